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
//! encoded straight from its columns), by prost's code, one reused message
//! at a time, and the bytes go through one gzip stream (flate2) as they
//! come, a megabyte at a time; the tables (sample types, mappings,
//! functions, strings, comments...) follow at the end as one more encoded
//! `Profile`. Protobuf merges concatenated messages
//! (repeated fields append), so the whole decodes to the profile the parts
//! merge into; `go tool pprof` resolves ids after decoding, and reads
//! concatenated gzip members as one stream.
//!
//! Memory: the global tables (O(strings + mappings + functions)), the
//! parts held before streaming (at most [`SPILL_VALUES`] values; lean ones
//! as copies of their columns), one part, and a megabyte of encoded bytes
//! — never O(locations).

use std::io::Write;

use prost::Message;

use super::{encode, pb, pb_label, rows, to_proto, Scratch};
use crate::error::{Error, Result};
use crate::profile::{AddressPart, LabelValue, PartSink, Profile, TableMap};

/// Sample values (samples × sample types) held, and written as one message
/// at the end, before streaming (2 MiB of values). The first part is always
/// held whole.
pub const SPILL_VALUES: usize = 1 << 18;

/// Encoded bytes gathered before they are written out (compressed or not).
const WRITE_BYTES: usize = 1 << 20;

/// A pprof output fed part by part; [`Stream::finish`] completes it.
pub struct Stream<W: Write> {
    out: Out<W>,
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

/// Where the encoded bytes go: the output itself, or a gzip stream into it.
enum Out<W: Write> {
    Raw(W),
    Gzip(Box<flate2::write::GzEncoder<W>>),
}

impl<W: Write> Out<W> {
    fn new(out: W, gzip: bool) -> Self {
        match gzip {
            true => Out::Gzip(Box::new(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::fast(),
            ))),
            false => Out::Raw(out),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Out::Raw(w) => w.write_all(bytes),
            Out::Gzip(w) => w.write_all(bytes),
        }
        .map_err(io_error)
    }

    /// Ends the gzip stream, if any, and gives the output back.
    fn finish(self) -> Result<W> {
        match self {
            Out::Raw(w) => Ok(w),
            Out::Gzip(w) => w.finish().map_err(io_error),
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
    /// Encoded bytes not yet written out.
    pending: Vec<u8>,
    scratch: Scratch,
    /// One sample's values, in the global sample types' order.
    values: Vec<i64>,
    /// One sample's labels, their strings in the global table.
    labels: Vec<pb::Label>,
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
            out: Out::new(out, gzip),
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
                self.out.write_all(&encode(&whole))?;
            }
            State::Streaming(mut s) => {
                crate::write::prefer_sample_type(&mut s.global, preferred.as_deref())?;
                let tables = to_proto(&s.global).encode_to_vec();
                s.pending.extend_from_slice(&tables);
                s.ship(&mut self.out, 0)?;
            }
        }
        self.out.finish()
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
            pending: Vec::with_capacity(2 * WRITE_BYTES),
            scratch: Scratch::default(),
            values: Vec::new(),
            labels: Vec::new(),
        });
        s.encode(&rows, &identity);
        for part in parts {
            match part {
                Held::Whole(part) => s.add(&part)?,
                Held::Lean(part) => s.add_columns(&part)?,
            }
            s.ship(&mut self.out, WRITE_BYTES)?;
        }
        self.state = State::Streaming(s);
        Ok(())
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
                s.ship(&mut self.out, WRITE_BYTES)
            }
        }
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        match &mut self.state {
            State::Holding(..) => self.hold(Held::Whole(part)),
            State::Streaming(s) => {
                s.add(&part)?;
                s.ship(&mut self.out, WRITE_BYTES)
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
        for (i, &address) in part.addresses.iter().enumerate() {
            rows::location(&mut self.pending, base + i as u64 + 1, mapping, address);
        }
        self.locations += part.addresses.len() as u64;
        self.global_labels(&part.tables, &part.labels);
        let mut labels = Vec::new();
        for l in &self.labels {
            prost::encoding::message::encode(3, l, &mut labels);
        }
        let width = self.global.sample_types().len();
        for (i, (_, values)) in part.rows().enumerate() {
            if values.iter().all(|v| *v == 0) {
                continue;
            }
            self.values.clear();
            self.values.resize(width, 0);
            for (t, v) in values.iter().enumerate() {
                self.values[map.types[t]] = *v;
            }
            let id = base + i as u64 + 1;
            rows::sample(&mut self.pending, id, &self.values, &labels);
        }
        Ok(())
    }

    /// `labels` of `part` with their strings interned in the global table,
    /// into `self.labels`.
    fn global_labels(&mut self, part: &Profile, labels: &[crate::profile::Label]) {
        self.labels.clear();
        for l in labels {
            let key = self.global.intern(part.str(l.key));
            let value = match l.value {
                LabelValue::Str(v) => LabelValue::Str(self.global.intern(part.str(v))),
                LabelValue::Num { num, unit } => LabelValue::Num {
                    num,
                    unit: self.global.intern(part.str(unit)),
                },
            };
            let label = crate::profile::Label { key, value };
            self.labels.push(pb_label(&label));
        }
    }

    /// Encodes the locations and samples of `part`, whose tables `map`
    /// places in the global ones.
    fn encode(&mut self, part: &Profile, map: &TableMap) {
        let base = self.locations;
        for (i, l) in part.locations().iter().enumerate() {
            let mapping = l
                .mapping
                .map_or(0, |m| map.mappings[m.index()].index() as u64 + 1);
            let id = base + i as u64 + 1;
            let function_id =
                |f: crate::profile::FunctionId| map.functions[f.index()].index() as u64 + 1;
            self.scratch
                .location(&mut self.pending, id, l, function_id, mapping);
        }
        self.locations += part.locations().len() as u64;
        let width = self.global.sample_types().len();
        for s in part.samples() {
            // Label strings are interned for every sample, in order, as
            // merging would: the string table comes out the same.
            self.global_labels(part, &s.labels);
            if s.values.iter().all(|v| *v == 0) {
                continue;
            }
            self.values.clear();
            self.values.resize(width, 0);
            for (i, v) in s.values.iter().enumerate() {
                self.values[map.types[i]] = *v;
            }
            let ids = s.stack.iter().map(|l| base + l.index() as u64 + 1);
            let labels = self.labels.iter().copied();
            self.scratch
                .sample(&mut self.pending, ids, &self.values, labels);
        }
    }

    /// Writes the pending bytes out once there are at least `min` of them.
    fn ship<W: Write>(&mut self, out: &mut Out<W>, min: usize) -> Result<()> {
        if self.pending.len() < min.max(1) {
            return Ok(());
        }
        out.write_all(&self.pending)?;
        self.pending.clear();
        Ok(())
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::unnamed_output(e)
}
