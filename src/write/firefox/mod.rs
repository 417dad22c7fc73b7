//! Firefox Profiler output: the profiler's processed profile JSON (format
//! version 55, the one samply writes), as is or gzip-compressed
//! (profiler.firefox.com loads both). profconv writes the document itself,
//! a column at a time, so that a profile read in parts (a DCPI database at
//! `--granularity addresses`: ten million distinct addresses) is written in
//! memory bounded by one part, as the other outputs are.
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
//! - frames by name and image, inlined frames as frames of their own
//!   (caller first); the frame's image (mapping) as its category, which
//!   colours the profiler's graphs by library;
//! - a function per name and library, with its source file and first line,
//!   and its library (the image, with its path and build id: the profiler's
//!   `libs`, named in its call tree as `name [library]`); at
//!   `--granularity lines` a frame per line, named `function file:line`,
//!   whose function is the function itself and whose line is the line, so
//!   the call tree shows functions and the source view lines.
//!
//! Samples of one stack are one sample (the IR aggregates them); they are
//! placed a millisecond apart in stack order, root first, so that the stack
//! chart draws each call once.
//!
//! How it is written ([`FirefoxRuns`]): each run of parts (the whole
//! profile, for a profile held whole) adds to every thread's tables the
//! strings, functions, frames and stacks it has not seen, as segments of
//! JSON text per column, and its samples as binary rows; the document is
//! put together at the end from the segments, the samples' columns from
//! the rows (once the divisors are known). Segments and rows are kept in
//! memory for a profile held whole and in an anonymous temporary file for
//! runs. What is shared across runs is kept once per thread (functions,
//! frames and stacks of symbolized code, groups); an unsymbolized address
//! is named anew in each run it appears in, as the speedscope output does,
//! so that memory does not grow with the addresses.

mod tables;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::profile::{Profile, Sample};
use crate::write::WriteOptions;

use tables::{Column, Descs, Images, Lib, RunThread, Thread, NONE};

/// How many samples the whole document may get beyond one per stack when
/// values are split into `i32` weights: this many, plus
/// [`EXTRA_SAMPLES_PER_SAMPLE`] per sample of the profile, shared evenly by
/// the sample types. Past it a type's values are divided by a power of ten,
/// and its threads' names say by how much: the output stays within a few
/// times the profile's size, whatever its values.
const EXTRA_SAMPLES: u64 = 1 << 16;
const EXTRA_SAMPLES_PER_SAMPLE: u64 = 8;

/// The powers of ten a type's values may be divided by: 10⁰ to 10¹⁸ (the
/// largest that fits an `i64` ten times over).
const DIVISORS: usize = 19;

/// Writes `profile` as a processed profile, gzip-compressed when `gzip`;
/// returns the document's length (before compression).
pub fn write(
    profile: &Profile,
    options: &WriteOptions,
    gzip: bool,
    out: &mut dyn Write,
) -> Result<u64> {
    let mut document = FirefoxRuns {
        store: Store::Memory(Vec::new()),
        ..FirefoxRuns::default()
    };
    document.add(profile, options)?;
    document.write(profile, options, gzip, out)
}

/// A processed profile assembled from runs of parts ([`FirefoxRuns::add`])
/// and written at the end ([`FirefoxRuns::write`]).
#[derive(Default)]
pub(crate) struct FirefoxRuns {
    store: Store,
    images: Images,
    threads: BTreeMap<(SortKey, SortKey), Thread>,
    /// The values per sample of the rows (the profile's sample types).
    width: usize,
    /// Samples added, for the budget of [`EXTRA_SAMPLES_PER_SAMPLE`].
    samples: u64,
    /// Per sample type, the samples splitting would add at each divisor
    /// (10⁰ to 10¹⁸).
    extra: Vec<[u64; DIVISORS]>,
}

/// Where segments and rows wait for the end.
enum Store {
    Memory(Vec<u8>),
    File { out: BufWriter<File>, end: u64 },
}

impl Default for Store {
    fn default() -> Store {
        Store::Memory(Vec::new())
    }
}

impl Store {
    fn append(&mut self, bytes: &[u8]) -> Result<Range<u64>> {
        match self {
            Store::Memory(kept) => {
                let start = kept.len() as u64;
                kept.extend_from_slice(bytes);
                Ok(start..kept.len() as u64)
            }
            Store::File { out, end } => {
                out.write_all(bytes).map_err(Error::unnamed_output)?;
                let start = *end;
                *end += bytes.len() as u64;
                Ok(start..*end)
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::File { out, .. } => out.flush().map_err(Error::unnamed_output),
        }
    }

    fn copy(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        match self {
            Store::Memory(kept) => out
                .write_all(&kept[range.start as usize..range.end as usize])
                .map_err(Error::unnamed_output),
            Store::File { out: file, .. } => super::runs::copy_range(file.get_ref(), range, out),
        }
    }

    /// The bytes `range` (read into `buf` from a file).
    fn bytes<'a>(&'a self, range: Range<u64>, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        match self {
            Store::Memory(kept) => Ok(&kept[range.start as usize..range.end as usize]),
            Store::File { out, .. } => {
                buf.resize((range.end - range.start) as usize, 0);
                out.get_ref()
                    .read_exact_at(buf, range.start)
                    .map_err(Error::unnamed_output)?;
                Ok(buf)
            }
        }
    }
}

impl FirefoxRuns {
    /// Runs in an anonymous temporary file in `dir`.
    pub fn new(dir: &Path) -> Result<FirefoxRuns> {
        Ok(FirefoxRuns {
            store: Store::File {
                out: super::runs::spill_file(dir)?,
                end: 0,
            },
            ..FirefoxRuns::default()
        })
    }

    /// Adds the samples of `profile` (some parts of the whole, or all) and
    /// what its stacks need that the tables lack.
    pub fn add(&mut self, profile: &Profile, options: &WriteOptions) -> Result<()> {
        if self.width == 0 {
            self.width = profile.sample_types().len();
            self.extra = vec![[0; DIVISORS]; self.width];
        }
        let title = title(options);
        let descs = Descs::new(profile, options, &mut self.images);
        let mut by_thread: BTreeMap<(SortKey, SortKey), Vec<usize>> = BTreeMap::new();
        for (i, sample) in profile.samples().iter().enumerate() {
            self.count_extra(sample);
            let pid = profile.label_text(sample, "pid");
            let tid = profile.label_text(sample, "tid");
            let key = (sort_key(pid.as_deref()), sort_key(tid.as_deref()));
            let thread = self.threads.entry(key.clone()).or_insert_with(|| Thread {
                process_name: process_name(profile, sample, pid.as_deref(), title),
                name: thread_name(profile, sample, tid.as_deref()),
                pid,
                tid,
                largest: vec![0; self.width],
                ..Thread::default()
            });
            for (t, largest) in thread.largest.iter_mut().enumerate() {
                let value = sample.values.get(t).copied().unwrap_or(0);
                *largest = (*largest).max(value.unsigned_abs());
            }
            by_thread.entry(key).or_default().push(i);
        }
        for (key, mut order) in by_thread {
            order.sort_by(|&a, &b| descs.stack(profile, a).cmp(descs.stack(profile, b)));
            let Some(thread) = self.threads.get_mut(&key) else {
                continue;
            };
            let mut run = RunThread::default();
            for &i in &order {
                let stack =
                    run.intern_stack(thread, &descs, &self.images.libs, descs.stack(profile, i));
                run.rows
                    .extend_from_slice(&stack.unwrap_or(NONE).to_le_bytes());
                let values = &profile.samples()[i].values;
                for t in 0..self.width {
                    let value = values.get(t).copied().unwrap_or(0);
                    run.rows.extend_from_slice(&value.to_le_bytes());
                }
            }
            for (c, text) in run.columns.iter().enumerate() {
                if !text.is_empty() {
                    let range = self.store.append(text)?;
                    thread.segments[c].push(range);
                }
            }
            let range = self.store.append(&run.rows)?;
            thread.rows.push(range);
        }
        Ok(())
    }

    /// Counts the samples splitting `sample`'s values into `i32` weights
    /// would add, at each divisor.
    fn count_extra(&mut self, sample: &Sample) {
        self.samples += 1;
        for (t, extra) in self.extra.iter_mut().enumerate() {
            let value = sample.values.get(t).copied().unwrap_or(0);
            if value.unsigned_abs() <= i32::MAX as u64 {
                continue;
            }
            let mut divisor: i64 = 1;
            for e in extra.iter_mut() {
                *e = e.saturating_add((value / divisor).unsigned_abs() / i32::MAX as u64);
                divisor = divisor.saturating_mul(10);
            }
        }
    }

    /// What each sample type's values are divided by: 1, unless splitting
    /// them into `i32` weights would take more samples than the type's share
    /// of the budget ([`EXTRA_SAMPLES`]); then the least power of ten that
    /// keeps within it. One divisor per type, for all its threads, so that
    /// the threads of a type stay comparable.
    fn divisors(&self) -> Vec<i64> {
        let budget = EXTRA_SAMPLES
            .saturating_add(EXTRA_SAMPLES_PER_SAMPLE.saturating_mul(self.samples))
            / self.width.max(1) as u64;
        self.extra
            .iter()
            .map(|extra| {
                let k = extra
                    .iter()
                    .position(|&e| e <= budget)
                    .unwrap_or(DIVISORS - 1);
                10i64.pow(k as u32)
            })
            .collect()
    }

    /// Writes the document, gzip-compressed when `gzip`; `head` is the
    /// profile's tables (its sample types, start time). Returns the
    /// document's length (before compression).
    pub fn write(
        &mut self,
        head: &Profile,
        options: &WriteOptions,
        gzip: bool,
        out: &mut dyn Write,
    ) -> Result<u64> {
        self.store.flush()?;
        if !gzip {
            return self.write_counted(head, options, out);
        }
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
        let bytes = self.write_counted(head, options, &mut gz)?;
        gz.finish().map_err(Error::unnamed_output)?;
        Ok(bytes)
    }

    /// The document and a newline, and their length.
    fn write_counted(
        &self,
        head: &Profile,
        options: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<u64> {
        let io = Error::unnamed_output;
        let mut counted = super::limits::Counted::new(out);
        let mut w = BufWriter::with_capacity(1 << 16, &mut counted);
        self.write_document(head, options, &mut w)?;
        w.write_all(b"\n").map_err(io)?;
        w.flush().map_err(io)?;
        drop(w);
        Ok(counted.bytes)
    }

    fn write_document(
        &self,
        head: &Profile,
        options: &WriteOptions,
        w: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        let divisors = self.divisors();
        let heap = heap_types(head);
        let default = head.default_sample_type.unwrap_or(0);
        // The threads written, in order: each input thread's sample types
        // that have a value once divided.
        let mut written = Vec::new();
        // A process is named by its first thread.
        let mut processes: HashMap<&str, &str> = HashMap::new();
        for thread in self.threads.values() {
            let pid = thread.pid.as_deref().unwrap_or_default();
            processes.entry(pid).or_insert(&thread.process_name);
            let types = type_order(head).into_iter().filter(|&t| t < self.width);
            let mut nth = 0;
            for t in types {
                let divisor = divisors[t].unsigned_abs();
                if thread.largest.get(t).is_some_and(|&l| l >= divisor) {
                    written.push((thread, t, nth));
                    nth += 1;
                }
            }
        }
        let selected = written.iter().position(|&(_, t, _)| t == default);
        w.write_all(b"{\"meta\":").map_err(io)?;
        self.write_meta(head, options, selected, w)?;
        w.write_all(b",\"libs\":[").map_err(io)?;
        for (i, lib) in self.images.libs.iter().enumerate() {
            if i > 0 {
                w.write_all(b",").map_err(io)?;
            }
            write_lib(lib, w)?;
        }
        w.write_all(b"],\"threads\":[").map_err(io)?;
        for (i, &(thread, t, nth)) in written.iter().enumerate() {
            if i > 0 {
                w.write_all(b",").map_err(io)?;
            }
            let allocations = heap.filter(|h| h.0 == t);
            let pid = thread.pid.as_deref().unwrap_or_default();
            let sample_thread = SampleThread {
                thread,
                process: processes.get(pid).copied().unwrap_or_default(),
                t,
                divisor: divisors[t],
                nth,
            };
            self.write_thread(head, &sample_thread, allocations, w)?;
        }
        w.write_all(b"],\"pages\":[],\"profilerOverhead\":[],\"counters\":[]}")
            .map_err(io)
    }

    fn write_meta(
        &self,
        head: &Profile,
        options: &WriteOptions,
        selected: Option<usize>,
        w: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        w.write_all(b"{\"categories\":[").map_err(io)?;
        let other = std::iter::once(("Other", "grey"));
        let images = self.images.categories.iter().enumerate();
        let images = images.map(|(i, name)| (name.as_str(), COLORS[i % COLORS.len()]));
        for (i, (name, color)) in other.chain(images).enumerate() {
            if i > 0 {
                w.write_all(b",").map_err(io)?;
            }
            w.write_all(b"{\"color\":\"").map_err(io)?;
            w.write_all(color.as_bytes()).map_err(io)?;
            w.write_all(b"\",\"name\":").map_err(io)?;
            json_string(name, w)?;
            w.write_all(b",\"subcategories\":[\"Other\"]}")
                .map_err(io)?;
        }
        // profconv symbolized what it could; nothing is left for a symbol
        // server.
        let start = head.time_nanos.max(0) as f64 / 1_000_000.0;
        write!(
            w,
            "],\"debug\":false,\"extensions\":{{\"baseURL\":[],\"id\":[],\"length\":0,\"name\":[]}},\
             \"interval\":1.0,\"preprocessedProfileVersion\":55,\"processType\":0,\"product\":"
        )
        .map_err(io)?;
        json_string(title(options), w)?;
        write!(
            w,
            ",\"sampleUnits\":{{\"eventDelay\":\"ms\",\"threadCPUDelta\":\"µs\",\"time\":\"ms\"}},\
             \"startTime\":"
        )
        .map_err(io)?;
        serde_json::to_writer(&mut *w, &start).map_err(|e| io(e.into()))?;
        write!(
            w,
            ",\"symbolicated\":true,\"pausedRanges\":[],\"version\":24,\
             \"usesOnlyOneStackType\":true,\"sourceCodeIsNotOnSearchfox\":true,\"markerSchema\":[]"
        )
        .map_err(io)?;
        if let Some(i) = selected {
            write!(w, ",\"initialSelectedThreads\":[{i}]").map_err(io)?;
        }
        w.write_all(b"}").map_err(io)
    }

    /// One thread of the document: `sample`'s type of an input thread, its
    /// tables, samples and (`allocations`: the heap's `alloc_space` and
    /// `inuse_space`) allocations.
    fn write_thread(
        &self,
        head: &Profile,
        sample: &SampleThread<'_>,
        allocations: Option<(usize, usize)>,
        w: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        let thread = sample.thread;
        let column = |c: Column, w: &mut dyn Write| self.join(&thread.segments[c as usize], w);
        w.write_all(b"{\"frameTable\":").map_err(io)?;
        self.write_frame_table(thread, w)?;
        w.write_all(b",\"funcTable\":").map_err(io)?;
        self.write_func_table(thread, w)?;
        w.write_all(
            b",\"markers\":{\"category\":[],\"data\":[],\"endTime\":[],\"length\":0,\
              \"name\":[],\"phase\":[],\"startTime\":[]},\"name\":",
        )
        .map_err(io)?;
        json_string(&sample.name(head), w)?;
        w.write_all(
            b",\"isMainThread\":false,\"nativeSymbols\":{\"address\":[],\"functionSize\":[],\
              \"length\":0,\"libIndex\":[],\"name\":[]},\"pausedRanges\":[],\"pid\":",
        )
        .map_err(io)?;
        let pid = thread.pid.as_deref().and_then(|p| p.parse::<u32>().ok());
        json_string(&pid.unwrap_or(0).to_string(), w)?;
        w.write_all(b",\"processName\":").map_err(io)?;
        json_string(sample.process, w)?;
        w.write_all(
            b",\"processShutdownTime\":null,\"processStartupTime\":0.0,\
              \"processType\":\"default\",\"registerTime\":0.0,\"resourceTable\":",
        )
        .map_err(io)?;
        write_resources(&thread.resources, w)?;
        w.write_all(b",\"samples\":").map_err(io)?;
        self.write_samples(head, sample, w)?;
        if let Some(heap) = allocations {
            w.write_all(b",\"nativeAllocations\":").map_err(io)?;
            self.write_allocations(thread, heap, w)?;
        }
        let stacks = thread.stacks_len;
        write!(w, ",\"stackTable\":{{\"length\":{stacks},\"prefix\":[").map_err(io)?;
        column(Column::StackPrefix, w)?;
        w.write_all(b"],\"frame\":[").map_err(io)?;
        column(Column::StackFrame, w)?;
        w.write_all(b"]},\"stringArray\":[").map_err(io)?;
        column(Column::Strings, w)?;
        w.write_all(b"],\"tid\":").map_err(io)?;
        json_string(&sample.tid(), w)?;
        w.write_all(b",\"unregisterTime\":null,\"showMarkersInTimeline\":false}")
            .map_err(io)
    }

    /// A thread's frame table: the columns runs made, and those of one
    /// value.
    fn write_frame_table(&self, thread: &Thread, w: &mut dyn Write) -> Result<()> {
        let io = Error::unnamed_output;
        let column = |c: Column, w: &mut dyn Write| self.join(&thread.segments[c as usize], w);
        let frames = thread.frames_len as u64;
        write!(w, "{{\"length\":{frames},\"address\":[").map_err(io)?;
        repeat("-1", frames, w)?;
        w.write_all(b"],\"inlineDepth\":[").map_err(io)?;
        repeat("0", frames, w)?;
        w.write_all(b"],\"category\":[").map_err(io)?;
        column(Column::FrameCategory, w)?;
        w.write_all(b"],\"subcategory\":[").map_err(io)?;
        repeat("0", frames, w)?;
        w.write_all(b"],\"func\":[").map_err(io)?;
        column(Column::FrameFunc, w)?;
        w.write_all(b"],\"nativeSymbol\":[").map_err(io)?;
        repeat("null", frames, w)?;
        w.write_all(b"],\"innerWindowID\":[").map_err(io)?;
        repeat("0", frames, w)?;
        w.write_all(b"],\"line\":[").map_err(io)?;
        column(Column::FrameLine, w)?;
        w.write_all(b"],\"column\":[").map_err(io)?;
        repeat("null", frames, w)?;
        w.write_all(b"]}").map_err(io)
    }

    /// A thread's function table, likewise.
    fn write_func_table(&self, thread: &Thread, w: &mut dyn Write) -> Result<()> {
        let io = Error::unnamed_output;
        let column = |c: Column, w: &mut dyn Write| self.join(&thread.segments[c as usize], w);
        let funcs = thread.funcs_len as u64;
        write!(w, "{{\"length\":{funcs},\"name\":[").map_err(io)?;
        column(Column::FuncName, w)?;
        w.write_all(b"],\"isJS\":[").map_err(io)?;
        repeat("false", funcs, w)?;
        w.write_all(b"],\"relevantForJS\":[").map_err(io)?;
        repeat("false", funcs, w)?;
        w.write_all(b"],\"resource\":[").map_err(io)?;
        column(Column::FuncResource, w)?;
        w.write_all(b"],\"fileName\":[").map_err(io)?;
        column(Column::FuncFile, w)?;
        w.write_all(b"],\"lineNumber\":[").map_err(io)?;
        column(Column::FuncLine, w)?;
        w.write_all(b"],\"columnNumber\":[").map_err(io)?;
        repeat("null", funcs, w)?;
        w.write_all(b"]}").map_err(io)
    }

    /// The samples of one thread's type: each row's value divided, split
    /// into `i32` weights, a millisecond apart.
    fn write_samples(
        &self,
        head: &Profile,
        sample: &SampleThread<'_>,
        w: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        let (_, unit) = head.sample_type_name(sample.t);
        let weight_type = if unit == "bytes" { "bytes" } else { "samples" };
        write!(w, "{{\"weightType\":\"{weight_type}\",\"stack\":[").map_err(io)?;
        let each = |f: &mut dyn FnMut(u32, i32, &mut dyn Write) -> Result<()>,
                    w: &mut dyn Write| {
            self.each_row(sample.thread, |stack, values| {
                let mut value = values[sample.t] / sample.divisor;
                while value != 0 {
                    let weight = value.clamp(-i64::from(i32::MAX), i64::from(i32::MAX));
                    value -= weight;
                    f(stack, weight as i32, w)?;
                }
                Ok(())
            })
        };
        let mut n = 0u64;
        each(
            &mut |stack, _, w| {
                n += 1;
                let comma = if n > 1 { "," } else { "" };
                write_stack(comma, stack, w)
            },
            w,
        )?;
        w.write_all(b"],\"timeDeltas\":[").map_err(io)?;
        if n > 0 {
            w.write_all(b"0").map_err(io)?;
            repeat_after(",1", n - 1, w)?;
        }
        w.write_all(b"],\"weight\":[").map_err(io)?;
        let mut first = true;
        each(
            &mut |_, weight, w| {
                let comma = if first { "" } else { "," };
                first = false;
                write!(w, "{comma}{weight}").map_err(io)
            },
            w,
        )?;
        w.write_all(b"],\"threadCPUDelta\":[").map_err(io)?;
        repeat("0", n, w)?;
        write!(w, "],\"length\":{n}}}").map_err(io)
    }

    /// The allocations of a heap profile's thread ([`each_allocation`]).
    fn write_allocations(
        &self,
        thread: &Thread,
        heap: (usize, usize),
        w: &mut dyn Write,
    ) -> Result<()> {
        let io = Error::unnamed_output;
        let mut n = 0u64;
        let mut column = |name: &str, value: fn(&Allocation) -> String, w: &mut dyn Write| {
            write!(w, "\"{name}\":[").map_err(io)?;
            n = 0;
            self.each_allocation(thread, heap, |a| {
                n += 1;
                let comma = if n > 1 { "," } else { "" };
                write!(w, "{comma}{}", value(a)).map_err(io)
            })?;
            w.write_all(b"],").map_err(io)
        };
        w.write_all(b"{").map_err(io)?;
        column("time", |a| a.time.to_string(), w)?;
        column("weight", |a| a.bytes.to_string(), w)?;
        column("memoryAddress", |a| a.address.to_string(), w)?;
        column(
            "stack",
            |a| match a.stack {
                NONE => "null".into(),
                s => s.to_string(),
            },
            w,
        )?;
        // The profiler does not read `threadId`; its type wants a number.
        w.write_all(b"\"threadId\":[").map_err(io)?;
        repeat("0", n, w)?;
        write!(w, "],\"weightType\":\"bytes\",\"length\":{n}}}").map_err(io)
    }

    /// Calls `f` with each allocation of `thread`'s heap profile (its
    /// `alloc_space` and `inuse_space` values): each stack's unfreed bytes
    /// as an allocation never freed, the rest of its allocated bytes as an
    /// allocation freed again, each at an address of its own, at the time
    /// of the stack's row.
    fn each_allocation(
        &self,
        thread: &Thread,
        (alloc, inuse): (usize, usize),
        mut f: impl FnMut(&Allocation) -> Result<()>,
    ) -> Result<()> {
        let (mut time, mut address) = (0u64, 0u64);
        self.each_row(thread, |stack, values| {
            let allocated = values.get(alloc).copied().unwrap_or(0);
            let unfreed = values.get(inuse).copied().unwrap_or(0);
            let unfreed = unfreed.clamp(0, allocated.max(0));
            let freed = allocated - unfreed;
            let at = |address, bytes| Allocation {
                time,
                stack,
                address,
                bytes,
            };
            if allocated > 0 && unfreed > 0 {
                address += 1;
                f(&at(address, unfreed))?;
            }
            if allocated > 0 && freed > 0 {
                address += 1;
                f(&at(address, freed))?;
                f(&at(address, -freed))?;
            }
            time += 1;
            Ok(())
        })
    }

    /// Calls `f` with every row of `thread`: its stack and values.
    fn each_row(
        &self,
        thread: &Thread,
        mut f: impl FnMut(u32, &[i64]) -> Result<()>,
    ) -> Result<()> {
        let width = 4 + 8 * self.width;
        let mut buf = Vec::new();
        let mut values = vec![0i64; self.width];
        for range in &thread.rows {
            let bytes = self.store.bytes(range.clone(), &mut buf)?;
            for row in bytes.chunks_exact(width) {
                let (stack, rest) = row.split_at(4);
                let stack = u32::from_le_bytes(stack.try_into().unwrap_or_default());
                for (v, b) in values.iter_mut().zip(rest.chunks_exact(8)) {
                    *v = i64::from_le_bytes(b.try_into().unwrap_or_default());
                }
                f(stack, &values)?;
            }
        }
        Ok(())
    }

    /// The segments `ranges`, comma-separated.
    fn join(&self, ranges: &[Range<u64>], w: &mut dyn Write) -> Result<()> {
        for (i, range) in ranges.iter().enumerate() {
            if i > 0 {
                w.write_all(b",").map_err(Error::unnamed_output)?;
            }
            self.store.copy(range.clone(), w)?;
        }
        Ok(())
    }
}

/// One entry of a thread's native allocations.
struct Allocation {
    time: u64,
    stack: u32,
    address: u64,
    bytes: i64,
}

/// One thread of the document: an input thread's sample type.
struct SampleThread<'a> {
    thread: &'a Thread,
    /// The name of the thread's process.
    process: &'a str,
    t: usize,
    /// What the values are divided by ([`FirefoxRuns::divisors`]).
    divisor: i64,
    /// Which of the input thread's types this is (0 for the first written).
    nth: usize,
}

impl SampleThread<'_> {
    /// `thread_name — kind (unit)`, or the type alone for an input
    /// without threads.
    fn name(&self, head: &Profile) -> String {
        let (kind, unit) = head.sample_type_name(self.t);
        let scaled = match self.divisor {
            1 => String::new(),
            d => format!(" ÷{d}"),
        };
        match &self.thread.name {
            Some(base) => format!("{base} — {kind} ({unit}{scaled})"),
            None => format!("{kind} ({unit}{scaled})"),
        }
    }

    /// The thread's id: the input's `tid` (0 without), and for the second
    /// and later types of one input thread `tid.N`, so that each is its own.
    fn tid(&self) -> String {
        let tid = self
            .thread
            .tid
            .as_deref()
            .and_then(|t| t.parse::<u32>().ok());
        match self.nth {
            0 => tid.unwrap_or(0).to_string(),
            n => format!("{}.{n}", tid.unwrap_or(0)),
        }
    }
}

/// The title the document is named by.
fn title(options: &WriteOptions) -> &str {
    match options.title.is_empty() {
        true => "profconv",
        false => options.title.as_str(),
    }
}

/// A sample's stack in a column: its id, or `null`.
fn write_stack(comma: &str, stack: u32, w: &mut dyn Write) -> Result<()> {
    match stack {
        NONE => write!(w, "{comma}null"),
        s => write!(w, "{comma}{s}"),
    }
    .map_err(Error::unnamed_output)
}

/// `n` times `value`, comma-separated.
fn repeat(value: &str, n: u64, w: &mut dyn Write) -> Result<()> {
    if n > 0 {
        w.write_all(value.as_bytes())
            .map_err(Error::unnamed_output)?;
        repeat_after(&format!(",{value}"), n - 1, w)?;
    }
    Ok(())
}

/// `n` times `text`, in blocks.
fn repeat_after(text: &str, n: u64, w: &mut dyn Write) -> Result<()> {
    const BLOCK: u64 = 1024;
    let block = text.repeat(BLOCK.min(n) as usize);
    let mut left = n;
    while left > 0 {
        let k = left.min(BLOCK);
        w.write_all(&block.as_bytes()[..k as usize * text.len()])
            .map_err(Error::unnamed_output)?;
        left -= k;
    }
    Ok(())
}

fn json_string(s: &str, w: &mut dyn Write) -> Result<()> {
    serde_json::to_writer(w, s).map_err(|e| Error::unnamed_output(e.into()))
}

/// One entry of `libs`.
fn write_lib(lib: &Lib, w: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    w.write_all(b"{\"name\":").map_err(io)?;
    json_string(&lib.name, w)?;
    w.write_all(b",\"path\":").map_err(io)?;
    json_string(&lib.path, w)?;
    w.write_all(b",\"debugName\":").map_err(io)?;
    json_string(&lib.name, w)?;
    w.write_all(b",\"debugPath\":").map_err(io)?;
    json_string(&lib.path, w)?;
    w.write_all(b",\"breakpadId\":").map_err(io)?;
    json_string(&breakpad_id(&lib.build_id), w)?;
    w.write_all(b",\"codeId\":").map_err(io)?;
    match lib.build_id.is_empty() {
        true => w.write_all(b"null").map_err(io)?,
        false => json_string(&lib.build_id, w)?,
    }
    w.write_all(b",\"arch\":null}").map_err(io)
}

/// A thread's resource table: one library resource per library used.
fn write_resources(resources: &[(u32, u32)], w: &mut dyn Write) -> Result<()> {
    /// The processed format's `resourceTypeEnum.library`.
    const LIBRARY: u32 = 1;
    let len = resources.len() as u64;
    let io = Error::unnamed_output;
    let list = |values: &mut dyn Iterator<Item = u32>, w: &mut dyn Write| -> Result<()> {
        for (i, v) in values.enumerate() {
            let comma = if i > 0 { "," } else { "" };
            write!(w, "{comma}{v}").map_err(io)?;
        }
        Ok(())
    };
    write!(w, "{{\"length\":{len},\"lib\":[").map_err(io)?;
    list(&mut resources.iter().map(|r| r.0), w)?;
    w.write_all(b"],\"name\":[").map_err(io)?;
    list(&mut resources.iter().map(|r| r.1), w)?;
    w.write_all(b"],\"host\":[").map_err(io)?;
    repeat("null", len, w)?;
    w.write_all(b"],\"type\":[").map_err(io)?;
    list(&mut resources.iter().map(|_| LIBRARY), w)?;
    w.write_all(b"]}").map_err(io)
}

/// The breakpad id of an ELF build id (hex), as samply makes it: its first
/// 16 bytes (zero-padded) in upper-case hex, then the age, 0.
fn breakpad_id(build_id: &str) -> String {
    let mut hex: String = build_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(32)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    hex.truncate(hex.len() / 2 * 2);
    while hex.len() < 32 {
        hex.push('0');
    }
    hex.push('0');
    hex
}

/// The sample types in the order their threads are written: a heap
/// profile's `alloc_space` first (its allocations' thread), the others in
/// the profile's order.
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

/// Threads are ordered by the numbers (then the text) of their `pid` and
/// `tid`.
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

/// The colours images are given, in turn (the profiler's names).
const COLORS: [&str; 10] = [
    "blue",
    "green",
    "orange",
    "purple",
    "lightblue",
    "red",
    "brown",
    "magenta",
    "lightgreen",
    "yellow",
];
