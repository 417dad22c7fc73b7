//! pprof written while the profile arrives in parts ([`PartSink`]), so that
//! a profile larger than memory (a DCPI database of tens of millions of
//! sampled addresses) never has to be whole.
//!
//! Small profiles are held, merged, and written at the end exactly as
//! [`super::write`] writes them (the same bytes). Once the held samples
//! pass a threshold, the writer streams: each part's locations and samples
//! are encoded at once as `Profile` fields 4 and 2 with global ids
//! (locations numbered in arrival order, strings, mappings and functions
//! re-interned into one global table; a lean part, [`AddressPart`], is
//! encoded straight from its columns), the bytes compressed on the other
//! cores as gzip members of 1 MiB and written out in order; the tables
//! (sample types, mappings, functions, strings, comments...) follow at the
//! end as one more encoded `Profile`. Protobuf merges concatenated messages
//! (repeated fields append), so the whole decodes to the profile the parts
//! merge into; `go tool pprof` resolves ids after decoding, and reads
//! concatenated gzip members as one stream.
//!
//! Memory: the global tables (O(strings + mappings + functions)), the
//! parts held before streaming (at most [`SPILL_VALUES`] values), one part,
//! and a member per core in flight — never O(locations).

use std::collections::VecDeque;
use std::io::Write;
use std::thread::JoinHandle;

use prost::Message;

use super::wire::{self, Encoder, Label, Line};
use super::{to_proto, worth_a_thread, write as write_whole};
use crate::error::{Error, Result};
use crate::profile::{AddressPart, LabelValue, PartSink, Profile, TableMap};

/// Sample values (samples × sample types) held, and written as one message
/// at the end, before streaming (2 MiB of values). The first part is always
/// held whole.
pub const SPILL_VALUES: usize = 1 << 18;

/// Encoded bytes per gzip member (and per write of raw output).
const MEMBER_BYTES: usize = 1 << 20;

/// A pprof output fed part by part; [`Stream::finish`] completes it.
pub struct Stream<W: Write> {
    out: W,
    gzip: bool,
    spill_at: usize,
    state: State,
}

enum State {
    /// Parts held so far (not merged: merging keeps indexes), and the
    /// sample values they will make once merged.
    Holding(Vec<Profile>, usize),
    Streaming(Box<Streaming>),
}

/// The state once streaming: the global tables and what is being written.
struct Streaming {
    /// Sample types, header, strings, mappings and functions; no locations
    /// or samples (they were written).
    global: Profile,
    /// Locations written so far (the next one's id is this + 1).
    locations: u64,
    /// Encoded bytes not yet handed to compression.
    pending: Vec<u8>,
    /// Members being compressed, oldest first.
    jobs: VecDeque<Job>,
    /// Buffers written out, kept for the next members: encoded bytes,
    /// compressed ones and compressors (at most one of each per job in
    /// flight). A fresh buffer of megabytes costs a page fault per page; a
    /// fresh compressor, its tables.
    spare: Buffers,
    /// Members compressed at once: the cores (asked once: the answer reads
    /// cgroup files).
    cores: usize,
    encoder: Encoder,
    /// Scratch for one sample's location ids, values and labels.
    ids: Vec<u64>,
    values: Vec<i64>,
    labels: Vec<Label>,
    lines: Vec<Line>,
    /// A lean part's labels, encoded once for all its samples.
    label_bytes: Vec<u8>,
}

impl<W: Write> Stream<W> {
    /// A pprof output to `out`, gzip-compressed when `gzip`.
    pub fn new(out: W, gzip: bool) -> Self {
        Stream::with_spill(out, gzip, SPILL_VALUES)
    }

    /// As [`Stream::new`], streaming once more than `spill_at` sample values
    /// would be held (0: from the second part on; tests use it).
    pub fn with_spill(out: W, gzip: bool, spill_at: usize) -> Self {
        Stream {
            out,
            gzip,
            spill_at,
            state: State::Holding(Vec::new(), 0),
        }
    }

    /// Writes what remains (or the whole held profile) and returns the output.
    pub fn finish(mut self) -> Result<W> {
        match std::mem::replace(&mut self.state, State::Holding(Vec::new(), 0)) {
            State::Holding(parts, _) => {
                let mut parts = parts.into_iter();
                let mut whole = parts.next().unwrap_or_default();
                for part in parts {
                    whole.merge(&part)?;
                }
                write_whole(&whole, self.gzip, &mut self.out)?;
                drop_aside(whole);
            }
            State::Streaming(mut s) => {
                let tables = to_proto(&s.global).encode_to_vec();
                s.pending.extend_from_slice(&tables);
                s.ship(self.gzip, &mut self.out, 0)?;
                while let Some(job) = s.jobs.pop_front() {
                    s.spare.write_member(job, &mut self.out)?;
                }
            }
        }
        Ok(self.out)
    }

    /// Starts streaming with the parts held so far.
    fn spill(&mut self, parts: Vec<Profile>) -> Result<()> {
        let mut parts = parts.into_iter();
        let (tables, rows) = split_tables(parts.next().unwrap_or_default());
        let identity = TableMap {
            types: (0..tables.sample_types().len()).collect(),
            mappings: (0..tables.mappings().len())
                .map(crate::profile::MappingId::from_index)
                .collect(),
            functions: (0..tables.functions().len())
                .map(crate::profile::FunctionId::from_index)
                .collect(),
        };
        let mut s = Box::new(Streaming {
            global: tables,
            locations: 0,
            pending: Vec::with_capacity(2 * MEMBER_BYTES),
            jobs: VecDeque::new(),
            spare: Buffers::default(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            encoder: Encoder::default(),
            ids: Vec::new(),
            values: Vec::new(),
            labels: Vec::new(),
            lines: Vec::new(),
            label_bytes: Vec::new(),
        });
        s.encode(&rows, &identity);
        for part in parts {
            s.add(&part)?;
            s.ship(self.gzip, &mut self.out, MEMBER_BYTES)?;
        }
        self.state = State::Streaming(s);
        Ok(())
    }
}

/// Frees a profile written whole: a large one (hundreds of thousands of
/// small allocations) on another thread, so that the output is complete
/// without waiting for it.
fn drop_aside(profile: Profile) {
    if worth_a_thread(&profile) {
        // If no thread can be made, the profile is freed here.
        let _ = std::thread::Builder::new().spawn(move || drop(profile));
    }
}

/// A profile's tables (everything but locations and samples), and a
/// profile holding the locations and samples (with the same string ids).
fn split_tables(mut whole: Profile) -> (Profile, Profile) {
    let rows = whole.take_rows();
    (whole, rows)
}

impl<W: Write> PartSink for Stream<W> {
    /// Held whole while the profile is small (as the profile it stands
    /// for); once streaming, its columns are encoded as they are, with no
    /// location or sample made.
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        if let State::Streaming(s) = &mut self.state {
            s.add_columns(part)?;
            return s.ship(self.gzip, &mut self.out, MEMBER_BYTES);
        }
        self.part(part.to_profile())
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        match &mut self.state {
            // The first part is always held: a reader that hands over its
            // profile whole gets exactly the bytes of `write`.
            State::Holding(parts, values) => {
                let width = parts.first().unwrap_or(&part).sample_types().len().max(1);
                *values = values.saturating_add(part.samples().len().saturating_mul(width));
                if parts.is_empty() || *values <= self.spill_at {
                    parts.push(part);
                    return Ok(());
                }
                let held = std::mem::take(parts);
                self.spill(held)?;
                self.part(part)
            }
            State::Streaming(s) => {
                s.add(&part)?;
                s.ship(self.gzip, &mut self.out, MEMBER_BYTES)
            }
        }
    }
}

impl Streaming {
    /// Merges the tables of `part` into the global ones and encodes its
    /// locations and samples.
    fn add(&mut self, part: &Profile) -> Result<()> {
        let map = self.merge_tables(part)?;
        self.encode(part, &map);
        Ok(())
    }

    /// Merges the tables of a part into the global ones: where its ids go.
    fn merge_tables(&mut self, tables: &Profile) -> Result<TableMap> {
        let width = self.global.sample_types().len();
        let map = self.global.merge_tables(tables)?;
        if self.global.sample_types().len() != width {
            return Err(Error::Usage(
                "a part of a streamed profile brought a new sample type after samples were written"
                    .into(),
            ));
        }
        Ok(map)
    }

    /// As [`Streaming::add`] for a lean part: the same bytes as for the
    /// profile it stands for ([`AddressPart::to_profile`]), straight from
    /// its columns.
    fn add_columns(&mut self, part: &AddressPart) -> Result<()> {
        let map = self.merge_tables(&part.tables)?;
        let base = self.locations;
        let mapping = map
            .mappings
            .get(part.mapping.index())
            .map_or(0, |m| m.index() as u64 + 1);
        self.encoder
            .bare_locations(&mut self.pending, base + 1, mapping, &part.addresses);
        self.locations += part.addresses.len() as u64;
        if part.addresses.is_empty() {
            return Ok(());
        }
        let mut labels = std::mem::take(&mut self.labels);
        self.wire_labels(&part.tables, &part.labels, &mut labels);
        self.label_bytes.clear();
        wire::encode_labels(&mut self.label_bytes, &labels);
        self.labels = labels;
        let width = self.global.sample_types().len();
        let same = part.width() == width && map.types.iter().enumerate().all(|(i, &t)| i == t);
        if same {
            // Only the values of rows there are addresses for.
            let rows = part.addresses.len().saturating_mul(width);
            let values = part.values.get(..rows).unwrap_or(&part.values);
            self.encoder.one_frame_samples(
                &mut self.pending,
                base + 1,
                values,
                width,
                &self.label_bytes,
            );
            return Ok(());
        }
        for (i, (_, values)) in part.rows().enumerate() {
            if values.iter().all(|v| *v == 0) {
                continue;
            }
            let id = base + i as u64 + 1;
            self.values.clear();
            self.values.resize(width, 0);
            for (t, v) in values.iter().enumerate() {
                self.values[map.types[t]] = *v;
            }
            wire::one_frame_sample(&mut self.pending, id, &self.values, &self.label_bytes);
        }
        Ok(())
    }

    /// The labels of a sample of `part` with their strings interned in the
    /// global table, into `out`.
    fn wire_labels(
        &mut self,
        part: &Profile,
        labels: &[crate::profile::Label],
        out: &mut Vec<Label>,
    ) {
        out.clear();
        for l in labels {
            let key = self.global.intern(part.str(l.key)).index() as i64;
            out.push(match l.value {
                LabelValue::Str(v) => Label {
                    key,
                    str: self.global.intern(part.str(v)).index() as i64,
                    ..Label::default()
                },
                LabelValue::Num { num, unit } => Label {
                    key,
                    num,
                    num_unit: self.global.intern(part.str(unit)).index() as i64,
                    ..Label::default()
                },
            });
        }
    }

    /// Encodes the locations and samples of `part`, whose tables `map`
    /// places in the global ones.
    fn encode(&mut self, part: &Profile, map: &TableMap) {
        let base = self.locations;
        for (i, l) in part.locations().iter().enumerate() {
            self.lines.clear();
            self.lines.extend(l.lines.iter().map(|line| Line {
                function_id: map.functions[line.function.index()].index() as u64 + 1,
                line: line.line,
            }));
            let mapping = l
                .mapping
                .map_or(0, |m| map.mappings[m.index()].index() as u64 + 1);
            let id = base + i as u64 + 1;
            self.encoder
                .location(&mut self.pending, id, mapping, l.address, &self.lines);
        }
        self.locations += part.locations().len() as u64;
        let width = self.global.sample_types().len();
        for s in part.samples() {
            // Label strings are interned for every sample, in order, as
            // merging would: the string table comes out the same.
            let mut labels = std::mem::take(&mut self.labels);
            self.wire_labels(part, &s.labels, &mut labels);
            self.labels = labels;
            if s.values.iter().all(|v| *v == 0) {
                continue;
            }
            self.values.clear();
            self.values.resize(width, 0);
            for (i, v) in s.values.iter().enumerate() {
                self.values[map.types[i]] = *v;
            }
            self.ids.clear();
            self.ids
                .extend(s.stack.iter().map(|l| base + l.index() as u64 + 1));
            self.encoder
                .sample(&mut self.pending, &self.ids, &self.values, &self.labels);
        }
    }

    /// Hands the pending bytes on once there are at least `min` of them:
    /// to a compression thread (writing out the oldest member when as many
    /// are in flight as there are cores), or straight out when raw.
    fn ship(&mut self, gzip: bool, out: &mut dyn Write, min: usize) -> Result<()> {
        if self.pending.len() < min.max(1) {
            return Ok(());
        }
        let next = self.spare.encoded.pop().unwrap_or_default();
        let mut bytes = std::mem::replace(&mut self.pending, next);
        self.pending.reserve(2 * MEMBER_BYTES);
        if !gzip {
            out.write_all(&bytes).map_err(io_error)?;
            bytes.clear();
            self.spare.encoded.push(bytes);
            return Ok(());
        }
        while self.jobs.len() >= self.cores {
            if let Some(job) = self.jobs.pop_front() {
                self.spare.write_member(job, out)?;
            }
        }
        let member = self.spare.compressed.pop().unwrap_or_default();
        let mut deflate = self
            .spare
            .deflate
            .pop()
            .unwrap_or_else(super::member_deflate);
        self.jobs.push_back(std::thread::spawn(move || {
            let member = super::gzip_member_into(&bytes, member, &mut deflate)?;
            Ok(Done {
                member,
                encoded: bytes,
                deflate,
            })
        }));
        Ok(())
    }
}

/// A member being compressed.
type Job = JoinHandle<std::io::Result<Done>>;

/// A member compressed, with what made it (to be reused).
struct Done {
    member: Vec<u8>,
    /// The encoded bytes it came from.
    encoded: Vec<u8>,
    deflate: flate2::Compress,
}

/// Buffers and compressors to reuse ([`Streaming::spare`]).
#[derive(Default)]
struct Buffers {
    encoded: Vec<Vec<u8>>,
    compressed: Vec<Vec<u8>>,
    deflate: Vec<flate2::Compress>,
}

impl Buffers {
    /// Waits for a member's compression, writes it, and keeps its buffers.
    fn write_member(&mut self, job: Job, out: &mut dyn Write) -> Result<()> {
        let mut done = job
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
            .map_err(io_error)?;
        out.write_all(&done.member).map_err(io_error)?;
        done.encoded.clear();
        self.encoded.push(done.encoded);
        self.compressed.push(done.member);
        self.deflate.push(done.deflate);
        Ok(())
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::io(std::path::Path::new("<output>"), e)
}
