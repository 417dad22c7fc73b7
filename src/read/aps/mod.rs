//! APS sample files (`docs/formats/aps.md`): the per-CPU sample files of Huawei's
//! "Advanced Performance Solution" board profiler.
//!
//! A file is a 56-byte head, `index` fixed-size records (`36 + 4·D` bytes,
//! D = call depth), a module table and a vma table (entries carrying a
//! `P`-byte path), with no padding (§3). D and P are compile-time constants of
//! the board's collector, so they are found from the file itself: the unique
//! (D, P) that puts the module and vma magics where they must be and ends the
//! file exactly (§10).
//!
//! Records are streamed: they are counted per distinct (mode, pid, tid,
//! event, pc, call stack) while reading, so memory grows with the number of
//! distinct stacks, not with the number of records.

mod capture;
mod count;
mod head;
mod images;
mod info;
mod key_table;
mod layout;
mod mapping;
mod pid_info;
mod profile;
mod records;
mod source;
mod tables;

pub use capture::is_sample_file_name;
pub use head::{FILE_HEAD_MAGIC, FILE_HEAD_SIZE};
pub use pid_info::PidInfo;
pub use records::ApsFile;

use std::path::Path;

use super::directory::Survey;
use super::info::{Entry, Summary};
use super::input::{Detection, Input};
use super::options::{Format, ReadOptions};
use crate::error::Result;
use crate::profile::Profile;
use capture::expand_inputs;
use capture::sample_files_in;
use count::count_records;
use head::magic_order;
use head::TABLE_HEAD_SIZE;
use images::symbolize_images;
use info::{describe_file, KEY_WIDTH};
use profile::build_profile;

/// An APS sample file starts with the file-head magic in either byte order
/// and holds at least the head and the two table heads.
pub fn detect(head: &[u8], file_len: u64) -> bool {
    magic_order(head, FILE_HEAD_MAGIC).is_some() && file_len >= FILE_HEAD_SIZE + 2 * TABLE_HEAD_SIZE
}

/// The file-head magic in either byte order, and room for the heads.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Magic
    } else {
        Detection::No
    }
}

/// A directory holding `sample_cpu_<N>_…` files (§7).
pub fn is_capture(path: &Path) -> bool {
    sample_files_in(path).is_ok_and(|files| !files.is_empty())
}

/// A capture directory by its layout (§7): its profiles are all APS
/// sample files, directly in it and named `sample_cpu_<N>_…`.
pub fn detect_dir(_path: &Path, survey: &Survey) -> bool {
    !survey.profiles.is_empty()
        && survey.profiles.iter().all(|(format, rel)| {
            *format == Format::Aps && rel.components().count() == 1 && is_sample_file_name(rel)
        })
}

/// Reads APS sample files (and capture directories) into one profile.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let inputs = expand_inputs(inputs, options)?;
    let pid_info = inputs.pid_info.as_deref().map(PidInfo::load).transpose()?;
    let mut files = Vec::with_capacity(inputs.files.len());
    let mut counts = Vec::with_capacity(inputs.files.len());
    let pool = options.pool()?;
    for sample_file in &inputs.files {
        sample_file.with(options, |input| {
            let (file, src) = ApsFile::open(input, options)?;
            counts.push(count_records(&file, &src, options, pool.as_ref())?);
            files.push(file);
            Ok(())
        })?;
    }
    let (mut profile, images) = build_profile(
        &files,
        counts,
        pid_info.as_ref(),
        inputs.pid_info.as_deref(),
    )?;
    if let Some(root) = &options.aps.image_root {
        symbolize_images(&mut profile, root, &images);
    }
    Ok(profile)
}

/// Describes the inputs: layout, head fields, tables and record counts.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<Summary> {
    let inputs = expand_inputs(inputs, options)?;
    let mut summary = Summary {
        // The pid_info line's value lines up with the files' values.
        align: Some(KEY_WIDTH + 2),
        entries: Vec::new(),
    };
    for sample_file in &inputs.files {
        let entry = sample_file.with(options, |input| describe_file(input, options))?;
        summary.push(entry);
    }
    if let Some(p) = &inputs.pid_info {
        let info = PidInfo::load(p)?;
        let value = format!("{} ({} threads)", p.display(), info.len());
        summary.push(Entry::field("pid_info", value));
    }
    Ok(summary)
}
