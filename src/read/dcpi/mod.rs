//! DCPI reader (docs/formats/dcpi.md): binary profile files of versions 0.06/0.07
//! and the older variant with no `version`/`tstart` lines, `dcpicat` text
//! dumps, and whole profile database directories.
//!
//! Reading streams in two passes over the files: first every header
//! (`index.rs`: events, images, which files hold each image; a binary
//! profile's first 64 KiB only), then the counts one image at a time
//! (`scan.rs`: each file read whole, then dropped), each image
//! becoming one lean part of the profile (rows of address and values,
//! `parts.rs`) that is handed on, its buffers reused for the next image.
//! What stays in memory is O(files + images), plus the image being read;
//! `info` keeps no counts at all, only their totals.

mod binary;
mod collection;
mod counts;
mod database;
mod dcpicat;
mod header;
mod index;
mod info;
mod interpret;
mod parts;
mod scan;
mod symbols;

use std::path::Path;

use rayon::prelude::*;

use super::directory::Survey;
use super::info::Summary;
use super::input::Detection;
use super::input::{Input, DETECT_BYTES};
use super::options::ReadOptions;
use crate::error::{Error, Result};
use crate::profile::{CollectParts, PartSink, Profile};

/// Does this file look like a binary DCPI profile or a `dcpicat` dump?
pub fn detect(head: &[u8], _file_len: u64) -> bool {
    header::looks_like_header(head, head.len() >= DETECT_BYTES) || dcpicat::looks_like(head)
}

/// DCPI files have no magic number: their header lines are recognised.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Likely
    } else {
        Detection::No
    }
}

/// Is this directory a profile database by its layout (§3)?
pub fn detect_dir(path: &Path, survey: &Survey) -> bool {
    database::is_database_layout(path, survey)
}

/// A directory with epoch directories of profiles directly below it: one
/// database, converted as one unit in archive migration.
pub fn is_database(path: &Path) -> bool {
    database::is_database(path)
}

/// Reads DCPI profile files, dumps and databases into one profile.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let mut whole = CollectParts::default();
    read_parts(inputs, options, &mut whole)?;
    Ok(whole.into_profile())
}

/// Reads DCPI profile files, dumps and databases into parts handed to
/// `sink`: a head, one part per image, and a tail of warnings (see
/// [`PartSink`]). Merged, they are the profile [`read`] returns.
pub fn read_parts(inputs: &[Input], options: &ReadOptions, sink: &mut dyn PartSink) -> Result<()> {
    parts::read_parts(inputs, options, sink)
}

/// Describes DCPI inputs: files, images, events, epochs and warnings. The
/// counts are summed as they are read, never stored. The images are
/// scanned one after the other, or side by side in the reading's pool
/// ([`ReadOptions::threads`]) and applied in image order.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<Summary> {
    let mut c = index::index(inputs, options)?;
    let scan = |c: &_, i, buf: &mut Vec<u8>| {
        scan::scan_image(c, inputs, options, (i, buf), scan::Keep::Sums)
    };
    match options.pool()? {
        None => {
            let mut buf = Vec::new();
            for i in 0..c.images.len() {
                let mut one = scan(&c, i, &mut buf)?;
                scan::apply(&mut c, &mut one);
            }
        }
        Some(pool) => {
            let scans: Vec<Result<scan::ImageScan>> = pool.install(|| {
                (0..c.images.len())
                    .into_par_iter()
                    .map(|i| scan(&c, i, &mut Vec::new()))
                    .collect()
            });
            for result in scans {
                scan::apply(&mut c, &mut result?);
            }
        }
    }
    Ok(info::describe(&c))
}

/// The instruction size from the options (docs/formats/dcpi.md §2.3: 4 unless told).
fn insn_size(options: &ReadOptions) -> Result<u32> {
    match options.dcpi.insn_size.unwrap_or(4) {
        n @ 1..=64 => Ok(n),
        n => Err(Error::Usage(format!(
            "--dcpi-insn-size {n}: the instruction size is 1 to 64 bytes"
        ))),
    }
}

/// Event indices in output order: `cycles` first (the default), then as met.
fn event_order(events: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i] != "cycles", i));
    order
}
