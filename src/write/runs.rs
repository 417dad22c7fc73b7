//! Folded lines kept on disk in sorted runs and merged at the end: how the
//! folded and SVG outputs of a profile read in parts (a DCPI database at
//! `--granularity addresses`: millions of distinct stacks) are written in
//! memory bounded by one run, not by the profile.
//!
//! Each run is the folded lines of a profile of some of the parts
//! ([`super::folded::each_line`]: sorted, one per distinct line, counts
//! positive), written as `STACK COUNT\n` to one anonymous temporary file
//! (no name, so nothing is left behind whatever happens). [`FoldedRuns::merge`]
//! reads the runs side by side and gives every distinct stack once, in
//! order, with its counts added up: the lines the whole profile has. Parts
//! hold distinct samples, so the only lines two runs share are stacks that
//! fold to the same frame names (an image's address in two runs of parts),
//! and adding their positive counts is what the whole profile does.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::write::{chosen_sample_type, folded, WriteOptions};

/// Bytes read from a run at a time: with a few hundred runs, a few MiB.
const READ_BYTES: usize = 1 << 16;

/// Folded lines spilled as sorted runs to a temporary file.
pub(crate) struct FoldedRuns {
    out: BufWriter<File>,
    /// Each run's bytes in the file.
    runs: Vec<Range<u64>>,
    /// Bytes written so far.
    end: u64,
    /// The counts of every run's lines added up: the flamegraph's total
    /// while it fits an `i64`.
    total: i128,
    /// The positive values of the chosen sample type added up (what
    /// [`crate::profile::count_shift`] is told).
    positive: i128,
}

impl FoldedRuns {
    /// Runs in an anonymous temporary file in `dir` ([`spill_file`]).
    pub fn new(dir: &Path) -> Result<FoldedRuns> {
        Ok(FoldedRuns {
            out: spill_file(dir)?,
            runs: Vec::new(),
            end: 0,
            total: 0,
            positive: 0,
        })
    }

    /// Writes the folded lines of `profile` (some parts of the whole) as
    /// the next run.
    pub fn add(&mut self, profile: &Profile, options: &WriteOptions) -> Result<()> {
        let index = chosen_sample_type(profile, options)?;
        for s in profile.samples() {
            let v = s.values.get(index).copied().unwrap_or(0);
            self.positive += i128::from(v.max(0));
        }
        let start = self.end;
        let (out, end, total) = (&mut self.out, &mut self.end, &mut self.total);
        folded::each_line(profile, options, |stack, count| {
            let text = format!("{stack} {count}\n");
            out.write_all(text.as_bytes())
                .map_err(Error::unnamed_output)?;
            *end += text.len() as u64;
            *total += i128::from(count);
            Ok(())
        })?;
        if self.end > start {
            self.runs.push(start..self.end);
        }
        Ok(())
    }

    /// The counts of all lines added up.
    pub fn total(&self) -> i128 {
        self.total
    }

    /// The positive values of the chosen sample type added up.
    pub fn positive(&self) -> i128 {
        self.positive
    }

    /// Calls `emit` with every distinct stack of the runs, sorted as
    /// [`folded::each_line`] sorts, and its counts added up (capped at
    /// `i64::MAX`, as the whole profile's are).
    pub fn merge(&mut self, mut emit: impl FnMut(&str, i64) -> Result<()>) -> Result<()> {
        self.out.flush().map_err(Error::unnamed_output)?;
        let file = self.out.get_ref();
        let mut cursors: Vec<Cursor> = self.runs.iter().cloned().map(Cursor::new).collect();
        let mut heap = BinaryHeap::with_capacity(cursors.len());
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some((stack, count)) = c.next_line(file)? {
                heap.push(Reverse((stack, count, i)));
            }
        }
        while let Some(Reverse((stack, mut total, i))) = heap.pop() {
            if let Some((s, c)) = cursors[i].next_line(file)? {
                heap.push(Reverse((s, c, i)));
            }
            while let Some(Reverse((next, _, _))) = heap.peek() {
                if *next != stack {
                    break;
                }
                let Some(Reverse((_, count, j))) = heap.pop() else {
                    break;
                };
                total = total.saturating_add(count);
                if let Some((s, c)) = cursors[j].next_line(file)? {
                    heap.push(Reverse((s, c, j)));
                }
            }
            let stack = String::from_utf8(stack).map_err(|_| spill_corrupt())?;
            emit(&stack, total)?;
        }
        Ok(())
    }
}

/// An anonymous temporary file in `dir` (the output's folder, so that a
/// large spill lands on the disk the output goes to, not in a `/tmp` that
/// may be memory), else in the system's temporary folder: it has no name,
/// so nothing is left behind whatever happens to the run.
pub(crate) fn spill_file(dir: &Path) -> Result<BufWriter<File>> {
    let file = tempfile::tempfile_in(dir)
        .or_else(|_| tempfile::tempfile())
        .map_err(Error::unnamed_output)?;
    Ok(BufWriter::with_capacity(1 << 20, file))
}

/// Copies the bytes `range` of `file` to `out`.
pub(crate) fn copy_range(file: &File, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
    let mut buf = vec![0; READ_BYTES.min((range.end - range.start) as usize)];
    let mut at = range.start;
    while at < range.end {
        let n = buf.len().min((range.end - at) as usize);
        file.read_exact_at(&mut buf[..n], at)
            .map_err(Error::unnamed_output)?;
        out.write_all(&buf[..n]).map_err(Error::unnamed_output)?;
        at += n as u64;
    }
    Ok(())
}

/// The spill file read back is not what was written (another process
/// wrote into it: it has no name, so that takes a debugger).
fn spill_corrupt() -> Error {
    Error::unnamed_output(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "the temporary file of folded lines changed while it was read",
    ))
}

/// A run being read: its bytes not read yet, and a buffer of lines.
struct Cursor {
    next: u64,
    end: u64,
    buf: Vec<u8>,
    /// The bytes of `buf` not yet taken.
    at: Range<usize>,
}

impl Cursor {
    fn new(run: Range<u64>) -> Cursor {
        Cursor {
            next: run.start,
            end: run.end,
            buf: Vec::new(),
            at: 0..0,
        }
    }

    /// The next line's stack and count, or `None` at the run's end.
    fn next_line(&mut self, file: &File) -> Result<Option<(Vec<u8>, i64)>> {
        loop {
            let pending = &self.buf[self.at.clone()];
            if let Some(n) = pending.iter().position(|&b| b == b'\n') {
                let line = &pending[..n];
                self.at.start += n + 1;
                let space = line.iter().rposition(|&b| b == b' ');
                let space = space.ok_or_else(spill_corrupt)?;
                let count = std::str::from_utf8(&line[space + 1..])
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(spill_corrupt)?;
                return Ok(Some((line[..space].to_vec(), count)));
            }
            if self.next >= self.end {
                return match self.at.is_empty() {
                    true => Ok(None),
                    false => Err(spill_corrupt()),
                };
            }
            // Keep the partial line, then read more after it (a line longer
            // than the buffer, a deep stack of long names, grows it).
            self.buf.drain(..self.at.start);
            let kept = self.buf.len();
            let want = READ_BYTES.max(kept) as u64;
            let more = want.min(self.end - self.next) as usize;
            self.buf.resize(kept + more, 0);
            file.read_exact_at(&mut self.buf[kept..], self.next)
                .map_err(Error::unnamed_output)?;
            self.next += more as u64;
            self.at = 0..self.buf.len();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Folded and SVG outputs at every address, spilled in runs of any size,
    //! against the whole-profile writers on the same database.

    use std::collections::{BTreeMap, HashMap};
    use std::path::Path;

    use crate::profile::Granularity;
    use crate::read::{self, Input, ReadOptions};
    use crate::testkit::gen::dcpi::{build_db, DbSpec};
    use crate::testkit::tempdir;
    use crate::write::{write, OutputFormat, StreamedOutputs, WriteOptions};

    fn open(db: &Path) -> Vec<Input> {
        read::open_all(&[db.to_path_buf()], &ReadOptions::default()).unwrap()
    }

    /// The outputs of `db` in `formats` through [`StreamedOutputs`],
    /// spilling every `run_samples` samples.
    fn streamed(
        db: &Path,
        formats: &[OutputFormat],
        options: &WriteOptions,
        run_samples: usize,
    ) -> Vec<String> {
        let out = streamed_bytes(db, formats, options, run_samples);
        out.into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    /// [`streamed`], as bytes.
    fn streamed_bytes(
        db: &Path,
        formats: &[OutputFormat],
        options: &WriteOptions,
        run_samples: usize,
    ) -> Vec<Vec<u8>> {
        let dir = tempdir();
        let paths: Vec<_> = (0..formats.len())
            .map(|i| dir.path().join(format!("out{i}")))
            .collect();
        let outputs: Vec<_> = paths
            .iter()
            .map(|p| p.as_path())
            .zip(formats.iter().copied())
            .collect();
        let mut sink = StreamedOutputs::create(&outputs, options, None).unwrap();
        sink.set_run_samples(run_samples);
        read::read_parts(&open(db), &ReadOptions::default(), &mut sink).unwrap();
        sink.finish(|_| {}).unwrap();
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, formats.len(), "only the outputs are left");
        paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
    }

    /// Two databases: parts of several sample types whose addresses meet
    /// in several parts, and lean parts.
    fn databases(root: &Path) -> Vec<std::path::PathBuf> {
        // Two events, two epochs: parts of several sample types, and
        // addresses of one image in parts of both epochs.
        let mut varied = DbSpec::sparse(3, 4000, 300);
        varied.epochs = 2;
        varied.events = vec![("cycles".into(), 63488), ("imiss".into(), 4096)];
        // One file per image: lean parts, read straight into columns.
        let mut lean = DbSpec::sparse(4, 3000, 300);
        lean.events = varied.events.clone();
        lean.one_event_each = true;
        let mut dbs = Vec::new();
        for (i, spec) in [varied, lean].iter().enumerate() {
            let db = root.join(format!("db{i}"));
            build_db(&db, spec);
            dbs.push(db);
        }
        dbs
    }

    /// `format` of the whole profile, `sample_type` its default.
    fn whole_output(
        whole: &crate::profile::Profile,
        format: OutputFormat,
        options: &WriteOptions,
    ) -> String {
        let mut whole = whole.clone();
        crate::write::prefer_sample_type(&mut whole, options.sample_type.as_deref()).unwrap();
        let mut out = Vec::new();
        write(&whole, format, options, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn spilled_runs_write_the_whole_profiles_folded_lines_and_flamegraph() {
        let dir = tempdir();
        for db in databases(dir.path()) {
            let whole = read::read_inputs(&open(&db), &ReadOptions::default()).unwrap();
            for (min_width, sample_type) in [(None, None), (Some(0.5), Some("imiss"))] {
                let mut options = WriteOptions {
                    granularity: Some(Granularity::Addresses),
                    sample_type: sample_type.map(str::to_owned),
                    ..WriteOptions::default()
                };
                options.flamegraph.min_width = min_width;
                let folded = whole_output(&whole, OutputFormat::Folded, &options);
                let svg = whole_output(&whole, OutputFormat::Svg, &options);
                assert!(folded.lines().count() > 1000, "an address a line");
                for run_samples in [1, 100, 1000, usize::MAX] {
                    let formats = [OutputFormat::Folded, OutputFormat::Svg];
                    let out = streamed(&db, &formats, &options, run_samples);
                    assert!(
                        out[0] == folded,
                        "folded, runs of {run_samples}, {min_width:?}"
                    );
                    assert!(out[1] == svg, "svg, runs of {run_samples}, {min_width:?}");
                }
            }
        }
    }

    /// What a callgrind tool reads of a file: the header's fields, self
    /// costs by function and instruction, call costs and counts by caller
    /// and callee, and the totals.
    #[derive(Debug, Default, PartialEq)]
    struct Callgrind {
        header: Vec<String>,
        own: BTreeMap<(String, String), Vec<u64>>,
        calls: BTreeMap<(String, String), (u64, Vec<u64>)>,
        totals: String,
    }

    fn read_callgrind(text: &str) -> Callgrind {
        let mut cg = Callgrind::default();
        let mut names: HashMap<(&str, String), String> = HashMap::new();
        let mut name = |kind: &'static str, field: &str| -> String {
            match field.strip_prefix('(').and_then(|f| f.split_once(')')) {
                Some((id, "")) => names[&(kind, id.to_owned())].clone(),
                Some((id, rest)) => {
                    let rest = rest.trim_start().to_owned();
                    names.insert((kind, id.to_owned()), rest.clone());
                    rest
                }
                None => field.to_owned(),
            }
        };
        let (mut positions, mut function, mut callee) = (1, String::new(), String::new());
        let mut call: Option<u64> = None;
        for line in text.lines() {
            let field = |key: &str| line.strip_prefix(key);
            if let Some(p) = field("positions: ") {
                positions = p.split(' ').count();
            } else if let Some(f) = field("fn=") {
                function = name("fn", f);
            } else if let Some(f) = field("cfn=") {
                callee = name("fn", f);
            } else if let Some(f) = field("ob=").or(field("cob=")) {
                name("ob", f);
            } else if let Some(f) = field("fl=").or(field("cfl=")) {
                name("fl", f);
            } else if let Some(c) = field("calls=") {
                call = Some(c.split(' ').next().unwrap().parse().unwrap());
            } else if let Some(t) = field("totals: ") {
                cg.totals = t.to_owned();
            } else if line.starts_with(|c: char| c.is_ascii_digit()) {
                let words: Vec<&str> = line.split(' ').collect();
                let costs = words[positions..].iter().map(|c| c.parse().unwrap());
                let costs: Vec<u64> = costs.collect();
                let add = |to: &mut Vec<u64>| {
                    to.resize(to.len().max(costs.len()), 0);
                    to.iter_mut().zip(&costs).for_each(|(t, c)| *t += c);
                };
                match call.take() {
                    Some(count) => {
                        let entry = cg.calls.entry((function.clone(), callee.clone()));
                        let entry = entry.or_default();
                        entry.0 += count;
                        add(&mut entry.1);
                    }
                    None => add(cg
                        .own
                        .entry((function.clone(), words[0].to_owned()))
                        .or_default()),
                }
            } else if line.starts_with(|c: char| c.is_ascii_alphabetic())
                && !line.starts_with("positions")
            {
                cg.header.push(line.to_owned());
            }
        }
        cg
    }

    #[test]
    fn spilled_callgrind_bodies_hold_the_whole_profiles_costs() {
        let dir = tempdir();
        for db in databases(dir.path()) {
            let whole = read::read_inputs(&open(&db), &ReadOptions::default()).unwrap();
            for sample_type in [None, Some("imiss")] {
                let options = WriteOptions {
                    granularity: Some(Granularity::Addresses),
                    sample_type: sample_type.map(str::to_owned),
                    ..WriteOptions::default()
                };
                let text = whole_output(&whole, OutputFormat::Callgrind, &options);
                let expected = read_callgrind(&text);
                assert!(expected.own.len() > 1000, "an address a cost line");
                let runs = [usize::MAX, 1000, 100, 1];
                for run_samples in runs {
                    let formats = [OutputFormat::Callgrind];
                    let out = streamed(&db, &formats, &options, run_samples);
                    let spilled = read_callgrind(&out[0]);
                    assert!(spilled == expected, "runs of {run_samples}");
                    let held = run_samples == usize::MAX;
                    assert_eq!(out[0] == text, held, "runs of {run_samples}");
                    assert_eq!(out[0].contains("positions: instr line"), !held);
                }
            }
        }
    }

    /// What speedscope shows of a document: everything but the frame
    /// table and the order of samples, each profile's samples as weights
    /// by stack of frame names.
    fn speedscope_view(text: &str) -> serde_json::Value {
        let mut doc: serde_json::Value = serde_json::from_str(text).unwrap();
        let frames = doc["shared"]["frames"].as_array().unwrap().clone();
        let names = |stack: &serde_json::Value| -> String {
            let ids = stack.as_array().unwrap().iter();
            let names = ids.map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            });
            names.collect::<Vec<_>>().join(";")
        };
        for profile in doc["profiles"].as_array_mut().unwrap() {
            let mut by_stack: BTreeMap<String, i64> = BTreeMap::new();
            let samples = profile["samples"].as_array().unwrap();
            let weights = profile["weights"].as_array().unwrap();
            assert_eq!(samples.len(), weights.len());
            for (stack, weight) in samples.iter().zip(weights) {
                *by_stack.entry(names(stack)).or_default() += weight.as_i64().unwrap();
            }
            profile["samples"] = serde_json::json!(by_stack);
            profile["weights"] = serde_json::Value::Null;
        }
        let frames: std::collections::BTreeSet<String> =
            frames.iter().map(|f| f.to_string()).collect();
        doc["shared"]["frames"] = serde_json::json!(frames);
        doc
    }

    #[test]
    fn spilled_speedscope_samples_show_the_whole_profiles_stacks() {
        let dir = tempdir();
        for db in databases(dir.path()) {
            let whole = read::read_inputs(&open(&db), &ReadOptions::default()).unwrap();
            for sample_type in [None, Some("imiss")] {
                let options = WriteOptions {
                    granularity: Some(Granularity::Addresses),
                    sample_type: sample_type.map(str::to_owned),
                    ..WriteOptions::default()
                };
                let text = whole_output(&whole, OutputFormat::Speedscope, &options);
                let expected = speedscope_view(&text);
                let stacks = expected["profiles"][0]["samples"]
                    .as_object()
                    .unwrap()
                    .len();
                assert!(stacks > 1000, "an address a stack");
                for run_samples in [usize::MAX, 1000, 100, 1] {
                    let formats = [OutputFormat::Speedscope];
                    let out = streamed(&db, &formats, &options, run_samples);
                    let spilled = speedscope_view(&out[0]);
                    assert!(spilled == expected, "runs of {run_samples}");
                    if run_samples == usize::MAX {
                        assert!(out[0] == text, "held whole: the same bytes");
                    }
                }
            }
        }
    }

    /// What the Firefox Profiler shows of a document: each thread's names
    /// and samples as weights by stack (each frame by its function's name,
    /// library and file, its category and line), its allocations likewise;
    /// the categories, libraries and the selected thread. Every table's
    /// columns are checked to have its length.
    fn firefox_view(text: &str) -> serde_json::Value {
        use serde_json::{json, Value};
        let doc: Value = serde_json::from_str(text).unwrap();
        let categories = doc["meta"]["categories"].as_array().unwrap();
        let libs = doc["libs"].as_array().unwrap();
        let threads: Vec<Value> = (doc["threads"].as_array().unwrap().iter())
            .map(|t| firefox_thread_view(t, categories, libs))
            .collect();
        let selected: Vec<Value> = doc["meta"]["initialSelectedThreads"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|i| threads[i.as_u64().unwrap() as usize]["name"].clone())
            .collect();
        let mut categories: Vec<String> = categories.iter().map(|c| c.to_string()).collect();
        categories.sort();
        json!({"threads": threads, "categories": categories, "libs": libs, "selected": selected})
    }

    /// One thread of [`firefox_view`], its tables' columns checked to have
    /// their lengths.
    fn firefox_thread_view(
        t: &serde_json::Value,
        categories: &[serde_json::Value],
        libs: &[serde_json::Value],
    ) -> serde_json::Value {
        use serde_json::{json, Value};
        for table in [
            "frameTable",
            "funcTable",
            "stackTable",
            "samples",
            "resourceTable",
        ] {
            let len = t[table]["length"].as_u64().unwrap() as usize;
            for (key, column) in t[table].as_object().unwrap() {
                if let Some(column) = column.as_array() {
                    assert_eq!(column.len(), len, "{table}.{key}");
                }
            }
        }
        let stacks = firefox_stacks(t, categories, libs);
        let stack = |s: &Value| {
            s.as_u64()
                .map_or(String::new(), |s| stacks[s as usize].clone())
        };
        let by_stack = |table: &Value| {
            let mut by_stack: BTreeMap<String, i64> = BTreeMap::new();
            let stacks = table["stack"].as_array().unwrap();
            let weights = table["weight"].as_array().unwrap();
            for (s, w) in stacks.iter().zip(weights) {
                *by_stack.entry(stack(s)).or_default() += w.as_i64().unwrap();
            }
            json!(by_stack)
        };
        let allocations = t.get("nativeAllocations").map(by_stack);
        json!({
            "name": t["name"], "pid": t["pid"], "tid": t["tid"],
            "processName": t["processName"],
            "samples": by_stack(&t["samples"]),
            "weightType": t["samples"]["weightType"],
            "allocations": allocations,
        })
    }

    /// Each stack of thread `t` as text, its frames root first (each by its
    /// function's name, library and file, its category and line); a prefix
    /// comes before its stacks, as the profiler requires.
    fn firefox_stacks(
        t: &serde_json::Value,
        categories: &[serde_json::Value],
        libs: &[serde_json::Value],
    ) -> Vec<String> {
        use serde_json::Value;
        let strings = t["stringArray"].as_array().unwrap();
        let string = |v: &Value| match v.as_u64() {
            Some(i) => strings[i as usize].as_str().unwrap(),
            None => "-",
        };
        let frame = |f: usize| {
            let func = t["frameTable"]["func"][f].as_u64().unwrap() as usize;
            let funcs = &t["funcTable"];
            let resource = funcs["resource"][func].as_i64().unwrap();
            let lib = match resource {
                r if r >= 0 => {
                    let lib = t["resourceTable"]["lib"][r as usize].as_u64().unwrap();
                    libs[lib as usize]["path"].as_str().unwrap()
                }
                _ => "-",
            };
            let category = t["frameTable"]["category"][f].as_u64().unwrap() as usize;
            format!(
                "{} [{lib}] {}:{} {} {}",
                string(&funcs["name"][func]),
                string(&funcs["fileName"][func]),
                funcs["lineNumber"][func],
                categories[category]["name"],
                t["frameTable"]["line"][f],
            )
        };
        let frames: Vec<String> = (0..t["frameTable"]["length"].as_u64().unwrap() as usize)
            .map(frame)
            .collect();
        let mut stacks: Vec<String> = Vec::new();
        let table = &t["stackTable"];
        for s in 0..table["length"].as_u64().unwrap() as usize {
            let name = &frames[table["frame"][s].as_u64().unwrap() as usize];
            let text = match table["prefix"][s].as_u64() {
                Some(p) => {
                    assert!((p as usize) < s, "stack {s}'s prefix {p} comes first");
                    format!("{};{name}", stacks[p as usize])
                }
                None => name.clone(),
            };
            stacks.push(text);
        }
        stacks
    }

    #[test]
    fn spilled_firefox_tables_show_the_whole_profiles_stacks() {
        let dir = tempdir();
        for db in databases(dir.path()) {
            let whole = read::read_inputs(&open(&db), &ReadOptions::default()).unwrap();
            for sample_type in [None, Some("imiss")] {
                let options = WriteOptions {
                    granularity: Some(Granularity::Addresses),
                    sample_type: sample_type.map(str::to_owned),
                    ..WriteOptions::default()
                };
                let text = whole_output(&whole, OutputFormat::FirefoxRaw, &options);
                let expected = firefox_view(&text);
                let threads = expected["threads"].as_array().unwrap();
                assert!(threads.len() >= 2, "a thread per sample type");
                let stacks = threads[0]["samples"].as_object().unwrap().len();
                assert!(stacks > 1000, "an address a stack");
                for run_samples in [usize::MAX, 1000, 100, 7] {
                    let formats = [OutputFormat::FirefoxRaw, OutputFormat::Firefox];
                    let out = streamed_bytes(&db, &formats, &options, run_samples);
                    let raw = String::from_utf8(out[0].clone()).unwrap();
                    assert!(firefox_view(&raw) == expected, "runs of {run_samples}");
                    let mut gz = flate2::read::GzDecoder::new(&out[1][..]);
                    let mut unzipped = String::new();
                    std::io::Read::read_to_string(&mut gz, &mut unzipped).unwrap();
                    assert!(unzipped == raw, "the gzip output is the same document");
                    if run_samples == usize::MAX {
                        assert!(raw == text, "held whole: the same bytes");
                    }
                }
            }
        }
    }
}
