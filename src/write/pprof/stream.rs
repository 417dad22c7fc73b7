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
//! encoded straight from its columns), the bytes compressed by a pool of
//! threads, one per core ([`Pool`]), as gzip members of 1 MiB or more and
//! written out in order; the tables
//! (sample types, mappings, functions, strings, comments...) follow at the
//! end as one more encoded `Profile`. Protobuf merges concatenated messages
//! (repeated fields append), so the whole decodes to the profile the parts
//! merge into; `go tool pprof` resolves ids after decoding, and reads
//! concatenated gzip members as one stream.
//!
//! Memory: the global tables (O(strings + mappings + functions)), the
//! parts held before streaming (at most [`SPILL_VALUES`] values; lean ones
//! as copies of their columns), one part, and the members in the pool (two
//! per core and one more, at most 16 MiB beyond one per core and one more)
//! — never O(locations).

use std::io::Write;

use prost::Message;

use super::pool::Pool;
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
    /// The sample type to make the default (`--sample-type`), set at the end.
    sample_type: Option<String>,
}

enum State {
    /// Parts held so far (not merged: merging keeps indexes), and the
    /// sample values they will make once merged.
    Holding(Vec<Held>, usize),
    Streaming(Box<Streaming>),
}

/// A part held before streaming: a profile, or a copy of a lean part (the
/// profile it stands for is made only if the output is written whole; if
/// it streams, the columns are encoded as they are).
enum Held {
    Whole(Profile),
    Lean(AddressPart),
}

impl Held {
    fn sample_types(&self) -> usize {
        match self {
            Held::Whole(p) => p.sample_types().len(),
            Held::Lean(p) => p.width(),
        }
    }

    fn samples(&self) -> usize {
        match self {
            Held::Whole(p) => p.samples().len(),
            Held::Lean(p) => p.addresses.len(),
        }
    }

    fn into_profile(self) -> Profile {
        match self {
            Held::Whole(p) => p,
            Held::Lean(p) => p.to_profile(),
        }
    }
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
    /// The threads compressing members, once the first one is handed in
    /// (gzip only). Buffers come back from it for the next members: a fresh
    /// buffer of megabytes costs a page fault per page.
    pool: Option<Pool>,
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
            sample_type: None,
        }
    }

    /// Makes the sample type `name` the output's default when it is
    /// finished (see `write::prefer_sample_type`); `finish` fails when the
    /// profile has no such type.
    pub fn prefer_sample_type(&mut self, name: Option<String>) {
        self.sample_type = name;
    }

    /// Adds the diagnostic `text` ([`Profile::warn`]) to the output's
    /// comments, which are written at the end.
    pub fn warn(&mut self, text: &str) {
        match &mut self.state {
            State::Holding(parts, _) => {
                if let Some(Held::Whole(first)) = parts.first_mut() {
                    first.warn_once(text.to_owned());
                }
            }
            State::Streaming(s) => s.global.warn_once(text.to_owned()),
        }
    }

    /// Writes what remains (or the whole held profile) and returns the output.
    pub fn finish(mut self) -> Result<W> {
        let preferred = self.sample_type.take();
        match std::mem::replace(&mut self.state, State::Holding(Vec::new(), 0)) {
            State::Holding(parts, _) => {
                let mut parts = parts.into_iter();
                let mut whole = parts.next().map(Held::into_profile).unwrap_or_default();
                for part in parts {
                    whole.merge(&part.into_profile())?;
                }
                crate::write::prefer_sample_type(&mut whole, preferred.as_deref())?;
                write_whole(&whole, self.gzip, &mut self.out)?;
                drop_aside(whole);
            }
            State::Streaming(mut s) => {
                crate::write::prefer_sample_type(&mut s.global, preferred.as_deref())?;
                let tables = to_proto(&s.global).encode_to_vec();
                s.pending.extend_from_slice(&tables);
                s.ship(self.gzip, &mut self.out, 0)?;
                if let Some(pool) = s.pool.take() {
                    pool.finish(&mut self.out).map_err(io_error)?;
                }
            }
        }
        Ok(self.out)
    }

    /// Starts streaming with the parts held so far.
    fn spill(&mut self, parts: Vec<Held>) -> Result<()> {
        let mut parts = parts.into_iter();
        let first = parts.next().map(Held::into_profile).unwrap_or_default();
        let (tables, rows) = split_tables(first);
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
            pool: None,
            encoder: Encoder::default(),
            ids: Vec::new(),
            values: Vec::new(),
            labels: Vec::new(),
            lines: Vec::new(),
            label_bytes: Vec::new(),
        });
        s.encode(&rows, &identity);
        for part in parts {
            match part {
                Held::Whole(part) => s.add(&part)?,
                Held::Lean(part) => s.add_columns(&part)?,
            }
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
    /// Held as a copy while the profile is small (as the profile it
    /// stands for, if it is the first part); once streaming, its columns
    /// are encoded as they are, with no location or sample made.
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        match &mut self.state {
            State::Holding(parts, _) if parts.is_empty() => {
                self.hold(Held::Whole(part.to_profile()))
            }
            State::Holding(..) => self.hold(Held::Lean(part.clone())),
            State::Streaming(s) => {
                s.add_columns(part)?;
                s.ship(self.gzip, &mut self.out, MEMBER_BYTES)
            }
        }
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        match &mut self.state {
            State::Holding(..) => self.hold(Held::Whole(part)),
            State::Streaming(s) => {
                s.add(&part)?;
                s.ship(self.gzip, &mut self.out, MEMBER_BYTES)
            }
        }
    }
}

impl<W: Write> Stream<W> {
    /// Holds a part while the held ones make at most `spill_at` sample
    /// values; else starts streaming with them and this one. The first part
    /// is always held: a reader that hands over its profile whole gets
    /// exactly the bytes of `write`.
    fn hold(&mut self, part: Held) -> Result<()> {
        if let State::Holding(parts, values) = &mut self.state {
            let width = parts.first().unwrap_or(&part).sample_types().max(1);
            *values = values.saturating_add(part.samples().saturating_mul(width));
            if parts.is_empty() || *values <= self.spill_at {
                parts.push(part);
                return Ok(());
            }
            let held = std::mem::take(parts);
            self.spill(held)?;
        }
        match part {
            Held::Whole(part) => self.part(part),
            Held::Lean(part) => self.address_part(&part),
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
    /// to the compression threads (started with the first member, one per
    /// core), or straight out when raw.
    fn ship(&mut self, gzip: bool, out: &mut dyn Write, min: usize) -> Result<()> {
        if self.pending.len() < min.max(1) {
            return Ok(());
        }
        if !gzip {
            out.write_all(&self.pending).map_err(io_error)?;
            self.pending.clear();
            return Ok(());
        }
        let pool = match &mut self.pool {
            Some(pool) => pool,
            None => {
                let cores = crate::cores();
                let pool = Pool::new(cores, |len| len / 4).map_err(io_error)?;
                self.pool.insert(pool)
            }
        };
        let next = pool.buffer(2 * MEMBER_BYTES);
        let bytes = std::mem::replace(&mut self.pending, next);
        pool.compress(bytes, out).map_err(io_error)
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::unnamed_output(e)
}
