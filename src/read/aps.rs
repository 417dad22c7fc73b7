//! aps reader (to be written: see its issue and ../shared/specs/aps.md).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::read::ReadOptions;

pub fn detect(_head: &[u8], _file_len: u64) -> bool {
    false
}

pub fn detect_dir(_path: &Path) -> bool {
    false
}

pub fn read(paths: &[PathBuf], _options: &ReadOptions) -> Result<Profile> {
    Err(Error::unsupported(
        paths.first().map_or(Path::new("-"), |p| p),
        "the aps reader is not written yet",
    ))
}

pub fn info(paths: &[PathBuf], options: &ReadOptions) -> Result<String> {
    read(paths, options).map(|_| String::new())
}
