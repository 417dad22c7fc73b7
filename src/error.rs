//! One error type for the library: what went wrong, in which file, at which byte.

use std::path::{Path, PathBuf};

/// Everything the library can fail with. Readers report malformed input as
/// [`Error::Format`], always with the file and the byte offset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is malformed: `what` says what was expected at `offset`.
    #[error("{}: at byte {offset}: {what}", file.display())]
    Format {
        /// The input file.
        file: PathBuf,
        /// Byte offset in the (decompressed) input.
        offset: u64,
        /// What was expected there, and what was found.
        what: String,
    },
    /// The input is well formed but uses a variant profconv does not read.
    #[error("{}: {what}", file.display())]
    Unsupported {
        /// The input file.
        file: PathBuf,
        /// The variant it uses, and what to do instead.
        what: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file being read or written.
        file: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Two profiles cannot be merged: one sample type is measured in two
    /// units (pprof's merge refuses the same).
    #[error("cannot merge profiles: sample type {sample_type} is in {first} in one and {second} in the other")]
    ConflictingUnits {
        /// The sample type both profiles have.
        sample_type: String,
        /// Its unit in the profile merged into.
        first: String,
        /// Its unit in the profile being merged.
        second: String,
    },
    /// The request itself cannot be carried out (bad option, unknown format...).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// A malformed-input error at `offset` of `file`.
    pub(crate) fn format(file: &Path, offset: u64, what: impl Into<String>) -> Self {
        Error::Format {
            file: file.to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    /// An unsupported-variant error about `file`.
    pub(crate) fn unsupported(file: &Path, what: impl Into<String>) -> Self {
        Error::Unsupported {
            file: file.to_path_buf(),
            what: what.into(),
        }
    }

    /// An I/O error on `file`.
    pub fn io(file: &Path, source: std::io::Error) -> Self {
        Error::Io {
            file: file.to_path_buf(),
            source,
        }
    }

    /// An I/O error on output `path`, `-` being named "standard output".
    pub fn output_io(path: &Path, source: std::io::Error) -> Self {
        if path == Path::new("-") {
            return Error::stdout(source);
        }
        Error::io(path, source)
    }

    /// An I/O error writing standard output (named so in the message).
    pub fn stdout(source: std::io::Error) -> Self {
        Error::io(Path::new(STANDARD_OUTPUT), source)
    }

    /// True for a write to standard output that failed because its reader
    /// closed the pipe (EPIPE): the command line ends quietly then.
    pub fn is_broken_pipe_on_stdout(&self) -> bool {
        matches!(self, Error::Io { file, source }
            if file == Path::new(STANDARD_OUTPUT)
                && source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// An I/O error of a writer, which does not know where its bytes go;
    /// [`Error::naming_output`] puts the output's name in.
    pub(crate) fn unnamed_output(source: std::io::Error) -> Self {
        Error::io(Path::new(UNNAMED_OUTPUT), source)
    }

    /// This error, with an I/O error of a writer ([`Error::unnamed_output`])
    /// naming the output `path` (`-`: standard output) instead.
    pub(crate) fn naming_output(self, path: &Path) -> Self {
        match self {
            Error::Io { file, source } if file == Path::new(UNNAMED_OUTPUT) => {
                Error::output_io(path, source)
            }
            other => other,
        }
    }

    /// This error, an I/O error naming `path` instead of the file it names
    /// (an output's resolved target becomes the path the user gave).
    pub(crate) fn with_file(self, path: &Path) -> Self {
        match self {
            Error::Io { source, .. } => Error::output_io(path, source),
            other => other,
        }
    }

    /// True when the error is about the input's content (exit code 1), false
    /// when it is about how profconv was asked to run (exit code 2): inputs
    /// that cannot be combined are the request's fault, as inputs of two
    /// formats are.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Usage(_) | Error::ConflictingUnits { .. })
    }
}

/// How errors name standard output (the output `-`).
pub const STANDARD_OUTPUT: &str = "standard output";

/// How a writer's I/O errors name their output when written with
/// [`crate::write::write`] to a writer of the caller's: the file functions
/// ([`crate::convert`], [`crate::write::write_file`]) name the real path.
const UNNAMED_OUTPUT: &str = "<output>";

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
