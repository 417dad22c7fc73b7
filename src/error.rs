//! One error type for the library: what went wrong, in which file, at which byte.

use std::path::{Path, PathBuf};

/// Everything the library can fail with. Readers report malformed input as
/// [`Error::Format`], always with the file and the byte offset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is malformed: `what` says what was expected at `offset`.
    #[error("{}: at byte {offset}: {what}", file.display())]
    Format {
        file: PathBuf,
        offset: u64,
        what: String,
    },
    /// The input is well formed but uses a variant profconv does not read.
    #[error("{}: {what}", file.display())]
    Unsupported { file: PathBuf, what: String },
    /// Reading or writing a file failed.
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The request itself cannot be carried out (bad option, unknown format...).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn format(file: &Path, offset: u64, what: impl Into<String>) -> Self {
        Error::Format {
            file: file.to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    pub fn unsupported(file: &Path, what: impl Into<String>) -> Self {
        Error::Unsupported {
            file: file.to_path_buf(),
            what: what.into(),
        }
    }

    pub fn io(file: &Path, source: std::io::Error) -> Self {
        Error::Io {
            file: file.to_path_buf(),
            source,
        }
    }

    /// True when the error is about the input's content (exit code 1), false
    /// when it is about how profconv was asked to run (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Usage(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
