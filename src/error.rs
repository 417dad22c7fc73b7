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

    /// True when the error is about the input's content (exit code 1), false
    /// when it is about how profconv was asked to run (exit code 2): inputs
    /// that cannot be combined are the request's fault, as inputs of two
    /// formats are.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Usage(_) | Error::ConflictingUnits { .. })
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
