//! gprof reader (in progress).
use std::path::{Path, PathBuf};
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::read::ReadOptions;
pub fn detect_gnu(head: &[u8]) -> bool { head.starts_with(b"gmon") }
pub fn detect(_head: &[u8], _len: u64) -> bool { false }
pub fn read(paths: &[PathBuf], _o: &ReadOptions) -> Result<Profile> {
    Err(Error::unsupported(paths.first().map_or(Path::new("-"), |p| p), "todo"))
}
pub fn info(paths: &[PathBuf], o: &ReadOptions) -> Result<String> { read(paths, o).map(|_| String::new()) }
