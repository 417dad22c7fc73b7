//! What a reading is asked to do: the options every reader shares and one
//! options struct per format, and the one place a reading's threads are
//! made ([`ReadOptions::pool`]).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The legacy formats profconv reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
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
    /// The format's name as the command line and messages spell it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Gprof => "gprof",
            Format::Mpatrol => "mpatrol",
            Format::Dcpi => "dcpi",
            Format::Aps => "aps",
        }
    }
}

/// How the gprof reader builds stacks (docs/formats/gprof.md §4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
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

/// Options of the gprof reader.
#[derive(Debug, Clone, Default)]
pub struct GprofOptions {
    /// Address size in bytes (4 or 8) instead of detecting it.
    pub pointer_size: Option<usize>,
    /// Clock rate (ticks per second) for 4.3BSD files, which do not record it.
    pub rate: Option<u32>,
    /// Synthesized or flat stacks.
    pub stacks: GprofStacks,
    /// Convert even when `--binary` does not fit the profile (by default
    /// such a pair is refused, docs/formats/gprof.md §3.4).
    pub skip_binary_check: bool,
    /// Give each address the frames of the functions inlined there,
    /// innermost first, as DWARF describes them. Off by default: a tick
    /// goes to the function whose code holds it, the one gprof credits
    /// (with the line table's file and line, as `gprof -l` shows), so that
    /// pprof's default views show gprof's numbers.
    pub inline_frames: bool,
}

/// Options of the mpatrol reader.
#[derive(Debug, Clone, Default)]
pub struct MpatrolOptions {
    /// Split samples by allocation size class.
    pub size_classes: bool,
}

/// Options of the DCPI reader.
#[derive(Debug, Clone, Default)]
pub struct DcpiOptions {
    /// Instruction size in bytes (default 4).
    pub insn_size: Option<u32>,
    /// Which epochs of a database to read.
    pub epoch: EpochSelect,
    /// A directory to find images in by their `path` header.
    pub image_dir: Option<PathBuf>,
}

/// Options of the APS reader.
#[derive(Debug, Clone, Default)]
pub struct ApsOptions {
    /// Call depth D instead of detecting it.
    pub call_depth: Option<usize>,
    /// Path length P instead of detecting it.
    pub path_len: Option<usize>,
    /// A copy of the board's file system, to symbolize with.
    pub image_root: Option<PathBuf>,
    /// The `pid_info` file with thread and process names.
    pub pid_info: Option<PathBuf>,
    /// Leave pid 0 (idle) out.
    pub drop_idle: bool,
}

/// How far a conversion has got, for a progress display: bytes of input
/// read so far, whether the outputs are being written, and the warnings
/// about the inputs once they are known. Readers add whole files as they
/// finish them and streamed files chunk by chunk; another thread may poll
/// it meanwhile. A conversion that is one part of a larger run (a unit of
/// an archive) also adds its bytes to the run's total, up to its share.
#[derive(Debug, Default)]
pub struct Progress {
    read: std::sync::atomic::AtomicU64,
    writing: std::sync::atomic::AtomicBool,
    warnings: std::sync::Mutex<Vec<String>>,
    /// The run's counter, and the most bytes this part adds to it.
    part_of: Option<(std::sync::Arc<Progress>, u64)>,
}

impl Progress {
    /// Bytes of input read so far.
    pub fn read(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True once the inputs are read and the outputs are being written.
    pub fn writing(&self) -> bool {
        self.writing.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The warnings about the inputs ([`crate::Profile::warn`]), once
    /// [`crate::convert`] knows them: before the outputs are written when
    /// it reads the whole profile first (so also when writing then fails),
    /// at the end when it writes as it reads.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The progress of one part of a run whose counter is `whole`: the
    /// bytes this part reads are added to `whole` too, up to `share` (the
    /// part's expected size, so that a part which reads more than planned,
    /// a decompressed input, does not push the run past its total).
    pub(crate) fn part_of(whole: std::sync::Arc<Progress>, share: u64) -> Progress {
        Progress {
            part_of: Some((whole, share)),
            ..Progress::default()
        }
    }

    pub(crate) fn add(&self, bytes: u64) {
        let before = self
            .read
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        if let Some((whole, share)) = &self.part_of {
            let after = before.saturating_add(bytes).min(*share);
            whole.add(after.saturating_sub(before.min(*share)));
        }
    }

    /// The part is done, however far it read (skipped, unchanged, failed
    /// early): the run's counter gets the rest of its share, so that it
    /// ends at the run's total.
    pub(crate) fn finish_part(&self) {
        if let Some((whole, share)) = &self.part_of {
            whole.add(share.saturating_sub(self.read().min(*share)));
        }
    }

    /// Reading is done; writing starts.
    pub(crate) fn start_writing(&self) {
        self.writing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The warnings about the inputs are `warnings`.
    pub(crate) fn set_warnings(&self, warnings: &[String]) {
        *self
            .warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = warnings.to_vec();
    }
}

/// Options of every reader: the shared ones, and one struct per format.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Force the input format instead of detecting it.
    pub format: Option<Format>,
    /// The executable (or image) to symbolize addresses with.
    pub binary: Option<PathBuf>,
    /// The most bytes read from an input that is not a regular file
    /// (standard input, a pipe, a device; default 256 MiB), and the most a
    /// gzip-compressed input may decompress to (default: 64 × its
    /// compressed size, at least 256 MiB).
    pub max_input_size: Option<u64>,
    /// gprof options.
    pub gprof: GprofOptions,
    /// mpatrol options.
    pub mpatrol: MpatrolOptions,
    /// DCPI options.
    pub dcpi: DcpiOptions,
    /// APS options.
    pub aps: ApsOptions,
    /// Where readers report the bytes they have read, if anyone watches.
    pub progress: Option<std::sync::Arc<Progress>>,
    /// Threads of work for one reading (default 1: all of it on the calling
    /// thread, and no thread started; 0 is taken as 1). With more, the
    /// steps that split over threads, the APS reader's counting of a file's
    /// records and the DCPI reader's scan of a database's images for
    /// `info`, run in one rayon pool of this many threads made for the
    /// reading; the other steps run on the calling thread. What is read is
    /// the same whatever the number: outputs never depend on it.
    pub threads: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: None,
            binary: None,
            max_input_size: None,
            gprof: GprofOptions::default(),
            mpatrol: MpatrolOptions::default(),
            dcpi: DcpiOptions::default(),
            aps: ApsOptions::default(),
            progress: None,
            threads: 1,
        }
    }
}

impl ReadOptions {
    /// The pool of [`ReadOptions::threads`] threads a reader's parallel
    /// step runs in, made once per reading; `None` for one thread: the
    /// step then runs in sequence on the calling thread.
    pub(crate) fn pool(&self) -> Result<Option<rayon::ThreadPool>> {
        if self.threads <= 1 {
            return Ok(None);
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .build()
            .map(Some)
            .map_err(|e| Error::Usage(format!("cannot start {} threads: {e}", self.threads)))
    }

    /// Reports `bytes` more of input read.
    pub(crate) fn advance(&self, bytes: u64) {
        if let Some(p) = &self.progress {
            p.add(bytes);
        }
    }
}
