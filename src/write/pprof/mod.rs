//! pprof protobuf writer: the IR → `perftools.profiles.Profile` in one pass
//! that builds the string table once, then prost encoding (and gzip); and
//! [`Stream`], which writes a profile handed over in parts as they come.

use std::io::Write;

use prost::Message;

use crate::error::{Error, Result};
use crate::profile::{LabelValue, Profile};

pub mod pb;
mod stream;
mod wire;

pub use stream::{Stream, SPILL_VALUES};

/// Converts the IR to the generated pprof message. Ids are indexes + 1, so
/// they are unique and non-zero; string index 0 is "".
pub fn to_proto(profile: &Profile) -> pb::Profile {
    // The IR's table already starts with ""; comments and metadata are
    // appended to a copy of it, so the profile itself stays untouched.
    let mut string_table: Vec<String> = profile.strings.as_slice().to_vec();
    let mut comment = Vec::new();
    let texts = profile
        .comments
        .iter()
        .cloned()
        .chain(profile.metadata.iter().map(|(k, v)| format!("{k}: {v}")));
    for text in texts {
        comment.push(string_table.len() as i64);
        string_table.push(text);
    }
    let vt = |t: &crate::profile::ValueType| pb::ValueType {
        r#type: t.kind.index() as i64,
        unit: t.unit.index() as i64,
    };
    let sample_type: Vec<pb::ValueType> = profile.sample_types.iter().map(vt).collect();
    let default_sample_type = profile
        .default_sample_type
        .and_then(|i| profile.sample_types.get(i))
        .map_or(0, |t| t.kind.index() as i64);
    let sample = profile
        .samples
        .iter()
        .filter(|s| s.values.iter().any(|v| *v != 0))
        .map(|s| pb::Sample {
            location_id: s.stack.iter().map(|&l| l.index() as u64 + 1).collect(),
            value: s.values.clone(),
            label: s
                .labels
                .iter()
                .map(|l| match l.value {
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
                })
                .collect(),
        })
        .collect();
    let mapping = profile
        .mappings
        .iter()
        .enumerate()
        .map(|(i, m)| pb::Mapping {
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
        })
        .collect();
    let location = profile
        .locations
        .iter()
        .enumerate()
        .map(|(i, l)| pb::Location {
            id: i as u64 + 1,
            mapping_id: l.mapping.map_or(0, |m| m.index() as u64 + 1),
            address: l.address,
            line: l
                .lines
                .iter()
                .map(|line| pb::Line {
                    function_id: line.function.index() as u64 + 1,
                    line: line.line,
                    column: 0,
                })
                .collect(),
            is_folded: false,
        })
        .collect();
    let function = profile
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| pb::Function {
            id: i as u64 + 1,
            name: f.name.index() as i64,
            system_name: f.system_name.index() as i64,
            filename: f.filename.index() as i64,
            start_line: f.start_line,
        })
        .collect();
    pb::Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
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

/// Writes the profile as pprof protobuf, gzip-compressed when `gzip` (at
/// the fastest level, as Go's runtime/pprof does).
pub fn write(profile: &Profile, gzip: bool, out: &mut dyn Write) -> Result<()> {
    let bytes = to_proto(profile).encode_to_vec();
    let io = |e| Error::io(std::path::Path::new("<output>"), e);
    if gzip {
        for member in gzip_members(&bytes).map_err(io)? {
            out.write_all(&member).map_err(io)?;
        }
    } else {
        out.write_all(&bytes).map_err(io)?;
    }
    Ok(())
}

/// Decodes pprof bytes (gzip-compressed or not): for tests and `info`.
/// Encoded profiles up to this size are one gzip member (so small outputs
/// stay byte for byte what one compressor writes); larger ones are cut into
/// pieces of at least this size compressed on all cores, as concatenated
/// gzip members, which gzip, Go's `compress/gzip` (so `go tool pprof`) and
/// flate2's `MultiGzDecoder` read as one stream.
const GZIP_MEMBER_MIN: usize = 1 << 20;

/// The gzip members of `bytes`, compressed at Go's BestSpeed level.
fn gzip_members(bytes: &[u8]) -> std::io::Result<Vec<Vec<u8>>> {
    let compress = gzip_member;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pieces = (bytes.len() / GZIP_MEMBER_MIN).clamp(1, cores);
    if pieces == 1 {
        return Ok(vec![compress(bytes)?]);
    }
    let size = bytes.len().div_ceil(pieces);
    std::thread::scope(|scope| {
        let handles: Vec<_> = bytes
            .chunks(size)
            .map(|piece| scope.spawn(move || compress(piece)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// One gzip member of `piece`, at Go's BestSpeed level.
fn gzip_member(piece: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(piece.len() / 4),
        flate2::Compression::fast(),
    );
    enc.write_all(piece)?;
    enc.finish()
}

/// Decodes pprof bytes (gzip-compressed or not, in one or more gzip
/// members): for tests and `info`.
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
mod gzip_tests {
    use super::*;

    #[test]
    fn large_outputs_are_concatenated_gzip_members_that_read_back_whole() {
        let bytes: Vec<u8> = (0..3 * GZIP_MEMBER_MIN as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let members = gzip_members(&bytes).unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(members.len(), cores.min(3));
        let joined: Vec<u8> = members.concat();
        let mut back = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::MultiGzDecoder::new(&joined[..]),
            &mut back,
        )
        .unwrap();
        assert!(back == bytes, "the members decode to the input");
        let small = gzip_members(&bytes[..1000]).unwrap();
        assert_eq!(small.len(), 1, "small outputs stay one member");
    }
}
