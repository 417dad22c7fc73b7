//! Symbolization under `--image-root` (§6, §10): finding each mapping's ELF
//! file in the copy of the board's file system and how it was loaded.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::mapping::Image;
use super::tables::module_file_name;
use crate::profile::{MappingId, Profile};
use crate::symbolize::{self, Binary, Relocation};

/// Where a process image is in the copy of the board's file system: its path
/// under the root, with ':' replaced by '_' as the reporter does (§6).
pub(super) fn user_image_path(root: &Path, file: &str) -> PathBuf {
    let relative = file.trim_start_matches('/').replace(':', "_");
    root.join(relative)
}

/// Kernel image files under the root by normalized name (`vmlinux`, or a
/// module name with '-' read as '_'), found by walking the tree once.
pub(super) fn kernel_images(root: &Path) -> HashMap<String, PathBuf> {
    let mut found = HashMap::new();
    for known in ["vmlinux", "boot/vmlinux"] {
        let path = root.join(known);
        if path.is_file() {
            found.insert("vmlinux".to_owned(), path);
            break;
        }
    }
    let mut pending = vec![(root.to_path_buf(), 0usize)];
    let mut visited = 0usize;
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > 1_000_000 {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < 16 {
                pending.push((path, depth + 1));
            } else if kind.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let key = if name == "vmlinux" {
                    name
                } else if let Some(module) = name.strip_suffix(".ko") {
                    module.replace('-', "_")
                } else {
                    continue;
                };
                found.entry(key).or_insert(path);
            }
        }
    }
    found
}

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
    let mut binaries: HashMap<PathBuf, Option<Binary>> = HashMap::new();
    let mut kernel: Option<HashMap<String, PathBuf>> = None;
    let mut missing = BTreeSet::new();
    let mut unreadable = BTreeSet::new();
    for id in used {
        let Some(image) = images.get(id.index()) else {
            continue;
        };
        let path = match image {
            Image::User { file, .. } => Some(user_image_path(root, file)).filter(|p| p.is_file()),
            Image::Kernel { name, .. } => kernel
                .get_or_insert_with(|| kernel_images(root))
                .get(&name.replace('-', "_"))
                .cloned(),
        };
        let Some(path) = path else {
            missing.insert(match image {
                Image::User { file, .. } => file.clone(),
                Image::Kernel { name, .. } => module_file_name(name),
            });
            continue;
        };
        let binary = binaries
            .entry(path.clone())
            .or_insert_with(|| Binary::open(&path).ok());
        let Some(binary) = binary.as_ref() else {
            unreadable.insert(path.display().to_string());
            continue;
        };
        let relocation = match image {
            Image::User {
                start,
                is_sre: false,
                ..
            } => Relocation::FileOffset {
                start: u64::from(*start),
            },
            Image::Kernel { name, .. } if name == "vmlinux" => Relocation::Identity,
            Image::User { start, .. } | Image::Kernel { start, .. } => {
                let Some(section) = binary.section_address(".text") else {
                    unreadable.insert(format!("{} (no .text section)", path.display()));
                    continue;
                };
                Relocation::Section {
                    start: u64::from(*start),
                    section,
                }
            }
        };
        symbolize::symbolize_mapping(profile, id, binary, relocation);
        if !binary.build_id.is_empty() {
            profile.set_mapping_build_id(id, &binary.build_id);
        }
    }
    for file in missing {
        profile.warn(format!("APS: no image for {file} under {}", root.display()));
    }
    for file in unreadable {
        profile.warn(format!("APS: cannot symbolize with {file}"));
    }
}
