//! Image files: which file symbolizes an image of a profile, and how the
//! image was loaded.
//!
//! Readers say what they know about each image — the paths the profile
//! records for it, its kernel module name, where it was loaded and how — and
//! this module finds the file (`--binary` by name, an image directory, a copy
//! of a board's file system), opens it once, picks the [`Relocation`] and
//! symbolizes the image's mapping. Separate debug files (build id,
//! `.gnu_debuglink`) are found by [`Binary::open`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{symbolize_mapping, Binary, Relocation, SymbolizeStats};
use crate::error::Result;
use crate::profile::{basename, MappingId, Profile};

/// How an image was loaded: what its profiled addresses are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// The addresses are the file's own link-time addresses (a kernel).
    Linked,
    /// A process mapping of the file from offset 0 at `start`: file offset
    /// `address − start`, found in the program headers.
    Mapped {
        /// The mapping's first address.
        start: u64,
    },
    /// The file's `.text` section was loaded at `start` (images loaded by a
    /// runtime, kernel modules). Without a `.text` section there is no
    /// relocation.
    Text {
        /// Where `.text` was loaded.
        start: u64,
    },
    /// The image's text starts at `start`: the file's own addresses when
    /// `start` lies in the file's executable segments, else `.text` (or the
    /// first executable segment) loaded there.
    TextAt {
        /// The image's text start as the profile records it.
        start: u64,
    },
}

impl Load {
    /// The relocation that turns profiled addresses into `binary`'s
    /// link-time addresses, or why there is none.
    pub fn relocation(self, binary: &Binary) -> std::result::Result<Relocation, &'static str> {
        match self {
            Load::Linked => Ok(Relocation::Identity),
            Load::Mapped { start } => Ok(Relocation::FileOffset { start }),
            Load::Text { start } => match binary.section_address(".text") {
                Some(section) => Ok(Relocation::Section { start, section }),
                None => Err("no .text section"),
            },
            Load::TextAt { start } => {
                let in_text = binary
                    .text_range()
                    .is_some_and(|(lo, hi)| start >= lo && start < hi);
                if in_text {
                    return Ok(Relocation::Identity);
                }
                let section = binary
                    .section_address(".text")
                    .or_else(|| binary.text_segment().map(|s| s.vaddr))
                    .unwrap_or(0);
                Ok(Relocation::Section { start, section })
            }
        }
    }
}

/// Symbolizes `mapping` of `profile` with `binary`, the image loaded as
/// `load` says; with `build_id`, also records the file's build id on the
/// mapping. `Err` says why the file cannot symbolize the image.
pub fn symbolize_image(
    profile: &mut Profile,
    mapping: MappingId,
    binary: &Binary,
    load: Load,
    build_id: bool,
) -> std::result::Result<SymbolizeStats, &'static str> {
    let relocation = load.relocation(binary)?;
    let stats = symbolize_mapping(profile, mapping, binary, relocation);
    if build_id && !binary.build_id.is_empty() {
        profile.set_mapping_build_id(mapping, &binary.build_id);
    }
    Ok(stats)
}

/// Whether `binary` (a `--binary` file) is the image the profile names by
/// one of `names`: the same file name, whatever the directories.
pub fn names_file(binary: &Path, names: &[&str]) -> bool {
    let wanted = file_name(binary);
    names.iter().any(|n| basename(n) == wanted)
}

/// The file name of `path`, as profiles name images.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The image file in directory `dir` for an image recorded as `paths`: for
/// each path in turn, the path under `dir` (leading separators dropped), then
/// its file name in `dir`; the first that is a file.
pub fn in_dir(dir: &Path, paths: &[&str]) -> Option<PathBuf> {
    paths
        .iter()
        .flat_map(|p| {
            [
                dir.join(p.trim_start_matches(['/', '\\'])),
                dir.join(basename(p)),
            ]
        })
        .find(|candidate| candidate.is_file())
}

/// Where an absolute path of the profiled machine is in a copy of its file
/// system at `root`, if it is a file there.
pub fn under_root(root: &Path, path: &str) -> Option<PathBuf> {
    Some(root.join(path.trim_start_matches('/'))).filter(|p| p.is_file())
}

/// Kernel image files in a copy of a Linux file system: `vmlinux` (at the
/// root, in `boot/`, or anywhere) and modules (`*.ko`) by their normalized
/// name (`-` read as `_`, as the kernel does).
#[derive(Debug, Default)]
pub struct KernelImages {
    by_name: HashMap<String, PathBuf>,
}

/// Directories deeper than this are not searched for kernel images.
const KERNEL_SEARCH_DEPTH: usize = 16;
/// The search for kernel images stops after this many directory entries.
const KERNEL_SEARCH_ENTRIES: usize = 1_000_000;

impl KernelImages {
    /// Walks the tree under `root` once (bounded in depth and entries).
    pub fn find(root: &Path) -> KernelImages {
        let mut by_name = HashMap::new();
        for known in ["vmlinux", "boot/vmlinux"] {
            let path = root.join(known);
            if path.is_file() {
                by_name.insert("vmlinux".to_owned(), path);
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
                if visited > KERNEL_SEARCH_ENTRIES {
                    return KernelImages { by_name };
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() && depth < KERNEL_SEARCH_DEPTH {
                    pending.push((path, depth + 1));
                } else if let Some(key) = kind.is_file().then(|| kernel_key(&entry)).flatten() {
                    by_name.entry(key).or_insert(path);
                }
            }
        }
        KernelImages { by_name }
    }

    /// The file of kernel image `name` (`vmlinux` or a module name).
    pub fn get(&self, name: &str) -> Option<&PathBuf> {
        self.by_name.get(&normalize_module(name))
    }
}

/// The name a kernel image file is known by, if it is one.
fn kernel_key(entry: &std::fs::DirEntry) -> Option<String> {
    let name = entry.file_name().to_string_lossy().into_owned();
    if name == "vmlinux" {
        return Some(name);
    }
    name.strip_suffix(".ko").map(normalize_module)
}

/// A module name as the kernel compares them: `-` and `_` are the same.
fn normalize_module(name: &str) -> String {
    name.replace('-', "_")
}

/// Image files opened for symbolization, each opened once while it stays
/// among the last `keep` used (files that fail to open are not kept, but
/// remembered for [`OpenImages::open_once`]).
#[derive(Debug)]
pub struct OpenImages {
    open: Vec<(PathBuf, Binary)>,
    keep: usize,
    failed: std::collections::HashSet<PathBuf>,
}

impl OpenImages {
    /// Keeps up to `keep` files open (at least one).
    pub fn new(keep: usize) -> OpenImages {
        OpenImages {
            open: Vec::new(),
            keep: keep.max(1),
            failed: Default::default(),
        }
    }

    /// Like [`OpenImages::open`], but a file that failed to open before is
    /// not tried again (many mappings of one unreadable file: once).
    pub fn open_once(&mut self, path: &Path) -> Option<&Binary> {
        if self.failed.contains(path) {
            return None;
        }
        self.open(path).ok()
    }

    /// The opened file at `path`, opening it if it is not open.
    pub fn open(&mut self, path: &Path) -> Result<&Binary> {
        let index = match self.open.iter().position(|(p, _)| p == path) {
            Some(i) => i,
            None => {
                // Make room first, so that no more than `keep` are ever open.
                if self.open.len() >= self.keep {
                    self.open.remove(0);
                }
                let binary = Binary::open(path).inspect_err(|_| {
                    self.failed.insert(path.to_path_buf());
                })?;
                self.open.push((path.to_path_buf(), binary));
                self.open.len() - 1
            }
        };
        Ok(&self.open[index].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    #[test]
    fn an_image_directory_is_searched_by_path_then_by_file_name() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("usr/lib/libc.so"));
        touch(&dir.path().join("libm.so"));
        touch(&dir.path().join("app"));
        // The path under the directory wins over the file name alone.
        touch(&dir.path().join("libc.so"));
        let found = |paths: &[&str]| in_dir(dir.path(), paths);
        assert_eq!(
            found(&["/usr/lib/libc.so"]),
            Some(dir.path().join("usr/lib/libc.so"))
        );
        assert_eq!(found(&["/lib/libm.so"]), Some(dir.path().join("libm.so")));
        assert_eq!(found(&["/nowhere/x", "app"]), Some(dir.path().join("app")));
        assert_eq!(found(&["/usr/lib/libz.so"]), None);
    }

    #[test]
    fn a_binary_names_an_image_by_file_name_only() {
        let binary = Path::new("/build/out/app");
        assert!(names_file(binary, &["app"]));
        assert!(names_file(binary, &["x", "/opt/bin/app"]));
        assert!(names_file(binary, &["C:\\bin\\app"]));
        assert!(!names_file(binary, &["app2", "/app/x"]));
    }

    #[test]
    fn kernel_images_are_found_anywhere_by_normalized_module_name() {
        let root = tempfile::tempdir().unwrap();
        touch(&root.path().join("boot/vmlinux"));
        touch(
            &root
                .path()
                .join("lib/modules/6.1/kernel/drivers/snd-hda.ko"),
        );
        let kernel = KernelImages::find(root.path());
        assert_eq!(
            kernel.get("vmlinux"),
            Some(&root.path().join("boot/vmlinux"))
        );
        let module = root
            .path()
            .join("lib/modules/6.1/kernel/drivers/snd-hda.ko");
        assert_eq!(kernel.get("snd_hda"), Some(&module));
        assert_eq!(kernel.get("snd-hda"), Some(&module));
        assert_eq!(kernel.get("ext4"), None);
        assert_eq!(
            under_root(root.path(), "/boot/vmlinux"),
            Some(root.path().join("boot/vmlinux"))
        );
        assert_eq!(under_root(root.path(), "/boot"), None);
    }

    #[test]
    fn each_load_picks_its_relocation() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gprof/callgraph-nopie");
        let binary = Binary::open(&path).unwrap();
        let text = binary.section_address(".text").unwrap();
        let (lo, _) = binary.text_range().unwrap();
        assert_eq!(Load::Linked.relocation(&binary), Ok(Relocation::Identity));
        let mapped = Load::Mapped { start: 0x4000 }.relocation(&binary);
        assert_eq!(mapped, Ok(Relocation::FileOffset { start: 0x4000 }));
        let moved = Relocation::Section {
            start: 0x10,
            section: text,
        };
        assert_eq!(Load::Text { start: 0x10 }.relocation(&binary), Ok(moved));
        assert_eq!(Load::TextAt { start: 0x10 }.relocation(&binary), Ok(moved));
        let own = Load::TextAt { start: lo }.relocation(&binary);
        assert_eq!(own, Ok(Relocation::Identity));
    }

    #[test]
    fn at_most_keep_files_stay_open() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gprof");
        let mut open = OpenImages::new(1);
        open.open(&dir.join("callgraph-nopie")).unwrap();
        open.open(&dir.join("callgraph-pie")).unwrap();
        assert_eq!(open.open.len(), 1);
        assert!(open.open(&dir.join("callgraph-nopie.gmon")).is_err());
        assert!(open.open.is_empty());
    }

    #[test]
    fn open_once_does_not_try_a_failed_file_again() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gprof");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"not an executable").unwrap();
        let mut open = OpenImages::new(usize::MAX);
        assert!(open.open_once(&path).is_none());
        // Now readable: open_once remembers the failure, open tries again.
        std::fs::copy(fixtures.join("callgraph-pie"), &path).unwrap();
        assert!(open.open_once(&path).is_none());
        assert!(open.open(&path).is_ok());
        assert!(open.open_once(&fixtures.join("callgraph-nopie")).is_some());
    }
}
