//! Symbolization of DCPI images with `--binary` or `--image-dir` (docs/formats/dcpi.md §6.7).
//!
//! Which file symbolizes which image is settled once all headers are read
//! ([`plan`]); each image's part is then symbolized as it is made, with
//! the file opened once for consecutive images that share it.

use std::path::PathBuf;

use super::super::options::ReadOptions;
use super::collection::{Collection, Image, Warnings};
use crate::error::Result;
use crate::profile::{basename, MappingId, Profile};
use crate::symbolize::{self, Relocation};

/// The file to symbolize each image with, and the last one opened.
pub(super) struct Plan {
    files: Vec<Option<PathBuf>>,
    open: Option<(PathBuf, symbolize::Binary)>,
}

/// Settles which file symbolizes each image, warning about images that
/// `--binary` matches none of or `--image-dir` has no file for.
pub(super) fn plan(c: &Collection, options: &ReadOptions, warnings: &mut Warnings) -> Plan {
    let mut files: Vec<Option<PathBuf>> = vec![None; c.images.len()];
    if let Some(binary) = &options.binary {
        let wanted = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let only = c.images.len() == 1;
        let mut any = false;
        for (file, image) in files.iter_mut().zip(&c.images) {
            if only
                || basename(&image.name) == wanted
                || image.paths.iter().any(|p| basename(p) == wanted)
            {
                *file = Some(binary.clone());
                any = true;
            }
        }
        if !any {
            warnings.add(
                binary,
                format!("--binary matches no image of the profile by name ({wanted}): nothing symbolized"),
            );
        }
    } else if let Some(dir) = &options.dcpi.image_dir {
        for (file, image) in files.iter_mut().zip(&c.images) {
            let mut candidates = Vec::new();
            for p in image.paths.iter().chain(std::iter::once(&image.name)) {
                candidates.push(dir.join(p.trim_start_matches(['/', '\\'])));
                candidates.push(dir.join(basename(p)));
            }
            *file = candidates.into_iter().find(|c| c.is_file());
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
    Plan { files, open: None }
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
        if self.open.as_ref().is_none_or(|(p, _)| *p != path) {
            self.open = None;
            match symbolize::Binary::open(&path) {
                Ok(b) => self.open = Some((path.clone(), b)),
                Err(e) if options.binary.is_some() => return Err(e),
                Err(e) => {
                    warnings.add(&path, format!("not symbolized: {e}"));
                    return Ok(());
                }
            }
        }
        let Some((_, binary)) = &self.open else {
            return Ok(());
        };
        // A profile's addresses are the image's own when tstart lies in its
        // text; otherwise (a relocated image, or tstart 0 in the older
        // variant) tstart stands for the start of `.text`.
        let in_text = binary
            .text_range()
            .is_some_and(|(lo, hi)| image.tstart >= lo && image.tstart < hi);
        let relocation = if in_text {
            Relocation::Identity
        } else {
            Relocation::Section {
                start: image.tstart,
                section: binary
                    .section_address(".text")
                    .or_else(|| binary.text_segment().map(|s| s.vaddr))
                    .unwrap_or(0),
            }
        };
        let mapping = MappingId::from_index(0);
        let stats = symbolize::symbolize_mapping(part, mapping, binary, relocation);
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
