//! The rows of a profile and their ids: interned strings, sample types,
//! labels, mappings, functions, lines, locations and samples. Ids are
//! distinct types, one per table, so that a location id cannot be used as a
//! mapping id.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use smallvec::SmallVec;

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
    /// Index into [`Profile::strings`](super::Profile::strings); 0 is always the empty string.
    StrId
);

impl StrId {
    /// The empty string, always at index 0.
    pub const EMPTY: StrId = StrId(0);
}

table_id!(
    /// Index into [`Profile::mappings`](super::Profile::mappings).
    MappingId
);
table_id!(
    /// Index into [`Profile::functions`](super::Profile::functions).
    FunctionId
);
table_id!(
    /// Index into [`Profile::locations`](super::Profile::locations).
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
    pub(super) fn reserve(&mut self, additional: usize) {
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
pub(crate) struct SymbolFlags {
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
    /// One value per [`Profile::sample_types`](super::Profile::sample_types) entry.
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
