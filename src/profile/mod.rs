//! The intermediate representation every reader fills and every writer reads.
//!
//! It follows pprof's model (sample types, samples with leaf-first stacks of
//! locations, locations with inlined lines, functions, mappings, labels) with
//! everything interned: strings, functions, locations and samples, so that a
//! profile of millions of records costs memory in proportion to its distinct
//! stacks, not to its records. There is one way in: `intern`,
//! `add_mapping`, `add_function`, `add_location` and `add_sample`, each
//! finding an equal row by its value (mappings aside: every one is kept).
//!
//! The row types are in `tables.rs`: ids, strings, mappings, functions,
//! locations and samples; `parts.rs` hands a large profile over in parts;
//! `merge.rs` merges profiles (folding locations to a granularity on the way); `apportion.rs` splits a total in proportion
//! to weights; `totals.rs` says when values add up past what an `i64`
//! holds. This module imports nothing of the crate but `error.rs`.

mod apportion;
mod merge;
mod parts;
mod tables;
mod totals;

use std::hash::{Hash, Hasher};

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use rustc_hash::{FxHashMap as HashMap, FxHasher};

pub(crate) use apportion::{apportion, Apportioner};
pub use merge::Granularity;
pub(crate) use merge::TableMap;
pub(crate) use parts::{AddressPart, CollectParts, PartSink};
pub(crate) use tables::SymbolFlags;
pub use tables::{
    Function, FunctionId, GroupBy, Label, LabelValue, Line, Lines, Location, LocationId, Mapping,
    MappingId, Sample, Stack, StrId, StringTable, ValueType, Values,
};
pub(crate) use totals::{count_shift, ValueTotals};

/// What marks a diagnostic ([`Profile::warn`]) among a profile's comments.
const WARNING_PREFIX: &str = "warning: ";

/// A profile in the intermediate representation.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Interned strings; every `StrId` indexes it.
    strings: StringTable,
    /// What each value of a sample measures, in order.
    sample_types: Vec<ValueType>,
    /// Index into `sample_types` of the type to show by default.
    pub default_sample_type: Option<usize>,
    /// Index into `sample_types` of a type that counts calls (gprof's arcs):
    /// each sample with a value of this type is one call arc, stack
    /// `[callee, caller]` (leaf first), and the value is how many times the
    /// caller called the callee from that site. Writers that carry call
    /// counts (callgrind) read them from here; for the others it is an
    /// ordinary sample type.
    pub call_count_type: Option<usize>,
    /// What the period counts.
    pub period_type: Option<ValueType>,
    /// Events between two samples, in `period_type` units.
    pub period: i64,
    /// Start of the collection, nanoseconds since the Unix epoch (0 = unknown).
    pub time_nanos: i64,
    /// Length of the collection in nanoseconds (0 = unknown).
    pub duration_nanos: i64,
    /// Free-form text that must survive conversion (input header lines, how
    /// stacks were made...). Written as pprof comments.
    comments: Vec<String>,
    /// Key/value facts about the input (platform, cpu speed, byte order...).
    /// Written as `key: value` pprof comments and speedscope metadata.
    metadata: Vec<(String, String)>,
    /// Synthetic root frames the readers suggest for folded/speedscope
    /// outputs; the command line may override them.
    group_by: Vec<GroupBy>,
    /// Images, by [`MappingId`].
    mappings: Vec<Mapping>,
    /// Functions, by [`FunctionId`].
    functions: Vec<Function>,
    /// Locations, by [`LocationId`].
    locations: Vec<Location>,
    /// Samples, each with a distinct (stack, labels).
    samples: Vec<Sample>,
    function_index: HashMap<Function, FunctionId>,
    /// Locations by the hash of their content, as indexes into
    /// `locations` (as the strings' index): no copy of a location is kept.
    location_index: HashTable<Slot>,
    /// Samples by the hash of their stack and labels, as indexes into
    /// `samples`: a repeated stack costs no allocation.
    sample_index: HashTable<Slot>,
}

/// An entry of [`Profile`]'s location and sample indexes: the row's index
/// and its hash, kept so that a growing table moves its entries without
/// reading (and hashing again) every row, and a probe reads a row only when
/// the hashes agree.
#[derive(Debug, Clone, Copy)]
struct Slot {
    at: u32,
    hash: u32,
}

impl Slot {
    /// The index's hash of a row hashed to `full`: 32 bits kept, spread
    /// over the 64 the table reads (its buckets from the low bits, its tags
    /// from the top ones).
    fn hash_of(full: u64) -> u32 {
        (full >> 32) as u32 ^ full as u32
    }

    /// The hash the table is given for `hash`, as [`Slot::hash_of`] made it.
    fn table_hash(hash: u32) -> u64 {
        (u64::from(hash) << 32) | u64::from(hash)
    }

    /// What the table rehashes an entry with.
    fn rehash(&self) -> u64 {
        Slot::table_hash(self.hash)
    }
}

impl Profile {
    /// A profile with the given `(type, unit)` sample types, the first the default.
    pub fn new(sample_types: &[(&str, &str)]) -> Self {
        let mut profile = Profile::default();
        for (kind, unit) in sample_types {
            profile.add_sample_type(kind, unit);
        }
        if !profile.sample_types.is_empty() {
            profile.default_sample_type = Some(0);
        }
        profile
    }

    /// Interned strings; every `StrId` indexes it.
    pub fn strings(&self) -> &StringTable {
        &self.strings
    }

    /// What each value of a sample measures, in order.
    pub fn sample_types(&self) -> &[ValueType] {
        &self.sample_types
    }

    /// Free-form text that must survive conversion, diagnostics
    /// ([`Profile::warn`]) among it. Written as pprof comments.
    pub fn comments(&self) -> &[String] {
        &self.comments
    }

    /// Keeps `text` as a comment (a pprof comment; speedscope and callgrind
    /// carry them too).
    pub fn add_comment(&mut self, text: impl Into<String>) {
        self.comments.push(text.into());
    }

    /// Key/value facts about the input, in the order they were added.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// Synthetic root frames the reader suggests for folded and speedscope
    /// outputs.
    pub fn group_by(&self) -> &[GroupBy] {
        &self.group_by
    }

    /// Suggests `group` as the next level of synthetic root frames.
    pub fn add_group_by(&mut self, group: GroupBy) {
        self.group_by.push(group);
    }

    /// Images, by [`MappingId`].
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// Functions, by [`FunctionId`].
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Locations, by [`LocationId`].
    pub fn locations(&self) -> &[Location] {
        &self.locations
    }

    /// The location `id` (ids come from this profile, so it exists).
    pub fn location(&self, id: LocationId) -> &Location {
        &self.locations[id.index()]
    }

    /// Samples, each with a distinct (stack, labels).
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The id of `s` in the string table, adding it when new.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.strings.intern(s)
    }

    /// The string with id `id`.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// Adds a sample type and returns its index. Existing samples get a 0 for it.
    pub fn add_sample_type(&mut self, kind: &str, unit: &str) -> usize {
        let vt = ValueType {
            kind: self.intern(kind),
            unit: self.intern(unit),
        };
        if let Some(i) = self.sample_types.iter().position(|t| *t == vt) {
            return i;
        }
        self.sample_types.push(vt);
        for sample in &mut self.samples {
            sample.values.push(0);
        }
        self.sample_types.len() - 1
    }

    /// The index of the sample type called `kind`, if any.
    pub fn sample_type_index(&self, kind: &str) -> Option<usize> {
        self.sample_types
            .iter()
            .position(|t| self.str(t.kind) == kind)
    }

    /// `(type, unit)` of sample type `i`.
    pub fn sample_type_name(&self, i: usize) -> (&str, &str) {
        let vt = self.sample_types[i];
        (self.str(vt.kind), self.str(vt.unit))
    }

    /// Sets the period type and period.
    pub fn set_period(&mut self, kind: &str, unit: &str, period: i64) {
        self.period_type = Some(ValueType {
            kind: self.intern(kind),
            unit: self.intern(unit),
        });
        self.period = period;
    }

    /// Adds a `key: value` fact about the input.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.metadata.push((key.into(), value.into()));
    }

    /// Sets the `has_*` flags of a mapping that `found` sets (never clears one).
    pub(crate) fn add_mapping_flags(&mut self, id: MappingId, found: SymbolFlags) {
        if let Some(m) = self.mappings.get_mut(id.index()) {
            m.has_functions |= found.functions;
            m.has_filenames |= found.filenames;
            m.has_line_numbers |= found.line_numbers;
            m.has_inline_frames |= found.inline_frames;
        }
    }

    /// Sets the build id of a mapping (hex text, as pprof shows it).
    pub(crate) fn set_mapping_build_id(&mut self, id: MappingId, build_id: &str) {
        let build_id = self.intern(build_id);
        if let Some(m) = self.mappings.get_mut(id.index()) {
            m.build_id = build_id;
        }
    }

    /// Adds a mapping, even when an equal one is there: mappings are not
    /// interned, since the same image at the same range in two processes
    /// is two mappings (a reader knows which mapping it means; merging
    /// profiles finds equal ones, [`Profile::merge`]).
    pub fn add_mapping(&mut self, mapping: Mapping) -> MappingId {
        self.mappings.push(mapping);
        MappingId::from_index(self.mappings.len() - 1)
    }

    /// Adds a function (or finds the equal one) and returns its id.
    pub fn add_function(
        &mut self,
        name: &str,
        system_name: &str,
        filename: &str,
        start_line: i64,
    ) -> FunctionId {
        let name_id = self.intern(name);
        let function = Function {
            name: name_id,
            // C names are their own system names: one string, looked up once.
            system_name: match system_name == name {
                true => name_id,
                false => self.intern(system_name),
            },
            filename: self.intern(filename),
            start_line,
        };
        self.intern_function(function)
    }

    fn intern_function(&mut self, function: Function) -> FunctionId {
        if let Some(&id) = self.function_index.get(&function) {
            return id;
        }
        let id = FunctionId::from_index(self.functions.len());
        self.functions.push(function);
        self.function_index.insert(function, id);
        id
    }

    /// Interns a location; equal locations get the same id, new ones the
    /// next id in order.
    pub fn add_location(&mut self, location: Location) -> LocationId {
        let locations = &self.locations;
        let hash = Slot::hash_of(location_hash(&location));
        let entry = self.location_index.entry(
            Slot::table_hash(hash),
            |s| s.hash == hash && locations[s.at as usize] == location,
            Slot::rehash,
        );
        match entry {
            Entry::Occupied(found) => LocationId::from_index(found.get().at as usize),
            Entry::Vacant(slot) => {
                let id = LocationId::from_index(self.locations.len());
                slot.insert(Slot {
                    at: id.index() as u32,
                    hash,
                });
                self.locations.push(location);
                id
            }
        }
    }

    /// Makes room for `locations` more locations and `samples` more samples
    /// (their tables and indexes), and `functions` more functions with two
    /// strings each: a reader that knows how many it is about to add, so
    /// that the hash tables are not rebuilt as they grow.
    pub(crate) fn reserve(&mut self, locations: usize, samples: usize, functions: usize) {
        self.locations.reserve(locations);
        self.location_index.reserve(locations, Slot::rehash);
        self.samples.reserve(samples);
        self.sample_index.reserve(samples, Slot::rehash);
        self.functions.reserve(functions);
        self.function_index.reserve(functions);
        self.strings.reserve(functions.saturating_mul(2));
    }

    /// An unsymbolized location at `address`.
    pub fn address_location(
        &mut self,
        mapping: Option<MappingId>,
        address: u64,
        is_return_address: bool,
    ) -> LocationId {
        self.add_location(Location {
            mapping,
            address,
            is_return_address,
            lines: Lines::new(),
        })
    }

    /// Replaces the lines of a location (symbolization), keeping the index
    /// consistent. If an equal location already exists the two stay distinct
    /// ids with equal content, which every writer accepts, and the index
    /// keeps finding the first.
    pub(crate) fn set_location_lines(&mut self, id: LocationId, lines: Vec<Line>) {
        let Some(location) = self.locations.get_mut(id.index()) else {
            return;
        };
        let at = id.index() as u32;
        let hash = Slot::hash_of(location_hash(location));
        if let Ok(entry) = self
            .location_index
            .find_entry(Slot::table_hash(hash), |s| s.at == at)
        {
            entry.remove();
        }
        location.lines = Lines::from_vec(lines);
        let (locations, location) = (&self.locations, &self.locations[id.index()]);
        let hash = Slot::hash_of(location_hash(location));
        let eq = |s: &Slot| s.hash == hash && locations[s.at as usize] == *location;
        let table_hash = Slot::table_hash(hash);
        if self.location_index.find(table_hash, eq).is_none() {
            let slot = Slot { at, hash };
            self.location_index
                .insert_unique(table_hash, slot, Slot::rehash);
        }
    }

    /// Records a diagnostic about the input (an assumed clock rate, totals
    /// that disagree...): kept among the comments as `warning: …`, so pprof
    /// carries it, and shown once on standard error by the command line.
    pub fn warn(&mut self, what: impl std::fmt::Display) {
        self.comments.push(format!("{WARNING_PREFIX}{what}"));
    }

    /// The diagnostics recorded by [`Profile::warn`], in order.
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.comments
            .iter()
            .filter_map(|c| c.strip_prefix(WARNING_PREFIX))
    }

    /// A label with a string value.
    pub fn label_str(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.intern(key),
            value: LabelValue::Str(self.intern(value)),
        }
    }

    /// A label with a numeric value in `unit` (`""` for none).
    pub fn label_num(&mut self, key: &str, num: i64, unit: &str) -> Label {
        Label {
            key: self.intern(key),
            value: LabelValue::Num {
                num,
                unit: self.intern(unit),
            },
        }
    }

    /// Adds `values` to the sample with this stack and these labels, creating
    /// it if needed. `values` must have one entry per sample type; labels
    /// sorted by key cost no copy.
    pub fn add_sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        debug_assert_eq!(values.len(), self.sample_types.len());
        let sorted;
        let labels = if labels.is_sorted() {
            labels
        } else {
            let mut own = labels.to_vec();
            own.sort();
            sorted = own;
            &sorted[..]
        };
        let samples = &self.samples;
        let hash = Slot::hash_of(sample_hash(stack, labels));
        let entry = self.sample_index.entry(
            Slot::table_hash(hash),
            |slot| {
                slot.hash == hash && {
                    let s = &samples[slot.at as usize];
                    s.stack[..] == *stack && s.labels == labels
                }
            },
            Slot::rehash,
        );
        let slot = match entry {
            Entry::Occupied(found) => {
                add_values(&mut self.samples[found.get().at as usize].values, values);
                return;
            }
            Entry::Vacant(slot) => slot,
        };
        slot.insert(Slot {
            at: self.samples.len() as u32,
            hash,
        });
        let mut own = Values::from_slice(values);
        own.resize(self.sample_types.len(), 0);
        self.samples.push(Sample {
            stack: Stack::from_slice(stack),
            values: own,
            labels: labels.to_vec(),
        });
    }

    /// Checks the invariants every writer relies on: ids in range (strings,
    /// mappings, functions, locations), one value per sample type, labels
    /// sorted, a default sample type that exists. Returns what is wrong.
    pub fn check(&self) -> std::result::Result<(), String> {
        let strings = self.strings.as_slice().len();
        let str_ok = |id: StrId| id.index() < strings;
        let types = self.sample_types.len();
        if self.default_sample_type.is_some_and(|d| d >= types) {
            return Err(format!("default sample type out of {types} types"));
        }
        let value_types = self.sample_types.iter().chain(self.period_type.as_ref());
        if let Some(t) = value_types
            .into_iter()
            .find(|t| !str_ok(t.kind) || !str_ok(t.unit))
        {
            return Err(format!("value type {t:?} names a string out of range"));
        }
        for (i, m) in self.mappings.iter().enumerate() {
            if !str_ok(m.filename) || !str_ok(m.build_id) {
                return Err(format!("mapping {i} names a string out of range"));
            }
        }
        for (i, f) in self.functions.iter().enumerate() {
            if ![f.name, f.system_name, f.filename].into_iter().all(str_ok) {
                return Err(format!("function {i} names a string out of range"));
            }
        }
        for (i, l) in self.locations.iter().enumerate() {
            if l.mapping.is_some_and(|m| m.index() >= self.mappings.len()) {
                return Err(format!("location {i} has a mapping out of range"));
            }
            if l.lines
                .iter()
                .any(|line| line.function.index() >= self.functions.len())
            {
                return Err(format!("location {i} has a function out of range"));
            }
        }
        self.check_samples(str_ok)
    }

    fn check_samples(&self, str_ok: impl Fn(StrId) -> bool) -> std::result::Result<(), String> {
        let types = self.sample_types.len();
        for (i, s) in self.samples.iter().enumerate() {
            if s.values.len() != types {
                return Err(format!(
                    "sample {i} has {} values for {types} sample types",
                    s.values.len()
                ));
            }
            if s.stack.iter().any(|&l| l.index() >= self.locations.len()) {
                return Err(format!("sample {i} has a location out of range"));
            }
            if !s.labels.is_sorted() {
                return Err(format!("sample {i} has unsorted labels"));
            }
            let label_strings = s.labels.iter().flat_map(|l| match l.value {
                LabelValue::Str(v) => [l.key, v],
                LabelValue::Num { unit, .. } => [l.key, unit],
            });
            if !label_strings.into_iter().all(&str_ok) {
                return Err(format!("sample {i} has a label string out of range"));
            }
        }
        Ok(())
    }

    /// Sum of sample type `i` over all samples.
    pub fn total(&self, i: usize) -> i64 {
        self.samples
            .iter()
            .map(|s| s.values.get(i).copied().unwrap_or(0))
            .fold(0i64, i64::saturating_add)
    }

    /// Drops every location and sample (and their indexes), keeping the
    /// other tables: what a streaming writer keeps once it has written them.
    pub(crate) fn clear_locations_and_samples(&mut self) {
        self.locations = Vec::new();
        self.samples = Vec::new();
        self.location_index = HashTable::new();
        self.sample_index = HashTable::new();
    }

    /// Moves the locations and samples out into a profile of their own (with
    /// the same strings and sample types, so ids keep their meaning), and
    /// leaves this one with the other tables.
    pub(crate) fn take_rows(&mut self) -> Profile {
        let rows = Profile {
            locations: std::mem::take(&mut self.locations),
            samples: std::mem::take(&mut self.samples),
            strings: self.strings.clone(),
            sample_types: self.sample_types.clone(),
            ..Profile::default()
        };
        self.clear_locations_and_samples();
        rows
    }

    /// The display frames of a location, innermost first: one per line
    /// (inlined frames), or one synthesized name for an unsymbolized address.
    pub(crate) fn location_frames(&self, id: LocationId) -> Vec<Frame<'_>> {
        let Some(location) = self.locations.get(id.index()) else {
            return Vec::new();
        };
        if location.lines.is_empty() {
            return vec![Frame {
                name: std::borrow::Cow::Owned(self.address_name(location)),
                file: None,
                line: 0,
            }];
        }
        location
            .lines
            .iter()
            .map(|line| self.line_frame(line))
            .collect()
    }

    /// The display frame of one line of a location: its function's name
    /// and file, and the line.
    pub(crate) fn line_frame(&self, line: &Line) -> Frame<'_> {
        let f = &self.functions[line.function.index()];
        let file = self.str(f.filename);
        Frame {
            name: std::borrow::Cow::Borrowed(self.str(f.name)),
            file: (!file.is_empty()).then_some(file),
            line: line.line,
        }
    }

    /// `image+0xOFFSET` for an address in a named mapping, else `0xADDRESS`.
    pub(crate) fn address_name(&self, location: &Location) -> String {
        match location.mapping.and_then(|m| self.mappings.get(m.index())) {
            Some(m) if !self.str(m.filename).is_empty() => {
                let offset = location
                    .address
                    .wrapping_sub(m.start)
                    .wrapping_add(m.file_offset);
                format!("{}+{:#x}", basename(self.str(m.filename)), offset)
            }
            _ => format!("{:#x}", location.address),
        }
    }

    /// The value of label `key` on a sample, as text.
    pub(crate) fn label_text(&self, sample: &Sample, key: &str) -> Option<String> {
        sample
            .labels
            .iter()
            .find(|l| self.str(l.key) == key)
            .map(|l| match l.value {
                LabelValue::Str(v) => self.str(v).to_owned(),
                LabelValue::Num { num, .. } => num.to_string(),
            })
    }
}

/// The hash a location is indexed by.
fn location_hash(location: &Location) -> u64 {
    let mut hasher = FxHasher::default();
    location.hash(&mut hasher);
    hasher.finish()
}

/// The hash a sample is indexed by: of its stack and (sorted) labels.
fn sample_hash(stack: &[LocationId], labels: &[Label]) -> u64 {
    let mut hasher = FxHasher::default();
    stack.hash(&mut hasher);
    labels.hash(&mut hasher);
    hasher.finish()
}

/// Adds `values` to a sample's `sums`, one by one, saturating: how samples
/// of one stack and labels are summed.
pub(crate) fn add_values(sums: &mut [i64], values: &[i64]) {
    for (sum, v) in sums.iter_mut().zip(values) {
        *sum = sum.saturating_add(*v);
    }
}

/// A frame as outputs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    /// The function name (or a synthesized address name).
    pub name: std::borrow::Cow<'a, str>,
    /// Its source file, when known.
    pub file: Option<&'a str>,
    /// Its line (0 when unknown).
    pub line: i64,
}

/// The last path component of a file name (either separator).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The most sample values a profile may hold: one `i64` per sample type per
/// sample, 2^27 of them (1 GiB). An input whose distinct stacks times sample
/// types exceed it (thousands of event types, say) is refused with
/// [`too_many_values`] before the values are allocated.
pub(crate) const MAX_VALUES: u64 = 1 << 27;

/// Values are kept densely (one per sample type per sample); past this many
/// (32 MiB of them) they must also be at least one in [`MAX_ZEROS_PER_VALUE`]
/// non-zero, so that a small input with thousands of events, each sampled at
/// a few addresses, cannot make memory grow with events × addresses.
pub(crate) const DENSE_VALUES_FREE: u64 = 1 << 22;

/// See [`DENSE_VALUES_FREE`]: at most this many values per non-zero one.
pub(crate) const MAX_ZEROS_PER_VALUE: u64 = 16;

/// `None` when `types` sample types over `samples` samples, of which
/// `nonzero` values are not zero, fit [`MAX_VALUES`] and the density rule of
/// [`DENSE_VALUES_FREE`]; else what to say about it.
pub(crate) fn too_many_values(types: usize, samples: u64, nonzero: u64) -> Option<String> {
    let values = (types as u64).saturating_mul(samples);
    if values > MAX_VALUES {
        return Some(format!(
            "{types} sample types (one per event) over {samples} distinct stacks would need {values} values, more than the {MAX_VALUES} profconv holds in memory; convert fewer events at a time"
        ));
    }
    let sparse = values > DENSE_VALUES_FREE && values / MAX_ZEROS_PER_VALUE > nonzero;
    sparse.then(|| {
        format!(
            "{types} sample types (one per event) over {samples} distinct stacks would need {values} values of which only {nonzero} are not zero; profconv keeps one value per type per stack, and refuses more than {DENSE_VALUES_FREE} values when fewer than one in {MAX_ZEROS_PER_VALUE} is used; convert fewer events at a time"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_table_starts_with_empty_string() {
        let p = Profile::default();
        assert_eq!(p.strings.as_slice(), &[String::new()]);
    }

    #[test]
    fn equal_samples_are_aggregated() {
        let mut p = Profile::new(&[("samples", "count")]);
        let l = p.address_location(None, 0x10, false);
        let label = p.label_num("pid", 7, "");
        p.add_sample(&[l], &[2], &[label]);
        p.add_sample(&[l], &[3], &[label]);
        p.add_sample(&[l], &[5], &[]);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.samples[0].values[..], [5]);
        assert_eq!(p.total(0), 10);
    }

    /// The indexes find every row again after growing past what was
    /// reserved (their entries moved by the hashes they keep), and after a
    /// location's lines are replaced.
    #[test]
    fn indexes_find_rows_after_growth_and_new_lines() {
        let mut p = Profile::new(&[("samples", "count")]);
        p.reserve(10, 10, 0);
        let n = 50_000u64;
        let ids: Vec<LocationId> = (0..n)
            .map(|a| p.address_location(None, 0x1000 + a, false))
            .collect();
        for (i, pair) in ids.windows(2).enumerate() {
            p.add_sample(pair, &[i as i64], &[]);
        }
        for (a, &id) in (0..n).zip(&ids) {
            assert_eq!(p.address_location(None, 0x1000 + a, false), id);
        }
        for (i, pair) in ids.windows(2).enumerate() {
            p.add_sample(pair, &[1], &[]);
            assert_eq!(p.samples[i].values[..], [i as i64 + 1]);
        }
        assert_eq!(
            (p.locations.len(), p.samples.len()),
            (n as usize, n as usize - 1)
        );

        let f = p.add_function("f", "f", "f.c", 1);
        p.set_location_lines(
            ids[7],
            vec![Line {
                function: f,
                line: 3,
            }],
        );
        let with_lines = Location {
            mapping: None,
            address: 0x1007,
            is_return_address: false,
            lines: vec![Line {
                function: f,
                line: 3,
            }]
            .into(),
        };
        assert_eq!(p.add_location(with_lines), ids[7]);
        // The old content is no longer indexed: it is a new location.
        let again = p.address_location(None, 0x1007, false);
        assert_eq!(again.index(), n as usize);
    }

    #[test]
    fn check_finds_a_sample_with_the_wrong_number_of_values() {
        let mut p = Profile::new(&[("samples", "count")]);
        let l = p.address_location(None, 0x10, false);
        p.add_sample(&[l], &[1], &[]);
        assert_eq!(p.check(), Ok(()));
        p.samples[0].values.push(2);
        assert!(p
            .check()
            .unwrap_err()
            .contains("2 values for 1 sample types"));
    }

    #[test]
    fn values_past_the_free_amount_must_be_dense_enough() {
        // Under the free amount anything goes.
        assert_eq!(too_many_values(2000, 2000, 1), None);
        // Past it, one value in 16 must be non-zero.
        let samples = DENSE_VALUES_FREE; // 4 types: 4 × free values
        assert!(too_many_values(4, samples, samples / 4 - 1).is_some());
        assert_eq!(too_many_values(4, samples, samples / 4), None);
        // Past the hard limit, density does not help.
        assert!(too_many_values(2, MAX_VALUES, 2 * MAX_VALUES).is_some());
    }

    #[test]
    fn unsymbolized_frames_name_image_and_offset() {
        let mut p = Profile::default();
        let f = p.intern("/usr/lib/libc.so");
        let m = p.add_mapping(Mapping::new(0x1000, 0x2000, 0x100, f, StrId::EMPTY));
        let l = p.address_location(Some(m), 0x1010, false);
        assert_eq!(p.location_frames(l)[0].name, "libc.so+0x110");
        let l = p.address_location(None, 0x1010, false);
        assert_eq!(p.location_frames(l)[0].name, "0x1010");
    }
}
