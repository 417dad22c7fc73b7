//! speedscope JSON: shared frames and one `sampled` profile per sample type,
//! following `file-format-schema.json` of the speedscope package.

use std::collections::BTreeMap;
use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::{Granularity, Profile};
use crate::write::frames::Frames;
use crate::write::{effective_group_by, WriteOptions};

/// The schema speedscope documents its file format with.
pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

/// speedscope's unit for a pprof unit; units outside its enum become `none`.
pub fn unit(pprof_unit: &str) -> &'static str {
    match pprof_unit {
        "nanoseconds" => "nanoseconds",
        "microseconds" => "microseconds",
        "milliseconds" => "milliseconds",
        "seconds" => "seconds",
        "bytes" => "bytes",
        _ => "none",
    }
}

/// The speedscope document as a JSON value, for tests (the writer streams
/// the same bytes without building it).
#[cfg(test)]
pub fn to_json(profile: &Profile, options: &WriteOptions) -> serde_json::Value {
    let mut bytes = Vec::new();
    write(profile, options, &mut bytes).expect("writing to memory");
    serde_json::from_slice(&bytes).expect("the writer's own JSON")
}

/// Writes the document, keys in sorted order (as serde_json's maps sort
/// them), streaming samples: the frame table is interned once
/// ([`Frames`]) and each sample's stack is walked by id, so memory stays
/// linear in the profile however deep its stacks are.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    let json = |e: serde_json::Error| io(e.into());
    let group_by = effective_group_by(profile, options);
    // Frames are shared by function (name and file), not by line, so that a
    // function sampled at many addresses is one box; by line only when
    // asked (`--granularity lines`).
    let by_line = options.granularity == Some(Granularity::Lines);
    let table = Frames::new(profile, group_by, true, by_line);
    // Flame-chart order: stacks sorted root first, so that every stack
    // prefix is one contiguous run of samples and speedscope's time-ordered
    // view draws each call once instead of interleaving unrelated stacks.
    let mut order: Vec<usize> = (0..profile.samples().len()).collect();
    order.sort_by(|&a, &b| table.stack(profile, a).cmp(table.stack(profile, b)));

    let active = profile.default_sample_type.unwrap_or(0);
    let metadata: BTreeMap<&str, &str> = profile
        .metadata()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    write!(out, "{{\"$schema\":").map_err(io)?;
    serde_json::to_writer(&mut *out, SCHEMA_URL).map_err(json)?;
    write!(out, ",\"activeProfileIndex\":{active},\"comments\":").map_err(io)?;
    serde_json::to_writer(&mut *out, profile.comments()).map_err(json)?;
    write!(out, ",\"exporter\":").map_err(io)?;
    serde_json::to_writer(
        &mut *out,
        &format!("profconv {}", env!("CARGO_PKG_VERSION")),
    )
    .map_err(json)?;
    write!(out, ",\"metadata\":").map_err(io)?;
    serde_json::to_writer(&mut *out, &metadata).map_err(json)?;
    write!(out, ",\"name\":").map_err(io)?;
    serde_json::to_writer(&mut *out, &options.title).map_err(json)?;
    write!(out, ",\"profiles\":[").map_err(io)?;
    for t in 0..profile.sample_types().len() {
        if t > 0 {
            write!(out, ",").map_err(io)?;
        }
        write_profile(profile, &table, &order, t, out)?;
    }
    write!(out, "],\"shared\":{{\"frames\":[").map_err(io)?;
    for (i, frame) in table.frames.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        write!(out, "{sep}{{").map_err(io)?;
        if let Some(file) = frame.file {
            write!(out, "\"file\":").map_err(io)?;
            serde_json::to_writer(&mut *out, file).map_err(json)?;
            write!(out, ",").map_err(io)?;
        }
        if frame.line > 0 {
            write!(out, "\"line\":{},", frame.line).map_err(io)?;
        }
        write!(out, "\"name\":").map_err(io)?;
        serde_json::to_writer(&mut *out, &frame.name).map_err(json)?;
        write!(out, "}}").map_err(io)?;
    }
    writeln!(out, "]}}}}").map_err(io)
}

/// One `sampled` profile: the samples of sample type `t` with a positive
/// value, in `order`.
fn write_profile(
    profile: &Profile,
    table: &Frames<'_>,
    order: &[usize],
    t: usize,
    out: &mut dyn Write,
) -> Result<()> {
    let io = Error::unnamed_output;
    let value = |i: usize| profile.samples()[i].values.get(t).copied().unwrap_or(0);
    let kept = || order.iter().copied().filter(|&i| value(i) > 0);
    // JSON numbers have no width: the end value is the exact sum.
    let total: i128 = kept().map(|i| i128::from(value(i))).sum();
    let (kind, pprof_unit) = profile.sample_type_name(t);
    write!(out, "{{\"endValue\":{total},\"name\":").map_err(io)?;
    serde_json::to_writer(&mut *out, &format!("{kind} ({pprof_unit})"))
        .map_err(|e| io(e.into()))?;
    write!(out, ",\"samples\":[").map_err(io)?;
    for (n, i) in kept().enumerate() {
        write!(out, "{}[", if n > 0 { "," } else { "" }).map_err(io)?;
        for (k, id) in table.stack(profile, i).enumerate() {
            write!(out, "{}{id}", if k > 0 { "," } else { "" }).map_err(io)?;
        }
        write!(out, "]").map_err(io)?;
    }
    write!(
        out,
        "],\"startValue\":0,\"type\":\"sampled\",\"unit\":\"{}\",\"weights\":[",
        unit(pprof_unit)
    )
    .map_err(io)?;
    for (n, i) in kept().enumerate() {
        write!(out, "{}{}", if n > 0 { "," } else { "" }, value(i)).map_err(io)?;
    }
    write!(out, "]}}").map_err(io)
}
