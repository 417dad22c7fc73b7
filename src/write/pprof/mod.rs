//! pprof protobuf writer: the IR → `perftools.profiles.Profile`, encoded by
//! prost's generated code, then compressed by flate2 (one gzip member at the
//! fastest level, as Go's runtime/pprof writes it); and [`Stream`], which
//! writes a profile handed over in parts as they come.
//!
//! The tables (mappings, functions, strings, comments) are built as one
//! message; locations and samples, the bulk of a profile, are encoded one
//! at a time into the output buffer from one reused message each, so that
//! no `pb::Sample` per sample is ever held. Protocol buffers let a message
//! carry its fields in any order, and concatenated encodings of one message
//! type decode as their merge (repeated fields append): what [`Stream`]
//! relies on too. The bytes depend on the profile only.

use std::io::Write;

use prost::Message;

use crate::error::{Error, Result};
use crate::profile::{LabelValue, Profile, Sample};

pub mod pb;
mod rows;
mod stream;
#[cfg(test)]
mod stream_tests;

pub use stream::Stream;

/// A sample is written when one of its values is not zero.
fn is_written(sample: &Sample) -> bool {
    sample.values.iter().any(|v| *v != 0)
}

/// The pprof message of one sample.
fn pb_sample(s: &Sample) -> pb::Sample {
    pb::Sample {
        location_id: s.stack.iter().map(|&l| l.index() as u64 + 1).collect(),
        value: s.values.to_vec(),
        label: s.labels.iter().map(pb_label).collect(),
    }
}

/// The pprof message of one label.
fn pb_label(l: &crate::profile::Label) -> pb::Label {
    match l.value {
        LabelValue::Str(v) => pb::Label {
            key: l.key.index() as i64,
            str: v.index() as i64,
            ..Default::default()
        },
        LabelValue::Num { num, unit } => pb::Label {
            key: l.key.index() as i64,
            num,
            num_unit: unit.index() as i64,
            ..Default::default()
        },
    }
}

/// Converts the IR to the generated pprof message. Ids are indexes + 1, so
/// they are unique and non-zero; string index 0 is "".
pub fn to_proto(profile: &Profile) -> pb::Profile {
    let mut message = to_proto_tables(profile);
    message.sample = profile
        .samples()
        .iter()
        .filter(|s| is_written(s))
        .map(pb_sample)
        .collect();
    message
}

/// [`to_proto`] without the samples.
fn to_proto_tables(profile: &Profile) -> pb::Profile {
    let mut message = to_proto_rest(profile, true);
    // The IR's table already starts with ""; comments and metadata are
    // appended to a copy of it, so the profile itself stays untouched.
    let mut strings = profile.strings().as_slice().to_vec();
    strings.append(&mut message.string_table);
    message.string_table = strings;
    message.function = profile
        .functions()
        .iter()
        .enumerate()
        .map(pb_function)
        .collect();
    message
}

/// [`to_proto_tables`] but for the profile's own strings and its functions:
/// the string table holds only the comments and metadata, which come after
/// the profile's strings (their ids count from there).
fn to_proto_rest(profile: &Profile, locations: bool) -> pb::Profile {
    let own = profile.strings().as_slice().len();
    let mut string_table = Vec::new();
    let mut comment = Vec::new();
    let texts = profile
        .comments()
        .iter()
        .cloned()
        .chain(profile.metadata().iter().map(|(k, v)| format!("{k}: {v}")));
    for text in texts {
        comment.push((own + string_table.len()) as i64);
        string_table.push(text);
    }
    let vt = pb_value_type;
    let sample_type: Vec<pb::ValueType> = profile.sample_types().iter().map(vt).collect();
    let default_sample_type = profile
        .default_sample_type
        .and_then(|i| profile.sample_types().get(i))
        .map_or(0, |t| t.kind.index() as i64);
    let mapping = profile.mappings().iter().enumerate().map(pb_mapping);
    let location = match locations {
        true => profile
            .locations()
            .iter()
            .enumerate()
            .map(pb_location)
            .collect(),
        false => Vec::new(),
    };
    pb::Profile {
        sample_type,
        sample: Vec::new(),
        mapping: mapping.collect(),
        location,
        function: Vec::new(),
        string_table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: profile.time_nanos,
        duration_nanos: profile.duration_nanos,
        period_type: profile.period_type.as_ref().map(vt),
        period: profile.period,
        comment,
        default_sample_type,
        doc_url: 0,
    }
}

/// A sample type or the period type.
fn pb_value_type(t: &crate::profile::ValueType) -> pb::ValueType {
    pb::ValueType {
        r#type: t.kind.index() as i64,
        unit: t.unit.index() as i64,
    }
}

/// Mapping `i` (pprof ids count from 1).
fn pb_mapping((i, m): (usize, &crate::profile::Mapping)) -> pb::Mapping {
    pb::Mapping {
        id: i as u64 + 1,
        memory_start: m.start,
        memory_limit: m.limit,
        file_offset: m.file_offset,
        filename: m.filename.index() as i64,
        build_id: m.build_id.index() as i64,
        has_functions: m.has_functions,
        has_filenames: m.has_filenames,
        has_line_numbers: m.has_line_numbers,
        has_inline_frames: m.has_inline_frames,
    }
}

/// Location `i` with its lines, innermost first.
fn pb_location((i, l): (usize, &crate::profile::Location)) -> pb::Location {
    let line = |line: &crate::profile::Line| pb::Line {
        function_id: line.function.index() as u64 + 1,
        line: line.line,
        column: 0,
    };
    pb::Location {
        id: i as u64 + 1,
        mapping_id: l.mapping.map_or(0, |m| m.index() as u64 + 1),
        address: l.address,
        line: l.lines.iter().map(line).collect(),
        is_folded: false,
    }
}

/// Function `i`.
fn pb_function((i, f): (usize, &crate::profile::Function)) -> pb::Function {
    pb::Function {
        id: i as u64 + 1,
        name: f.name.index() as i64,
        system_name: f.system_name.index() as i64,
        filename: f.filename.index() as i64,
        start_line: f.start_line,
    }
}

/// Writes the profile as pprof protobuf, gzip-compressed when `gzip` (at
/// the fastest level, as Go's runtime/pprof does): encoded, then compressed
/// in one piece (zlib-rs's fastest level makes other bytes of a message
/// handed over in pieces: the bytes would then depend on the pieces).
pub fn write(profile: &Profile, gzip: bool, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    let encoded = encode(profile);
    if !gzip {
        return out.write_all(&encoded).map_err(io);
    }
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    gz.write_all(&encoded).map_err(io)?;
    gz.finish().map_err(io)?;
    Ok(())
}

/// The encoded pprof message, what `to_proto(profile)` decodes to: the
/// locations (field 4), the samples (field 2), then the tables.
pub fn encode(profile: &Profile) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows_len_bound(profile));
    let mut scratch = Scratch::default();
    for (i, l) in profile.locations().iter().enumerate() {
        scratch.location(
            &mut out,
            i as u64 + 1,
            l,
            |f| f.index() as u64 + 1,
            l.mapping.map_or(0, |m| m.index() as u64 + 1),
        );
    }
    for s in profile.samples().iter().filter(|s| is_written(s)) {
        scratch.sample(
            &mut out,
            s.stack.iter().map(|l| l.index() as u64 + 1),
            &s.values,
            s.labels.iter().map(pb_label),
        );
    }
    encode_tables(profile, &mut out);
    out
}

/// At most the bytes [`encode`] writes for the locations and samples
/// (numbers at their length, ids at the longest of their range): room made
/// at once, so that the buffer is not copied as it grows. Room never
/// written is never touched.
fn rows_len_bound(profile: &Profile) -> usize {
    let varint = |n: u64| prost::encoding::encoded_len_varint(n);
    let location_id = varint(profile.locations().len() as u64);
    let function_id = varint(profile.functions().len() as u64);
    let mapping_id = varint(profile.mappings().len() as u64);
    // A field's tag, a message's tag and length: at most 1 and 1 + 5.
    let (field, message) = (1, 6);
    let locations: usize = profile
        .locations()
        .iter()
        .map(|l| {
            let ids = 2 * field + location_id + mapping_id;
            let lines: usize = (l.lines.iter())
                .map(|line| message + 2 * field + function_id + varint(line.line as u64))
                .sum();
            message + ids + field + varint(l.address) + lines
        })
        .sum();
    let label = message + 4 * (field + 10);
    let samples: usize = profile
        .samples()
        .iter()
        .map(|s| {
            let stack = message + s.stack.len() * location_id;
            let values = message + s.values.iter().map(|&v| varint(v as u64)).sum::<usize>();
            message + stack + values + s.labels.len() * label
        })
        .sum();
    locations.saturating_add(samples)
}

/// Appends the encoding of [`to_proto_tables`]`(profile)` without its
/// locations to `out`: prost's bytes, without a copy of every string of the
/// profile in a message. prost writes a message's fields in field order,
/// so the fields before the string table (6), its strings, and the fields
/// after it are encoded one after the other.
fn encode_tables(profile: &Profile, out: &mut Vec<u8>) {
    let mut rest = to_proto_rest(profile, false);
    let before = pb::Profile {
        sample_type: std::mem::take(&mut rest.sample_type),
        mapping: std::mem::take(&mut rest.mapping),
        function: profile
            .functions()
            .iter()
            .enumerate()
            .map(pb_function)
            .collect(),
        ..Default::default()
    };
    let grows = "a Vec grows as needed";
    before.encode(out).expect(grows);
    // The IR's table starts with "", then the comments and metadata.
    let extra = std::mem::take(&mut rest.string_table);
    for s in profile.strings().as_slice().iter().chain(&extra) {
        prost::encoding::string::encode(6, s, out);
    }
    rest.encode(out).expect(grows);
}

/// One location and one sample message, reused for every one encoded, so
/// that encoding allocates nothing per row.
#[derive(Default)]
struct Scratch {
    location: pb::Location,
    sample: pb::Sample,
}

impl Scratch {
    /// Appends location `id` (field 4 of `Profile`), its lines innermost
    /// first with their functions' ids as `function_id` gives them.
    fn location(
        &mut self,
        out: &mut Vec<u8>,
        id: u64,
        l: &crate::profile::Location,
        function_id: impl Fn(crate::profile::FunctionId) -> u64,
        mapping_id: u64,
    ) {
        let m = &mut self.location;
        m.id = id;
        m.mapping_id = mapping_id;
        m.address = l.address;
        m.line.clear();
        m.line.extend(l.lines.iter().map(|line| pb::Line {
            function_id: function_id(line.function),
            line: line.line,
            column: 0,
        }));
        prost::encoding::message::encode(4, m, out);
    }

    /// Appends a sample (field 2 of `Profile`).
    fn sample(
        &mut self,
        out: &mut Vec<u8>,
        location_ids: impl Iterator<Item = u64>,
        values: &[i64],
        labels: impl Iterator<Item = pb::Label>,
    ) {
        let m = &mut self.sample;
        m.location_id.clear();
        m.location_id.extend(location_ids);
        m.value.clear();
        m.value.extend_from_slice(values);
        m.label.clear();
        m.label.extend(labels);
        prost::encoding::message::encode(2, m, out);
    }
}

/// Decodes pprof bytes (gzip-compressed or not, in one or more gzip
/// members): for tests.
#[cfg(test)]
pub fn decode(bytes: &[u8]) -> std::result::Result<pb::Profile, String> {
    let raw;
    let data = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(bytes), &mut out)
            .map_err(|e| e.to_string())?;
        raw = out;
        &raw[..]
    } else {
        bytes
    };
    pb::Profile::decode(data).map_err(|e| e.to_string())
}

#[cfg(test)]
mod encode_tests {
    use super::*;
    use crate::profile::{Location, Mapping, StrId};

    #[test]
    fn the_encoding_decodes_to_the_message_of_the_profile() {
        let mut p = Profile::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
        p.add_comment("a comment");
        p.add_metadata("key", "value");
        p.time_nanos = 7;
        let name = p.intern("a.out");
        let m = p.add_mapping(Mapping::new(0x1000, 0x2000, 0, name, StrId::EMPTY));
        let f = p.add_function("main", "main", "main.c", 3);
        p.add_function("ns::f()", "_ZN2ns1fEv", "", 0);
        p.add_function("g", "g", "lib/g.c", -1);
        let mut stack = Vec::new();
        for a in 0..300u64 {
            stack.push(p.add_location(Location {
                mapping: Some(m),
                address: 0x1000 + a * 977,
                is_return_address: false,
                lines: smallvec::smallvec![crate::profile::Line {
                    function: f,
                    line: a as i64,
                }],
            }));
        }
        let pid = p.label_num("pid", 42, "");
        let tid = p.label_str("thread", "worker");
        p.add_sample(&stack, &[1, -5], &[]);
        p.add_sample(&stack[..1], &[0, 0], &[]);
        p.add_sample(&stack[3..200], &[300, 1 << 40], &[pid, tid]);
        p.add_sample(&[], &[0, 9], &[pid]);
        for p in [p, Profile::default()] {
            let decoded = pb::Profile::decode(&encode(&p)[..]).unwrap();
            assert_eq!(decoded, to_proto(&p));
            let mut gz = Vec::new();
            write(&p, true, &mut gz).unwrap();
            assert_eq!(
                decode(&gz).unwrap(),
                decoded,
                "one gzip member of the same bytes"
            );
        }
    }

    /// The room [`encode`] makes for the locations and samples holds them
    /// at their longest: the largest address, negative lines and values
    /// (ten bytes each), several lines, numeric and string labels.
    #[test]
    fn the_room_for_the_rows_holds_their_longest_encoding() {
        let mut p = Profile::new(&[("a", "count"), ("b", "count"), ("c", "count")]);
        let name = p.intern("a.out");
        let m = p.add_mapping(Mapping::new(0, u64::MAX, 0, name, StrId::EMPTY));
        let f = p.add_function("f", "f", "f.c", -1);
        let line = |line| crate::profile::Line { function: f, line };
        let mut stack = Vec::new();
        for a in 0..2000u64 {
            stack.push(p.add_location(Location {
                mapping: Some(m),
                address: u64::MAX - a,
                is_return_address: false,
                lines: smallvec::smallvec![line(-1), line(i64::MIN), line(a as i64)],
            }));
        }
        let labels = [
            p.label_num("bytes", i64::MIN, "bytes"),
            p.label_str("thread", "main"),
        ];
        for depth in 1..stack.len() {
            let values = [i64::MIN, -1, depth as i64];
            p.add_sample(&stack[..depth], &values, &labels);
        }
        let mut tables = Vec::new();
        encode_tables(&p, &mut tables);
        let rows = encode(&p).len() - tables.len();
        let room = rows_len_bound(&p);
        assert!(rows <= room, "{rows} bytes of rows, room for {room}");
        assert!(room < 2 * rows, "room for {room}, {rows} bytes written");
    }
}
