//! Readers, one module per legacy format, and detection of the format of an
//! input from its content.
//!
//! Every reader exposes the same four functions:
//! - `detect(head, file_len) -> bool`: does this file (its first bytes, at most
//!   [`DETECT_BYTES`], and its full length) look like this format?
//! - `read(paths, options) -> Result<Profile>`: read one or more inputs into one profile;
//! - `info(paths, options) -> Result<String>`: describe what the inputs hold.
//!
//! Readers that take directories (DCPI databases, APS capture folders) also
//! have `detect_dir(path) -> bool`.

pub mod aps;
pub mod cursor;
pub mod dcpi;
pub mod gprof;
pub mod mpatrol;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::profile::Profile;

/// How many leading bytes of a file detection looks at.
pub const DETECT_BYTES: usize = 4096;

/// The legacy formats profconv reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// GNU gprof `gmon.out` (GNU tagged, 4.4BSD and 4.3BSD layouts).
    Gprof,
    /// mpatrol `mpatrol.out` allocation profiles.
    Mpatrol,
    /// DCPI profile files, databases and `dcpicat` dumps.
    Dcpi,
    /// APS sample files.
    Aps,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Gprof => "gprof",
            Format::Mpatrol => "mpatrol",
            Format::Dcpi => "dcpi",
            Format::Aps => "aps",
        }
    }
}

/// How the gprof reader builds stacks (spec gprof §4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GprofStacks {
    /// Distribute self time over callers along the call-graph arcs.
    #[default]
    Synthesized,
    /// One-frame stacks: the function that was sampled.
    Flat,
}

/// Which DCPI epochs to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EpochSelect {
    /// Every epoch, summed per image.
    #[default]
    All,
    /// Only the newest epoch.
    Latest,
    /// The epoch with this directory name.
    Named(String),
}

/// How far reading has got, for a progress display: bytes of input read so
/// far. Readers add whole files as they finish them and streamed files
/// chunk by chunk; another thread may poll it meanwhile.
#[derive(Debug, Default)]
pub struct Progress {
    read: std::sync::atomic::AtomicU64,
}

impl Progress {
    /// Bytes read so far.
    pub fn read(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn add(&self, bytes: u64) {
        self.read
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The bytes a progress display can expect to be read from `paths`: the
/// sizes of the files, and of every file below the directories.
pub fn input_size(paths: &[PathBuf]) -> u64 {
    fn size(path: &Path, depth: usize) -> u64 {
        let Ok(meta) = std::fs::metadata(path) else {
            return 0;
        };
        if !meta.is_dir() {
            return meta.len();
        }
        if depth > 8 {
            return 0;
        }
        std::fs::read_dir(path).map_or(0, |entries| {
            entries.flatten().map(|e| size(&e.path(), depth + 1)).sum()
        })
    }
    paths.iter().map(|p| size(p, 0)).sum()
}

/// Options of every reader. Each reader uses the fields that concern it.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Force the input format instead of detecting it.
    pub format: Option<Format>,
    /// The executable (or image) to symbolize addresses with.
    pub binary: Option<PathBuf>,
    /// gprof: address size in bytes (4 or 8) instead of detecting it.
    pub gmon_pointer_size: Option<usize>,
    /// gprof: clock rate for 4.3BSD files, which do not record it.
    pub gmon_rate: Option<u32>,
    /// gprof: synthesized or flat stacks.
    pub gprof_stacks: GprofStacks,
    /// mpatrol: split samples by allocation size class.
    pub mpatrol_size_classes: bool,
    /// DCPI: instruction size in bytes (default 4).
    pub dcpi_insn_size: Option<u32>,
    /// DCPI: which epochs of a database to read.
    pub epoch: EpochSelect,
    /// DCPI: a directory to find images in by their `path` header.
    pub image_dir: Option<PathBuf>,
    /// APS: call depth D instead of detecting it.
    pub aps_call_depth: Option<usize>,
    /// APS: path length P instead of detecting it.
    pub aps_path_len: Option<usize>,
    /// APS: a copy of the board's file system, to symbolize with.
    pub image_root: Option<PathBuf>,
    /// APS: the `pid_info` file with thread and process names.
    pub pid_info: Option<PathBuf>,
    /// APS: leave pid 0 (idle) out.
    pub drop_idle: bool,
    /// Where readers report the bytes they have read, if anyone watches.
    pub progress: Option<std::sync::Arc<Progress>>,
}

impl ReadOptions {
    /// Reports `bytes` more of input read.
    pub fn advance(&self, bytes: u64) {
        if let Some(p) = &self.progress {
            p.add(bytes);
        }
    }
}

/// Reads a whole input file, decompressing it when it is gzip-compressed.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    let mut data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if data.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&data[..])
            .read_to_end(&mut out)
            .map_err(|e| {
                Error::format(
                    path,
                    0,
                    format!("gzip-compressed input does not decompress: {e}"),
                )
            })?;
        data = out;
    }
    Ok(data)
}

/// The first [`DETECT_BYTES`] of a file (decompressed when gzip) and the
/// length of the whole (decompressed) content.
pub fn read_head(path: &Path) -> Result<(Vec<u8>, u64)> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(|e| Error::io(path, e))?;
    if n == 2 && magic == [0x1f, 0x8b] {
        let data = read_input(path)?;
        let len = data.len() as u64;
        let head = data[..data.len().min(DETECT_BYTES)].to_vec();
        return Ok((head, len));
    }
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut head = magic[..n].to_vec();
    file.take((DETECT_BYTES - n) as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(path, e))?;
    Ok((head, len))
}

/// The format of one input (a file or a directory), or `None` when it is of
/// no format profconv knows.
pub fn detect(path: &Path) -> Result<Option<Format>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        if dcpi::detect_dir(path) {
            return Ok(Some(Format::Dcpi));
        }
        if aps::detect_dir(path) {
            return Ok(Some(Format::Aps));
        }
        return Ok(None);
    }
    let (head, len) = read_head(path)?;
    Ok(detect_bytes(&head, len))
}

/// The format of a file from its first bytes and its length. Formats with a
/// magic number are tried before the heuristic ones.
pub fn detect_bytes(head: &[u8], len: u64) -> Option<Format> {
    if gprof::detect_gnu(head) {
        Some(Format::Gprof)
    } else if mpatrol::detect(head, len) {
        Some(Format::Mpatrol)
    } else if aps::detect(head, len) {
        Some(Format::Aps)
    } else if dcpi::detect(head, len) {
        Some(Format::Dcpi)
    } else if gprof::detect(head, len) {
        Some(Format::Gprof)
    } else {
        None
    }
}

/// Reads all `paths` (of one format) into one profile.
pub fn read(paths: &[PathBuf], options: &ReadOptions) -> Result<Profile> {
    let format = format_of(paths, options)?;
    match format {
        Format::Gprof => gprof::read(paths, options),
        Format::Mpatrol => mpatrol::read(paths, options),
        Format::Dcpi => dcpi::read(paths, options),
        Format::Aps => aps::read(paths, options),
    }
}

/// Describes what the inputs hold, without converting them.
pub fn info(paths: &[PathBuf], options: &ReadOptions) -> Result<String> {
    let format = format_of(paths, options)?;
    match format {
        Format::Gprof => gprof::info(paths, options),
        Format::Mpatrol => mpatrol::info(paths, options),
        Format::Dcpi => dcpi::info(paths, options),
        Format::Aps => aps::info(paths, options),
    }
}

/// The one format of all inputs: forced by the options, or detected and the
/// same for every input.
pub fn format_of(paths: &[PathBuf], options: &ReadOptions) -> Result<Format> {
    if let Some(f) = options.format {
        return Ok(f);
    }
    let Some(first) = paths.first() else {
        return Err(Error::Usage("no input given".into()));
    };
    let mut format = None;
    for path in paths {
        let this = detect(path)?.ok_or_else(|| {
            Error::unsupported(
                path,
                "not a profile of any known format (gprof gmon.out, mpatrol.out, DCPI, APS); use --from to force one",
            )
        })?;
        match format {
            None => format = Some(this),
            Some(f) if f == this => {}
            Some(f) => {
                return Err(Error::Usage(format!(
                    "inputs of different formats cannot be combined: {} is {}, {} is {}",
                    first.display(),
                    f.name(),
                    path.display(),
                    this.name()
                )))
            }
        }
    }
    format.ok_or_else(|| Error::Usage("no input given".into()))
}
