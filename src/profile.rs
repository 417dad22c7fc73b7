//! The intermediate representation every reader fills and every writer reads.
//!
//! It follows pprof's model (sample types, samples with leaf-first stacks of
//! locations, locations with inlined lines, functions, mappings, labels) with
//! everything interned: strings, functions, locations and samples, so that a
//! profile of millions of records costs memory in proportion to its distinct
//! stacks, not to its records.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::{FxHashMap as HashMap, FxHasher};
use smallvec::SmallVec;

use crate::error::{Error, Result};

/// An id of a table of the profile: a distinct type per table, so that a
/// location id cannot be used as a mapping id.
macro_rules! table_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The 0-based position in the table.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of the entry at 0-based position `index`.
            pub fn from_index(index: usize) -> Self {
                $name(index as u32)
            }
        }
    };
}

table_id!(
    /// Index into [`Profile::strings`]; 0 is always the empty string.
    StrId
);

impl StrId {
    /// The empty string, always at index 0.
    pub const EMPTY: StrId = StrId(0);
}

table_id!(
    /// Index into [`Profile::mappings`].
    MappingId
);
table_id!(
    /// Index into [`Profile::functions`].
    FunctionId
);
table_id!(
    /// Index into [`Profile::locations`].
    LocationId
);

/// Interned strings. Index 0 is `""`, as pprof requires.
#[derive(Debug, Clone)]
pub struct StringTable {
    strings: Vec<String>,
    /// Ids by the hash of their string: each string is stored once.
    index: HashTable<StrId>,
}

impl Default for StringTable {
    fn default() -> Self {
        let mut table = StringTable {
            strings: Vec::new(),
            index: HashTable::new(),
        };
        table.intern("");
        table
    }
}

fn str_hash(s: &str) -> u64 {
    let mut hasher = FxHasher::default();
    s.hash(&mut hasher);
    hasher.finish()
}

impl StringTable {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> StrId {
        let strings = &self.strings;
        let entry = self.index.entry(
            str_hash(s),
            |id| strings[id.index()] == s,
            |id| str_hash(&strings[id.index()]),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_table::Entry::Vacant(e) => {
                let id = StrId::from_index(self.strings.len());
                e.insert(id);
                self.strings.push(s.to_owned());
                id
            }
        }
    }

    /// The string with id `id` (`""` when out of range).
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.index()).map_or("", String::as_str)
    }

    /// Makes room for `additional` more strings without growing the index.
    fn reserve(&mut self, additional: usize) {
        let strings = &self.strings;
        self.index
            .reserve(additional, |id| str_hash(&strings[id.index()]));
        self.strings.reserve(additional);
    }

    /// Every string, by id.
    pub fn as_slice(&self) -> &[String] {
        &self.strings
    }
}

/// A (type, unit) pair such as `cpu/nanoseconds` or `alloc_space/bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// The type, e.g. `cpu`.
    pub kind: StrId,
    /// The unit, e.g. `nanoseconds`.
    pub unit: StrId,
}

/// The value of a label: a string, or a number with an optional unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelValue {
    /// A string value.
    Str(StrId),
    /// A number, with its unit.
    Num {
        /// The value.
        num: i64,
        /// Its unit (`""` when none).
        unit: StrId,
    },
}

/// A key/value pair attached to a sample: pid, tid, cpu, event, size class...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// The label's name.
    pub key: StrId,
    /// Its value.
    pub value: LabelValue,
}

/// An image mapped into the profiled address space.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub limit: u64,
    /// File offset that `start` corresponds to.
    pub file_offset: u64,
    /// Path or name of the image.
    pub filename: StrId,
    /// Build id (hex), `""` when unknown.
    pub build_id: StrId,
    /// Some location of the mapping has a function.
    pub has_functions: bool,
    /// Some location has a source file.
    pub has_filenames: bool,
    /// Some location has a line number.
    pub has_line_numbers: bool,
    /// Some location has inlined frames.
    pub has_inline_frames: bool,
}

impl Mapping {
    /// A mapping of `[start, limit)` at `file_offset` in the named file, with
    /// nothing symbolized yet (the `has_*` flags false).
    pub fn new(start: u64, limit: u64, file_offset: u64, filename: StrId, build_id: StrId) -> Self {
        Mapping {
            start,
            limit,
            file_offset,
            filename,
            build_id,
            has_functions: false,
            has_filenames: false,
            has_line_numbers: false,
            has_inline_frames: false,
        }
    }
}

/// What symbolization found for a mapping's locations (pprof's `has_*` flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SymbolFlags {
    /// Some location got a function name.
    pub functions: bool,
    /// Some location got a source file.
    pub filenames: bool,
    /// Some location got a line number.
    pub line_numbers: bool,
    /// Some location got inlined frames.
    pub inline_frames: bool,
}

impl std::ops::BitOrAssign for SymbolFlags {
    /// What either found.
    fn bitor_assign(&mut self, other: SymbolFlags) {
        self.functions |= other.functions;
        self.filenames |= other.filenames;
        self.line_numbers |= other.line_numbers;
        self.inline_frames |= other.inline_frames;
    }
}

/// A function (or procedure) as a symbol table or debug information names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Function {
    /// Human-readable (demangled) name.
    pub name: StrId,
    /// Name as the system knows it (mangled).
    pub system_name: StrId,
    /// Source file of the function (`""` when unknown).
    pub filename: StrId,
    /// First line of the function (0 when unknown).
    pub start_line: i64,
}

/// One frame of a location: a function and a line in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Line {
    /// The function of this frame.
    pub function: FunctionId,
    /// The line in it (0 when unknown).
    pub line: i64,
}

/// The lines of a [`Location`]: one inline (the common case, no inlined
/// frames), so a location costs no allocation of its own.
pub type Lines = SmallVec<[Line; 1]>;

/// A sample's stack, leaf first: short stacks stored inline.
pub type Stack = SmallVec<[LocationId; 4]>;

/// A sample's values, one per sample type: up to four stored inline.
pub type Values = SmallVec<[i64; 4]>;

/// A program location: an address in a mapping, and the source lines it
/// stands for (several = inlined frames, innermost first). A location with no
/// lines is unsymbolized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The image the address is in, if known.
    pub mapping: Option<MappingId>,
    /// The address as profiled (before relocation).
    pub address: u64,
    /// The address is a return address (a caller frame): symbolize it at
    /// `address - 1` so that it lands inside the call instruction.
    pub is_return_address: bool,
    /// Source frames, innermost first; empty when unsymbolized.
    pub lines: Lines,
}

/// Aggregated measurements for one stack and one set of labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Leaf first.
    pub stack: Stack,
    /// One value per [`Profile::sample_types`] entry.
    pub values: Values,
    /// Sorted by key, so that equal label sets compare equal.
    pub labels: Vec<Label>,
}

/// How folded and speedscope outputs group stacks under synthetic root frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBy {
    /// A frame naming the image (mapping file name) of the leaf location.
    Image,
    /// A frame for the value of the named label (e.g. `pid`, `tid`).
    Label(String),
}

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
    location_index: HashMap<Location, LocationId>,
    /// Samples as (hash of their stack and labels, index): collisions are
    /// resolved by comparing, so a repeated stack costs no allocation.
    sample_index: HashTable<(u64, u32)>,
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

    /// Adds a mapping even when an equal one exists: the same image at the
    /// same range in two processes is two mappings.
    pub fn add_distinct_mapping(&mut self, mapping: Mapping) -> MappingId {
        self.mappings.push(mapping);
        MappingId::from_index(self.mappings.len() - 1)
    }

    /// Sets the `has_*` flags of a mapping that `found` sets (never clears one).
    pub fn add_mapping_flags(&mut self, id: MappingId, found: SymbolFlags) {
        if let Some(m) = self.mappings.get_mut(id.index()) {
            m.has_functions |= found.functions;
            m.has_filenames |= found.filenames;
            m.has_line_numbers |= found.line_numbers;
            m.has_inline_frames |= found.inline_frames;
        }
    }

    /// Sets the build id of a mapping (hex text, as pprof shows it).
    pub fn set_mapping_build_id(&mut self, id: MappingId, build_id: &str) {
        let build_id = self.intern(build_id);
        if let Some(m) = self.mappings.get_mut(id.index()) {
            m.build_id = build_id;
        }
    }

    /// Adds a mapping, or finds the equal one already there.
    pub fn add_mapping(&mut self, mapping: Mapping) -> MappingId {
        if let Some(i) = self.mappings.iter().position(|m| *m == mapping) {
            return MappingId::from_index(i);
        }
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
        let function = Function {
            name: self.intern(name),
            system_name: self.intern(system_name),
            filename: self.intern(filename),
            start_line,
        };
        self.intern_function(function)
    }

    /// Adds a function whose strings are interned here already (or finds
    /// the equal one): [`Profile::add_function`] without interning.
    pub fn add_interned_function(&mut self, function: Function) -> FunctionId {
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

    /// Interns a location; equal locations get the same id.
    pub fn add_location(&mut self, location: Location) -> LocationId {
        if let Some(&id) = self.location_index.get(&location) {
            return id;
        }
        let id = LocationId::from_index(self.locations.len());
        self.location_index.insert(location.clone(), id);
        self.locations.push(location);
        id
    }

    /// Makes room for `locations` more locations and `samples` more samples
    /// (a reader that knows how many it is about to add).
    pub fn reserve(&mut self, locations: usize, samples: usize) {
        self.locations.reserve(locations);
        self.samples.reserve(samples);
    }

    /// Makes room for `samples` more samples through [`Profile::add_sample`]
    /// (their index, which [`Profile::reserve`] leaves alone since distinct
    /// samples need none) and `functions` more functions with two strings
    /// each, so that the hash tables are not rebuilt as they grow.
    pub fn reserve_interned(&mut self, samples: usize, functions: usize) {
        self.sample_index.reserve(samples, |&(h, _)| h);
        self.functions.reserve(functions);
        self.function_index.reserve(functions);
        self.strings.reserve(functions.saturating_mul(2));
    }

    /// Adds a location without looking for an equal one: for readers that
    /// know their locations are distinct (one per sampled address of an
    /// image), so that no index entry is kept per location. A later
    /// [`Profile::add_location`] of an equal location gets an id of its own.
    pub fn add_distinct_location(&mut self, location: Location) -> LocationId {
        self.locations.push(location);
        LocationId::from_index(self.locations.len() - 1)
    }

    /// Adds `locations` as [`Profile::add_distinct_location`] would one by
    /// one: the first gets the id [`Profile::locations`]`.len()`, the next
    /// one more, and so on (moved in whole when there are none yet).
    pub fn add_distinct_locations(&mut self, locations: Vec<Location>) {
        if self.locations.is_empty() {
            self.locations = locations;
        } else {
            self.locations.extend(locations);
        }
    }

    /// Adds a sample without looking for one with the same stack and labels:
    /// for readers that know their stacks are distinct, so that no index
    /// entry is kept per sample (a later [`Profile::add_sample`] of the same
    /// stack makes a second sample, which every writer sums). `values` must
    /// have one entry per sample type; `labels` sorted by key.
    pub fn add_distinct_sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        debug_assert_eq!(values.len(), self.sample_types.len());
        debug_assert!(labels.is_sorted());
        self.samples.push(Sample {
            stack: Stack::from_slice(stack),
            values: Values::from_slice(values),
            labels: labels.to_vec(),
        });
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
    /// ids with equal content, which every writer accepts.
    pub fn set_location_lines(&mut self, id: LocationId, lines: Vec<Line>) {
        let Some(location) = self.locations.get_mut(id.index()) else {
            return;
        };
        if self.location_index.get(location) == Some(&id) {
            self.location_index.remove(location);
        }
        location.lines = Lines::from_vec(lines);
        self.location_index.entry(location.clone()).or_insert(id);
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
    /// it if needed. `values` must have one entry per sample type.
    pub fn add_sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        debug_assert_eq!(values.len(), self.sample_types.len());
        let width = self.sample_types.len();
        add_sample_to(
            &mut self.samples,
            &mut self.sample_index,
            width,
            stack,
            values,
            labels,
        );
    }

    /// Adds the samples of `set`, as [`Profile::add_sample`] would one by one
    /// (moved as they are when this profile has none yet). Their stacks must
    /// name this profile's locations, their labels its strings, and they must
    /// have one value per sample type of this profile.
    pub fn add_samples(&mut self, set: SampleSet) {
        debug_assert_eq!(set.width, self.sample_types.len());
        if self.samples.is_empty() && set.width == self.sample_types.len() {
            self.samples = set.samples;
            self.sample_index = set.index;
            return;
        }
        for s in set.samples {
            self.add_sample(&s.stack, &s.values, &s.labels);
        }
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

    /// Adds every sample of `other` into `self` (e.g. several gmon.out files of
    /// one program, like `gprof -s`). Sample types are matched by name and
    /// unit; types only `other` has are added. A type with the same name and a
    /// different unit is an error.
    pub fn merge(&mut self, other: &Profile) -> Result<()> {
        let mut merger = Merger::new(self, other);
        merger.map_sample_types()?;
        merger.map_header();
        merger.map_mappings();
        merger.map_functions();
        merger.map_locations();
        merger.map_samples();
        Ok(())
    }

    /// Merges everything of `other` but its locations and samples (sample
    /// types, header, mappings, functions and the strings they name) into
    /// `self`, in the order [`Profile::merge`] would, and says where each
    /// entry went. A streaming writer uses it to translate a part's ids
    /// while it encodes the part's locations and samples itself.
    pub fn merge_tables(&mut self, other: &Profile) -> Result<TableMap> {
        let mut merger = Merger::new(self, other);
        merger.map_sample_types()?;
        merger.map_header();
        merger.map_mappings();
        merger.map_functions();
        Ok(TableMap {
            types: merger.types,
            mappings: merger.mappings,
            functions: merger.functions,
        })
    }

    /// Drops every location and sample (and their indexes), keeping the
    /// other tables: what a streaming writer keeps once it has written them.
    pub fn clear_locations_and_samples(&mut self) {
        self.locations = Vec::new();
        self.samples = Vec::new();
        self.location_index = HashMap::default();
        self.sample_index = HashTable::new();
    }

    /// Moves the locations and samples out into a profile of their own (with
    /// the same strings and sample types, so ids keep their meaning), and
    /// leaves this one with the other tables.
    pub fn take_rows(&mut self) -> Profile {
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
    pub fn location_frames(&self, id: LocationId) -> Vec<Frame<'_>> {
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
            .map(|line| {
                let f = &self.functions[line.function.index()];
                let file = self.str(f.filename);
                Frame {
                    name: std::borrow::Cow::Borrowed(self.str(f.name)),
                    file: (!file.is_empty()).then_some(file),
                    line: line.line,
                }
            })
            .collect()
    }

    /// `image+0xOFFSET` for an address in a named mapping, else `0xADDRESS`.
    pub fn address_name(&self, location: &Location) -> String {
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
    pub fn label_text(&self, sample: &Sample, key: &str) -> Option<String> {
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

/// Samples gathered apart from a profile (e.g. on another thread, once the
/// location ids they name are known), aggregated as [`Profile::add_sample`]
/// does, then added with [`Profile::add_samples`].
#[derive(Debug, Clone, Default)]
pub struct SampleSet {
    /// Values per sample.
    width: usize,
    samples: Vec<Sample>,
    /// As [`Profile`]'s `sample_index`.
    index: HashTable<(u64, u32)>,
}

impl SampleSet {
    /// An empty set of samples with `width` values each, with room for
    /// `capacity` of them.
    pub fn with_capacity(width: usize, capacity: usize) -> Self {
        let mut index = HashTable::new();
        index.reserve(capacity, |&(h, _): &(u64, u32)| h);
        SampleSet {
            width,
            samples: Vec::with_capacity(capacity),
            index,
        }
    }

    /// Adds `values` to the sample with this stack and these labels,
    /// creating it if needed: [`Profile::add_sample`]. `values` has one entry
    /// per sample type.
    pub fn add(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        debug_assert_eq!(values.len(), self.width);
        add_sample_to(
            &mut self.samples,
            &mut self.index,
            self.width,
            stack,
            values,
            labels,
        );
    }

    /// Values per sample.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The samples so far, in order of first addition.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }
}

/// Adds `values` to the sample of `samples` with this stack and labels (found
/// through `index`), or a new sample of `width` values.
fn add_sample_to(
    samples: &mut Vec<Sample>,
    index: &mut HashTable<(u64, u32)>,
    width: usize,
    stack: &[LocationId],
    values: &[i64],
    labels: &[Label],
) {
    let sorted;
    let labels = if labels.is_sorted() {
        labels
    } else {
        let mut own = labels.to_vec();
        own.sort();
        sorted = own;
        &sorted[..]
    };
    let mut hasher = FxHasher::default();
    stack.hash(&mut hasher);
    labels.hash(&mut hasher);
    let hash = hasher.finish();
    let found = index.find(hash, |&(h, i)| {
        let sample = &samples[i as usize];
        h == hash && sample.stack[..] == *stack && sample.labels == labels
    });
    if let Some(&(_, i)) = found {
        let sample = &mut samples[i as usize];
        for (acc, v) in sample.values.iter_mut().zip(values) {
            *acc = acc.saturating_add(*v);
        }
        return;
    }
    let at = samples.len() as u32;
    index.insert_unique(hash, (hash, at), |&(h, _)| h);
    let mut own = Values::from_slice(values);
    own.resize(width, 0);
    samples.push(Sample {
        stack: Stack::from_slice(stack),
        values: own,
        labels: labels.to_vec(),
    });
}

/// Where the sample types, mappings and functions of a profile went when
/// [`Profile::merge_tables`] merged it into another: entry `i` of each is
/// the new index of entry `i` of the merged profile.
#[derive(Debug, Clone, Default)]
pub struct TableMap {
    /// Sample type indexes.
    pub types: Vec<usize>,
    /// Mapping ids.
    pub mappings: Vec<MappingId>,
    /// Function ids.
    pub functions: Vec<FunctionId>,
}

/// Receives a profile in parts, for readers that can hand over a large
/// profile piece by piece so that it never has to be whole in memory.
///
/// The first part is the head: sample types, period, time, metadata,
/// groupings (and possibly strings and tables the later parts use). Every
/// later part holds some of the head's sample types (in any order, never a
/// new one: those it has values for) and its own mappings, functions,
/// locations and samples; its locations
/// and samples are distinct from every other part's (a part is, e.g., one
/// DCPI image). A part with no samples may carry comments to add at the end.
/// The profile the parts stand for is the head with every later part
/// [merged](Profile::merge) into it, in order.
pub trait PartSink {
    /// Takes the next part.
    fn part(&mut self, part: Profile) -> Result<()>;

    /// Takes the next part in its lean form (a later part, never the head).
    /// The part is lent: the reader reuses its buffers for the next one. By
    /// default it is made into the profile it stands for
    /// ([`AddressPart::to_profile`]) and handed to [`PartSink::part`]; a
    /// sink that can use the columns as they are (the streaming pprof
    /// writer) overrides this.
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        self.part(part.to_profile())
    }
}

/// A part ([`PartSink`]) in columns: one mapping, and per row one
/// unsymbolized location at a distinct address (not a return address) in
/// it and one sample whose stack is that location alone, all with the same
/// labels. No object per row: a DCPI image of millions of sampled addresses
/// is two flat arrays, reused from image to image.
#[derive(Debug, Clone)]
pub struct AddressPart {
    /// Sample types, strings and the mapping; no locations or samples.
    pub tables: Profile,
    /// The rows' mapping, in `tables`.
    pub mapping: MappingId,
    /// Every sample's labels, sorted by key.
    pub labels: Vec<Label>,
    /// Each row's address, in the order the rows are.
    pub addresses: Vec<u64>,
    /// Each row's values, one per sample type of `tables`, row after row.
    pub values: Vec<i64>,
}

impl Default for AddressPart {
    fn default() -> Self {
        AddressPart {
            tables: Profile::default(),
            mapping: MappingId::from_index(0),
            labels: Vec::new(),
            addresses: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl AddressPart {
    /// Empties the part, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.tables = Profile::default();
        self.labels.clear();
        self.addresses.clear();
        self.values.clear();
    }

    /// Values per row: the number of sample types.
    pub fn width(&self) -> usize {
        self.tables.sample_types().len()
    }

    /// Every row: its address and its values ([`AddressPart::width`] of them).
    pub fn rows(&self) -> impl Iterator<Item = (u64, &[i64])> {
        let width = self.width();
        self.addresses.iter().enumerate().map(move |(i, &address)| {
            let values = self.values.get(i * width..(i + 1) * width);
            (address, values.unwrap_or_default())
        })
    }

    /// The profile the part stands for: `tables` with a location and a
    /// one-frame sample per row, in row order.
    pub fn to_profile(&self) -> Profile {
        let mut part = self.tables.clone();
        part.reserve(self.addresses.len(), self.addresses.len());
        for (address, values) in self.rows() {
            let location = part.add_distinct_location(Location {
                mapping: Some(self.mapping),
                address,
                is_return_address: false,
                lines: Lines::new(),
            });
            part.add_distinct_sample(&[location], values, &self.labels);
        }
        part
    }
}

/// The [`PartSink`] that merges the parts into one profile: the
/// collect-everything reading every writer but the streaming one uses.
#[derive(Debug, Default)]
pub struct CollectParts {
    profile: Option<Profile>,
}

impl CollectParts {
    /// The merged profile (an empty one if no part came).
    pub fn into_profile(self) -> Profile {
        self.profile.unwrap_or_default()
    }
}

impl PartSink for CollectParts {
    fn part(&mut self, part: Profile) -> Result<()> {
        match &mut self.profile {
            None => self.profile = Some(part),
            Some(whole) => whole.merge(&part)?,
        }
        Ok(())
    }
}

/// Merges one profile into another, one table at a time: each `map_*`
/// adds a table of `src` to `dst` and remembers where each entry went, so
/// that the next tables can translate their ids (google/pprof's merge.go).
struct Merger<'a> {
    dst: &'a mut Profile,
    src: &'a Profile,
    types: Vec<usize>,
    mappings: Vec<MappingId>,
    functions: Vec<FunctionId>,
    locations: Vec<LocationId>,
}

impl<'a> Merger<'a> {
    fn new(dst: &'a mut Profile, src: &'a Profile) -> Self {
        Merger {
            dst,
            src,
            types: Vec::new(),
            mappings: Vec::new(),
            functions: Vec::new(),
            locations: Vec::new(),
        }
    }

    /// The id in `dst` of the string `id` of `src`.
    fn str(&mut self, id: StrId) -> StrId {
        self.dst.intern(self.src.str(id))
    }

    /// Sample types by name and unit; a name in two units cannot be summed.
    fn map_sample_types(&mut self) -> Result<()> {
        for i in 0..self.src.sample_types.len() {
            let (kind, unit) = self.src.sample_type_name(i);
            let index = match self.dst.sample_type_index(kind) {
                Some(j) => {
                    let (_, own_unit) = self.dst.sample_type_name(j);
                    if own_unit != unit {
                        return Err(Error::ConflictingUnits {
                            sample_type: kind.to_string(),
                            first: own_unit.to_string(),
                            second: unit.to_string(),
                        });
                    }
                    j
                }
                None => self.dst.add_sample_type(kind, unit),
            };
            self.types.push(index);
        }
        Ok(())
    }

    /// Period, default type, time range, comments, metadata and groupings.
    fn map_header(&mut self) {
        let (dst, src) = (&mut *self.dst, self.src);
        if dst.period_type.is_none() {
            if let Some(pt) = src.period_type {
                dst.set_period(src.str(pt.kind), src.str(pt.unit), src.period);
            }
        }
        if dst.default_sample_type.is_none() {
            dst.default_sample_type = src.default_sample_type.map(|i| self.types[i]);
        }
        if dst.call_count_type.is_none() {
            dst.call_count_type = src.call_count_type.map(|i| self.types[i]);
        }
        if src.time_nanos != 0 {
            if dst.time_nanos == 0 {
                dst.time_nanos = src.time_nanos;
                dst.duration_nanos = src.duration_nanos;
            } else {
                let start = dst.time_nanos.min(src.time_nanos);
                let end =
                    (dst.time_nanos + dst.duration_nanos).max(src.time_nanos + src.duration_nanos);
                dst.time_nanos = start;
                dst.duration_nanos = end - start;
            }
        }
        for c in &src.comments {
            if !dst.comments.contains(c) {
                dst.comments.push(c.clone());
            }
        }
        for kv in &src.metadata {
            if !dst.metadata.contains(kv) {
                dst.metadata.push(kv.clone());
            }
        }
        for g in &src.group_by {
            if !dst.group_by.contains(g) {
                dst.group_by.push(g.clone());
            }
        }
    }

    fn map_mappings(&mut self) {
        for m in &self.src.mappings {
            let mut m = m.clone();
            m.filename = self.str(m.filename);
            m.build_id = self.str(m.build_id);
            let id = self.dst.add_mapping(m);
            self.mappings.push(id);
        }
    }

    fn map_functions(&mut self) {
        for f in &self.src.functions {
            let f = Function {
                name: self.str(f.name),
                system_name: self.str(f.system_name),
                filename: self.str(f.filename),
                start_line: f.start_line,
            };
            let id = self.dst.intern_function(f);
            self.functions.push(id);
        }
    }

    fn map_locations(&mut self) {
        for l in &self.src.locations {
            let l = Location {
                mapping: l.mapping.map(|m| self.mappings[m.index()]),
                address: l.address,
                is_return_address: l.is_return_address,
                lines: l
                    .lines
                    .iter()
                    .map(|line| Line {
                        function: self.functions[line.function.index()],
                        line: line.line,
                    })
                    .collect(),
            };
            let id = self.dst.add_location(l);
            self.locations.push(id);
        }
    }

    fn map_label(&mut self, l: &Label) -> Label {
        Label {
            key: self.str(l.key),
            value: match l.value {
                LabelValue::Str(v) => LabelValue::Str(self.str(v)),
                LabelValue::Num { num, unit } => LabelValue::Num {
                    num,
                    unit: self.str(unit),
                },
            },
        }
    }

    fn map_samples(&mut self) {
        let mut values = vec![0i64; self.dst.sample_types.len()];
        for s in &self.src.samples {
            let stack: Vec<LocationId> =
                s.stack.iter().map(|&l| self.locations[l.index()]).collect();
            values.iter_mut().for_each(|v| *v = 0);
            for (i, v) in s.values.iter().enumerate() {
                values[self.types[i]] = *v;
            }
            let labels: Vec<Label> = s.labels.iter().map(|l| self.map_label(l)).collect();
            self.dst.add_sample(&stack, &values, &labels);
        }
    }
}

/// A frame as outputs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The function name (or a synthesized address name).
    pub name: std::borrow::Cow<'a, str>,
    /// Its source file, when known.
    pub file: Option<&'a str>,
    /// Its line (0 when unknown).
    pub line: i64,
}

/// The last path component of a file name (either separator).
pub fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The most sample values a profile may hold: one `i64` per sample type per
/// sample, 2^27 of them (1 GiB). An input whose distinct stacks times sample
/// types exceed it (thousands of event types, say) is refused with
/// [`too_many_values`] before the values are allocated.
pub const MAX_VALUES: u64 = 1 << 27;

/// Values are kept densely (one per sample type per sample); past this many
/// (32 MiB of them) they must also be at least one in [`MAX_ZEROS_PER_VALUE`]
/// non-zero, so that a small input with thousands of events, each sampled at
/// a few addresses, cannot make memory grow with events × addresses.
pub const DENSE_VALUES_FREE: u64 = 1 << 22;

/// See [`DENSE_VALUES_FREE`]: at most this many values per non-zero one.
pub const MAX_ZEROS_PER_VALUE: u64 = 16;

/// `None` when `types` sample types over `samples` samples, of which
/// `nonzero` values are not zero, fit [`MAX_VALUES`] and the density rule of
/// [`DENSE_VALUES_FREE`]; else what to say about it.
pub fn too_many_values(types: usize, samples: u64, nonzero: u64) -> Option<String> {
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

/// Splits `total` into integer parts proportional to `weights`, so that the
/// parts add up to `total` exactly (largest-remainder rounding).
pub fn apportion(total: i64, weights: &[f64]) -> Vec<i64> {
    let mut parts = vec![0; weights.len()];
    Apportioner::default().split_into(total, weights, &mut parts);
    parts
}

/// [`apportion`] for callers that split many totals: its working space is
/// kept from call to call, and the parts written into a slice.
#[derive(Debug, Default)]
pub struct Apportioner {
    exact: Vec<f64>,
    order: Vec<usize>,
}

impl Apportioner {
    /// Writes [`apportion`]`(total, weights)` into `parts` (as long as
    /// `weights`).
    pub fn split_into(&mut self, total: i64, weights: &[f64], parts: &mut [i64]) {
        assert_eq!(parts.len(), weights.len(), "one part per weight");
        let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
        if weights.is_empty() || sum <= 0.0 {
            parts.fill(0);
            return;
        }
        let exact = &mut self.exact;
        exact.clear();
        exact.extend(weights.iter().map(|w| {
            if w.is_finite() && *w > 0.0 {
                total as f64 * w / sum
            } else {
                0.0
            }
        }));
        for (p, e) in parts.iter_mut().zip(exact.iter()) {
            *p = e.floor() as i64;
        }
        // What flooring left over: fewer than one per part in exact
        // arithmetic, but anything when the total is too large for an f64 to
        // hold exactly (a crafted count near 2^63): handed out in bulk, never
        // one by one.
        let assigned: i128 = parts.iter().map(|&p| i128::from(p)).sum();
        let mut rest = i128::from(total) - assigned;
        if rest == 0 {
            return;
        }
        let order = &mut self.order;
        order.clear();
        order.extend((0..weights.len()).filter(|&i| exact[i] > 0.0 || weights[i] > 0.0));
        if order.is_empty() {
            return;
        }
        // Largest remainder first, then lowest index: a total order (the
        // remainders are finite), so any sort gives this one sequence.
        let by_remainder = |&a: &usize, &b: &usize| {
            let ra = exact[a] - exact[a].floor();
            let rb = exact[b] - exact[b].floor();
            rb.partial_cmp(&ra)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(&b))
        };
        let n = order.len() as i128;
        if rest > 0 {
            // Every part gets `each`, the `extra` first in that order one
            // more: which those are, not their order, is all that counts.
            let (each, extra) = (rest / n, (rest % n) as usize);
            if extra > 0 && extra < order.len() {
                order.select_nth_unstable_by(extra, by_remainder);
            }
            for (k, &i) in order.iter().enumerate() {
                let add = each + i128::from(k < extra);
                parts[i] =
                    (i128::from(parts[i]) + add).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            }
            return;
        }
        // Too much given (rounding up): taken back from the smallest
        // remainders.
        order.sort_unstable_by(by_remainder);
        for &i in order.iter().rev() {
            if rest >= 0 {
                break;
            }
            let take = (-rest).min(i128::from(parts[i].max(0)));
            parts[i] -= take as i64;
            rest += take;
        }
    }
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

    #[test]
    fn merge_sums_values_and_adds_missing_types() {
        let mut a = Profile::new(&[("samples", "count")]);
        let la = a.address_location(None, 0x10, false);
        a.add_sample(&[la], &[2], &[]);
        let mut b = Profile::new(&[("calls", "count"), ("samples", "count")]);
        let lb = b.address_location(None, 0x10, false);
        b.add_sample(&[lb], &[7, 3], &[]);
        a.merge(&b).unwrap();
        assert_eq!(a.sample_types.len(), 2);
        assert_eq!(a.samples.len(), 1);
        assert_eq!(a.samples[0].values[..], [5, 7]);
    }

    #[test]
    fn merge_refuses_unit_mismatch() {
        let mut a = Profile::new(&[("cpu", "nanoseconds")]);
        let b = Profile::new(&[("cpu", "count")]);
        match a.merge(&b) {
            Err(Error::ConflictingUnits {
                sample_type,
                first,
                second,
            }) => assert_eq!(
                (&*sample_type, &*first, &*second),
                ("cpu", "nanoseconds", "count")
            ),
            other => panic!("expected ConflictingUnits, got {other:?}"),
        }
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

    /// `apportion` as first written (every part sorted by remainder,
    /// stable, fresh vectors), which `Apportioner` must match exactly.
    fn apportion_by_full_sort(total: i64, weights: &[f64]) -> Vec<i64> {
        let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
        if weights.is_empty() || sum <= 0.0 {
            return vec![0; weights.len()];
        }
        let ok = |w: f64| w.is_finite() && w > 0.0;
        let exact: Vec<f64> = weights
            .iter()
            .map(|&w| if ok(w) { total as f64 * w / sum } else { 0.0 })
            .collect();
        let mut parts: Vec<i64> = exact.iter().map(|e| e.floor() as i64).collect();
        let assigned: i128 = parts.iter().map(|&p| i128::from(p)).sum();
        let mut rest = i128::from(total) - assigned;
        let mut order: Vec<usize> = (0..weights.len())
            .filter(|&i| exact[i] > 0.0 || weights[i] > 0.0)
            .collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
            rb.partial_cmp(&ra).unwrap().then(a.cmp(&b))
        });
        if order.is_empty() {
            return parts;
        }
        let n = order.len() as i128;
        if rest > 0 {
            let (each, extra) = (rest / n, rest % n);
            for (k, &i) in order.iter().enumerate() {
                let add = each + i128::from((k as i128) < extra);
                parts[i] =
                    (i128::from(parts[i]) + add).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            }
            rest = 0;
        }
        // Rounded up: the excess comes back from the smallest remainders,
        // as much as each positive part holds.
        let mut excess = -rest;
        let mut k = order.len();
        while excess > 0 && k > 0 {
            k -= 1;
            let back = excess.min(i128::from(parts[order[k]]).max(0));
            parts[order[k]] -= back as i64;
            excess -= back;
        }
        parts
    }

    #[test]
    fn apportioner_matches_a_full_sort_of_the_remainders() {
        let mut rng = crate::test_rng::XorShift(0x51_7cc1_b727_220a);
        let mut split = Apportioner::default();
        let totals = [
            0,
            1,
            7,
            1000,
            123_456_789,
            -5,
            i64::MAX,
            i64::MAX - 3,
            i64::MIN,
        ];
        for round in 0..20_000 {
            let n = 1 + (rng.next() % 9) as usize;
            let weights: Vec<f64> = (0..n)
                .map(|_| match rng.next() % 10 {
                    0 => 0.0,
                    1 => (rng.next() % 3) as f64, // ties
                    2 => u64::MAX as f64,
                    3 => f64::NAN,
                    _ => (rng.next() % 100_000) as f64 + 0.5,
                })
                .collect();
            let total = match round % 3 {
                0 => totals[(rng.next() % totals.len() as u64) as usize],
                _ => (rng.next() % 1_000_000) as i64,
            };
            let mut parts = vec![-1; n];
            split.split_into(total, &weights, &mut parts);
            let want = apportion_by_full_sort(total, &weights);
            assert_eq!(parts, want, "total {total}, weights {weights:?}");
            assert_eq!(apportion(total, &weights), want);
        }
    }

    #[test]
    fn apportion_keeps_the_total() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]).iter().sum::<i64>(), 10);
        assert_eq!(
            apportion(7, &[0.5, 0.25, 0.25]),
            vec![3, 2, 2],
            "largest remainders first"
        );
        assert_eq!(apportion(5, &[0.0, 0.0]), vec![0, 0]);
        assert_eq!(apportion(3, &[1.0, 0.0]), vec![3, 0]);
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
