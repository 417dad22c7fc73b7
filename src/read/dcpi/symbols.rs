//! Symbolization of DCPI images with `--binary` or `--image-dir` (docs/formats/dcpi.md §6.7).

use std::path::PathBuf;

use super::super::options::ReadOptions;
use super::{Collection, Image, Warnings};
use crate::error::Result;
use crate::profile::{basename, MappingId, Profile};
use crate::symbolize::{self, Relocation};

/// Symbolizes the images that `--binary` or `--image-dir` provide.
pub(super) fn symbolize_images(
    profile: &mut Profile,
    collection: &Collection,
    mapped: &[(MappingId, usize)],
    options: &ReadOptions,
    warnings: &mut Warnings,
) -> Result<()> {
    let mut work: Vec<(MappingId, &Image, PathBuf)> = Vec::new();
    if let Some(binary) = &options.binary {
        let wanted = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let matching: Vec<&(MappingId, usize)> = if mapped.len() == 1 {
            mapped.iter().collect()
        } else {
            mapped
                .iter()
                .filter(|(_, i)| {
                    let image = &collection.images[*i];
                    basename(&image.name) == wanted
                        || image.paths.iter().any(|p| basename(p) == wanted)
                })
                .collect()
        };
        if matching.is_empty() {
            warnings.add(
                binary,
                format!("--binary matches no image of the profile by name ({wanted}): nothing symbolized"),
            );
        }
        for (m, i) in matching {
            work.push((*m, &collection.images[*i], binary.clone()));
        }
    } else if let Some(dir) = &options.dcpi.image_dir {
        for (m, i) in mapped {
            let image = &collection.images[*i];
            let mut candidates = Vec::new();
            for p in image.paths.iter().chain(std::iter::once(&image.name)) {
                candidates.push(dir.join(p.trim_start_matches(['/', '\\'])));
                candidates.push(dir.join(basename(p)));
            }
            match candidates.into_iter().find(|c| c.is_file()) {
                Some(found) => work.push((*m, image, found)),
                None => warnings.add(
                    dir,
                    format!(
                        "no file for image {} ({}) in this directory",
                        image.id, image.name
                    ),
                ),
            }
        }
    }
    for (mapping, image, path) in work {
        let binary = match symbolize::Binary::open(&path) {
            Ok(b) => b,
            Err(e) if options.binary.is_some() => return Err(e),
            Err(e) => {
                warnings.add(&path, format!("not symbolized: {e}"));
                continue;
            }
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
        let stats = symbolize::symbolize_mapping(profile, mapping, &binary, relocation);
        if stats.symbolized == 0 && stats.locations > 0 {
            warnings.add(
                &path,
                format!(
                    "no sampled address of image {} has a symbol in this file",
                    image.id
                ),
            );
        }
    }
    Ok(())
}
