//! Where a whole output is written: to a file through a temporary file and
//! a rename ([`write_file`], [`write_atomically`]), to standard output, or
//! to a device in place; and outputs written part by part as the profile is
//! read ([`OutputFile`], [`StreamedOutputs`]).

use std::io::Write;
use std::path::Path;

use super::{pprof, streams_format, target, temporary, write, OutputFormat, WriteOptions};
use crate::error::{Error, Result};
use crate::profile::{AddressPart, PartSink, Profile, ValueTotals};

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
    for &(path, format) in outputs {
        let named = |e: Error| e.naming_output(path);
        match resolve(path, within)? {
            target::Target::Stdout => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                write(profile, format, options, &mut lock).map_err(named)?;
                lock.flush().map_err(|e| Error::output_io(path, e))?;
            }
            target::Target::Special(node) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&node)
                    .map_err(|e| Error::io(path, e))?;
                let mut out = std::io::BufWriter::new(file);
                write(profile, format, options, &mut out).map_err(named)?;
                out.flush().map_err(|e| Error::io(path, e))?;
            }
            target::Target::Regular(file) => {
                let mut tmp =
                    temporary::Temporary::create(&file, within).map_err(|e| e.with_file(path))?;
                write(profile, format, options, &mut tmp).map_err(named)?;
                pending.push(tmp);
            }
        }
    }
    temporary::commit_all(pending)
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

/// pprof outputs written while the profile is read in parts: a
/// [`PartSink`] for [`crate::read::read_parts`]. Each output gets every
/// part; [`StreamedOutputs::finish`] completes and renames them.
pub struct StreamedOutputs {
    streams: Vec<pprof::Stream<OutputFile>>,
    /// Each stream's output, to name in its errors.
    paths: Vec<std::path::PathBuf>,
    warnings: Vec<String>,
    /// The totals of every part's values, to say those past an `i64`.
    totals: ValueTotals,
}

impl StreamedOutputs {
    /// Opens the outputs, each of a format that [`streams_format`] allows,
    /// inside the folder `within` if given (as [`write_files`]).
    pub fn create(
        outputs: &[(&Path, OutputFormat)],
        sample_type: Option<&str>,
        within: Option<&Path>,
    ) -> Result<StreamedOutputs> {
        let mut streams = Vec::with_capacity(outputs.len());
        let mut paths = Vec::with_capacity(outputs.len());
        for &(path, format) in outputs {
            if !streams_format(format) {
                return Err(Error::Usage(format!(
                    "{}: {format:?} output cannot be written part by part",
                    path.display()
                )));
            }
            let gzip = format == OutputFormat::Pprof;
            let mut stream = pprof::Stream::new(OutputFile::create(path, within)?, gzip);
            stream.prefer_sample_type(sample_type.map(str::to_owned));
            streams.push(stream);
            paths.push(path.to_path_buf());
        }
        Ok(StreamedOutputs {
            streams,
            paths,
            warnings: Vec::new(),
            totals: ValueTotals::default(),
        })
    }

    /// Writes the rest of every output, then renames them into place
    /// together (all or none, as [`write_files`]); the parts' diagnostics
    /// ([`Profile::warn`]), for the caller to show.
    pub fn finish(mut self) -> Result<Vec<String>> {
        let totals = self.totals.warnings();
        for text in totals {
            if !self.warnings.contains(&text) {
                self.streams.iter_mut().for_each(|s| s.warn(&text));
                self.warnings.push(text);
            }
        }
        let mut pending = Vec::new();
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
        Ok(())
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        self.warnings.extend(part.warnings().map(str::to_owned));
        self.totals.add_profile(&part);
        let last = self.streams.len().saturating_sub(1);
        for (i, (stream, path)) in self.streams.iter_mut().zip(&self.paths).enumerate() {
            let named = |e: Error| e.naming_output(path);
            if i == last {
                return stream.part(part).map_err(named);
            }
            stream.part(part.clone()).map_err(named)?;
        }
        Ok(())
    }
}
