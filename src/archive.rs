//! Archive migration: convert a whole tree of legacy profiles in one run.
//!
//! The tree is walked one folder at a time, in name order (`walk.rs`), into
//! units: a file, or a directory that is one profile (a DCPI database with
//! its epochs, an APS capture directory). A first walk counts the units
//! and their bytes (the [`Tree`], and the plan for the progress display;
//! a run of one shard of several walks once more to count its share, cut
//! from that tree by bytes, `shard.rs`); the last walk hands each unit of
//! the run, as it is reached, to a work-stealing pool, a bounded number ahead of
//! the conversions, so that memory follows the largest folder and not the
//! tree. Each unit writes its outputs through a temporary file and a
//! rename, at the unit's relative path under the output directory with the
//! output format's extension. One bad unit never stops the run. What each
//! unit's outputs were made from is kept in a stamp beside them
//! ([`MadeFrom`], `made_from.rs`), so that a re-run redoes exactly what
//! changed; the records go to a journal on disk ([`Journal`]) in walk
//! order, which is the report's.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::convert::{convert_inputs, Options, Output};
use crate::error::{Error, Result};
use crate::read::{self, Format, ReadOptions};
use crate::write::{self, OutputFormat, WriteOptions};

mod journal;
mod made_from;
mod merge;
mod shard;
mod walk;
pub use journal::Journal;
use made_from::{Binaries, Stamp};
pub use made_from::{BinaryFingerprint, Fingerprint, MadeFrom};
use shard::Cut;
pub use shard::{Shard, Share, Tree};
use walk::{relative, Listing, Unit, Visit, Walk, MAX_DEPTH};

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
    /// display that polls it: it ends at the sum of the units' bytes
    /// ([`Plan::bytes`]; a unit skipped, unchanged or failed early counts
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

/// What a run is about to convert, counted by a walk before it starts:
/// for a progress display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plan {
    /// Units (inputs) the run converts: of its shard, with those listed
    /// and not converted (links, special files, collisions).
    pub units: usize,
    /// Their input bytes, what [`ArchiveOptions::progress`] ends at when
    /// the archive does not change while the run goes.
    pub bytes: u64,
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

impl Record {
    /// A record of `path` (and its exact bytes, see [`Record::path_bytes`])
    /// with `status` and nothing else known yet.
    pub(crate) fn new(path: String, path_bytes: Option<String>, status: Status) -> Record {
        Record {
            path,
            path_bytes,
            format: None,
            status,
            outputs: Vec::new(),
            bytes: 0,
            seconds: 0.0,
            binary: None,
            unsymbolized: None,
            known_failure: false,
            error: None,
            warnings: Vec::new(),
            made_from: None,
        }
    }
}

/// The report of a run: a summary and one record per unit, in walk order
/// ([`walk_order`]).
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
    /// The whole archive as the run's first walk listed it, every shard's
    /// units (see [`Tree`]); the shards of a merged report listed this one
    /// tree. `None` for a report written before profconv kept it.
    #[serde(default)]
    pub tree: Option<Tree>,
    /// For a merged report, each shard's units and input bytes, in shard
    /// order; `[]` otherwise.
    #[serde(default)]
    pub shards: Vec<Share>,
    /// For a merged report, the largest shard's input bytes over the mean
    /// of the shards merged (1.0: even); `None` otherwise, or when the
    /// shards have no bytes.
    #[serde(default)]
    pub shard_spread: Option<f64>,
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
    /// walk order ([`walk_order`]): for a run stopped early, what it
    /// finished.
    pub fn of(archive: String, out_dir: String, seconds: f64, mut inputs: Vec<Record>) -> Report {
        inputs.sort_by(walk_order);
        let count = |s: Status| inputs.iter().filter(|r| r.status == s).count();
        Report {
            archive,
            out_dir,
            shard: None,
            formats: Vec::new(),
            options: String::new(),
            missing_shards: Vec::new(),
            tree: None,
            shards: Vec::new(),
            shard_spread: None,
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

/// The order of the walk, of the report's records and of a merged
/// report's: by exact relative path (a record's `path_bytes` when it has
/// one, else its `path`), component by component, byte by byte.
pub fn walk_order(a: &Record, b: &Record) -> Ordering {
    let (a, b) = (exact_path(a), exact_path(b));
    let slash = |c: &u8| *c == b'/';
    a.split(slash).cmp(b.split(slash))
}

/// A record's exact relative path as bytes: its `path_bytes` unescaped
/// (`\xHH` a byte, `\\` a backslash), else its `path`.
fn exact_path(record: &Record) -> std::borrow::Cow<'_, [u8]> {
    let Some(escaped) = &record.path_bytes else {
        return record.path.as_bytes().into();
    };
    let mut out = Vec::with_capacity(escaped.len());
    let mut rest = escaped.as_bytes();
    while let Some((&c, tail)) = rest.split_first() {
        rest = tail;
        if c != b'\\' {
            out.push(c);
        } else if let Some(tail) = rest.strip_prefix(b"\\") {
            out.push(b'\\');
            rest = tail;
        } else if let Some(byte) = (rest.strip_prefix(b"x"))
            .and_then(|t| t.get(..2))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            rest = rest.get(3..).unwrap_or_default();
        } else {
            out.push(c);
        }
    }
    out.into()
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

/// What the units of one run share: the executables of `--binary` and
/// `--binary-map` fingerprinted, and the hash of the options that change
/// outputs. (An executable found beside the inputs is kept with their
/// folder, [`walk::Folder::neighbour`], for as long as a unit of it is.)
#[derive(Default)]
struct Shared {
    binaries: Binaries,
    options_hash: String,
}

/// The executable in the folder `dir`, for its gmon.out files: `a.out`,
/// else the only ELF executable there (none when there are several).
fn find_neighbour_binary(dir: &Path) -> Option<PathBuf> {
    let a_out = dir.join("a.out");
    if is_elf_executable(&a_out) {
        return Some(a_out);
    }
    let mut found = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_elf_executable(p));
    let one = found.next();
    // Several: ambiguous, say nothing.
    found.next().is_none().then_some(one).flatten()
}

/// The binary for a unit, with its fingerprint: `--binary`, else the first
/// `--binary-map` glob that matches, else (gprof) an executable next to
/// the input, looked up once per folder: an archive folder holds many gmon
/// files and one program.
fn binary_for(
    unit: &Unit,
    format: Format,
    options: &ArchiveOptions,
    shared: &Shared,
) -> Option<(PathBuf, BinaryFingerprint)> {
    let given = options.read.binary.as_ref().or_else(|| {
        (options.binary_map.iter())
            .find(|(g, _)| g.is_match(&unit.rel))
            .map(|(_, b)| b)
    });
    if let Some(b) = given {
        return Some((b.clone(), shared.binaries.of(b)));
    }
    if format != Format::Gprof || unit.is_dir {
        return None;
    }
    let folder = &unit.folder;
    folder
        .neighbour
        .get_or_init(|| {
            let found = find_neighbour_binary(&folder.path)?;
            let fingerprint = made_from::fingerprint_binary(&found);
            Some((found, fingerprint))
        })
        .clone()
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
        bytes: unit.bytes,
        ..Record::new(unit.rel.clone(), unit.rel_bytes.clone(), Status::Failed)
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
    let binary = binary_for(unit, format, options, shared);
    read_options.binary = binary.as_ref().map(|(path, _)| path.clone());
    let made_from = MadeFrom {
        input: match input.is_dir() {
            true => made_from::of_folder(&unit.path, MAX_DEPTH)?,
            false => made_from::of_input(&unit.path, &input)?,
        },
        binary: binary.map(|(_, fingerprint)| fingerprint),
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

/// Runs the whole migration. `on_plan` is told what the run will convert
/// (a first walk counts it) before any unit is; `progress` is called once
/// per unit as it finishes (from worker threads), with the unit's record.
///
/// Every output name is decided before anything of its folder is
/// converted: units whose outputs collide (an output that is also a folder
/// of another unit's outputs, or two units with one output) all fail,
/// saying with which, the same in every run and every shard. The output
/// folder is made once the plan is counted; a run that made it and
/// converted nothing removes the empty folders it leaves there.
pub fn run(
    archive: &Path,
    options: &ArchiveOptions,
    progress: &(dyn Fn(&Record) + Sync),
    on_plan: &dyn Fn(&Plan),
) -> Result<Report> {
    let started = Instant::now();
    check_out_dir(archive, &options.out_dir)?;
    let walk = || Walk::new(archive, Some(&options.out_dir), &options.formats);
    let (plan, mut tree) = Count::plan(walk, options.shard)?;
    if let Some(journal) = &options.journal {
        journal.listed(&tree);
    }
    // No thread without a unit to convert (0 stays rayon's "all cores").
    let threads = options.jobs.min(plan.units.max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start {threads} worker threads: {e}")))?;
    let made = !options.out_dir.exists();
    std::fs::create_dir_all(&options.out_dir).map_err(|e| Error::io(&options.out_dir, e))?;
    on_plan(&plan);
    let shared = Shared {
        options_hash: made_from::hash_hex(
            made_from::options_text(&options.read, &options.write).as_bytes(),
        ),
        ..Shared::default()
    };
    let window = Window::new(WINDOW_PER_THREAD * pool.current_num_threads());
    let records = Mutex::new(Vec::new());
    let finish = |record: Record, number: u64| match &options.journal {
        Some(journal) => journal.add(&record, number, || progress(&record)),
        None => {
            progress(&record);
            records
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(record);
        }
    };
    let walk = walk()?;
    let listed = pool.in_place_scope_fifo(|scope| {
        let mut dispatch = Dispatch {
            scope,
            window: &window,
            options,
            shared: &shared,
            finish: &finish,
            next: 0,
            cut: Cut::of(options.shard, &tree),
            stale: Vec::new(),
        };
        walk.run(&mut dispatch);
        dispatch.cut.tree()
    });
    tree.changed |= !tree.same_units(&listed);
    let inputs = records.into_inner().unwrap_or_else(PoisonError::into_inner);
    let seconds = started.elapsed().as_secs_f64();
    let mut report = Report::of_run(archive, options, seconds, inputs);
    report.tree = Some(tree);
    let report = match &options.journal {
        Some(journal) => journal.head(report),
        None => report,
    };
    // A shard leaves the folder it made: other shards write into it at the
    // same time, and one about to place an output there would find it gone.
    if made && report.converted == 0 && options.shard.is_none() {
        remove_empty_folders(&options.out_dir, 0);
    }
    Ok(report)
}

/// Counts the units of a shard and their bytes, as a walk hands them on.
struct Count {
    cut: Cut,
    plan: Plan,
}

impl Count {
    /// What a run of `shard` converts, and the tree it is cut from: a
    /// first walk measures the tree (every unit: a whole run's plan); a run
    /// of one shard of several walks again to count its share, the tree
    /// marked `changed` when that walk listed another.
    fn plan<'a>(walk: impl Fn() -> Result<Walk<'a>>, shard: Option<Shard>) -> Result<(Plan, Tree)> {
        let whole = Count::of(walk()?, Cut::measure());
        let mut tree = whole.cut.tree();
        let Some(shard) = shard.filter(|s| s.count > 1) else {
            return Ok((whole.plan, tree));
        };
        let share = Count::of(walk()?, Cut::of(Some(shard), &tree));
        tree.changed = !tree.same_units(&share.cut.tree());
        Ok((share.plan, tree))
    }

    /// The units `cut` takes of those `walk` reaches, and their bytes.
    fn of(walk: Walk<'_>, cut: Cut) -> Count {
        let mut count = Count {
            cut,
            plan: Plan::default(),
        };
        walk.run(&mut count);
        count
    }
}

impl Visit for Count {
    fn folder(&mut self, _: &Listing) {}

    fn unit(&mut self, unit: Unit) {
        if self.cut.takes(&unit) {
            self.plan.units += 1;
            self.plan.bytes += unit.bytes;
        }
    }
}

/// Units handed to the pool and not finished, at most, per thread: enough
/// that no thread waits while the walk lists the next folder, few enough
/// that memory does not follow the number of files.
const WINDOW_PER_THREAD: usize = 16;

/// The units handed to the pool and not yet finished, and how many may be.
struct Window {
    most: usize,
    busy: Mutex<usize>,
    freed: Condvar,
}

impl Window {
    fn new(most: usize) -> Window {
        Window {
            most: most.max(1),
            busy: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Waits for room, then takes a place, given back when the slot drops
    /// (also when the conversion panics).
    fn enter(&self) -> Slot<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy >= self.most {
            busy = self
                .freed
                .wait(busy)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *busy += 1;
        Slot(self)
    }
}

/// A place in the [`Window`], held by a unit being converted.
struct Slot<'a>(&'a Window);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let window = self.0;
        *window.busy.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        window.freed.notify_one();
    }
}

/// Hands the units of a run's shard to the pool as the walk reaches them,
/// numbered in walk order, waiting while the [`Window`] is full.
struct Dispatch<'a, 'scope> {
    scope: &'a rayon::ScopeFifo<'scope>,
    window: &'scope Window,
    options: &'scope ArchiveOptions,
    shared: &'scope Shared,
    /// Takes a unit's finished record with its number.
    finish: &'scope (dyn Fn(Record, u64) + Sync),
    /// The number of the next unit of the shard.
    next: u64,
    /// Which units are the shard's.
    cut: Cut,
    /// The temporaries a stopped run left in the output folders of the
    /// folders on the walk's way down, the innermost last.
    stale: Vec<write::Stale>,
}

impl Visit for Dispatch<'_, '_> {
    /// Reads the folder's output folder once for the temporaries a stopped
    /// run left there (see [`Dispatch::unit`]).
    fn folder(&mut self, listing: &Listing) {
        let out_dir = &self.options.out_dir;
        let folder = out_dir.join(&listing.folder().rel);
        self.stale
            .push(match write::target::is_folder_within(out_dir, &folder) {
                true => write::Stale::in_folder(&folder),
                false => write::Stale::none(),
            });
    }

    /// Removes the temporaries a stopped run left for the unit's outputs,
    /// when it is the shard's: this shard alone writes them (the walk gives
    /// each output one unit, and a unit one shard), so they are a stopped
    /// run's, never a live one's. Then hands the unit to the pool.
    fn unit(&mut self, unit: Unit) {
        let options = self.options;
        if !self.cut.takes(&unit) {
            return;
        }
        if let (None, Some(stale)) = (&unit.problem, self.stale.last_mut()) {
            stale.remove_for(|| {
                let stem = unit.out_stem.file_name().unwrap_or_default();
                (options.formats.iter())
                    .map(|&f| walk::output_name(stem, f))
                    .collect::<Vec<_>>()
            });
        }
        let number = self.next;
        self.next += 1;
        let slot = self.window.enter();
        let (shared, finish) = (self.shared, self.finish);
        self.scope.spawn_fifo(move |_| {
            let _slot = slot;
            let mut record = convert_unit_with(&unit, options, shared);
            // Before `progress` sees it: a report of a stopped run is
            // made of the records given to `progress`.
            record.known_failure = record.status == Status::Failed
                && (options.known_failures.contains(&record.path)
                    || (record.path_bytes.as_ref())
                        .is_some_and(|p| options.known_failures.contains(p)));
            finish(record, number);
        });
    }

    fn left(&mut self, _: &Listing) {
        self.stale.pop();
    }
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
    if !in_out_dir && report.exists() && !is_report(report) {
        read.push(archive);
    }
    write::refuse_input_as_output(report, &read)
}

/// Whether `path` is a regular file holding a report of `profconv convert`:
/// read as it is parsed, its records passed over unkept, so that memory
/// does not follow their number.
fn is_report(path: &Path) -> bool {
    /// A report's fields that say it is one; the records only parsed.
    #[derive(Deserialize)]
    #[allow(dead_code)] // Read to be checked, not used.
    struct Head {
        archive: String,
        out_dir: String,
        converted: usize,
        failed: usize,
        inputs: Vec<serde::de::IgnoredAny>,
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let small = file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= REPORT_LIMIT.bytes);
    let text = std::io::BufReader::new(std::io::Read::take(file, REPORT_LIMIT.bytes));
    small && serde_json::from_reader::<_, Head>(text).is_ok()
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
    fn a_tree_that_changes_between_a_shards_walks_is_marked_changed() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(dir.path().join(name), [0u8; 100]).unwrap();
        }
        let walks = std::cell::Cell::new(0);
        let (walks, root) = (&walks, dir.path());
        let walk = |grow: bool| {
            walks.set(0);
            move || {
                walks.set(walks.get() + 1);
                if grow && walks.get() == 2 {
                    std::fs::write(root.join("b"), [0u8; 300]).unwrap();
                }
                Walk::new(root, None, &[])
            }
        };
        let half = Some(Shard { index: 0, count: 2 });
        let (plan, tree) = Count::plan(walk(false), half).unwrap();
        assert_eq!((tree.units, tree.bytes, tree.changed), (3, 300, false));
        // Equal thirds: the middle one's middle is the half-way mark, shard 1's.
        assert_eq!((plan.units, plan.bytes), (1, 100));
        let (_, whole) = Count::plan(walk(false), None).unwrap();
        assert_eq!(whole, tree);
        let (_, grown) = Count::plan(walk(true), half).unwrap();
        assert!(grown.changed && grown.bytes == 300, "{grown:?}");
    }

    #[test]
    fn records_are_ordered_by_exact_path_component_by_component() {
        let record = |path: &str, path_bytes: Option<&str>| {
            Record::new(path.into(), path_bytes.map(String::from), Status::Converted)
        };
        let mut records = [
            record("\u{fffd}/a", Some("\\xff/a")),
            record("a.x", None),
            record("\u{fffd}/b", Some("\\xfe/b")),
            record("a/b", None),
            record("a\\b", None),
            record("a", None),
        ];
        records.sort_by(walk_order);
        let order: Vec<(&str, Option<&str>)> = records
            .iter()
            .map(|r| (r.path.as_str(), r.path_bytes.as_deref()))
            .collect();
        assert_eq!(
            order,
            [
                ("a", None),
                ("a/b", None),
                ("a.x", None),
                ("a\\b", None),
                ("\u{fffd}/b", Some("\\xfe/b")),
                ("\u{fffd}/a", Some("\\xff/a")),
            ]
        );
    }
}
