//! Archive migration: convert a whole tree of legacy profiles in one run.
//!
//! The tree is walked once (sorted, so the plan is the same every time) into
//! units: a file, or a directory that is one profile (a DCPI database with
//! its epochs, an APS capture directory). Units are converted in parallel on
//! a work-stealing pool; each writes its outputs through a temporary file and
//! a rename, at the unit's relative path under the output directory with the
//! output format's extension. One bad unit never stops the run. What each
//! unit's outputs were made from is kept in a stamp beside them
//! ([`MadeFrom`], `made_from.rs`), so that a re-run redoes exactly what
//! changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::convert::{convert_inputs, Options, Output};
use crate::error::{Error, Result};
use crate::read::{self, Format, ReadOptions};
use crate::write::{self, OutputFormat, WriteOptions};

mod journal;
mod made_from;
mod merge;
pub use journal::Journal;
use made_from::{Binaries, Stamp};
pub use made_from::{BinaryFingerprint, Fingerprint, MadeFrom};

/// What an archive run is asked to do.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// The folder the converted files go to.
    pub out_dir: PathBuf,
    /// The output formats, each written for every unit.
    pub formats: Vec<OutputFormat>,
    /// Options for every reader; `binary` applies to every input. Each unit
    /// reads with `read.threads` threads inside the run's pool of `jobs`
    /// (the command line keeps it at 1: the units are the parallel work).
    pub read: ReadOptions,
    /// Input glob → binary, first match wins (`--binary-map`).
    pub binary_map: Vec<(Glob, PathBuf)>,
    /// What the writers are told (the title is set per unit).
    pub write: WriteOptions,
    /// Parallel conversions (0 = all cores), no more than there are units.
    pub jobs: usize,
    /// Overwrite existing outputs.
    pub force: bool,
    /// `--resume`: what every run does (redo the outputs missing or made
    /// from other inputs or options, see [`MadeFrom`]); kept for scripts.
    pub resume: bool,
    /// Relative paths (as in the report) whose failure is expected
    /// (`--known-failures`): their records say `known_failure`, and the
    /// report counts the others as `new_failures`.
    pub known_failures: std::collections::HashSet<String>,
    /// Convert only shard `K` of `N` ([`Shard`]); `None`: every unit.
    pub shard: Option<Shard>,
    /// Where the run reports input bytes as units read them, for a progress
    /// display that polls it: it ends at the sum of the units'
    /// [`Unit::bytes`] (a unit skipped, unchanged or failed early counts
    /// whole when it finishes). `None`: nobody watches.
    pub progress: Option<std::sync::Arc<read::Progress>>,
    /// Where the records go as units finish, kept on disk rather than in
    /// the returned report (whose `inputs` then hold only the failed and
    /// skipped records, see [`Journal::head`]); `None`: every record is in
    /// the returned report.
    pub journal: Option<std::sync::Arc<Journal>>,
}

impl ArchiveOptions {
    /// A run writing `formats` into `out_dir`, one unit at a time, with the
    /// default reading and writing options and nothing else asked for.
    pub fn new(out_dir: PathBuf, formats: Vec<OutputFormat>) -> ArchiveOptions {
        ArchiveOptions {
            out_dir,
            formats,
            read: ReadOptions::default(),
            binary_map: Vec::new(),
            write: WriteOptions::default(),
            jobs: 1,
            force: false,
            resume: false,
            known_failures: Default::default(),
            shard: None,
            progress: None,
            journal: None,
        }
    }

    /// The files the run reads besides the archive, which no output may be
    /// ([`write::refuse_input_as_output`]): `--binary`, the binaries of the
    /// binary map, APS `pid_info`, and the image folders (all below them).
    pub fn files_read(&self) -> Vec<&Path> {
        let mut read: Vec<&Path> = crate::convert::read_besides(&self.read).collect();
        read.extend(self.binary_map.iter().map(|(_, b)| b.as_path()));
        read
    }
}

/// One input of the archive: a file, or a directory that is one profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The unit's path (a file, or a folder that is one profile).
    pub path: PathBuf,
    /// Path relative to the archive root, with `/` separators (lossy for
    /// names that are not UTF-8: for display and globs only).
    pub rel: String,
    /// The exact relative path when `rel` is lossy (a name that is not
    /// UTF-8), escaped as [`Record::path_bytes`] says; `None` when `rel` is
    /// exact.
    pub rel_bytes: Option<String>,
    /// The outputs' path relative to the output directory, less the format's
    /// extension: the input's own relative path (not lossy), less a `.gz`
    /// unless another input already has that name.
    pub out_stem: PathBuf,
    /// True for a folder unit (a DCPI database, an APS capture).
    pub is_dir: bool,
    /// Input bytes, for the progress bar.
    pub bytes: u64,
    /// Why the entry is listed but cannot be converted (a FIFO, a folder
    /// too deep or unreadable, a symbolic link), with the status to report.
    pub problem: Option<(Status, String)>,
}

impl Unit {
    fn new(root: &Path, path: PathBuf, is_dir: bool, bytes: u64) -> Unit {
        let rel_path = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        Unit {
            rel: relative(root, &path),
            rel_bytes: escaped_if_not_utf8(&rel_path),
            out_stem: rel_path,
            path,
            is_dir,
            bytes,
            problem: None,
        }
    }

    fn with_problem(mut self, status: Status, why: impl Into<String>) -> Unit {
        self.problem = Some((status, why.into()));
        self
    }
}

/// What happened to one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Outputs written.
    Converted,
    /// Every output exists, made from what it would be made from now
    /// (its stamp's [`MadeFrom`]): kept.
    Unchanged,
    /// Not a profile of a known format, or not followed (symbolic link).
    Skipped,
    /// The input is bad: the error says why.
    Failed,
    /// An ELF file (an executable or a library): no profile, but what
    /// profiles are symbolized with, so not reported as skipped.
    Binary,
}

/// One record of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The unit's path relative to the archive (for a name that is not
    /// UTF-8, lossy: each bad byte a U+FFFD).
    pub path: String,
    /// The exact relative path when `path` is lossy: its UTF-8 runs as
    /// they are (a backslash doubled), each other byte as `\xHH`
    /// (`run\xff.gmon`). `None` (JSON `null`) when `path` is exact. A
    /// record is named by the two together.
    #[serde(default)]
    pub path_bytes: Option<String>,
    /// The detected format's name, when known.
    pub format: Option<String>,
    /// What became of the unit.
    pub status: Status,
    /// The outputs' paths relative to the output folder.
    pub outputs: Vec<String>,
    /// Input bytes.
    pub bytes: u64,
    /// Wall-clock seconds the conversion took.
    pub seconds: f64,
    /// The binary used to symbolize, if any.
    pub binary: Option<String>,
    /// Why a converted profile has no function names (a gmon.out with no
    /// binary found for it); `None` when it is symbolized or needs no binary.
    #[serde(default)]
    pub unsymbolized: Option<String>,
    /// A failure listed in `--known-failures`.
    #[serde(default)]
    pub known_failure: bool,
    /// Why the unit failed or was skipped.
    pub error: Option<String>,
    /// What the reader warned about ([`crate::Profile::warn`]).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What the outputs on disk are made from (for `unchanged`, what an
    /// earlier run made them from, the same); `None` when the unit has no
    /// outputs (skipped, failed before its input was read).
    #[serde(default)]
    pub made_from: Option<MadeFrom>,
}

/// The report of a run: a summary and one record per unit, in plan order.
/// Every report and every record has every field (`null`, `false` or `[]`
/// when there is nothing to say), whether the run finished, was stopped by
/// a signal or is a merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The archive folder, as given.
    pub archive: String,
    /// The output folder, as given.
    pub out_dir: String,
    /// The shard this run converted (`K/N`); `None` for a whole run or a
    /// merged report.
    #[serde(default)]
    pub shard: Option<String>,
    /// The output formats, by their extensions in name order.
    #[serde(default)]
    pub formats: Vec<String>,
    /// The options that change outputs, as text (the readers' and writers'
    /// options and the profconv version): reports of runs with other
    /// options are not merged.
    #[serde(default)]
    pub options: String,
    /// For a report merged with `--partial`, the shards (`K/N`) it lacks;
    /// `[]` otherwise.
    #[serde(default)]
    pub missing_shards: Vec<String>,
    /// Units converted in this run.
    pub converted: usize,
    /// Units whose outputs were already up to date.
    pub unchanged: usize,
    /// Units passed over (not a profile, links, special files).
    pub skipped: usize,
    /// Units that failed.
    pub failed: usize,
    /// Failures not listed in `--known-failures` (all of them without it).
    pub new_failures: usize,
    /// Units converted without the binary they need (see [`Record::unsymbolized`]).
    pub unsymbolized: usize,
    /// ELF files met in the archive (executables, libraries): not profiles,
    /// not skipped.
    pub binaries: usize,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// One record per unit, in walk order.
    pub inputs: Vec<Record>,
}

impl Report {
    /// A report of `inputs` with the counts made from them, the records in
    /// plan order (by path, component by component; names that are not
    /// UTF-8 by their exact form next): for a run stopped early, what it
    /// finished.
    pub fn of(archive: String, out_dir: String, seconds: f64, mut inputs: Vec<Record>) -> Report {
        inputs.sort_by(|a, b| {
            (Path::new(&a.path), &a.path_bytes).cmp(&(Path::new(&b.path), &b.path_bytes))
        });
        let count = |s: Status| inputs.iter().filter(|r| r.status == s).count();
        Report {
            archive,
            out_dir,
            shard: None,
            formats: Vec::new(),
            options: String::new(),
            missing_shards: Vec::new(),
            converted: count(Status::Converted),
            unchanged: count(Status::Unchanged),
            skipped: count(Status::Skipped),
            failed: count(Status::Failed),
            new_failures: inputs
                .iter()
                .filter(|r| r.status == Status::Failed && !r.known_failure)
                .count(),
            unsymbolized: inputs.iter().filter(|r| r.unsymbolized.is_some()).count(),
            binaries: count(Status::Binary),
            seconds,
            inputs,
        }
    }

    /// The report of a run of `options` over `archive` that took `seconds`:
    /// [`Report::of`] `inputs`, with the shard. A run stopped early reports
    /// what it finished through this too, so that its report has what a
    /// finished one has.
    pub fn of_run(
        archive: &Path,
        options: &ArchiveOptions,
        seconds: f64,
        inputs: Vec<Record>,
    ) -> Report {
        let mut report = Report::of(
            archive.display().to_string(),
            options.out_dir.display().to_string(),
            seconds,
            inputs,
        );
        report.shard = options.shard.map(|s| s.to_string());
        report.formats = options
            .formats
            .iter()
            .map(|f| f.extension().to_owned())
            .collect();
        report.formats.sort();
        report.options = made_from::options_text(&options.read, &options.write);
        report
    }

    /// Reads a report that [`Report::save`] wrote (at most 1 GiB).
    pub fn load(path: &Path) -> Result<Report> {
        let text = crate::file::read_small(path, REPORT_LIMIT, "a profconv convert report")?;
        serde_json::from_slice(&text)
            .map_err(|e| Error::format(path, 0, format!("not a profconv convert report: {e}")))
    }

    /// Joins the reports of the shards of one run, each with the file it
    /// was read from, into the report one run would have made; see
    /// `merge.rs` for what is refused and what `partial` allows: reports
    /// of different runs, a shard twice, and (unless `partial`) a missing one.
    pub fn merge(reports: &[(PathBuf, Report)], partial: bool) -> Result<Report> {
        merge::merge(reports, partial)
    }

    /// Writes the report as pretty JSON, and a newline, to `path`: through
    /// a temporary file renamed into place, so that a killed run leaves the
    /// old report or the new one.
    pub fn save(&self, path: &Path) -> Result<()> {
        write::write_atomically(path, |out| {
            serde_json::to_writer_pretty(&mut *out, self).map_err(|e| Error::io(path, e.into()))?;
            out.write_all(b"\n").map_err(|e| Error::io(path, e))
        })
    }
}

/// How deep the walk goes.
const MAX_DEPTH: usize = 64;

/// Walks `root` into units, sorted by relative path. The output directory,
/// when it lies inside the archive, is left out. Every entry is listed: what
/// cannot be converted (unreadable folders, folders deeper than
/// `MAX_DEPTH` (64), FIFOs and devices, symbolic links) is a unit with a
/// problem, so the report accounts for the whole tree.
pub(crate) fn plan(root: &Path, exclude: Option<&Path>) -> Result<Vec<Unit>> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::Usage(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    let exclude = exclude.and_then(|p| p.canonicalize().ok());
    let mut units = Vec::new();
    walk(root, root, 0, exclude.as_deref(), &mut units);
    units.sort_by(|a, b| a.path.cmp(&b.path));
    keep_gz_where_names_collide(&mut units);
    Ok(units)
}

/// `path` written losslessly when it is not UTF-8: its UTF-8 runs as they
/// are (a backslash doubled), every other byte as `\xHH`. `None` for a UTF-8
/// path, which its plain text already names exactly.
fn escaped_if_not_utf8(path: &Path) -> Option<String> {
    use std::fmt::Write as _;
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    #[cfg(not(unix))]
    let bytes = path.as_os_str().as_encoded_bytes();
    if std::str::from_utf8(bytes).is_ok() {
        return None;
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Some(out)
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Drops a `.gz` from the output names of compressed inputs, except where
/// the shorter name is another input's (`gmon.out` beside `gmon.out.gz`):
/// every input gets outputs of its own.
fn keep_gz_where_names_collide(units: &mut [Unit]) {
    let names: std::collections::HashSet<PathBuf> =
        units.iter().map(|u| u.out_stem.clone()).collect();
    for unit in units.iter_mut() {
        if let Some(short) = strip_gz(&unit.out_stem) {
            if !names.contains(&short) {
                unit.out_stem = short;
            }
        }
    }
}

/// `name.gz` → `name`, for any file name (not only UTF-8 ones).
fn strip_gz(path: &Path) -> Option<PathBuf> {
    #[cfg(unix)]
    let short = {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes().strip_suffix(b".gz")?;
        PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
    };
    #[cfg(not(unix))]
    let short = PathBuf::from(path.to_str()?.strip_suffix(".gz")?);
    (short.file_name().is_some()).then_some(short)
}

fn walk(root: &Path, dir: &Path, depth: usize, exclude: Option<&Path>, out: &mut Vec<Unit>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let unit = Unit::new(root, dir.to_path_buf(), true, 0);
            out.push(unit.with_problem(Status::Failed, format!("cannot read the folder: {e}")));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                let unit = Unit::new(root, path, false, 0);
                out.push(unit.with_problem(Status::Failed, e.to_string()));
                continue;
            }
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            // Not followed: links can loop or leave the archive.
            let unit = Unit::new(root, path, false, 0);
            out.push(unit.with_problem(Status::Skipped, "symbolic link, not followed"));
        } else if kind.is_dir() {
            if exclude.is_some_and(|x| path.canonicalize().is_ok_and(|p| p == x)) {
                continue;
            }
            walk_dir(root, path, depth, exclude, out);
        } else if kind.is_file() {
            out.push(Unit::new(root, path, false, meta.len()));
        } else {
            // Opening a FIFO would wait for a writer; devices are no profiles.
            let unit = Unit::new(root, path, false, 0);
            out.push(unit.with_problem(
                Status::Skipped,
                "not a regular file (FIFO, socket or device)",
            ));
        }
    }
}

/// A folder: one unit when it is a DCPI database; an APS capture folder is
/// one unit for its sample files, and what else it holds is walked on.
fn walk_dir(root: &Path, path: PathBuf, depth: usize, exclude: Option<&Path>, out: &mut Vec<Unit>) {
    if read::is_whole_profile_dir(&path) {
        let bytes = dir_bytes(&path, 0);
        out.push(Unit::new(root, path, true, bytes));
    } else if depth >= MAX_DEPTH {
        let unit = Unit::new(root, path, true, 0);
        out.push(unit.with_problem(
            Status::Skipped,
            format!("folder deeper than {MAX_DEPTH} levels, not walked"),
        ));
    } else if let Some(is_member) = read::capture_dir(&path) {
        let before = out.len();
        walk(root, &path, depth + 1, exclude, out);
        // The sample files are read together, as the capture.
        let mut bytes = 0;
        let mut i = before;
        while i < out.len() {
            if out[i].problem.is_none() && is_member(&out[i].path) {
                bytes += out.remove(i).bytes;
            } else {
                i += 1;
            }
        }
        out.push(Unit::new(root, path, true, bytes));
    } else {
        walk(root, &path, depth + 1, exclude, out);
    }
}

fn dir_bytes(dir: &Path, depth: usize) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => dir_bytes(&e.path(), depth + 1),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// The output path of a unit in a format: its relative path (less a `.gz`,
/// see [`Unit::out_stem`]) plus the format's extension, under the output
/// directory.
pub(crate) fn output_path(out_dir: &Path, unit: &Unit, format: OutputFormat) -> PathBuf {
    let mut name = unit.out_stem.clone().into_os_string();
    name.push(".");
    name.push(format.extension());
    out_dir.join(name)
}

/// A `--binary-map` glob: `*` and `?` stay within one path component, `**`
/// crosses components. Matching is linear in the path (globset compiles to
/// a regular expression automaton), whatever the pattern.
#[derive(Debug, Clone)]
pub struct Glob {
    /// The pattern as written.
    pub pattern: String,
    matcher: globset::GlobMatcher,
}

impl Glob {
    /// Compiles a `*`, `?`, `**` pattern; the error says what is wrong with it.
    pub fn new(pattern: &str) -> std::result::Result<Glob, String> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Glob {
            pattern: pattern.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    /// Matches a `/`-separated relative path.
    pub fn is_match(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }
}

/// Matches a glob against a `/`-separated relative path (see [`Glob`]); an
/// invalid pattern matches nothing.
#[cfg(test)]
fn glob_match(pattern: &str, path: &str) -> bool {
    Glob::new(pattern).is_ok_and(|g| g.is_match(path))
}

/// The most bytes read of a `--binary-map` file or a `--known-failures`
/// list (a list longer than that is not one).
const AUXILIARY_LIMIT: crate::file::Limit = crate::file::Limit {
    bytes: crate::file::DEFAULT_LIMIT,
    why: "the most profconv reads of a list, 256 MiB",
};

/// The most bytes read of a report: about three million records.
const REPORT_LIMIT: crate::file::Limit = crate::file::Limit {
    bytes: 1 << 30,
    why: "the most profconv reads of a report, 1 GiB",
};

/// Reads a `--known-failures` list: relative paths, one a line; blank lines
/// and `#` comments ignored. At most 256 MiB are read.
pub fn read_known_failures(path: &Path) -> Result<std::collections::HashSet<String>> {
    let text = crate::file::read_small_text(path, AUXILIARY_LIMIT, "a --known-failures list")?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// Reads a `--binary-map` file: `GLOB PATH` per line (blank lines and `#`
/// comments ignored); relative binary paths are relative to the map file.
/// At most 256 MiB are read.
pub fn read_binary_map(path: &Path) -> Result<Vec<(Glob, PathBuf)>> {
    let text = crate::file::read_small_text(path, AUXILIARY_LIMIT, "a --binary-map file")?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    let mut offset = 0u64;
    for line in text.lines() {
        let here = offset;
        offset += line.len() as u64 + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((glob, binary)) = line.split_once(char::is_whitespace) else {
            return Err(Error::format(
                path,
                here,
                "expected `GLOB BINARY` on the line",
            ));
        };
        let glob = Glob::new(glob)
            .map_err(|e| Error::format(path, here, format!("bad glob {glob:?}: {e}")))?;
        out.push((glob, base.join(binary.trim())));
    }
    Ok(out)
}

/// True for a regular file with an ELF header and an execute bit.
fn is_elf_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return false;
        }
    }
    let mut magic = [0u8; 4];
    meta.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok()
        && magic == *b"\x7fELF"
}

/// The executable a gmon.out lies next to: `a.out`, else the one ELF
/// executable in its directory. Looked up once per directory: an archive
/// directory holds many gmon files and one program.
fn neighbour_binary(input: &Path, cache: &Neighbours) -> Option<PathBuf> {
    let dir = input.parent()?;
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(dir.to_path_buf())
        .or_insert_with(|| find_neighbour_binary(dir))
        .clone()
}

/// Directory → the executable found in it.
type Neighbours = std::sync::Mutex<std::collections::HashMap<PathBuf, Option<PathBuf>>>;

/// What the units of one run share: the executables found and
/// fingerprinted, and the hash of the options that change outputs.
#[derive(Default)]
struct Shared {
    neighbours: Neighbours,
    binaries: Binaries,
    options_hash: String,
}

fn find_neighbour_binary(dir: &Path) -> Option<PathBuf> {
    let a_out = dir.join("a.out");
    if is_elf_executable(&a_out) {
        return Some(a_out);
    }
    let mut found = None;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if is_elf_executable(&path) {
            if found.is_some() {
                return None; // several: ambiguous, say nothing
            }
            found = Some(path);
        }
    }
    found
}

/// The binary for a unit: `--binary`, else the first `--binary-map` glob
/// that matches, else (gprof) an executable next to the input.
fn binary_for(
    unit: &Unit,
    format: Format,
    options: &ArchiveOptions,
    cache: &Neighbours,
) -> Option<PathBuf> {
    if let Some(b) = &options.read.binary {
        return Some(b.clone());
    }
    if let Some((_, b)) = options
        .binary_map
        .iter()
        .find(|(g, _)| g.is_match(&unit.rel))
    {
        return Some(b.clone());
    }
    (format == Format::Gprof && !unit.is_dir)
        .then(|| neighbour_binary(&unit.path, cache))
        .flatten()
}

/// Converts one unit; never fails as a whole: failures are records.
fn convert_unit_with(unit: &Unit, options: &ArchiveOptions, shared: &Shared) -> Record {
    let progress = std::sync::Arc::new(match &options.progress {
        Some(whole) => read::Progress::part_of(whole.clone(), unit.bytes),
        None => read::Progress::default(),
    });
    let record = convert_unit_counted(unit, options, shared, &progress);
    progress.finish_part();
    record
}

/// [`convert_unit_with`], reading through `progress`.
fn convert_unit_counted(
    unit: &Unit,
    options: &ArchiveOptions,
    shared: &Shared,
    progress: &std::sync::Arc<read::Progress>,
) -> Record {
    let started = Instant::now();
    let mut record = Record {
        path: unit.rel.clone(),
        path_bytes: unit.rel_bytes.clone(),
        format: None,
        status: Status::Failed,
        outputs: Vec::new(),
        bytes: unit.bytes,
        seconds: 0.0,
        binary: None,
        unsymbolized: None,
        known_failure: false,
        error: None,
        warnings: Vec::new(),
        made_from: None,
    };
    if let Some((status, why)) = &unit.problem {
        record.status = *status;
        record.error = Some(why.clone());
        return record;
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        convert(unit, options, shared, progress, &mut record)
    }));
    match result {
        Ok(Ok(status)) => record.status = status,
        Ok(Err(e)) => {
            record.status = Status::Failed;
            record.error = Some(e.to_string());
        }
        // A bug in profconv, not in the input: the run goes on and the
        // report names the file (and the panic message went to stderr).
        Err(_) => {
            record.status = Status::Failed;
            record.error = Some(
                "internal error (a panic) while converting this input; please report it".into(),
            );
        }
    }
    if !matches!(record.status, Status::Converted | Status::Unchanged) {
        record.unsymbolized = None;
    }
    record.seconds = started.elapsed().as_secs_f64();
    record
}

/// Converts one unit, filling in `record` on the way; the status it ends with.
fn convert(
    unit: &Unit,
    options: &ArchiveOptions,
    shared: &Shared,
    progress: &std::sync::Arc<read::Progress>,
    record: &mut Record,
) -> Result<Status> {
    if std::fs::symlink_metadata(&unit.path).is_ok_and(|m| m.file_type().is_symlink()) {
        record.error = Some("symbolic link, not followed".into());
        return Ok(Status::Skipped);
    }
    let input = read::Input::open(&unit.path, options.read.max_input_size)?;
    let format = match options.read.format {
        Some(f) => Some(f),
        None if input.is_dir() => read::unit_dir_format(&unit.path),
        None => read::detect_input(&input),
    };
    let Some(format) = format else {
        if input.head().starts_with(b"\x7fELF") {
            return Ok(Status::Binary);
        }
        record.error = Some("not a profile of a known format".into());
        return Ok(Status::Skipped);
    };
    record.format = Some(format.name().to_owned());
    let targets: Vec<(OutputFormat, PathBuf)> = options
        .formats
        .iter()
        .map(|&f| (f, output_path(&options.out_dir, unit, f)))
        .collect();
    record.outputs = targets
        .iter()
        .map(|(_, p)| relative(&options.out_dir, p))
        .collect();
    let mut read_options = options.read.clone();
    read_options.format = Some(format);
    read_options.binary = binary_for(unit, format, options, &shared.neighbours);
    let made_from = MadeFrom {
        input: match input.is_dir() {
            true => made_from::of_folder(&unit.path, MAX_DEPTH)?,
            false => made_from::of_input(&unit.path, &input)?,
        },
        binary: (read_options.binary.as_deref()).map(|b| shared.binaries.of(b)),
        options: shared.options_hash.clone(),
    };
    record.made_from = Some(made_from.clone());
    let stamp_path = made_from::stamp_path(&options.out_dir, &unit.out_stem);
    let stamp = Stamp::load(&stamp_path).filter(|s| s.made_from == made_from);
    let todo = outputs_to_write(options, &targets, stamp.as_ref());
    if let (true, Some(stamp)) = (todo.is_empty(), &stamp) {
        // The record describes the outputs on disk: what made them.
        record.binary = stamp.binary.clone();
        record.unsymbolized = stamp.unsymbolized.clone();
        record.warnings = stamp.warnings.clone();
        return Ok(Status::Unchanged);
    }
    record.binary = read_options
        .binary
        .as_ref()
        .map(|b| b.display().to_string());
    if format == Format::Gprof && record.binary.is_none() {
        record.unsymbolized = Some(
            "gmon.out without a binary: no --binary, no --binary-map match, no a.out or single executable beside it".into(),
        );
    }
    // The warnings, also when writing fails after the reading.
    read_options.progress = Some(progress.clone());
    let mut write_options = options.write.clone();
    write_options.title = unit.rel.clone();
    let outputs: Vec<Output> = todo
        .iter()
        .map(|(format, path)| Output {
            path: path.clone(),
            format: *format,
        })
        .collect();
    let mut read_besides = options.files_read();
    read_besides.extend(read_options.binary.as_deref());
    for output in &outputs {
        write::target::within(&options.out_dir, &output.path, true)?;
        write::refuse_input_as_output(&output.path, &read_besides)?;
        // This unit is the only writer of its outputs (the plan gives each
        // output one unit, and a unit one shard): the marked temporaries of
        // these outputs are a stopped run's, never a live one's.
        write::remove_stale(&output.path);
    }
    let convert_options = Options {
        read: read_options,
        write: write_options,
    };
    let converted = convert_inputs(
        std::slice::from_ref(&input),
        &outputs,
        &convert_options,
        Some(&options.out_dir),
    );
    record.warnings = progress.warnings();
    converted?;
    // Outputs of this run's formats and, made from the same, of others
    // an earlier run wrote.
    let mut made: Vec<String> = stamp.map(|s| s.outputs).unwrap_or_default();
    made.extend(record.outputs.iter().cloned());
    made.sort();
    made.dedup();
    Stamp {
        made_from,
        outputs: made,
        binary: record.binary.clone(),
        unsymbolized: record.unsymbolized.clone(),
        warnings: record.warnings.clone(),
    }
    .save(&options.out_dir, &stamp_path)?;
    Ok(Status::Converted)
}

/// The outputs to write: all with `--force`, else those that are missing
/// or that `stamp` (the unit's, when it was made from what the outputs are
/// made from now) does not name.
fn outputs_to_write<'a>(
    options: &ArchiveOptions,
    targets: &'a [(OutputFormat, PathBuf)],
    stamp: Option<&Stamp>,
) -> Vec<&'a (OutputFormat, PathBuf)> {
    targets
        .iter()
        .filter(|(_, out)| {
            if options.force {
                return true;
            }
            let Some(stamp) = stamp else { return true };
            // Only a regular file is an output: a folder or a link at its
            // place is no output, and the unit then fails saying so.
            let rel = relative(&options.out_dir, out);
            !(std::fs::symlink_metadata(out).is_ok_and(|m| m.is_file())
                && stamp.outputs.contains(&rel))
        })
        .collect()
}

/// Runs the whole migration. `progress` is called once per unit as it
/// finishes (from worker threads), with the unit's record.
///
/// Every output name is decided before anything is converted: units whose
/// outputs collide (an output that is also a folder of another unit's
/// output, or two units with one output) all fail, saying with which, the
/// same in every run and every shard. The output folder is made once the
/// plan is known; a run that made it and converted nothing removes the
/// empty folders it leaves there.
pub fn run(
    archive: &Path,
    options: &ArchiveOptions,
    progress: &(dyn Fn(&Unit, &Record) + Sync),
    on_plan: &dyn Fn(&[Unit]),
) -> Result<Report> {
    let started = Instant::now();
    check_out_dir(archive, &options.out_dir)?;
    let mut units = plan(archive, Some(&options.out_dir))?;
    fail_colliding_outputs(&mut units, &options.formats);
    if let Some(shard) = options.shard {
        units.retain(|u| shard.takes(&u.rel));
    }
    // No thread without a unit to convert (0 stays rayon's "all cores").
    let threads = options.jobs.min(units.len().max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start {threads} worker threads: {e}")))?;
    let made = !options.out_dir.exists();
    std::fs::create_dir_all(&options.out_dir).map_err(|e| Error::io(&options.out_dir, e))?;
    on_plan(&units);
    let shared = Shared {
        options_hash: made_from::hash_hex(
            made_from::options_text(&options.read, &options.write).as_bytes(),
        ),
        ..Shared::default()
    };
    let ranks = report_ranks(&units);
    let inputs: Vec<Record> = pool.install(|| {
        units
            .par_iter()
            .zip(ranks.par_iter())
            .filter_map(|(unit, &rank)| {
                let mut record = convert_unit_with(unit, options, &shared);
                // Before `progress` sees it: a report of a stopped run is
                // made of the records given to `progress`.
                record.known_failure = record.status == Status::Failed
                    && (options.known_failures.contains(&record.path)
                        || (record.path_bytes.as_ref())
                            .is_some_and(|p| options.known_failures.contains(p)));
                match &options.journal {
                    Some(journal) => {
                        journal.add(&record, rank, || progress(unit, &record));
                        None
                    }
                    None => {
                        progress(unit, &record);
                        Some(record)
                    }
                }
            })
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let report = Report::of_run(archive, options, seconds, inputs);
    let report = match &options.journal {
        Some(journal) => journal.head(report),
        None => report,
    };
    if made && report.converted == 0 {
        remove_empty_folders(&options.out_dir, 0);
    }
    Ok(report)
}

/// Each unit's place in the report's order ([`Report::of`]), which for
/// names that are not UTF-8 is not the plan's.
fn report_ranks(units: &[Unit]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..units.len() as u32).collect();
    let key = |i: &u32| {
        let unit = &units[*i as usize];
        (Path::new(&unit.rel), &unit.rel_bytes)
    };
    order.sort_by(|a, b| key(a).cmp(&key(b)));
    let mut ranks = vec![0; units.len()];
    for (rank, i) in order.into_iter().enumerate() {
        ranks[i as usize] = rank as u32;
    }
    ranks
}

/// Refuses an output folder that is a file, or that holds the archive
/// (outputs would land among the inputs); one inside the archive is left
/// out of the walk.
fn check_out_dir(archive: &Path, out_dir: &Path) -> Result<()> {
    match std::fs::metadata(out_dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::Usage(format!(
                "the output folder {} is a file: `profconv convert` writes a folder of outputs; name a folder (it is made if missing)",
                out_dir.display()
            )))
        }
        Ok(_) => {}
        // A folder yet to be made holds nothing.
        Err(_) => return Ok(()),
    }
    if let (Ok(out), Ok(arch)) = (out_dir.canonicalize(), archive.canonicalize()) {
        if arch.starts_with(&out) {
            return Err(Error::Usage(format!(
                "the output directory {} holds the archive {}: outputs could overwrite inputs; choose a folder outside the archive",
                out_dir.display(),
                archive.display()
            )));
        }
    }
    Ok(())
}

/// Checks a `--report` file before the run converts anything: its folder
/// exists, and it is no file the run reads — not an existing file of the
/// archive unless it is an earlier report (a re-run replaces it; one in the
/// output folder there is an output), not a file of
/// [`ArchiveOptions::files_read`], not one of `also_read` (the binary map,
/// the known failures).
pub fn check_report_path(
    report: &Path,
    archive: &Path,
    options: &ArchiveOptions,
    also_read: &[&Path],
) -> Result<()> {
    let folder = match report.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(Error::Usage(format!(
            "the folder of the report {} does not exist: make it first, or name another place",
            report.display()
        )));
    }
    let mut read = options.files_read();
    read.extend_from_slice(also_read);
    let in_out_dir = folder
        .canonicalize()
        .ok()
        .zip(options.out_dir.canonicalize().ok())
        .is_some_and(|(f, out)| f.starts_with(out));
    if !in_out_dir && report.exists() && Report::load(report).is_err() {
        read.push(archive);
    }
    write::refuse_input_as_output(report, &read)
}

/// Fails every unit whose outputs collide with another unit's: an output
/// file that is also a folder on the way to another output (`x` →
/// `x.folded` beside a folder `x.folded/`), or one output of two units. The
/// names alone decide, so every run and every shard agrees.
fn fail_colliding_outputs(units: &mut [Unit], formats: &[OutputFormat]) {
    // Every output once, sorted component by component: the outputs below
    // a path (as a folder) follow it directly. One path per output, no
    // more, so that planning stays small for many files.
    let mut outputs: Vec<(PathBuf, usize)> = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        if unit.problem.is_none() {
            outputs.extend(
                formats
                    .iter()
                    .map(|&f| (output_path(Path::new(""), unit, f), i)),
            );
        }
    }
    outputs.sort();
    let mut clashes: Vec<(usize, String)> = Vec::new();
    for (k, (out, i)) in outputs.iter().enumerate() {
        let Some((next, j)) = outputs.get(k + 1) else {
            break;
        };
        let what = if j == i {
            continue;
        } else if next == out {
            "an output"
        } else if next.starts_with(out) {
            "a folder of the outputs"
        } else {
            continue;
        };
        // The message names the first output's unit as the one whose output
        // is also the other's (folder of) output.
        let (unit, other) = (&units[*i], &units[*j]);
        let why = format!(
            "outputs collide: {}, an output of {}, is also {what} of {}; neither is converted: rename one of them",
            out.display(),
            unit.rel,
            other.rel
        );
        clashes.push((*i, why.clone()));
        clashes.push((*j, why));
    }
    drop(outputs);
    for (i, why) in clashes {
        if units[i].problem.is_none() {
            units[i].problem = Some((Status::Failed, why));
        }
    }
}

/// Removes the empty folders below and including `dir`, deepest first: what
/// a run that made the output folder and converted nothing leaves there.
fn remove_empty_folders(dir: &Path, depth: usize) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if depth < MAX_DEPTH && e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_folders(&e.path(), depth + 1);
            }
        }
    }
    // Fails, leaving it, when something is inside.
    let _ = std::fs::remove_dir(dir);
}

/// A deterministic part of an archive run: shard `index` of `count` (from 0,
/// as Kubernetes Indexed Jobs count) takes the units whose relative path
/// hashes (FNV-1a, 64 bits) to `index` modulo `count`. The hash depends on
/// the path only, so a unit stays in its shard when others are added or
/// removed, and every machine agrees without talking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u64,
    /// How many shards the run is split into (1 or more).
    pub count: u64,
}

impl Shard {
    /// Does the unit at `rel` (a relative path as in the report) belong to
    /// this shard?
    pub fn takes(&self, rel: &str) -> bool {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in rel.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash % self.count.max(1) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The end-of-run summary for standard error: the counts, the failures
/// (new ones marked; with `brief` counted by reason, else each one), the
/// unsymbolized profiles and, unless `brief`, each skipped entry.
pub fn summary(report: &Report, brief: bool) -> String {
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for why in (report.inputs.iter()).filter_map(|r| r.unsymbolized.as_ref()) {
        *reasons.entry(why.clone()).or_default() += 1;
    }
    summary_with(report, &reasons, brief)
}

/// [`summary`] of `report`'s counts and listed records, with the
/// unsymbolized outputs counted by reason in `reasons`.
fn summary_with(
    report: &Report,
    reasons: &std::collections::BTreeMap<String, usize>,
    brief: bool,
) -> String {
    let mut out = format!(
        "profconv convert: {} converted, {} unchanged, {} skipped, {} failed",
        report.converted, report.unchanged, report.skipped, report.failed
    );
    if report.failed > 0 && report.new_failures < report.failed {
        out.push_str(&format!(
            " ({} known, {} new)",
            report.failed - report.new_failures,
            report.new_failures
        ));
    }
    if report.unsymbolized > 0 {
        out.push_str(&format!(", {} unsymbolized", report.unsymbolized));
    }
    if report.binaries > 0 {
        out.push_str(&format!(", {} binaries (not profiles)", report.binaries));
    }
    out.push_str(&format!(" in {:.1} s\n", report.seconds));
    if brief && report.failed > 0 {
        out.push_str(&failures_by_reason(&report.inputs));
        out.push_str("  (the report, or a run without -q, names each failed input)\n");
    }
    for r in (report.inputs.iter()).filter(|r| !brief && r.status == Status::Failed) {
        let mark = if r.known_failure { "known" } else { "new" };
        out.push_str(&format!(
            "  failed ({mark}): {}: {}\n",
            r.path,
            r.error.as_deref().unwrap_or("")
        ));
    }
    for (why, n) in reasons {
        out.push_str(&format!("  unsymbolized: {n} ({why})\n"));
    }
    if brief {
        return out;
    }
    for r in report.inputs.iter().filter(|r| r.status == Status::Skipped) {
        out.push_str(&format!(
            "  skipped: {} ({})\n",
            r.path,
            r.error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// `  failed (new): N × reason` lines, most frequent first: what `-q`
/// says of the failures. The reason is the error less the file's name,
/// the byte offset and the details in parentheses, numbers as `N`.
fn failures_by_reason(inputs: &[Record]) -> String {
    let mut counts = std::collections::BTreeMap::<(bool, String), usize>::new();
    for r in inputs.iter().filter(|r| r.status == Status::Failed) {
        let error = r.error.as_deref().unwrap_or("");
        let named = format!("{}: ", r.path);
        let mut reason = error
            .find(&named)
            .map_or(error, |i| &error[i + named.len()..]);
        if let Some(rest) = reason.strip_prefix("at byte ") {
            reason = rest.split_once(": ").map_or(rest, |(_, r)| r);
        }
        let reason = reason.split(" (").next().unwrap_or(reason);
        let mut masked = String::with_capacity(reason.len());
        for c in reason.chars() {
            if !c.is_ascii_digit() {
                masked.push(c);
            } else if !masked.ends_with('N') {
                masked.push('N');
            }
        }
        *counts.entry((r.known_failure, masked)).or_default() += 1;
    }
    let mut lines: Vec<_> = counts.into_iter().collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = String::new();
    for ((known, reason), n) in lines {
        let mark = if known { "known" } else { "new" };
        out.push_str(&format!("  failed ({mark}): {n} × {reason}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_components() {
        assert!(glob_match("*.gmon", "a.gmon"));
        assert!(!glob_match("*.gmon", "x/a.gmon"));
        assert!(glob_match("**/*.gmon", "x/y/a.gmon"));
        assert!(glob_match("**/*.gmon", "a.gmon"));
        assert!(glob_match("run?/gmon.out", "run1/gmon.out"));
        assert!(!glob_match("run?/gmon.out", "run12/gmon.out"));
        assert!(glob_match("2003/**", "2003/a/b/gmon.out"));
    }

    #[test]
    fn output_paths_keep_the_relative_path_and_drop_gz() {
        let mut units = vec![Unit::new(
            Path::new("/a"),
            "/a/run1/gmon.out.gz".into(),
            false,
            0,
        )];
        keep_gz_where_names_collide(&mut units);
        let unit = &units[0];
        assert_eq!(
            output_path(Path::new("/o"), unit, OutputFormat::Pprof),
            Path::new("/o/run1/gmon.out.pb.gz")
        );
        assert_eq!(
            output_path(Path::new("/o"), unit, OutputFormat::Speedscope),
            Path::new("/o/run1/gmon.out.speedscope.json")
        );
    }
}
