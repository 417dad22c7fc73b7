//! Symbolization under `--image-root` (§6, §10): which file in the copy of
//! the board's file system each mapping is, and how it was loaded. Finding,
//! opening and relocating are `symbolize::images`' job.

use std::collections::BTreeSet;
use std::path::Path;

use super::mapping::Image;
use super::tables::module_file_name;
use crate::profile::{MappingId, Profile};
use crate::symbolize::images::{self, KernelImages, Load, OpenImages};

/// Symbolizes every mapping that has locations with the ELF files found
/// under `root` (§10): process images through their program headers (file
/// offset `pc − vm_start`), SRE images and modules from `.text`, vmlinux
/// by absolute address. Caller frames are looked up at `address − 1`.
pub(super) fn symbolize_images(profile: &mut Profile, root: &Path, images: &[Image]) {
    let used: BTreeSet<MappingId> = profile
        .locations()
        .iter()
        .filter_map(|l| l.mapping)
        .collect();
    let mut files = OpenImages::new(usize::MAX);
    let mut kernel: Option<KernelImages> = None;
    let mut missing = BTreeSet::new();
    let mut unreadable = BTreeSet::new();
    for id in used {
        let Some(image) = images.get(id.index()) else {
            continue;
        };
        let path = match image {
            // The reporter writes ':' in file names as '_' (§6).
            Image::User { file, .. } => images::under_root(root, &file.replace(':', "_")),
            Image::Kernel { name, .. } => kernel
                .get_or_insert_with(|| KernelImages::find(root))
                .get(name)
                .cloned(),
        };
        let Some(path) = path else {
            missing.insert(match image {
                Image::User { file, .. } => file.clone(),
                Image::Kernel { name, .. } => module_file_name(name),
            });
            continue;
        };
        let Some(binary) = files.open_once(&path) else {
            unreadable.insert(path.display().to_string());
            continue;
        };
        if let Err(why) = images::symbolize_image(profile, id, binary, load(image), true) {
            unreadable.insert(format!("{} ({why})", path.display()));
        }
    }
    for file in missing {
        profile.warn(format!("APS: no image for {file} under {}", root.display()));
    }
    for file in unreadable {
        profile.warn(format!("APS: cannot symbolize with {file}"));
    }
}

/// How an image was loaded: a process image mapped from its file, vmlinux
/// at its own addresses, SRE images and modules by their `.text` (§10).
fn load(image: &Image) -> Load {
    match image {
        Image::User {
            start,
            is_sre: false,
            ..
        } => Load::Mapped {
            start: u64::from(*start),
        },
        Image::Kernel { name, .. } if name == "vmlinux" => Load::Linked,
        Image::User { start, .. } | Image::Kernel { start, .. } => Load::Text {
            start: u64::from(*start),
        },
    }
}
