//! mpatrol reader: `mpatrol.out` allocation profiles (docs/formats/mpatrol.md).
//!
//! The file is a dump of native C words (`size_t`, `unsigned long`, `void *`)
//! in the producing machine's byte order and word size, framed by the magic
//! `MPTL` at both ends. [`parse`] checks and keeps everything in it;
//! [`to_profile`] turns it into a heap profile: one sample per profiling
//! record, its stack the chain of call sites from the one that carries the
//! record, leaf first, with function names from the file's own string table.

mod check;
mod file;
mod info;
mod parse;
mod profile;

pub use file::MAGIC;
pub use parse::parse;
pub use profile::to_profile;

use super::info::Summary;
use super::input::{Detection, Input};
use super::options::ReadOptions;
use crate::error::{Error, Result};
use crate::profile::Profile;
use info::describe;

/// A file that starts with the magic: the trailing magic and the marker are
/// checked by [`parse`], which names the older layouts it refuses, so they
/// are detected here too.
pub fn detect(head: &[u8], _file_len: u64) -> bool {
    head.starts_with(MAGIC)
}

/// A file that starts with the magic.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Magic
    } else {
        Detection::No
    }
}

/// Reads one or more `mpatrol.out` files into one profile (summed).
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let mut out: Option<Profile> = None;
    for input in inputs {
        let (path, data) = (input.name(), input.bytes()?);
        options.advance(input.len());
        let file = parse(path, data)?;
        let profile = to_profile(path, data, &file, options)?;
        match &mut out {
            None => out = Some(profile),
            Some(acc) => acc.merge(&profile)?,
        }
    }
    out.ok_or_else(|| Error::Usage("no input given".into()))
}

/// What `profconv info` shows about each file.
pub fn info(inputs: &[Input], _options: &ReadOptions) -> Result<Summary> {
    let mut summary = Summary::default();
    for input in inputs {
        let path = input.name();
        let file = parse(path, input.bytes()?)?;
        summary.push(describe(path, &file));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests;
