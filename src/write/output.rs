//! Where a whole output is written: to a file through a temporary file and
//! a rename ([`write_file`], [`write_atomically`]), to standard output, or
//! to a device in place; and outputs written part by part as the profile is
//! read ([`OutputFile`], [`StreamedOutputs`]).

use std::io::Write;
use std::path::Path;

use super::{pprof, streams_format, target, temporary, write, OutputFormat, WriteOptions};
use crate::error::{Error, Result};
use crate::profile::{AddressPart, PartSink, Profile};

/// Writes `profile` to `path` (`-` = standard output). A regular file (or a
/// symbolic link's target) is written through a temporary file in the same
/// directory that is renamed into place, so a failed run leaves nothing
/// half-written; a device or FIFO is written in place.
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
    pub fn create(
        outputs: &[(&Path, OutputFormat)],
        sample_type: Option<&str>,
    ) -> Result<StreamedOutputs> {
        let mut streams = Vec::with_capacity(outputs.len());
        for &(path, format) in outputs {
            if !streams_format(format) {
                return Err(Error::Usage(format!(
                    "{}: {format:?} output cannot be written part by part",
                    path.display()
                )));
            }
            let gzip = format == OutputFormat::Pprof;
            let mut stream = pprof::Stream::new(OutputFile::create(path)?, gzip);
            stream.prefer_sample_type(sample_type.map(str::to_owned));
            streams.push(stream);
        }
        Ok(StreamedOutputs {
            streams,
            warnings: Vec::new(),
        })
    }

    /// Writes the rest of every output and renames it into place; the
    /// parts' diagnostics ([`Profile::warn`]), for the caller to show.
    pub fn finish(self) -> Result<Vec<String>> {
        for stream in self.streams {
            stream.finish()?.commit()?;
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
