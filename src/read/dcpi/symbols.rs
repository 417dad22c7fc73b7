//! Symbolization of DCPI images with `--binary` or `--image-dir` (docs/formats/dcpi.md §6.7).
//!
//! Which file symbolizes which image is settled once all headers are read
//! ([`plan`]); each image's part is then symbolized as it is made, with
//! the file opened once for consecutive images that share it.

use std::path::PathBuf;

use super::super::options::ReadOptions;
use super::collection::{Collection, Image, Warnings};
use crate::error::Result;
use crate::profile::{MappingId, Profile};
use crate::symbolize::images::{self, Load, OpenImages};

/// The file to symbolize each image with, and the last one opened.
pub(super) struct Plan {
    files: Vec<Option<PathBuf>>,
    open: OpenImages,
}

/// Settles which file symbolizes each image, warning about images that
/// `--binary` matches none of or `--image-dir` has no file for.
pub(super) fn plan(c: &Collection, options: &ReadOptions, warnings: &mut Warnings) -> Plan {
    let mut files: Vec<Option<PathBuf>> = vec![None; c.images.len()];
    if let Some(binary) = &options.binary {
        // One image is the binary whatever its name; else names must match.
        let only = c.images.len() == 1;
        let mut any = false;
        for (file, image) in files.iter_mut().zip(&c.images) {
            if only || images::names_file(binary, &names(image)) {
                *file = Some(binary.clone());
                any = true;
            }
        }
        if !any {
            let wanted = images::file_name(binary);
            warnings.add(
                binary,
                format!("--binary matches no image of the profile by name ({wanted}): nothing symbolized"),
            );
        }
    } else if let Some(dir) = &options.dcpi.image_dir {
        for (file, image) in files.iter_mut().zip(&c.images) {
            let mut paths: Vec<&str> = image.paths.iter().map(String::as_str).collect();
            paths.push(&image.name);
            *file = images::in_dir(dir, &paths);
            if file.is_none() {
                warnings.add(
                    dir,
                    format!(
                        "no file for image {} ({}) in this directory",
                        image.id, image.name
                    ),
                );
            }
        }
    }
    Plan {
        files,
        // Consecutive images share a file; one open at a time bounds memory.
        open: OpenImages::new(1),
    }
}

/// The names an image is recorded under: its name and its paths.
fn names(image: &Image) -> Vec<&str> {
    std::iter::once(image.name.as_str())
        .chain(image.paths.iter().map(String::as_str))
        .collect()
}

impl Plan {
    /// Symbolizes the part of image `index` (its one mapping is the first),
    /// if the plan has a file for it.
    pub(super) fn symbolize(
        &mut self,
        image: &Image,
        index: usize,
        part: &mut Profile,
        options: &ReadOptions,
        warnings: &mut Warnings,
    ) -> Result<()> {
        let Some(path) = self.files.get(index).cloned().flatten() else {
            return Ok(());
        };
        let binary = match self.open.open(&path) {
            Ok(b) => b,
            Err(e) if options.binary.is_some() => return Err(e),
            Err(e) => {
                warnings.add(&path, format!("not symbolized: {e}"));
                return Ok(());
            }
        };
        // A profile's addresses are the image's own when tstart lies in its
        // text; otherwise (a relocated image, or tstart 0 in the older
        // variant) tstart stands for the start of `.text`.
        let load = Load::TextAt {
            start: image.tstart,
        };
        let mapping = MappingId::from_index(0);
        let Ok(stats) = images::symbolize_image(part, mapping, binary, load, false) else {
            return Ok(());
        };
        if stats.symbolized == 0 && stats.locations > 0 {
            warnings.add(
                &path,
                format!(
                    "no sampled address of image {} has a symbol in this file",
                    image.id
                ),
            );
        }
        Ok(())
    }
}
