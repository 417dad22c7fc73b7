//! Where a whole output is written: to a file through a temporary file and
//! a rename ([`write_file`], [`write_atomically`]), to standard output, or
//! to a device in place; and outputs written part by part as the profile is
//! read ([`OutputFile`], [`StreamedOutputs`]).

use std::io::Write;
use std::path::Path;

use super::callgrind::CallgrindRuns;
use super::firefox::FirefoxRuns;
use super::runs::FoldedRuns;
use super::speedscope::SpeedscopeRuns;
use super::{granularity_of, limits, pprof, streams_format, target, temporary};
use super::{prefer_sample_type, write_folded, write_viewed, OutputFormat, WriteOptions};
use crate::error::{Error, Result};
use crate::profile::{AddressPart, CollectParts, Granularity, PartSink, Profile, ValueTotals};

/// A writer of one format ([`write_viewed`], [`write_folded`] for a
/// profile folded already, or the writer of spilled runs), returning the
/// length of the text the viewer reads when it is not the bytes written.
type Writer<'a> =
    &'a mut dyn FnMut(&Profile, OutputFormat, &WriteOptions, &mut dyn Write) -> Result<Option<u64>>;

/// Writes `profile` to `path` (`-` = standard output). A regular file (or a
/// symbolic link's target) is written through a temporary file in the same
/// directory that is renamed into place, so a failed run leaves nothing
/// half-written; a device or FIFO is written in place. Errors name `path`
/// ("standard output" for `-`), never the temporary file.
pub fn write_file(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    path: &Path,
) -> Result<()> {
    write_files(profile, &[(path, format)], options, None)
}

/// Writes `profile` to each of `outputs`, all or none: regular files go to
/// temporary files that are renamed into place together once every one is
/// complete ([`temporary::commit_all`]), so a failure (a full disk) leaves
/// none of them. Standard output and special files are written in place, in
/// order, as they come. With `within`, every output is a file inside that
/// folder, written there and never through a link ([`target::within`]).
pub(crate) fn write_files(
    profile: &Profile,
    outputs: &[(&Path, OutputFormat)],
    options: &WriteOptions,
    within: Option<&Path>,
) -> Result<()> {
    let mut pending = Vec::new();
    let mut write = write_viewed;
    write_each(profile, outputs, options, within, &mut write, &mut pending)?;
    temporary::commit_all(pending)?;
    Ok(())
}

/// [`write_files`] up to the renames: the regular files' temporaries are
/// added to `pending`, for the caller to rename with the others of its set.
/// Returns what the outputs' viewers cannot open ([`limits::warning`]).
fn write_each(
    profile: &Profile,
    outputs: &[(&Path, OutputFormat)],
    options: &WriteOptions,
    within: Option<&Path>,
    write: Writer<'_>,
    pending: &mut Vec<temporary::Temporary>,
) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    for &(path, format) in outputs {
        let named = |e: Error| e.naming_output(path);
        let mut counted = |out: &mut dyn Write| {
            let mut out = limits::Counted::new(out);
            let viewed = write(profile, format, options, &mut out).map_err(named)?;
            let bytes = viewed.unwrap_or(out.bytes);
            warnings.extend(limits::warning(format, bytes, path));
            Ok::<_, Error>(())
        };
        match resolve(path, within)? {
            target::Target::Stdout => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                counted(&mut lock)?;
                lock.flush().map_err(|e| Error::output_io(path, e))?;
            }
            target::Target::Special(node) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&node)
                    .map_err(|e| Error::io(path, e))?;
                let mut out = std::io::BufWriter::new(file);
                counted(&mut out)?;
                out.flush().map_err(|e| Error::io(path, e))?;
            }
            target::Target::Regular(file) => {
                let mut tmp =
                    temporary::Temporary::create(&file, within).map_err(|e| e.with_file(path))?;
                counted(&mut tmp)?;
                pending.push(tmp);
            }
        }
    }
    Ok(warnings)
}

/// Where `path` is to be written: [`target::resolve`], or, for an output
/// confined to the folder `within`, the path itself (links in it are
/// refused, not followed).
fn resolve(path: &Path, within: Option<&Path>) -> Result<target::Target> {
    match within {
        Some(_) => Ok(target::Target::Regular(path.to_path_buf())),
        None => target::resolve(path),
    }
}

/// Runs `fill` on a temporary file next to `path` and renames it to `path`
/// when `fill` succeeds; on failure the temporary file is removed. The rename
/// is atomic, so a killed run leaves either the old file or the new one; there
/// is no fsync (like compilers and archivers, durability against power loss
/// is left to the file system).
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let mut tmp = temporary::Temporary::create(path, None)?;
    fill(&mut tmp).map_err(|e| e.naming_output(path))?;
    tmp.commit()
}

/// An output open for writing while it is being produced (a streamed
/// pprof profile): a regular file is written to a temporary file beside it
/// and renamed into place by [`OutputFile::commit`] (dropped uncommitted,
/// the temporary file is removed and nothing is left); standard output, a
/// device or a FIFO is written in place, as [`write_file`] does.
pub struct OutputFile {
    path: std::path::PathBuf,
    sink: OutputSink,
}

enum OutputSink {
    Stdout(std::io::Stdout),
    Special(std::io::BufWriter<std::fs::File>),
    Temporary(temporary::Temporary),
}

impl OutputFile {
    /// Opens the output `path` (`-` = standard output), inside the folder
    /// `within` if given (as [`write_files`]).
    pub fn create(path: &Path, within: Option<&Path>) -> Result<OutputFile> {
        let sink = match resolve(path, within)? {
            target::Target::Stdout => OutputSink::Stdout(std::io::stdout()),
            target::Target::Special(node) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&node)
                    .map_err(|e| Error::io(path, e))?;
                OutputSink::Special(std::io::BufWriter::new(file))
            }
            target::Target::Regular(file) => OutputSink::Temporary(
                temporary::Temporary::create(&file, within).map_err(|e| e.with_file(path))?,
            ),
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            sink,
        })
    }

    /// Flushes the output; a regular file's temporary is returned, for
    /// the caller to rename into place with the others of its set.
    fn flush_or_pending(self) -> Result<Option<temporary::Temporary>> {
        let path = &self.path;
        match self.sink {
            OutputSink::Stdout(mut out) => out.flush().map_err(|e| Error::output_io(path, e))?,
            OutputSink::Special(mut out) => out.flush().map_err(|e| Error::io(path, e))?,
            OutputSink::Temporary(out) => return Ok(Some(out)),
        }
        Ok(None)
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.sink {
            OutputSink::Stdout(out) => out.write(buf),
            OutputSink::Special(out) => out.write(buf),
            OutputSink::Temporary(out) => out.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.sink {
            OutputSink::Stdout(out) => out.flush(),
            OutputSink::Special(out) => out.flush(),
            OutputSink::Temporary(out) => out.flush(),
        }
    }
}

/// Every output of a conversion, fed the profile part by part as it is
/// read: a [`PartSink`] for [`crate::read::read_parts`]. pprof outputs at
/// every address are written as the parts come ([`pprof::Stream`]); the
/// others are kept as one profile per granularity they ask for, folded as
/// the parts come ([`CollectParts::folded`]: as large as the distinct
/// folded stacks, not as the input), and written by
/// [`StreamedOutputs::finish`], which then renames every output into place
/// together.
pub struct StreamedOutputs {
    streams: Vec<pprof::Stream<OutputFile>>,
    /// Each stream's output, to name in its errors.
    paths: Vec<std::path::PathBuf>,
    /// The outputs written whole at the end, by granularity.
    collected: Vec<Collected>,
    options: WriteOptions,
    within: Option<std::path::PathBuf>,
    warnings: Vec<String>,
    /// The totals of every part's values, to say those past an `i64`.
    totals: ValueTotals,
    /// Samples held before folded lines are spilled ([`RUN_SAMPLES`]).
    run_samples: usize,
}

/// The outputs of one granularity written whole once every part is in.
struct Collected {
    parts: CollectParts,
    outputs: Vec<(std::path::PathBuf, OutputFormat)>,
    /// What the outputs are written from once the parts held pass
    /// `run_samples`: at every address, where the distinct stacks are as
    /// many as the input's addresses, runs spilled to disk.
    spills: Spills,
    /// The runs spilled so far.
    runs: Option<Runs>,
}

/// What a group of outputs spills ([`Collected::spills`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spills {
    /// Nothing: the outputs are written from the profile held whole.
    Nothing,
    /// Runs of folded lines (folded and SVG outputs).
    FoldedLines,
    /// Runs of callgrind bodies.
    CallgrindBodies,
    /// Runs of speedscope samples and frames.
    SpeedscopeSamples,
    /// Runs of a Firefox Profiler document's tables and samples.
    FirefoxTables,
}

impl Spills {
    /// What the outputs of `format` at `granularity` spill.
    fn of(format: OutputFormat, granularity: Granularity) -> Spills {
        match (format, granularity) {
            (OutputFormat::Folded | OutputFormat::Svg, Granularity::Addresses) => {
                Spills::FoldedLines
            }
            (OutputFormat::Callgrind, Granularity::Addresses) => Spills::CallgrindBodies,
            (OutputFormat::Speedscope, Granularity::Addresses) => Spills::SpeedscopeSamples,
            (OutputFormat::Firefox | OutputFormat::FirefoxRaw, Granularity::Addresses) => {
                Spills::FirefoxTables
            }
            _ => Spills::Nothing,
        }
    }
}

/// Runs spilled to disk.
enum Runs {
    FoldedLines(FoldedRuns),
    CallgrindBodies(CallgrindRuns),
    SpeedscopeSamples(SpeedscopeRuns),
    FirefoxTables(FirefoxRuns),
}

/// Samples held before they are spilled as a run (at about 300 bytes each
/// while held and written: some 20 MiB).
const RUN_SAMPLES: usize = 1 << 16;

impl Collected {
    /// Takes a part; with `spills`, spills the parts held once they pass
    /// `run_samples`.
    fn take(&mut self, part: Profile, options: &WriteOptions, run_samples: usize) -> Result<()> {
        self.parts.part(part)?;
        self.spill_if_full(options, run_samples)
    }

    /// [`Collected::take`] of a lean part (`run_samples` rows at a time
    /// when it spills).
    fn take_lean(
        &mut self,
        part: &AddressPart,
        options: &WriteOptions,
        run_samples: usize,
    ) -> Result<()> {
        if self.spills == Spills::Nothing {
            return self.parts.address_part(part);
        }
        for start in (0..part.addresses.len()).step_by(run_samples.max(1)) {
            self.parts
                .part(part.to_profile_of(start..start.saturating_add(run_samples)))?;
            self.spill_if_full(options, run_samples)?;
        }
        Ok(())
    }

    fn spill_if_full(&mut self, options: &WriteOptions, run_samples: usize) -> Result<()> {
        match self.spills != Spills::Nothing && self.parts.held_samples() >= run_samples {
            true => self.spill(options),
            false => Ok(()),
        }
    }

    /// Writes the samples held as the next run of folded lines and drops
    /// them (the tables stay, for the parts to come).
    fn spill(&mut self, options: &WriteOptions) -> Result<()> {
        let first = self
            .outputs
            .first()
            .map(|(p, _)| p.clone())
            .unwrap_or_default();
        let Some(profile) = self.parts.profile_mut() else {
            return Ok(());
        };
        prefer_sample_type(profile, options.sample_type.as_deref())?;
        let named = |e: Error| e.naming_output(&first);
        let runs = match (&mut self.runs, self.spills) {
            (Some(runs), _) => runs,
            (None, Spills::CallgrindBodies) => self.runs.insert(Runs::CallgrindBodies(
                CallgrindRuns::new(&spill_dir(&first)).map_err(named)?,
            )),
            (None, Spills::SpeedscopeSamples) => self.runs.insert(Runs::SpeedscopeSamples(
                SpeedscopeRuns::new(&spill_dir(&first)).map_err(named)?,
            )),
            (None, Spills::FirefoxTables) => self.runs.insert(Runs::FirefoxTables(
                FirefoxRuns::new(&spill_dir(&first)).map_err(named)?,
            )),
            (None, _) => self.runs.insert(Runs::FoldedLines(
                FoldedRuns::new(&spill_dir(&first)).map_err(named)?,
            )),
        };
        match runs {
            Runs::FoldedLines(runs) => runs.add(profile, options),
            Runs::CallgrindBodies(runs) => runs.add(profile),
            Runs::SpeedscopeSamples(runs) => runs.add(profile, options),
            Runs::FirefoxTables(runs) => runs.add(profile, options),
        }
        .map_err(named)?;
        // The next run is as large: its tables are made at that size at once.
        let (locations, samples) = (profile.locations().len(), profile.samples().len());
        profile.clear_locations_and_samples();
        profile.reserve(locations, samples, 0);
        Ok(())
    }
}

/// Where the runs of the output `path` are spilled: its folder.
fn spill_dir(path: &Path) -> std::path::PathBuf {
    match path.parent() {
        _ if path == Path::new("-") => std::env::temp_dir(),
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Writes an output of spilled runs; `head` is the profile's tables.
fn write_runs(
    runs: &mut Runs,
    head: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<Option<u64>> {
    match (runs, format) {
        (Runs::CallgrindBodies(runs), _) => runs.write(head, options, out),
        (Runs::SpeedscopeSamples(runs), _) => runs.write(head, options, out),
        (Runs::FirefoxTables(runs), format) => {
            let gzip = format == OutputFormat::Firefox;
            let bytes = runs.write(head, options, gzip, out)?;
            return Ok(gzip.then_some(bytes));
        }
        (Runs::FoldedLines(runs), OutputFormat::Svg) => {
            super::flamegraph::write_runs(head, runs, options, out)
        }
        (Runs::FoldedLines(runs), _) => runs
            .merge(|stack, count| writeln!(out, "{stack} {count}").map_err(Error::unnamed_output)),
    }
    .map(|()| None)
}

impl StreamedOutputs {
    /// Opens the outputs that stream ([`streams_format`]), inside the folder
    /// `within` if given (as [`write_files`]); the others are opened when
    /// they are written.
    pub fn create(
        outputs: &[(&Path, OutputFormat)],
        options: &WriteOptions,
        within: Option<&Path>,
    ) -> Result<StreamedOutputs> {
        let mut streams = Vec::new();
        let mut paths = Vec::new();
        let mut collected: Vec<((Granularity, Spills), Collected)> = Vec::new();
        for &(path, format) in outputs {
            if !streams_format(format, options) {
                let granularity = granularity_of(format, options);
                let spills = Spills::of(format, granularity);
                let key = (granularity, spills);
                let at = match collected.iter().position(|(k, _)| *k == key) {
                    Some(at) => at,
                    None => {
                        let c = Collected {
                            parts: CollectParts::folded(granularity),
                            outputs: Vec::new(),
                            spills,
                            runs: None,
                        };
                        collected.push((key, c));
                        collected.len() - 1
                    }
                };
                collected[at].1.outputs.push((path.to_path_buf(), format));
                continue;
            }
            let gzip = format == OutputFormat::Pprof;
            let mut stream = pprof::Stream::new(OutputFile::create(path, within)?, gzip);
            stream.prefer_sample_type(options.sample_type.clone());
            streams.push(stream);
            paths.push(path.to_path_buf());
        }
        Ok(StreamedOutputs {
            streams,
            paths,
            collected: collected.into_iter().map(|(_, c)| c).collect(),
            options: options.clone(),
            within: within.map(Path::to_path_buf),
            warnings: Vec::new(),
            totals: ValueTotals::default(),
            run_samples: RUN_SAMPLES,
        })
    }

    /// Spills folded lines every `samples` samples instead of
    /// [`RUN_SAMPLES`] (tests, to have many runs of a small profile).
    #[cfg(test)]
    pub(crate) fn set_run_samples(&mut self, samples: usize) {
        self.run_samples = samples;
    }

    /// Writes the rest of every output, then renames them into place
    /// together (all or none, as [`write_files`]). `before_writing` is told
    /// the parts' diagnostics ([`Profile::warn`]) before any output kept
    /// whole is written; they are returned, for the caller to show, with
    /// what the outputs' viewers cannot open ([`limits::warning`]).
    pub fn finish(mut self, before_writing: impl FnOnce(&[String])) -> Result<Vec<String>> {
        let totals = self.totals.warnings();
        let mut profiles = Vec::with_capacity(self.collected.len());
        for mut c in std::mem::take(&mut self.collected) {
            if c.runs.is_some() {
                c.spill(&self.options)?;
            }
            let mut profile = c.parts.into_profile();
            prefer_sample_type(&mut profile, self.options.sample_type.as_deref())?;
            profiles.push((profile, c.outputs, c.runs));
        }
        for text in totals {
            if !self.warnings.contains(&text) {
                self.streams.iter_mut().for_each(|s| s.warn(&text));
                profiles.iter_mut().for_each(|(p, _, _)| p.warn(&text));
                self.warnings.push(text);
            }
        }
        before_writing(&self.warnings);
        let mut pending = Vec::new();
        for (profile, outputs, runs) in &mut profiles {
            let outputs: Vec<(&Path, OutputFormat)> =
                outputs.iter().map(|(p, f)| (p.as_path(), *f)).collect();
            let within = self.within.as_deref();
            let options = &self.options;
            let limits = match runs {
                Some(runs) => {
                    let mut write = |p: &Profile, f, o: &WriteOptions, out: &mut dyn Write| {
                        write_runs(runs, p, f, o, out)
                    };
                    write_each(profile, &outputs, options, within, &mut write, &mut pending)?
                }
                None => {
                    let mut write = write_folded;
                    write_each(profile, &outputs, options, within, &mut write, &mut pending)?
                }
            };
            self.warnings.extend(limits);
        }
        drop(profiles);
        for (stream, path) in self.streams.into_iter().zip(&self.paths) {
            let file = stream.finish().map_err(|e| e.naming_output(path))?;
            pending.extend(file.flush_or_pending()?);
        }
        temporary::commit_all(pending)?;
        Ok(self.warnings)
    }
}

impl PartSink for StreamedOutputs {
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        self.warnings
            .extend(part.tables.warnings().map(str::to_owned));
        let rows = part.addresses.len().saturating_mul(part.width());
        let values = part.values.get(..rows).unwrap_or(&part.values);
        self.totals.add_rows(&part.tables, values);
        for (stream, path) in self.streams.iter_mut().zip(&self.paths) {
            stream
                .address_part(part)
                .map_err(|e| e.naming_output(path))?;
        }
        for c in &mut self.collected {
            c.take_lean(part, &self.options, self.run_samples)?;
        }
        Ok(())
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        self.warnings.extend(part.warnings().map(str::to_owned));
        self.totals.add_profile(&part);
        // Every output but the last gets a copy; the last, the part itself.
        let mut part = Some(part);
        let last = self.streams.len() + self.collected.len();
        let mut take = |i: usize| match i + 1 == last {
            true => part.take().unwrap_or_default(),
            false => part.clone().unwrap_or_default(),
        };
        for (i, (stream, path)) in self.streams.iter_mut().zip(&self.paths).enumerate() {
            stream.part(take(i)).map_err(|e| e.naming_output(path))?;
        }
        let first = self.streams.len();
        for (i, c) in self.collected.iter_mut().enumerate() {
            c.take(take(first + i), &self.options, self.run_samples)?;
        }
        Ok(())
    }
}
