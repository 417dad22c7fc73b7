//! Capture directories (§7): the `sample_cpu_<N>_…` files of one capture,
//! and the `pid_info` file beside them.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::head::{magic_order, FILE_HEAD_MAGIC};
use crate::error::{Error, Result};
use crate::read::input::Input;
use crate::read::options::ReadOptions;

/// True for a `sample_cpu_<N>_…` file name (§7).
pub fn is_sample_file_name(path: &Path) -> bool {
    cpu_from_file_name(path).is_some()
}

/// The CPU number in a `sample_cpu_<N>_<date>_<time>` file name (§7).
pub fn cpu_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("sample_cpu_")?;
    let digits = rest.split('_').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The `sample_cpu_*` files of a capture directory whose content starts with
/// the APS magic, by CPU number then name.
pub(super) fn sample_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if cpu_from_file_name(&path).is_none() || !path.is_file() {
            continue;
        }
        let mut magic = [0u8; 4];
        let starts_with_magic = File::open(&path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok_and(|()| magic_order(&magic, FILE_HEAD_MAGIC).is_some());
        if starts_with_magic || magic.starts_with(&[0x1f, 0x8b]) {
            files.push(path);
        }
    }
    files.sort_by_key(|p| (cpu_from_file_name(p), p.clone()));
    Ok(files)
}

// Reading bytes: plain files are read a window at a time and their records
// streamed (`source.rs`), gzip-compressed ones were decompressed into
// memory when the input was opened.

/// A sample file to read: one given as an input, or one found in a
/// capture directory (opened when its turn comes, so that one decompressed
/// file at a time is in memory).
pub(super) enum SampleFile<'a> {
    Given(&'a Input),
    Found(PathBuf),
}

pub(super) struct Inputs<'a> {
    pub(super) files: Vec<SampleFile<'a>>,
    pub(super) pid_info: Option<PathBuf>,
}

impl SampleFile<'_> {
    /// Runs `f` on the opened file.
    pub(super) fn with<T>(
        &self,
        options: &ReadOptions,
        f: impl FnOnce(&Input) -> Result<T>,
    ) -> Result<T> {
        match self {
            SampleFile::Given(input) => f(input),
            SampleFile::Found(path) => f(&Input::open(path, options.max_input_size)?),
        }
    }
}

/// Expands capture directories into their `sample_cpu_*` files and finds the
/// `pid_info` file: the option's, else the one in the capture directory (or
/// next to the sample files), as the reporter reads it from its data dir.
pub(super) fn expand_inputs<'a>(inputs: &'a [Input], options: &ReadOptions) -> Result<Inputs<'a>> {
    let mut files = Vec::new();
    let mut dirs = BTreeSet::new();
    for input in inputs {
        let path = input.name();
        if input.is_dir() {
            let found = sample_files_in(path)?;
            if found.is_empty() {
                return Err(Error::unsupported(
                    path,
                    "the directory holds no APS sample files (sample_cpu_<N>_<date>_<time>)",
                ));
            }
            files.extend(found.into_iter().map(SampleFile::Found));
            dirs.insert(path.to_path_buf());
        } else {
            files.push(SampleFile::Given(input));
            dirs.insert(path.parent().map(Path::to_path_buf).unwrap_or_default());
        }
    }
    let pid_info = match &options.aps.pid_info {
        Some(p) => Some(p.clone()),
        None if dirs.len() == 1 => dirs
            .iter()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".").join("pid_info")
                } else {
                    d.join("pid_info")
                }
            })
            .find(|p| p.is_file()),
        None => None,
    };
    Ok(Inputs { files, pid_info })
}

// Counting records and building the profile.
