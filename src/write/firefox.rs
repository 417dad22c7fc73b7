//! Firefox Profiler output: the profiler's processed profile JSON, made by
//! `fxprof-processed-profile` (samply's implementation of the format), as is
//! or gzip-compressed (profiler.firefox.com loads both).
//!
//! How the IR maps onto the profiler's model:
//! - processes and threads from the `pid` and `tid` labels (APS), named by
//!   `process_name` and `thread_name`; one process and thread otherwise;
//! - a thread per sample type of each of them (one thread's samples carry
//!   one weight), named after the type (`cpu (nanoseconds)`), its samples
//!   weighted in the input's unit; a weight is an `i32` there, so a larger
//!   value is written as several samples of the same stack, within a budget
//!   of samples bounded by the profile's size (past it, the type's values
//!   are divided by a power of ten, which its threads' names show);
//! - a heap profile (`alloc_space` and `inuse_space` in bytes, mpatrol's)
//!   also as native allocation samples on its `alloc_space` thread: the
//!   unfreed bytes as allocations never freed, the rest as allocations freed
//!   again, so the profiler's "retained memory" is what was in use and its
//!   "allocated memory" what was allocated;
//! - frames by name, inlined frames as frames of their own (caller first);
//!   the frame's image (mapping) as its category, which colours the
//!   profiler's graphs by library;
//! - each function's source file and first line, and its library (the
//!   image, with its path and build id: the profiler's `libs`, named in its
//!   call tree as `name [library]`); at `--granularity lines` each frame's
//!   line too. The crate's format 0.8 leaves these columns `null`, so they
//!   are added to the document it serialized, per function name (the crate
//!   keys functions by name).
//!
//! Samples of one stack are one sample (the IR aggregates them); they are
//! placed a millisecond apart in stack order, root first, so that the stack
//! chart draws each call once. The whole document is built in memory (the
//! crate serializes a finished profile, which then takes its sources as a
//! JSON value): memory is that of the profile folded to its granularity, as
//! for the other outputs, times a small factor.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use fx::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, FrameFlags, FrameInfo,
    ReferenceTimestamp, SamplingInterval, ThreadHandle, Timestamp, WeightType,
};
use fxprof_processed_profile as fx;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::profile::{basename, Granularity, GroupBy, Location, Mapping, Profile, Sample, StrId};
use crate::write::frames::group_frames;
use crate::write::{effective_group_by, WriteOptions};

/// How many samples the whole document may get beyond one per stack when
/// values are split into `i32` weights: this many, plus
/// [`EXTRA_SAMPLES_PER_SAMPLE`] per sample of the profile, shared evenly by
/// the sample types. Past it a type's values are divided by a power of ten,
/// and its threads' names say by how much: the output stays within a few
/// times the profile's size, whatever its values.
const EXTRA_SAMPLES: u64 = 1 << 16;
const EXTRA_SAMPLES_PER_SAMPLE: u64 = 8;

/// Writes `profile` as a processed profile, gzip-compressed when `gzip`.
pub fn write(
    profile: &Profile,
    options: &WriteOptions,
    gzip: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let (document, sources) = build(profile, options);
    let io = Error::unnamed_output;
    let json = |e: serde_json::Error| io(e.into());
    let mut document = serde_json::to_value(&document).map_err(json)?;
    sources.add_to(&mut document);
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
        serde_json::to_writer(&mut gz, &document).map_err(json)?;
        gz.finish().map_err(io)?;
        Ok(())
    } else {
        serde_json::to_writer(&mut *out, &document).map_err(json)?;
        out.write_all(b"\n").map_err(io)
    }
}

/// The processed profile of `profile`, and what the crate cannot say of
/// its functions (files, lines, libraries).
fn build(profile: &Profile, options: &WriteOptions) -> (fx::Profile, Sources) {
    let reference = ReferenceTimestamp::from_millis_since_unix_epoch(
        profile.time_nanos.max(0) as f64 / 1_000_000.0,
    );
    let title = match options.title.is_empty() {
        true => "profconv",
        false => options.title.as_str(),
    };
    let mut fx = fx::Profile::new(title, reference, SamplingInterval::from_millis(1));
    // profconv symbolized what it could; nothing is left for a symbol server.
    fx.set_symbolicated(true);
    let (frames, sources) = FrameTable::new(profile, options, &mut fx);
    let types = type_order(profile);
    let divisors = divisors(profile, &types);
    let heap = heap_types(profile);
    let default = profile.default_sample_type.unwrap_or(0);
    let mut selected = None;
    let mut pid_seen: BTreeMap<String, fx::ProcessHandle> = BTreeMap::new();
    for (key, samples) in thread_keys(profile) {
        let first = &profile.samples()[samples[0]];
        let process = *pid_seen
            .entry(key.0.clone().unwrap_or_default())
            .or_insert_with(|| {
                let name = process_name(profile, first, key.0.as_deref(), title);
                let pid = key.0.as_deref().and_then(|p| p.parse().ok()).unwrap_or(0);
                fx.add_process(&name, pid, Timestamp::from_millis_since_reference(0.0))
            });
        let base = thread_name(profile, first, key.1.as_deref());
        let tid = key.1.as_deref().and_then(|t| t.parse().ok()).unwrap_or(0);
        let mut order = samples;
        order.sort_by(|&a, &b| frames.stack(profile, a).cmp(frames.stack(profile, b)));
        for (&t, &divisor) in types.iter().zip(&divisors) {
            let writer = ThreadWriter {
                profile,
                order: &order,
                t,
                divisor,
            };
            if writer.is_empty() {
                continue;
            }
            let name = writer.name(base.as_deref());
            // Not a main thread: the profiler names a main thread after its
            // process, and these are named by sample type.
            let start = Timestamp::from_millis_since_reference(0.0);
            let thread = fx.add_thread(process, tid, start, false);
            fx.set_thread_name(thread, &name);
            writer.add_samples(&mut fx, &frames, thread);
            if let Some((alloc, inuse)) = heap.filter(|h| h.0 == t) {
                add_allocations(profile, &order, (alloc, inuse), &mut fx, &frames, thread);
            }
            if t == default && selected.is_none() {
                selected = Some(thread);
            }
        }
    }
    if let Some(thread) = selected {
        fx.add_initial_selected_thread(thread);
    }
    (fx, sources)
}

/// The samples of one thread of the input (its `pid` and `tid`) for one
/// sample type, in stack order.
struct ThreadWriter<'a> {
    profile: &'a Profile,
    order: &'a [usize],
    t: usize,
    /// What the values are divided by (see [`divisors`]).
    divisor: i64,
}

impl ThreadWriter<'_> {
    fn value(&self, i: usize) -> i64 {
        let sample = &self.profile.samples()[i];
        sample.values.get(self.t).copied().unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.order.iter().all(|&i| self.value(i) == 0)
    }

    /// `thread_name — kind (unit)`, or the type alone for an input
    /// without threads.
    fn name(&self, base: Option<&str>) -> String {
        let (kind, unit) = self.profile.sample_type_name(self.t);
        let scaled = match self.divisor {
            1 => String::new(),
            d => format!(" ÷{d}"),
        };
        match base {
            Some(base) => format!("{base} — {kind} ({unit}{scaled})"),
            None => format!("{kind} ({unit}{scaled})"),
        }
    }

    /// The samples, a millisecond apart; a value past `i32` as several.
    fn add_samples(&self, fx: &mut fx::Profile, frames: &FrameTable, thread: ThreadHandle) {
        let (_, unit) = self.profile.sample_type_name(self.t);
        if unit == "bytes" {
            fx.set_thread_samples_weight_type(thread, WeightType::Bytes);
        }
        let mut time = 0u64;
        for &i in self.order {
            let mut value = self.value(i) / self.divisor;
            if value == 0 {
                continue;
            }
            let stack = frames.intern_stack(fx, self.profile, thread, i);
            while value != 0 {
                let weight = value.clamp(-i64::from(i32::MAX), i64::from(i32::MAX));
                value -= weight;
                let at = Timestamp::from_millis_since_reference(time as f64);
                fx.add_sample(thread, at, stack, CpuDelta::ZERO, weight as i32);
                time += 1;
            }
        }
    }
}

/// What each sample type's values in `types` are divided by: 1, unless
/// splitting them into `i32` weights would take more samples than the
/// type's share of the budget ([`EXTRA_SAMPLES`]); then the least power of
/// ten that keeps within it. One divisor per type, for all its threads, so
/// that the threads of a type stay comparable.
fn divisors(profile: &Profile, types: &[usize]) -> Vec<i64> {
    let samples = profile.samples();
    let budget = EXTRA_SAMPLES
        .saturating_add(EXTRA_SAMPLES_PER_SAMPLE.saturating_mul(samples.len() as u64))
        / types.len().max(1) as u64;
    let extra = |t: usize, divisor: i64| -> u64 {
        samples
            .iter()
            .map(|s| {
                let value = s.values.get(t).copied().unwrap_or(0) / divisor;
                value.unsigned_abs() / i32::MAX as u64
            })
            .fold(0, u64::saturating_add)
    };
    types
        .iter()
        .map(|&t| {
            let mut divisor: i64 = 1;
            while extra(t, divisor) > budget && divisor <= i64::MAX / 10 {
                divisor *= 10;
            }
            divisor
        })
        .collect()
}

/// The allocation samples of a heap profile: each stack's unfreed bytes
/// (`inuse`) as an allocation never freed, the rest of its allocated bytes
/// (`alloc`) as an allocation freed again, each at an address of its own.
fn add_allocations(
    profile: &Profile,
    order: &[usize],
    (alloc, inuse): (usize, usize),
    fx: &mut fx::Profile,
    frames: &FrameTable,
    thread: ThreadHandle,
) {
    let mut address = 0u64;
    for (n, &i) in order.iter().enumerate() {
        let values = &profile.samples()[i].values;
        let allocated = values.get(alloc).copied().unwrap_or(0);
        let unfreed = values
            .get(inuse)
            .copied()
            .unwrap_or(0)
            .clamp(0, allocated.max(0));
        let freed = allocated - unfreed;
        if allocated <= 0 {
            continue;
        }
        let stack = frames.intern_stack(fx, profile, thread, i);
        let at = Timestamp::from_millis_since_reference(n as f64);
        if unfreed > 0 {
            address += 1;
            fx.add_allocation_sample(thread, at, stack, address, unfreed);
        }
        if freed > 0 {
            address += 1;
            fx.add_allocation_sample(thread, at, stack, address, freed);
            fx.add_allocation_sample(thread, at, stack, address, -freed);
        }
    }
}

/// The sample types in the order their threads are added: a heap profile's
/// `alloc_space` first, as the crate puts a process's allocation samples
/// on its first thread; the others in the profile's order.
fn type_order(profile: &Profile) -> Vec<usize> {
    let mut types: Vec<usize> = (0..profile.sample_types().len()).collect();
    if let Some((alloc, _)) = heap_types(profile) {
        types.retain(|&t| t != alloc);
        types.insert(0, alloc);
    }
    types
}

/// The `alloc_space` and `inuse_space` types of a heap profile, in bytes.
fn heap_types(profile: &Profile) -> Option<(usize, usize)> {
    let find = |name: &str| {
        profile
            .sample_type_index(name)
            .filter(|&t| profile.sample_type_name(t).1 == "bytes")
    };
    Some((find("alloc_space")?, find("inuse_space")?))
}

/// The input's threads: the samples of each `pid` and `tid` (labels), in
/// order of the numbers (then the text) of both.
type ThreadKey = (Option<String>, Option<String>);
fn thread_keys(profile: &Profile) -> Vec<(ThreadKey, Vec<usize>)> {
    let mut threads: BTreeMap<(SortKey, SortKey), (ThreadKey, Vec<usize>)> = BTreeMap::new();
    for (i, sample) in profile.samples().iter().enumerate() {
        let pid = profile.label_text(sample, "pid");
        let tid = profile.label_text(sample, "tid");
        let sort = (sort_key(pid.as_deref()), sort_key(tid.as_deref()));
        threads
            .entry(sort)
            .or_insert_with(|| ((pid, tid), Vec::new()))
            .1
            .push(i);
    }
    threads.into_values().collect()
}

type SortKey = (Option<i64>, Option<String>);
fn sort_key(label: Option<&str>) -> SortKey {
    match label.map(|l| (l.parse::<i64>().ok(), l)) {
        Some((Some(n), _)) => (Some(n), None),
        Some((None, l)) => (None, Some(l.to_owned())),
        None => (None, None),
    }
}

/// `process_name` (`pid N` without one); the input's name for an input
/// without processes.
fn process_name(profile: &Profile, sample: &Sample, pid: Option<&str>, title: &str) -> String {
    match (profile.label_text(sample, "process_name"), pid) {
        (Some(name), _) => name,
        (None, Some(pid)) => format!("pid {pid}"),
        (None, None) => title.to_owned(),
    }
}

/// `thread_name` (`tid N` without one); `None` for an input without threads.
fn thread_name(profile: &Profile, sample: &Sample, tid: Option<&str>) -> Option<String> {
    match (profile.label_text(sample, "thread_name"), tid) {
        (Some(name), _) => Some(name),
        (None, Some(tid)) => Some(format!("tid {tid}")),
        (None, None) => None,
    }
}

/// Every location's frames, interned in the crate once: names as the
/// profiler shows them, categories by image.
struct FrameTable {
    /// Location → its frames, root first (inlined callers before callees).
    locations: Vec<Vec<FrameInfo>>,
    /// Sample → its group frames, root first: those of the options or the
    /// reader other than the threads' own (`pid`, `tid`).
    groups: Vec<Vec<FrameInfo>>,
}

impl FrameTable {
    fn new(
        profile: &Profile,
        options: &WriteOptions,
        fx: &mut fx::Profile,
    ) -> (FrameTable, Sources) {
        let by_line = options.granularity == Some(Granularity::Lines);
        // Each image's category, with its index in the document (which
        // the document's frames name it by).
        let mut categories: BTreeMap<&str, (CategoryHandle, u64)> = BTreeMap::new();
        let other = (CategoryHandle::OTHER, category_index(CategoryHandle::OTHER));
        let mut images = 0;
        let mut sources = Sources::default();
        let mut locations = Vec::with_capacity(profile.locations().len());
        for location in profile.locations() {
            let mapping = location
                .mapping
                .and_then(|m| profile.mappings().get(m.index()))
                .filter(|m| !profile.str(m.filename).is_empty());
            let lib = mapping.map(|m| sources.lib(profile, m));
            let (category, index) = match mapping.map(|m| basename(profile.str(m.filename))) {
                None => other,
                Some(image) => *categories.entry(image).or_insert_with(|| {
                    let color = COLORS[images % COLORS.len()];
                    images += 1;
                    let category = fx.add_category(image, color);
                    (category, category_index(category))
                }),
            };
            let at = Placed {
                lib,
                category,
                index,
            };
            locations.push(location_frames(
                profile,
                location,
                by_line,
                at,
                fx,
                &mut sources,
            ));
        }
        let group_by: Vec<GroupBy> = effective_group_by(profile, options)
            .iter()
            .filter(|g| !matches!(g, GroupBy::Label(k) if k == "pid" || k == "tid"))
            .cloned()
            .collect();
        let mut names: BTreeMap<String, FrameInfo> = BTreeMap::new();
        let mut groups = Vec::with_capacity(profile.samples().len());
        for sample in profile.samples() {
            let mut frames = Vec::new();
            for f in group_frames(profile, sample, &group_by) {
                let frame = match names.get(f.name.as_ref()) {
                    Some(frame) => frame.clone(),
                    None => {
                        let frame = label(fx, &f.name, CategoryHandle::OTHER.into());
                        names.insert(f.name.into_owned(), frame.clone());
                        frame
                    }
                };
                frames.push(frame);
            }
            groups.push(frames);
        }
        (FrameTable { locations, groups }, sources)
    }

    /// The frames of sample `i`, root first, for ordering samples.
    fn stack<'a>(
        &'a self,
        profile: &'a Profile,
        i: usize,
    ) -> impl Iterator<Item = &'a FrameInfo> + 'a {
        let stack = profile.samples().get(i).map_or(&[][..], |s| &s.stack[..]);
        let locations = stack
            .iter()
            .rev()
            .flat_map(|loc| self.locations.get(loc.index()).into_iter().flatten());
        self.groups.get(i).into_iter().flatten().chain(locations)
    }

    /// The crate's stack of sample `i` on `thread`.
    fn intern_stack(
        &self,
        fx: &mut fx::Profile,
        profile: &Profile,
        thread: ThreadHandle,
        i: usize,
    ) -> Option<fx::StackHandle> {
        fx.intern_stack_frames(thread, self.stack(profile, i).cloned())
    }
}

/// Where a location's frames are: its image's library and category, and
/// the category's index in the document.
#[derive(Clone, Copy)]
struct Placed {
    lib: Option<usize>,
    category: CategoryHandle,
    index: u64,
}

/// The frames of `location`, root first, each with what `sources` keeps
/// for its function: the image's library, and for a symbolized frame its
/// file and first line (and at `by_line` its line, the frame then named
/// `function file:line` as pprof names a line).
fn location_frames(
    profile: &Profile,
    location: &Location,
    by_line: bool,
    at: Placed,
    fx: &mut fx::Profile,
    sources: &mut Sources,
) -> Vec<FrameInfo> {
    if location.lines.is_empty() {
        let name = profile.address_name(location);
        let source = Source {
            lib: at.lib,
            ..Source::default()
        };
        sources.name(&name, at.index, source);
        return vec![label(fx, &name, at.category.into())];
    }
    let lines = location.lines.iter().rev();
    lines
        .map(|line| {
            let f = profile.line_frame(line);
            let function = &profile.functions()[line.function.index()];
            let (name, line) = match (by_line && f.line > 0, f.file) {
                (false, _) => (f.name.to_string(), None),
                (true, Some(file)) => (format!("{} {file}:{}", f.name, f.line), Some(f.line)),
                (true, None) => (format!("{}:{}", f.name, f.line), Some(f.line)),
            };
            let source = Source {
                base: line.map(|_| f.name.to_string()),
                lib: at.lib,
                file: f.file.map(str::to_owned),
                start_line: Some(function.start_line).filter(|&l| l > 0),
                line,
            };
            sources.name(&name, at.index, source);
            label(fx, &name, at.category.into())
        })
        .collect()
}

/// What the crate's format 0.8 leaves empty, added to the document it
/// serialized: each function's source file and first line and its library
/// (the image, with its path and build id), and at `--granularity lines`
/// each frame's line. The crate keys a frame by its name and category (the
/// image), so this is kept per name and category; functions are then made
/// per name and library, so that `_init` of two images is two functions.
#[derive(Default)]
struct Sources {
    by_frame: HashMap<(String, u64), Source>,
    libs: Vec<fx::LibraryInfo>,
    lib_of: HashMap<(StrId, StrId), usize>,
}

#[derive(Default, Clone)]
struct Source {
    /// The function's own name, when the frame's name also has its line.
    base: Option<String>,
    lib: Option<usize>,
    file: Option<String>,
    start_line: Option<i64>,
    line: Option<i64>,
}

impl Sources {
    /// Keeps `source` for the frames named `name` in the category of index
    /// `category` (the first of them gives it).
    fn name(&mut self, name: &str, category: u64, source: Source) {
        self.by_frame
            .entry((name.to_owned(), category))
            .or_insert(source);
    }

    /// The library of image `m`, added once per path and build id.
    fn lib(&mut self, profile: &Profile, m: &Mapping) -> usize {
        let libs = &mut self.libs;
        *self
            .lib_of
            .entry((m.filename, m.build_id))
            .or_insert_with(|| {
                let path = profile.str(m.filename).to_owned();
                let name = basename(&path).to_owned();
                let build_id = profile.str(m.build_id);
                libs.push(fx::LibraryInfo {
                    name: name.clone(),
                    debug_name: name,
                    debug_path: path.clone(),
                    path,
                    debug_id: debug_id(build_id),
                    code_id: (!build_id.is_empty()).then(|| build_id.to_owned()),
                    arch: None,
                    symbol_table: None,
                });
                libs.len() - 1
            })
    }

    /// Fills the columns the crate leaves `null` in `doc` (a serialized
    /// processed profile): `libs`, and per thread the functions' `fileName`,
    /// `lineNumber` and `resource` (a resource per library, as the profiler
    /// makes for native code), the frames' `line`.
    fn add_to(&self, doc: &mut Value) {
        if self
            .by_frame
            .values()
            .all(|s| s.lib.is_none() && s.file.is_none() && s.base.is_none())
        {
            return;
        }
        doc["libs"] = serde_json::to_value(&self.libs).unwrap_or_default();
        let Some(threads) = doc["threads"].as_array_mut() else {
            return;
        };
        for thread in threads {
            self.add_to_thread(thread);
        }
    }

    /// One thread's columns. Every frame gets the function of its name and
    /// library; at `--granularity lines` the crate named a frame per line
    /// (`f file:12`), and such a frame gets the function itself (`f`) and
    /// its line, so the profiler's call tree shows functions and its source
    /// view the lines, as for native code it symbolizes itself. The
    /// function table is made anew from the frames.
    fn add_to_thread(&self, thread: &mut Value) {
        let Value::Object(t) = thread else {
            return;
        };
        let mut strings = match t.get("stringArray") {
            Some(Value::Array(a)) => Strings::new(a),
            _ => return,
        };
        let names: Vec<usize> = column(t, "funcTable", "name");
        let frame_funcs: Vec<usize> = column(t, "frameTable", "func");
        let frame_categories: Vec<usize> = column(t, "frameTable", "category");
        let mut funcs = Funcs::default();
        let mut func_of: HashMap<(usize, Option<usize>), usize> = HashMap::new();
        let unknown = Source::default();
        let mut func = Vec::with_capacity(frame_funcs.len());
        let mut line = Vec::with_capacity(frame_funcs.len());
        for (&f, &category) in frame_funcs.iter().zip(&frame_categories) {
            let Some(&name) = names.get(f) else {
                func.push(Value::from(f));
                line.push(Value::Null);
                continue;
            };
            let key = (strings.get(name).to_owned(), category as u64);
            let source = self.by_frame.get(&key).unwrap_or(&unknown);
            let name = match &source.base {
                Some(base) => strings.intern(base),
                None => name,
            };
            let g = *func_of
                .entry((name, source.lib))
                .or_insert_with(|| funcs.push(name, source, &mut strings, self));
            func.push(Value::from(g));
            line.push(source.line.map_or(Value::Null, Value::from));
        }
        let resources = funcs.resources.to_value();
        if let Some(Value::Object(table)) = t.get_mut("funcTable") {
            funcs.write(table);
        }
        if let Some(Value::Object(frames)) = t.get_mut("frameTable") {
            frames.insert("func".into(), func.into());
            frames.insert("line".into(), line.into());
        }
        t.insert("resourceTable".into(), resources);
        t.insert("stringArray".into(), strings.list.into());
    }
}

/// A thread's function table as written: a function per name and library
/// its frames have, in the order of the frames.
#[derive(Default)]
struct Funcs {
    names: Vec<usize>,
    files: Vec<Value>,
    lines: Vec<Value>,
    resources_of: Vec<i64>,
    resources: Resources,
}

impl Funcs {
    fn push(
        &mut self,
        name: usize,
        source: &Source,
        strings: &mut Strings,
        all: &Sources,
    ) -> usize {
        self.names.push(name);
        let file = source.file.as_deref().map(|f| strings.intern(f));
        self.files.push(file.map_or(Value::Null, Value::from));
        self.lines
            .push(source.start_line.map_or(Value::Null, Value::from));
        let resource = source.lib.map(|lib| {
            let name = strings.intern(&all.libs[lib].name);
            self.resources.of(lib, name)
        });
        self.resources_of.push(resource.map_or(-1, |r| r as i64));
        self.names.len() - 1
    }

    fn write(self, table: &mut serde_json::Map<String, Value>) {
        let len = self.names.len();
        table.insert("length".into(), len.into());
        table.insert("name".into(), self.names.into());
        table.insert("isJS".into(), vec![false; len].into());
        table.insert("relevantForJS".into(), vec![false; len].into());
        table.insert("resource".into(), self.resources_of.into());
        table.insert("fileName".into(), self.files.into());
        table.insert("lineNumber".into(), self.lines.into());
        table.insert("columnNumber".into(), vec![Value::Null; len].into());
    }
}

/// A thread's string table, as serialized, to add strings to.
struct Strings {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

impl Strings {
    fn new(values: &[Value]) -> Strings {
        let list: Vec<String> = values
            .iter()
            .map(|s| s.as_str().unwrap_or("").to_owned())
            .collect();
        let mut index = HashMap::with_capacity(list.len());
        for (i, s) in list.iter().enumerate() {
            index.entry(s.clone()).or_insert(i);
        }
        Strings { list, index }
    }

    fn get(&self, i: usize) -> &str {
        self.list.get(i).map_or("", String::as_str)
    }

    fn intern(&mut self, s: &str) -> usize {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.list.push(s.to_owned());
        self.index.insert(s.to_owned(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// A thread's resource table: one library resource per library used.
#[derive(Default)]
struct Resources {
    libs: Vec<usize>,
    names: Vec<usize>,
}

impl Resources {
    fn of(&mut self, lib: usize, name: usize) -> usize {
        match self.libs.iter().position(|&l| l == lib) {
            Some(r) => r,
            None => {
                self.libs.push(lib);
                self.names.push(name);
                self.libs.len() - 1
            }
        }
    }

    fn to_value(&self) -> Value {
        /// The processed format's `resourceTypeEnum.library`.
        const LIBRARY: u32 = 1;
        let len = self.libs.len();
        serde_json::json!({
            "length": len,
            "lib": self.libs,
            "name": self.names,
            "host": vec![Value::Null; len],
            "type": vec![LIBRARY; len],
        })
    }
}

/// The column `key` of `table` in thread `t`, as indexes.
fn column(t: &serde_json::Map<String, Value>, table: &str, key: &str) -> Vec<usize> {
    let Some(Value::Array(values)) = t.get(table).and_then(|t| t.get(key)) else {
        return Vec::new();
    };
    let index = |v: &Value| v.as_u64().unwrap_or(u64::MAX) as usize;
    values.iter().map(index).collect()
}

/// The debug id of an ELF build id (hex), as samply makes it: its first 16
/// bytes read as a little-endian GUID, age 0; nil without one.
fn debug_id(build_id: &str) -> fx::debugid::DebugId {
    let bytes: Vec<u8> = (0..build_id.len() / 2)
        .filter_map(|i| u8::from_str_radix(build_id.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    if bytes.is_empty() {
        return fx::debugid::DebugId::nil();
    }
    let mut guid = [0u8; 16];
    for (g, b) in guid.iter_mut().zip(&bytes) {
        *g = *b;
    }
    guid[0..4].reverse();
    guid[4..6].reverse();
    guid[6..8].reverse();
    fx::debugid::DebugId::from_guid_age(&guid, 0).unwrap_or_default()
}

/// The index of `category` in the profile's categories (its serialized
/// form: the crate gives the index no other way).
fn category_index(category: CategoryHandle) -> u64 {
    serde_json::to_value(category)
        .ok()
        .and_then(|v| v.as_u64())
        .unwrap_or(0)
}

/// A frame named `name`.
fn label(fx: &mut fx::Profile, name: &str, category: CategoryPairHandle) -> FrameInfo {
    FrameInfo {
        frame: fx::Frame::Label(fx.intern_string(name)),
        category_pair: category,
        flags: FrameFlags::empty(),
    }
}

/// The colours images are given, in turn.
const COLORS: [CategoryColor; 10] = [
    CategoryColor::Blue,
    CategoryColor::Green,
    CategoryColor::Orange,
    CategoryColor::Purple,
    CategoryColor::LightBlue,
    CategoryColor::Red,
    CategoryColor::Brown,
    CategoryColor::Magenta,
    CategoryColor::LightGreen,
    CategoryColor::Yellow,
];
