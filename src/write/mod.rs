//! Writers, one module per output format, and what they share: choosing the
//! format from a file name, picking a sample type, turning samples into
//! root-first frame stacks, and writing a file atomically.

pub mod callgrind;
pub mod flamegraph;
pub mod folded;
pub mod frames;
mod names;
pub mod pprof;
pub mod speedscope;
pub mod target;
mod temporary;

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::profile::{AddressPart, Frame, GroupBy, PartSink, Profile, Sample};

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// gzip-compressed pprof protobuf (`.pb.gz`).
    Pprof,
    /// Uncompressed pprof protobuf (`.pb`).
    PprofRaw,
    /// Folded stacks (`.folded`, `.txt`).
    Folded,
    /// Flamegraph SVG rendered with inferno (`.svg`).
    Svg,
    /// speedscope JSON (`.speedscope.json`, `.json`).
    Speedscope,
    /// callgrind profile for KCachegrind/QCachegrind and callgrind_annotate
    /// (`.callgrind`, `callgrind.out*`).
    Callgrind,
}

impl OutputFormat {
    /// The format a file name asks for by its extension.
    pub fn from_path(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let format = if callgrind::is_callgrind_name(&name) {
            OutputFormat::Callgrind
        } else if name.ends_with(".pb.gz")
            || name.ends_with(".pprof")
            || name.ends_with(".pprof.gz")
        {
            OutputFormat::Pprof
        } else if name.ends_with(".pb") {
            OutputFormat::PprofRaw
        } else if name.ends_with(".folded")
            || name.ends_with(".txt")
            || name.ends_with(".collapsed")
        {
            OutputFormat::Folded
        } else if name.ends_with(".svg") {
            OutputFormat::Svg
        } else if name.ends_with(".json") {
            OutputFormat::Speedscope
        } else {
            return None;
        };
        Some(format)
    }

    /// The conventional extension of the format (used when converting archives).
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Pprof => "pb.gz",
            OutputFormat::PprofRaw => "pb",
            OutputFormat::Folded => "folded",
            OutputFormat::Svg => "svg",
            OutputFormat::Speedscope => "speedscope.json",
            OutputFormat::Callgrind => "callgrind",
        }
    }
}

/// Options of the writers.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The sample type folded and SVG outputs show (default: the profile's default).
    pub sample_type: Option<String>,
    /// Synthetic root frames for folded, SVG and speedscope outputs; `None`
    /// keeps what the reader suggested.
    pub group_by: Option<Vec<GroupBy>>,
    /// The name of the input, for titles.
    pub title: String,
}

/// Writes `profile` in `format` to `out`.
pub fn write(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<()> {
    debug_assert_eq!(profile.check(), Ok(()), "the IR's invariants");
    match format {
        OutputFormat::Pprof => pprof::write(profile, true, out),
        OutputFormat::PprofRaw => pprof::write(profile, false, out),
        OutputFormat::Folded => folded::write(profile, options, out),
        OutputFormat::Svg => flamegraph::write(profile, options, out),
        OutputFormat::Speedscope => speedscope::write(profile, options, out),
        OutputFormat::Callgrind => callgrind::write(profile, options, out),
    }
}

/// Writes `profile` to `path` (`-` = standard output). A regular file (or a
/// symbolic link's target) is written through a temporary file in the same
/// directory that is renamed into place, so a failed run leaves nothing
/// half-written; a device or FIFO is written in place ([`target::resolve`]).
pub fn write_file(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    path: &Path,
) -> Result<()> {
    match target::resolve(path)? {
        target::Target::Stdout => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            write(profile, format, options, &mut lock)?;
            lock.flush().map_err(|e| Error::io(path, e))
        }
        target::Target::Special(node) => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&node)
                .map_err(|e| Error::io(path, e))?;
            let mut out = std::io::BufWriter::new(file);
            write(profile, format, options, &mut out)?;
            out.flush().map_err(|e| Error::io(path, e))
        }
        target::Target::Regular(file) => {
            write_atomically(&file, |out| write(profile, format, options, out))
        }
    }
}

/// True for the name of a temporary file [`write_atomically`] makes:
/// `.NAME.XXXXXX.tmp`. A killed run can leave one; archive runs remove them.
pub fn is_temporary_name(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    match inner.rsplit_once('.') {
        Some((stem, random)) => {
            !stem.is_empty()
                && random.len() == temporary::TEMP_RANDOM_LEN
                && random.chars().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
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
    let mut tmp = temporary::Temporary::create(path)?;
    fill(&mut tmp)?;
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
    /// Opens the output `path` (`-` = standard output).
    pub fn create(path: &Path) -> Result<OutputFile> {
        let sink = match target::resolve(path)? {
            target::Target::Stdout => OutputSink::Stdout(std::io::stdout()),
            target::Target::Special(node) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&node)
                    .map_err(|e| Error::io(path, e))?;
                OutputSink::Special(std::io::BufWriter::new(file))
            }
            target::Target::Regular(file) => {
                OutputSink::Temporary(temporary::Temporary::create(&file)?)
            }
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            sink,
        })
    }

    /// Flushes the output and, for a regular file, renames it into place.
    pub fn commit(self) -> Result<()> {
        let path = &self.path;
        match self.sink {
            OutputSink::Stdout(mut out) => out.flush().map_err(|e| Error::io(path, e)),
            OutputSink::Special(mut out) => out.flush().map_err(|e| Error::io(path, e)),
            OutputSink::Temporary(out) => out.commit(),
        }
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
    warnings: Vec<String>,
}

impl StreamedOutputs {
    /// Opens the outputs, each of a format that [`streams_format`] allows.
    pub fn create(outputs: &[(&Path, OutputFormat)]) -> Result<StreamedOutputs> {
        let mut streams = Vec::with_capacity(outputs.len());
        for &(path, format) in outputs {
            if !streams_format(format) {
                return Err(Error::Usage(format!(
                    "{}: {format:?} output cannot be written part by part",
                    path.display()
                )));
            }
            let gzip = format == OutputFormat::Pprof;
            streams.push(pprof::Stream::new(OutputFile::create(path)?, gzip));
        }
        Ok(StreamedOutputs {
            streams,
            warnings: Vec::new(),
        })
    }

    /// Writes the rest of every output and renames it into place; the
    /// parts' diagnostics ([`Profile::warn`]), for the caller to show.
    pub fn finish(self) -> Result<Vec<String>> {
        self.finish_with(pprof::Stream::finish)
    }

    /// [`StreamedOutputs::finish`] for a process that ends right after
    /// ([`pprof::Stream::finish_before_exit`]): what the outputs held is
    /// left for the system to take back.
    pub fn finish_before_exit(self) -> Result<Vec<String>> {
        self.finish_with(pprof::Stream::finish_before_exit)
    }

    fn finish_with(
        self,
        finish: fn(pprof::Stream<OutputFile>) -> Result<OutputFile>,
    ) -> Result<Vec<String>> {
        for stream in self.streams {
            finish(stream)?.commit()?;
        }
        Ok(self.warnings)
    }
}

impl PartSink for StreamedOutputs {
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        self.warnings
            .extend(part.tables.warnings().map(str::to_owned));
        for stream in &mut self.streams {
            stream.address_part(part)?;
        }
        Ok(())
    }

    fn part(&mut self, part: Profile) -> Result<()> {
        self.warnings.extend(part.warnings().map(str::to_owned));
        if let Some((last, others)) = self.streams.split_last_mut() {
            for stream in others {
                stream.part(part.clone())?;
            }
            last.part(part)?;
        }
        Ok(())
    }
}

/// Can `format` be written while the profile is still being read, part by
/// part ([`pprof::Stream`])? Only pprof can; the other writers need the
/// whole profile (sorted stacks, totals).
pub fn streams_format(format: OutputFormat) -> bool {
    matches!(format, OutputFormat::Pprof | OutputFormat::PprofRaw)
}

/// The index of the sample type to show: the one named in the options, else
/// the profile's default, else the last (pprof's rule).
pub fn chosen_sample_type(profile: &Profile, options: &WriteOptions) -> Result<usize> {
    if profile.sample_types().is_empty() {
        return Err(Error::Usage("the profile has no sample types".into()));
    }
    if let Some(name) = &options.sample_type {
        return profile.sample_type_index(name).ok_or_else(|| {
            let known: Vec<&str> = (0..profile.sample_types().len())
                .map(|i| profile.sample_type_name(i).0)
                .collect();
            Error::Usage(format!(
                "no sample type {name:?} in this profile; it has: {}",
                known.join(", ")
            ))
        });
    }
    Ok(profile
        .default_sample_type
        .unwrap_or(profile.sample_types().len() - 1))
}

/// The synthetic frames `group_by` puts at the root of a sample's stack
/// (its image, process, thread...), root first.
pub fn group_frames<'p>(
    profile: &'p Profile,
    sample: &Sample,
    group_by: &[GroupBy],
) -> Vec<Frame<'p>> {
    let mut frames = Vec::with_capacity(group_by.len());
    for g in group_by {
        let name = match g {
            GroupBy::Image => {
                let image = sample
                    .stack
                    .first()
                    .and_then(|&l| profile.locations().get(l.index()))
                    .and_then(|l| l.mapping)
                    .and_then(|m| profile.mappings().get(m.index()))
                    .map(|m| crate::profile::basename(profile.str(m.filename)).to_owned())
                    .filter(|n| !n.is_empty());
                image.unwrap_or_else(|| "[unknown image]".to_owned())
            }
            GroupBy::Label(key) => group_frame_name(profile, sample, key),
        };
        frames.push(Frame {
            name: std::borrow::Cow::Owned(name),
            file: None,
            line: 0,
        });
    }
    frames
}

/// The frame for a label group: `name-value` when the sample has a
/// `<key>_name` label (e.g. `thread_name`, like perf's `comm-tid`), else
/// `key value`.
fn group_frame_name(profile: &Profile, sample: &Sample, key: &str) -> String {
    let value = profile.label_text(sample, key);
    let name_key = match key {
        "pid" => "process_name",
        "tid" => "thread_name",
        other => other,
    };
    let name = if name_key != key {
        profile.label_text(sample, name_key)
    } else {
        profile.label_text(sample, &format!("{key}_name"))
    };
    match (name, value) {
        (Some(n), Some(v)) => format!("{n}-{v}"),
        (None, Some(v)) => format!("{key} {v}"),
        (Some(n), None) => n,
        (None, None) => format!("{key} ?"),
    }
}

/// The group frames to use: the options' choice, else the reader's.
pub fn effective_group_by<'a>(profile: &'a Profile, options: &'a WriteOptions) -> &'a [GroupBy] {
    options.group_by.as_deref().unwrap_or(profile.group_by())
}

#[cfg(test)]
mod tests;
