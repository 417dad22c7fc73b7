//! A thread's tables as runs grow them ([`RunThread`]), and the frames of
//! one run before a thread numbers them ([`Descs`]). What a thread keeps
//! across runs (its strings, functions, frames and stacks of all but
//! unsymbolized addresses) is in [`Thread`]; what a run adds is written as
//! JSON text per column, which [`super::FirefoxRuns`] stores as segments.

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;

use hashbrown::HashTable;

use crate::profile::{basename, Granularity, GroupBy, Location, Mapping, Profile};
use crate::write::frames::{fx_hash, group_frames, intern_in, StackIds};
use crate::write::{effective_group_by, WriteOptions};

/// "No stack" and "no prefix" in the rows and the stack table.
pub(super) const NONE: u32 = u32::MAX;

/// The images of the document: each image's category (the profiler's
/// category `i + 1`; 0 is "Other") and library.
#[derive(Default)]
pub(super) struct Images {
    pub categories: Vec<String>,
    category_of: HashMap<String, u32>,
    pub libs: Vec<Lib>,
    lib_of: HashMap<(String, String), u32>,
}

impl Images {
    /// The category of image `name`.
    fn category(&mut self, name: &str) -> u32 {
        if let Some(&c) = self.category_of.get(name) {
            return c;
        }
        self.categories.push(name.to_owned());
        let c = self.categories.len() as u32;
        self.category_of.insert(name.to_owned(), c);
        c
    }

    /// The library and category of the image of mapping `m` (none and 0
    /// for a mapping without a file).
    fn place(&mut self, profile: &Profile, m: &Mapping) -> (Option<u32>, u32) {
        match profile.str(m.filename) {
            "" => (None, 0),
            path => (Some(self.lib(profile, m)), self.category(basename(path))),
        }
    }

    /// The library of image `m`, added once per path and build id.
    fn lib(&mut self, profile: &Profile, m: &Mapping) -> u32 {
        let path = profile.str(m.filename);
        let build_id = profile.str(m.build_id);
        let key = (path.to_owned(), build_id.to_owned());
        if let Some(&lib) = self.lib_of.get(&key) {
            return lib;
        }
        self.libs.push(Lib {
            name: basename(path).to_owned(),
            path: path.to_owned(),
            build_id: build_id.to_owned(),
        });
        let lib = (self.libs.len() - 1) as u32;
        self.lib_of.insert(key, lib);
        lib
    }
}

/// A library: an image by path and build id.
pub(super) struct Lib {
    pub name: String,
    pub path: String,
    pub build_id: String,
}

/// The columns of a thread's tables that grow with the runs, each kept as
/// segments of comma-separated JSON values.
#[derive(Clone, Copy)]
pub(super) enum Column {
    Strings,
    FrameCategory,
    FrameFunc,
    FrameLine,
    FuncName,
    FuncResource,
    FuncFile,
    FuncLine,
    StackPrefix,
    StackFrame,
}
pub(super) const COLUMNS: usize = 10;

/// One thread of the input (a `pid` and `tid`): its tables, shared by the
/// threads of its sample types, and its samples.
#[derive(Default)]
pub(super) struct Thread {
    pub pid: Option<String>,
    pub tid: Option<String>,
    pub process_name: String,
    pub name: Option<String>,
    /// What later runs find again: strings, functions (name, library),
    /// frames (name, category) and stacks (prefix, frame) of all but
    /// unsymbolized addresses.
    pub strings: HashMap<Box<str>, u32>,
    pub funcs: HashMap<(u32, u32), u32>,
    pub frames: HashMap<(u32, u32), u32>,
    pub stacks: HashMap<(u32, u32), u32>,
    /// Each resource's library and name.
    pub resources: Vec<(u32, u32)>,
    pub strings_len: u32,
    pub funcs_len: u32,
    pub frames_len: u32,
    pub stacks_len: u32,
    pub segments: [Vec<Range<u64>>; COLUMNS],
    /// Samples in stack order (within each run): the stack, then a value
    /// per sample type, little-endian.
    pub rows: Vec<Range<u64>>,
    /// Per sample type, the largest magnitude of a value.
    pub largest: Vec<u64>,
}

/// A frame as a run knows it before a thread numbers it: its name and
/// category (what tells frames apart), and its function's name, library,
/// file, first line and the frame's line.
pub(super) struct Desc {
    name: String,
    category: u32,
    /// The function's own name when the frame's also has its line.
    base: Option<String>,
    lib: Option<u32>,
    file: Option<String>,
    start_line: Option<i64>,
    line: Option<i64>,
    /// An unsymbolized address: named anew in each run.
    of_address: bool,
}

/// A run's frames: every location's and every sample's group frames, as
/// ranges of ids into `descs`, so that a sample's stack is a walk over ids.
pub(super) struct Descs {
    descs: Vec<Desc>,
    /// Frames by the hash of their name and category, as indexes into
    /// `descs`.
    index: HashTable<u32>,
    ids: StackIds,
}

impl Descs {
    pub fn new(profile: &Profile, options: &WriteOptions, images: &mut Images) -> Descs {
        let mut table = Descs {
            descs: Vec::new(),
            index: HashTable::with_capacity(profile.locations().len()),
            ids: StackIds::new(profile.locations().len(), profile.samples().len()),
        };
        let by_line = options.granularity == Some(Granularity::Lines);
        // Each mapping's library and category, looked up once, not once per
        // location (there can be millions), in the order locations use them.
        let mut placed: Vec<Option<(Option<u32>, u32)>> = vec![None; profile.mappings().len()];
        for (i, location) in profile.locations().iter().enumerate() {
            let start = table.ids.start();
            let (lib, category) = match location.mapping.map(|m| m.index()) {
                Some(m) if m < placed.len() => {
                    *placed[m].get_or_insert_with(|| images.place(profile, &profile.mappings()[m]))
                }
                _ => (None, 0),
            };
            table.add_location(profile, location, by_line, lib, category);
            table.ids.end_location(i, start);
        }
        // Groups of the options or the reader, but the threads' own.
        let group_by: Vec<GroupBy> = effective_group_by(profile, options)
            .iter()
            .filter(|g| !matches!(g, GroupBy::Label(k) if k == "pid" || k == "tid"))
            .cloned()
            .collect();
        for sample in profile.samples() {
            let start = table.ids.start();
            for f in group_frames(profile, sample, &group_by) {
                table.intern(Desc {
                    name: f.name.into_owned(),
                    category: 0,
                    base: None,
                    lib: None,
                    file: None,
                    start_line: None,
                    line: None,
                    of_address: false,
                });
            }
            table.ids.end_group(start);
        }
        table
    }

    /// The frames of `location` (in the library `lib` and the category
    /// `category` of its image), root first: its image's address, or its
    /// lines (inlined callers first), each named by its function (and at
    /// `by_line` its line, `function file:line`, as pprof names a line).
    fn add_location(
        &mut self,
        profile: &Profile,
        location: &Location,
        by_line: bool,
        lib: Option<u32>,
        category: u32,
    ) {
        if location.lines.is_empty() {
            self.intern(Desc {
                name: profile.address_name(location),
                category,
                base: None,
                lib,
                file: None,
                start_line: None,
                line: None,
                of_address: true,
            });
        }
        for line in location.lines.iter().rev() {
            let f = profile.line_frame(line);
            let function = &profile.functions()[line.function.index()];
            let (name, line) = match (by_line && f.line > 0, f.file) {
                (false, _) => (f.name.to_string(), None),
                (true, Some(file)) => (format!("{} {file}:{}", f.name, f.line), Some(f.line)),
                (true, None) => (format!("{}:{}", f.name, f.line), Some(f.line)),
            };
            self.intern(Desc {
                name,
                category,
                base: line.map(|_| f.name.to_string()),
                lib,
                file: f.file.map(str::to_owned),
                start_line: Some(function.start_line).filter(|&l| l > 0),
                line,
                of_address: false,
            });
        }
    }

    /// Adds the id of `desc` (the first frame of a name and category gives
    /// its function) to `ids`.
    fn intern(&mut self, desc: Desc) {
        let id = intern_in(
            &mut self.descs,
            &mut self.index,
            desc,
            |d| fx_hash((&d.name, d.category)),
            |a, b| a.category == b.category && a.name == b.name,
        );
        self.ids.push(id);
    }

    /// The frame ids of sample `i`, root first.
    pub fn stack<'a>(&'a self, profile: &'a Profile, i: usize) -> impl Iterator<Item = u32> + 'a {
        self.ids.stack(profile, i)
    }
}

/// What one run adds to one thread: the new rows of each column (JSON
/// text), its samples' rows, and the run's own frames and stacks (those of
/// unsymbolized addresses, forgotten after the run).
#[derive(Default)]
pub(super) struct RunThread {
    pub columns: [Vec<u8>; COLUMNS],
    pub rows: Vec<u8>,
    frame_of: HashMap<u32, (u32, bool)>,
    stacks: HashMap<(u32, u32), u32>,
}

impl RunThread {
    /// The thread's stack of the frames `descs` (root first).
    pub fn intern_stack(
        &mut self,
        thread: &mut Thread,
        descs: &Descs,
        libs: &[Lib],
        frames: impl Iterator<Item = u32>,
    ) -> Option<u32> {
        let mut prefix = NONE;
        let mut of_run = false;
        for d in frames {
            let (frame, of_address) = self.frame(thread, descs, libs, d);
            of_run |= of_address;
            let key = (prefix, frame);
            let known = match of_run {
                true => self.stacks.get(&key),
                false => thread.stacks.get(&key),
            };
            prefix = match known {
                Some(&id) => id,
                None => {
                    let id = thread.stacks_len;
                    thread.stacks_len += 1;
                    match prefix {
                        NONE => self.push(Column::StackPrefix, format_args!("null")),
                        p => self.push(Column::StackPrefix, format_args!("{p}")),
                    }
                    self.push(Column::StackFrame, format_args!("{frame}"));
                    match of_run {
                        true => self.stacks.insert(key, id),
                        false => thread.stacks.insert(key, id),
                    };
                    id
                }
            };
        }
        (prefix != NONE).then_some(prefix)
    }

    /// The thread's frame of `descs`' frame `d`, and whether it is the
    /// run's own (an unsymbolized address).
    fn frame(&mut self, thread: &mut Thread, descs: &Descs, libs: &[Lib], d: u32) -> (u32, bool) {
        if let Some(&known) = self.frame_of.get(&d) {
            return known;
        }
        let desc = &descs.descs[d as usize];
        let frame = if desc.of_address {
            let name = self.new_string(thread, &desc.name);
            let func = self.new_func(thread, name, desc, libs);
            self.new_frame(thread, func, desc)
        } else {
            let name = self.string(thread, &desc.name);
            match thread.frames.get(&(name, desc.category)) {
                Some(&frame) => frame,
                None => {
                    let func_name = match &desc.base {
                        Some(base) => self.string(thread, base),
                        None => name,
                    };
                    let key = (func_name, desc.lib.unwrap_or(NONE));
                    let func = match thread.funcs.get(&key) {
                        Some(&func) => func,
                        None => {
                            let func = self.new_func(thread, func_name, desc, libs);
                            thread.funcs.insert(key, func);
                            func
                        }
                    };
                    let frame = self.new_frame(thread, func, desc);
                    thread.frames.insert((name, desc.category), frame);
                    frame
                }
            }
        };
        self.frame_of.insert(d, (frame, desc.of_address));
        (frame, desc.of_address)
    }

    fn new_frame(&mut self, thread: &mut Thread, func: u32, desc: &Desc) -> u32 {
        self.push(Column::FrameCategory, format_args!("{}", desc.category));
        self.push(Column::FrameFunc, format_args!("{func}"));
        match desc.line {
            Some(line) => self.push(Column::FrameLine, format_args!("{line}")),
            None => self.push(Column::FrameLine, format_args!("null")),
        }
        thread.frames_len += 1;
        thread.frames_len - 1
    }

    /// A function named by the string `name`, with `desc`'s source and
    /// library (its resource).
    fn new_func(&mut self, thread: &mut Thread, name: u32, desc: &Desc, libs: &[Lib]) -> u32 {
        self.push(Column::FuncName, format_args!("{name}"));
        let resource = match desc.lib {
            Some(lib) => match thread.resources.iter().position(|r| r.0 == lib) {
                Some(r) => r as i64,
                None => {
                    let name = self.string(thread, &libs[lib as usize].name);
                    thread.resources.push((lib, name));
                    thread.resources.len() as i64 - 1
                }
            },
            None => -1,
        };
        self.push(Column::FuncResource, format_args!("{resource}"));
        match &desc.file {
            Some(file) => {
                let file = self.string(thread, file);
                self.push(Column::FuncFile, format_args!("{file}"));
            }
            None => self.push(Column::FuncFile, format_args!("null")),
        }
        match desc.start_line {
            Some(line) => self.push(Column::FuncLine, format_args!("{line}")),
            None => self.push(Column::FuncLine, format_args!("null")),
        }
        thread.funcs_len += 1;
        thread.funcs_len - 1
    }

    /// The thread's string `s`, kept for later runs.
    fn string(&mut self, thread: &mut Thread, s: &str) -> u32 {
        if let Some(&i) = thread.strings.get(s) {
            return i;
        }
        let i = self.new_string(thread, s);
        thread.strings.insert(s.into(), i);
        i
    }

    /// A new string of the thread, not kept for later runs.
    fn new_string(&mut self, thread: &mut Thread, s: &str) -> u32 {
        let text = &mut self.columns[Column::Strings as usize];
        if !text.is_empty() {
            text.push(b',');
        }
        // Writing to memory cannot fail, and a `str` is always JSON.
        let _ = serde_json::to_writer(&mut *text, s);
        thread.strings_len += 1;
        thread.strings_len - 1
    }

    /// Adds `value` to the column `c`.
    fn push(&mut self, c: Column, value: std::fmt::Arguments<'_>) {
        let text = &mut self.columns[c as usize];
        if !text.is_empty() {
            text.push(b',');
        }
        // Writing to memory cannot fail.
        let _ = text.write_fmt(value);
    }
}
