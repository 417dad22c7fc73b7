//! speedscope JSON: shared frames and one `sampled` profile per sample type,
//! following `file-format-schema.json` of the speedscope package.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::Path;

use crate::error::{Error, Result};
use crate::profile::{Frame, Granularity, Profile};
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
    let (table, order) = frames_and_order(profile, options);
    write_head(profile, options, out)?;
    for t in 0..profile.sample_types().len() {
        if t > 0 {
            write!(out, ",").map_err(io)?;
        }
        let value = |i: usize| profile.samples()[i].values.get(t).copied().unwrap_or(0);
        let kept = || order.iter().copied().filter(|&i| value(i) > 0);
        // JSON numbers have no width: the end value is the exact sum.
        let total: i128 = kept().map(|i| i128::from(value(i))).sum();
        write_profile_start(profile, t, total, out)?;
        write_samples(profile, &table, kept(), |id| id, out)?;
        write_profile_middle(profile, t, out)?;
        write_weights(kept().map(value), out)?;
        write!(out, "]}}").map_err(io)?;
    }
    write!(out, "],\"shared\":{{\"frames\":[").map_err(io)?;
    for (i, frame) in table.frames.iter().enumerate() {
        if i > 0 {
            write!(out, ",").map_err(io)?;
        }
        write_frame(frame, out)?;
    }
    writeln!(out, "]}}}}").map_err(io)
}

/// The frame table, and the samples in flame-chart order: stacks sorted
/// root first, so that every stack prefix is one contiguous run of
/// samples and speedscope's time-ordered view draws each call once
/// instead of interleaving unrelated stacks.
fn frames_and_order<'p>(
    profile: &'p Profile,
    options: &'p WriteOptions,
) -> (Frames<'p>, Vec<usize>) {
    let group_by = effective_group_by(profile, options);
    // Frames are shared by function (name and file), not by line, so that a
    // function sampled at many addresses is one box; by line only when
    // asked (`--granularity lines`).
    let by_line = options.granularity == Some(Granularity::Lines);
    let table = Frames::new(profile, group_by, true, by_line);
    let mut order: Vec<usize> = (0..profile.samples().len()).collect();
    order.sort_by(|&a, &b| table.stack(profile, a).cmp(table.stack(profile, b)));
    (table, order)
}

/// The document up to its first profile: `"profiles":[`.
fn write_head(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    let json = |e: serde_json::Error| io(e.into());
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
    write!(out, ",\"profiles\":[").map_err(io)
}

/// One `sampled` profile up to its samples: `{"endValue":…,"samples":[`.
fn write_profile_start(
    profile: &Profile,
    t: usize,
    total: i128,
    out: &mut dyn Write,
) -> Result<()> {
    let io = Error::unnamed_output;
    let (kind, pprof_unit) = profile.sample_type_name(t);
    write!(out, "{{\"endValue\":{total},\"name\":").map_err(io)?;
    serde_json::to_writer(&mut *out, &format!("{kind} ({pprof_unit})"))
        .map_err(|e| io(e.into()))?;
    write!(out, ",\"samples\":[").map_err(io)
}

/// Between a profile's samples and its weights.
fn write_profile_middle(profile: &Profile, t: usize, out: &mut dyn Write) -> Result<()> {
    let (_, pprof_unit) = profile.sample_type_name(t);
    write!(
        out,
        "],\"startValue\":0,\"type\":\"sampled\",\"unit\":\"{}\",\"weights\":[",
        unit(pprof_unit)
    )
    .map_err(Error::unnamed_output)
}

/// The stacks of `samples` as arrays of frame ids (`id` of each of the
/// table's), comma-separated.
fn write_samples(
    profile: &Profile,
    table: &Frames<'_>,
    samples: impl Iterator<Item = usize>,
    id: impl Fn(u32) -> u32,
    out: &mut dyn Write,
) -> Result<()> {
    let io = Error::unnamed_output;
    for (n, i) in samples.enumerate() {
        write!(out, "{}[", if n > 0 { "," } else { "" }).map_err(io)?;
        for (k, frame) in table.stack(profile, i).enumerate() {
            write!(out, "{}{}", if k > 0 { "," } else { "" }, id(frame)).map_err(io)?;
        }
        write!(out, "]").map_err(io)?;
    }
    Ok(())
}

/// Weights, comma-separated.
fn write_weights(weights: impl Iterator<Item = i64>, out: &mut dyn Write) -> Result<()> {
    for (n, w) in weights.enumerate() {
        write!(out, "{}{w}", if n > 0 { "," } else { "" }).map_err(Error::unnamed_output)?;
    }
    Ok(())
}

/// One frame of `shared.frames`.
fn write_frame(frame: &Frame<'_>, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    let json = |e: serde_json::Error| io(e.into());
    write!(out, "{{").map_err(io)?;
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
    write!(out, "}}").map_err(io)
}

/// The speedscope output of a profile read in parts, at every address:
/// each run of parts is written as it is made, its samples and weights per
/// sample type and its new frames, to an anonymous temporary file
/// ([`super::runs::spill_file`]); the document is put together at the end.
/// Frames are shared across runs, but for those of unsymbolized addresses
/// (as many as the addresses), which a run names anew: an address in two
/// runs is two frames of one name. Samples are in flame-chart order within
/// a run. Memory: one run, and the frames of functions and groups.
pub(crate) struct SpeedscopeRuns {
    out: BufWriter<File>,
    end: u64,
    /// Per sample type, the bytes of each run's samples and weights.
    samples: Vec<Vec<Range<u64>>>,
    weights: Vec<Vec<Range<u64>>>,
    totals: Vec<i128>,
    /// The bytes of each run's new frames.
    frames: Vec<Range<u64>>,
    /// The id of every frame but an address's: name, file, line.
    shared: HashMap<(String, Option<String>, i64), u32>,
    next_frame: u32,
}

impl SpeedscopeRuns {
    /// Runs in an anonymous temporary file in `dir`.
    pub fn new(dir: &Path) -> Result<SpeedscopeRuns> {
        Ok(SpeedscopeRuns {
            out: super::runs::spill_file(dir)?,
            end: 0,
            samples: Vec::new(),
            weights: Vec::new(),
            totals: Vec::new(),
            frames: Vec::new(),
            shared: HashMap::new(),
            next_frame: 0,
        })
    }

    /// Writes `f` to the file; returns the bytes it wrote.
    fn segment(&mut self, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<Range<u64>> {
        let mut counted = super::limits::Counted::new(&mut self.out);
        f(&mut counted)?;
        let start = self.end;
        self.end += counted.bytes;
        Ok(start..self.end)
    }

    /// Writes the samples and new frames of `profile` (some parts of the
    /// whole).
    pub fn add(&mut self, profile: &Profile, options: &WriteOptions) -> Result<()> {
        let (table, order) = frames_and_order(profile, options);
        let mut ids = Vec::with_capacity(table.frames.len());
        let mut new = Vec::new();
        for (frame, &of_address) in table.frames.iter().zip(&table.of_address) {
            let key = (
                frame.name.to_string(),
                frame.file.map(str::to_owned),
                frame.line,
            );
            let id = match (of_address, self.shared.get(&key)) {
                (false, Some(&id)) => id,
                _ => {
                    let id = self.next_frame;
                    self.next_frame += 1;
                    if !of_address {
                        self.shared.insert(key, id);
                    }
                    new.push(frame);
                    id
                }
            };
            ids.push(id);
        }
        let range = self.segment(|out| {
            for (n, frame) in new.iter().enumerate() {
                if n > 0 {
                    write!(out, ",").map_err(Error::unnamed_output)?;
                }
                write_frame(frame, out)?;
            }
            Ok(())
        })?;
        self.frames.push(range);
        let types = profile.sample_types().len();
        self.samples.resize(types, Vec::new());
        self.weights.resize(types, Vec::new());
        self.totals.resize(types, 0);
        for t in 0..types {
            let value = |i: usize| profile.samples()[i].values.get(t).copied().unwrap_or(0);
            let kept = || order.iter().copied().filter(|&i| value(i) > 0);
            self.totals[t] += kept().map(|i| i128::from(value(i))).sum::<i128>();
            let id = |local: u32| ids[local as usize];
            let range = self.segment(|out| write_samples(profile, &table, kept(), id, out))?;
            self.samples[t].push(range);
            let range = self.segment(|out| write_weights(kept().map(value), out))?;
            self.weights[t].push(range);
        }
        Ok(())
    }

    /// Writes the document: `head` (the profile's tables) and the runs.
    pub fn write(
        &mut self,
        head: &Profile,
        options: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        self.out.flush().map_err(io)?;
        let file = self.out.get_ref();
        // The segments of each run, comma-separated where not empty.
        let join = |ranges: &[Range<u64>], out: &mut dyn Write| -> Result<()> {
            let mut first = true;
            for r in ranges.iter().filter(|r| !r.is_empty()) {
                if !first {
                    write!(out, ",").map_err(io)?;
                }
                first = false;
                super::runs::copy_range(file, r.clone(), out)?;
            }
            Ok(())
        };
        write_head(head, options, out)?;
        for t in 0..head.sample_types().len() {
            if t > 0 {
                write!(out, ",").map_err(io)?;
            }
            let total = self.totals.get(t).copied().unwrap_or(0);
            write_profile_start(head, t, total, out)?;
            join(self.samples.get(t).map_or(&[], Vec::as_slice), out)?;
            write_profile_middle(head, t, out)?;
            join(self.weights.get(t).map_or(&[], Vec::as_slice), out)?;
            write!(out, "]}}").map_err(io)?;
        }
        write!(out, "],\"shared\":{{\"frames\":[").map_err(io)?;
        join(&self.frames, out)?;
        writeln!(out, "]}}}}").map_err(io)
    }
}
