//! pprof protobuf writer: the IR → `perftools.profiles.Profile` in one pass
//! that builds the string table once, then prost encoding (and gzip); and
//! [`Stream`], which writes a profile handed over in parts as they come.

use std::io::Write;

use prost::Message;

use crate::error::{Error, Result};
use crate::profile::{LabelValue, Profile, Sample};

pub mod pb;
mod pool;
mod stream;
#[cfg(test)]
mod stream_tests;
mod whole;
mod wire;

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
    let mut message = to_proto_tables(profile, true);
    message.sample = profile
        .samples()
        .iter()
        .filter(|s| is_written(s))
        .map(pb_sample)
        .collect();
    message
}

/// [`to_proto`] without the samples, and without the locations unless
/// `locations`.
fn to_proto_tables(profile: &Profile, locations: bool) -> pb::Profile {
    let mut message = to_proto_rest(profile, locations);
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
/// the fastest level, as Go's runtime/pprof does).
pub fn write(profile: &Profile, gzip: bool, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    if !gzip {
        return out.write_all(&encode(profile)).map_err(io);
    }
    whole::write_gzip(profile, out).map_err(io)
}

/// Profiles of fewer samples and locations than this are encoded (and
/// freed) on one thread: a thread costs more than it saves there.
const PARALLEL_ROWS: usize = 1 << 12;

/// Whether `profile` has rows enough to pay for another thread.
fn worth_a_thread(profile: &Profile) -> bool {
    profile.samples().len() + profile.locations().len() >= PARALLEL_ROWS
}

/// The encoded pprof message: what `to_proto(profile)` decodes from,
/// without building a message per sample. The tables come first: locations
/// (field 4), mappings (field 3) and fields 5 to 15, then `sample_type`
/// (field 1) and every sample (field 2), encoded here straight from the IR
/// (the order [`whole`] compresses them in: the tables are the slower part
/// to compress). Protocol buffers may carry fields in any order.
pub fn encode(profile: &Profile) -> Vec<u8> {
    // The tables (locations, strings, functions...) are encoded on another
    // thread while this one encodes the samples, when there are enough rows
    // to pay for a thread.
    let tables = || (encode_tables(profile), encode_locations(profile));
    let ((tables, locations), samples) = if !worth_a_thread(profile) {
        (tables(), encode_samples(profile))
    } else {
        std::thread::scope(|scope| {
            let tables = scope.spawn(tables);
            let samples = encode_samples(profile);
            let tables = tables
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (tables, samples)
        })
    };
    let [head, mappings, tail] = tables;
    let parts = [locations, mappings, tail, head, samples];
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in &parts {
        out.extend_from_slice(part);
    }
    out
}

/// The encodings of field 1 (`sample_type`), field 3 (`mapping`) and fields
/// 5 to 15: what goes before the samples, after the locations (field 4),
/// and after the mappings.
fn encode_tables(profile: &Profile) -> [Vec<u8>; 3] {
    let mut tables = to_proto_rest(profile, false);
    let head = pb::Profile {
        sample_type: std::mem::take(&mut tables.sample_type),
        ..Default::default()
    };
    let mappings = pb::Profile {
        mapping: std::mem::take(&mut tables.mapping),
        ..Default::default()
    };
    [
        head.encode_to_vec(),
        mappings.encode_to_vec(),
        encode_tail(profile, tables),
    ]
}

/// Fields 5 to 15: what `to_proto_tables(profile, false)` encodes from
/// there, with the functions (field 5) and the profile's own strings (the
/// start of field 6) encoded straight from the IR instead of copied into
/// the message first (tens of thousands of strings for a large program).
/// `rest` is [`to_proto_rest`]'s message, less the fields before 5.
fn encode_tail(profile: &Profile, mut rest: pb::Profile) -> Vec<u8> {
    use prost::encoding::{message, string};
    let own = profile.strings().as_slice();
    let added = std::mem::take(&mut rest.string_table);
    let strings_len: usize = own.iter().chain(&added).map(|s| s.len() + 4).sum();
    let mut out = Vec::with_capacity(16 * profile.functions().len() + strings_len);
    for (i, f) in profile.functions().iter().enumerate() {
        message::encode(5, &pb_function((i, f)), &mut out);
    }
    // Field 6 then goes on with the comments and metadata.
    string::encode_repeated(6, own, &mut out);
    string::encode_repeated(6, &added, &mut out);
    rest.encode(&mut out).expect("a Vec grows as needed");
    out
}

/// Every location as field 4, encoded straight from the IR.
fn encode_locations(profile: &Profile) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 * profile.locations().len());
    encode_some_locations_of(profile.locations(), 0, &mut out);
    out
}

/// The locations from index `start` on (a window of them: `locations` is
/// any subslice starting there) as field 4, appended to `out`.
fn encode_some_locations_of(
    locations: &[crate::profile::Location],
    start: usize,
    out: &mut Vec<u8>,
) {
    let mut encoder = wire::Encoder::default();
    let mut lines = Vec::new();
    for (i, l) in (start..).zip(locations) {
        lines.clear();
        lines.extend(l.lines.iter().map(|line| wire::Line {
            function_id: line.function.index() as u64 + 1,
            line: line.line,
        }));
        let mapping_id = l.mapping.map_or(0, |m| m.index() as u64 + 1);
        encoder.location(out, i as u64 + 1, mapping_id, l.address, &lines);
    }
}

/// Every written sample as field 2, encoded straight from the IR.
fn encode_samples(profile: &Profile) -> Vec<u8> {
    // Room for every sample at about 3 bytes per frame and 4 per value, so
    // the buffer is seldom copied while it grows.
    let mut out = Vec::with_capacity(samples_len_guess(profile));
    let mut scratch = Vec::new();
    for sample in profile.samples().iter().filter(|s| is_written(s)) {
        put_sample(sample, &mut out, &mut scratch);
    }
    out
}

/// About the length of the samples' encoding: 3 bytes per frame and 4 per
/// value.
fn samples_len_guess(profile: &Profile) -> usize {
    profile
        .samples()
        .iter()
        .map(|s| 8 + 3 * s.stack.len() + 4 * s.values.len())
        .sum()
}

/// `sample` as field 2, appended to `out` (`scratch` holds its labels'
/// encoding): the bytes prost writes for a `pb::Sample` of packed
/// `location_id` (1), packed `value` (2), then each label (3).
fn put_sample(sample: &Sample, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    scratch.clear();
    for label in &sample.labels {
        prost::encoding::message::encode(3, &pb_label(label), scratch);
    }
    let ids = sample.stack.iter().map(|&l| l.index() as u64 + 1);
    wire::sample_of(out, ids, &sample.values, scratch);
}

/// Encoded profiles up to this size are one gzip member (so small outputs
/// stay byte for byte what one compressor writes); larger ones are cut into
/// pieces of at least this size compressed on all cores, as concatenated
/// gzip members, which gzip, Go's `compress/gzip` (so `go tool pprof`) and
/// flate2's `MultiGzDecoder` read as one stream.
const GZIP_MEMBER_MIN: usize = 1 << 20;

/// How many members a whole profile of `len` encoded bytes is compressed
/// into (`whole::write_encoded`).
fn gzip_member_count(len: usize) -> usize {
    let cores = crate::cores();
    (len / GZIP_MEMBER_MIN).clamp(1, cores)
}

/// A compressor for [`gzip_member_into`], to be kept from member to member
/// (its tables are allocated and cleared once, not per member).
fn member_deflate() -> flate2::Compress {
    flate2::Compress::new(flate2::Compression::fast(), false)
}

/// The header `flate2::write::GzEncoder` writes at the fastest level: no
/// name or time, XFL 4 (fastest), OS 255 (unknown).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 0xff];

/// One gzip member of `piece`, at Go's BestSpeed level, written into `out`
/// (emptied first, its capacity reused) with `deflate` (reset first).
fn gzip_member_into(
    piece: &[u8],
    out: Vec<u8>,
    deflate: &mut flate2::Compress,
) -> std::io::Result<Vec<u8>> {
    let mut member = Member::start(out, deflate);
    member.add(piece)?;
    member.finish()
}

/// A gzip member being written, its input given in any number of pieces:
/// the bytes `flate2::write::GzEncoder` writes for the pieces joined, as it
/// makes them — all the input with no flush, then an empty finish (which
/// opens the last block: one call finishing with the input would make
/// other blocks). Deflate without flushes does not depend on how its input
/// is cut.
struct Member<'d> {
    out: Vec<u8>,
    deflate: &'d mut flate2::Compress,
    crc: flate2::Crc,
}

impl<'d> Member<'d> {
    /// A member into `out` (emptied first, its capacity reused) with
    /// `deflate` (reset first).
    fn start(mut out: Vec<u8>, deflate: &'d mut flate2::Compress) -> Self {
        deflate.reset();
        out.clear();
        out.extend_from_slice(&GZIP_HEADER);
        Member {
            out,
            deflate,
            crc: flate2::Crc::new(),
        }
    }

    /// Compresses the next piece of the input.
    fn add(&mut self, piece: &[u8]) -> std::io::Result<()> {
        self.crc.update(piece);
        let mut input = piece;
        while !input.is_empty() {
            self.out.reserve(input.len() / 2 + 64);
            let before = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut self.out, flate2::FlushCompress::None)?;
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = input.get(used..).unwrap_or_default();
        }
        Ok(())
    }

    /// Ends the deflate stream; the member's bytes.
    fn finish(mut self) -> std::io::Result<Vec<u8>> {
        use flate2::{FlushCompress, Status};
        loop {
            self.out.reserve(1 << 12);
            let status = self
                .deflate
                .compress_vec(&[], &mut self.out, FlushCompress::Finish)?;
            if status == Status::StreamEnd {
                break;
            }
        }
        self.out.extend_from_slice(&self.crc.sum().to_le_bytes());
        // ISIZE: the length modulo 2^32 (RFC 1952).
        self.out.extend_from_slice(&self.crc.amount().to_le_bytes());
        Ok(self.out)
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

/// `n` pieces of an output for the compressors' tests: 0 to 50 000 bytes
/// each, compressible (values below 17) in patterns that differ by piece.
#[cfg(test)]
fn test_pieces(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = (i as usize * 7919) % 50_000;
            (0..len)
                .map(|j| (j as u32 ^ i.wrapping_mul(2_654_435_761)) as u8 % 17)
                .collect()
        })
        .collect()
}

/// The decoded bytes of each gzip member of `joined`, in order (a member
/// ends where its trailer does): for tests of the members' order and
/// content, whatever compressor made them.
#[cfg(test)]
fn decoded_members(joined: &[u8]) -> Vec<Vec<u8>> {
    let (mut rest, mut members) = (joined, Vec::new());
    while !rest.is_empty() {
        // A bufread decoder stops at its member's end.
        let mut member = flate2::bufread::GzDecoder::new(rest);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut back).unwrap();
        members.push(back);
        rest = member.into_inner();
    }
    members
}

#[cfg(test)]
mod gzip_tests {
    use super::*;

    #[test]
    fn large_outputs_are_concatenated_gzip_members_that_read_back_whole() {
        let bytes: Vec<u8> = (0..3 * GZIP_MEMBER_MIN as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut joined = Vec::new();
        whole::write_encoded(bytes.clone(), &mut joined).unwrap();
        let cores = crate::cores();
        let members = decoded_members(&joined);
        assert_eq!(members.len(), cores.min(3));
        assert!(members.concat() == bytes, "the members decode to the input");
        let mut small = Vec::new();
        whole::write_encoded(bytes[..1000].to_vec(), &mut small).unwrap();
        assert_eq!(
            decoded_members(&small).len(),
            1,
            "small outputs stay one member"
        );
    }

    #[test]
    fn members_are_the_bytes_gz_encoder_writes() {
        // Compressible and not, in one: encoded varints and noise.
        let bytes: Vec<u8> = (0..3 * GZIP_MEMBER_MIN as u32 + 17)
            .map(|i| match i % 7 {
                0..=3 => (i / 64) as u8,
                _ => (i.wrapping_mul(2_654_435_761) >> 24) as u8,
            })
            .collect();
        let mut deflate = member_deflate();
        let mut out = Vec::new();
        for piece in [
            &bytes[..],
            &bytes[..0],
            &bytes[..1],
            &bytes[5..70_000],
            &bytes[..],
        ] {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(piece).unwrap();
            let expect = enc.finish().unwrap();
            out = gzip_member_into(piece, out, &mut deflate).unwrap();
            assert!(out == expect, "member of {} bytes", piece.len());
        }
    }
}

#[cfg(test)]
mod encode_tests {
    use super::*;
    use crate::profile::{Location, Mapping};

    #[test]
    fn direct_encoding_is_byte_for_byte_what_prost_writes_tables_first() {
        let mut p = Profile::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
        p.add_comment("a comment");
        p.add_metadata("key", "value");
        p.time_nanos = 7;
        let name = p.intern("a.out");
        let m = p.add_mapping(Mapping::new(0x1000, 0x2000, 0, name, StrIdEmpty::EMPTY));
        let f = p.add_function("main", "main", "main.c", 3);
        // Functions of other names, files and lines (fields 5 and 6).
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
            // What prost writes for the locations, the other tables, then
            // `sample_type` and the samples.
            let mut tables = to_proto(&p);
            let locations = pb::Profile {
                location: std::mem::take(&mut tables.location),
                ..Default::default()
            };
            let samples = pb::Profile {
                sample_type: std::mem::take(&mut tables.sample_type),
                sample: std::mem::take(&mut tables.sample),
                ..Default::default()
            };
            let mut expected = locations.encode_to_vec();
            expected.extend(tables.encode_to_vec());
            expected.extend(samples.encode_to_vec());
            assert_eq!(encode(&p), expected);
            assert_eq!(pb::Profile::decode(&encode(&p)[..]).unwrap(), to_proto(&p));
        }
    }

    use crate::profile::StrId as StrIdEmpty;
}
