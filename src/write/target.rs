//! Where an output goes, and the one rule for what profconv may write
//! ([`refuse_input_as_output`]): never a file the run reads, by any
//! spelling. An output that is the same file as an input (same device and
//! inode, so also through symbolic and hard links, or the same canonical
//! path), that lies inside an input folder (a DCPI database, an APS capture,
//! an image folder), that is standard input's file, or a standard output
//! redirected to an input (`>> gmon.out`) is refused before anything is
//! converted. Special files (devices, FIFOs, sockets) are written through as they
//! are, and a symbolic link's target is replaced, never the link itself, so
//! `-o /dev/null`, `-o /dev/stdout` or `-o link.svg` do what they say.
//!
//! Outputs confined to a folder (an archive run's OUT_DIR) are never
//! written through a link ([`check_within`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where [`resolve`] says to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-`: standard output.
    Stdout,
    /// A device, FIFO or socket: opened and written in place (no temporary
    /// file, which would replace the node with a regular file).
    Special(PathBuf),
    /// A regular file, existing or not (a symbolic link's final target):
    /// written through a temporary file and a rename.
    Regular(PathBuf),
}

/// How many symbolic links [`resolve`] follows (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Follows `path` through symbolic links to what is to be written.
pub fn resolve(path: &Path) -> Result<Target> {
    if path == Path::new("-") {
        return Ok(Target::Stdout);
    }
    match std::fs::metadata(path) {
        // Opened by the name given: `/dev/stdout` is a link to
        // `/proc/self/fd/1`, whose own target (`pipe:[…]`) has no name.
        Ok(m) if !m.is_file() && !m.is_dir() => Ok(Target::Special(path.to_path_buf())),
        Ok(m) if m.is_dir() => Err(Error::Usage(format!(
            "the output {} is a directory; name a file (or use `profconv convert` for archives)",
            path.display()
        ))),
        Ok(_) => Ok(Target::Regular(
            path.canonicalize().map_err(|e| Error::io(path, e))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => dangling(path),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// A path that does not exist yet, possibly through a dangling symbolic
/// link: the file the link names is the one to create.
fn dangling(path: &Path) -> Result<Target> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&at).map_err(|e| Error::io(&at, e))?;
                at = match at.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(Target::Regular(at)),
        }
    }
    Err(Error::Usage(format!(
        "the output {} is a chain of more than {MAX_LINKS} symbolic links",
        path.display()
    )))
}

/// True when `a` and `b` name the same existing file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if ma.dev() == mb.dev() && ma.ino() == mb.ino() {
            return true;
        }
    }
    let _ = (ma, mb);
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Refuses an output that is a file the run reads: one of `inputs` (an
/// input, the `--binary`, a binary map…), a file inside one of them that is
/// a folder (`--image-dir`, a DCPI database), or, for the input `-`,
/// standard input's file (`profconv - -o in.gmon < in.gmon`). The output
/// `-` is refused when standard output is a regular file that is an input
/// (`>> in.gmon`), as cat refuses "input file is output file". Other
/// special files are exempt: `-o /dev/null` while reading `/dev/stdin` is no
/// overwrite.
pub fn refuse_input_as_output(output: &Path, inputs: &[&Path]) -> Result<()> {
    let found = match resolve(output)? {
        Target::Special(_) => None,
        Target::Stdout => stdout_is_input(inputs),
        Target::Regular(file) => inputs.iter().copied().find(|input| is_read(&file, input)),
    };
    match found {
        Some(input) if output == Path::new("-") => Err(Error::Usage(format!(
            "standard output is the input {}: refusing to write an input; redirect it to another file",
            shown(input)
        ))),
        Some(input) if std::fs::metadata(input).is_ok_and(|m| m.is_dir()) => {
            Err(Error::Usage(format!(
                "the output {} is inside the input folder {}: refusing to write an input; choose a place outside it",
                output.display(),
                input.display()
            )))
        }
        Some(input) => Err(Error::Usage(format!(
            "the output {} is the same file as the input {}: refusing to overwrite an input",
            output.display(),
            shown(input)
        ))),
        None => Ok(()),
    }
}

/// An input as messages name it: `-` is standard input.
fn shown(input: &Path) -> String {
    if input == Path::new("-") {
        "- (standard input's file)".into()
    } else {
        input.display().to_string()
    }
}

/// Is `file` (a regular output, existing or not) the input `input`, or
/// inside it when it is a folder?
fn is_read(file: &Path, input: &Path) -> bool {
    if input == Path::new("-") {
        return std::fs::metadata(file)
            .ok()
            .zip(std_file(StdStream::In))
            .is_some_and(|(out, stdin)| identity(&out) == identity(&stdin));
    }
    match std::fs::metadata(input) {
        Ok(m) if m.is_dir() => {
            let (Ok(dir), Some(place)) = (input.canonicalize(), canonical_place(file)) else {
                return false;
            };
            place.starts_with(dir)
        }
        _ => same_file(file, input),
    }
}

/// The canonical path of `file`, which may not exist yet: its folder made
/// canonical, then its name.
fn canonical_place(file: &Path) -> Option<PathBuf> {
    if let Ok(place) = file.canonicalize() {
        return Some(place);
    }
    let name = file.file_name()?;
    let folder = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(folder.canonicalize().ok()?.join(name))
}

/// The input standard output writes to, when it is a regular file that is
/// one of `inputs` (or inside an input folder).
fn stdout_is_input<'a>(inputs: &[&'a Path]) -> Option<&'a Path> {
    let out = std_file(StdStream::Out).filter(std::fs::Metadata::is_file)?;
    // Its name, for inputs that are folders (Linux names the open file).
    let named = std::fs::read_link("/proc/self/fd/1").ok();
    inputs.iter().copied().find(|input| {
        if *input == Path::new("-") {
            return std_file(StdStream::In).is_some_and(|i| identity(&i) == identity(&out));
        }
        match std::fs::metadata(input) {
            Ok(m) if m.is_dir() => input
                .canonicalize()
                .ok()
                .zip(named.as_deref())
                .is_some_and(|(dir, place)| place.starts_with(dir)),
            Ok(m) => identity(&m) == identity(&out),
            Err(_) => false,
        }
    })
}

/// Standard input or output.
#[derive(Clone, Copy)]
enum StdStream {
    In,
    Out,
}

/// What standard input or output is open on (`None` when closed).
fn std_file(which: StdStream) -> Option<std::fs::Metadata> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = match which {
            StdStream::In => std::io::stdin().as_fd().try_clone_to_owned(),
            StdStream::Out => std::io::stdout().as_fd().try_clone_to_owned(),
        };
        std::fs::File::from(fd.ok()?).metadata().ok()
    }
    #[cfg(not(unix))]
    {
        let _ = which;
        None
    }
}

/// A file's device and inode (`None` where the system has none).
fn identity(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

/// Checks that writing the file `out` stays inside the folder `root`:
/// every component from `root` down to `out`'s folder is a real folder (not
/// a symbolic link, not a file), and `out`, when it exists, a regular file.
/// With `create`, missing folders are made. Called before an output's
/// temporary file is made and again before it is renamed into place.
pub(crate) fn within(root: &Path, out: &Path, create: bool) -> Result<()> {
    let outside = |at: &Path, why: &str| {
        Error::io(
            at,
            std::io::Error::other(format!(
                "{why}: not followed, so no output is written outside the output directory"
            )),
        )
    };
    let rel = out.strip_prefix(root).unwrap_or(out);
    let parts: Vec<_> = rel.components().collect();
    let mut at = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let last = i + 1 == parts.len();
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(outside(&at, "a symbolic link in the output directory"))
            }
            Ok(m) if !last && !m.is_dir() => return Err(outside(&at, "not a folder")),
            Ok(m) if last && !m.is_file() => return Err(outside(&at, "not a regular file")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !last && !create {
                    return Err(Error::io(&at, e));
                }
                if !last {
                    match std::fs::create_dir(&at) {
                        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                            return Err(Error::io(&at, e))
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => return Err(Error::io(&at, e)),
        }
    }
    Ok(())
}

/// [`within`] without making folders: the check made again right before
/// an output's temporary file is created and before it is renamed.
pub(crate) fn check_within(root: &Path, out: &Path) -> Result<()> {
    within(root, out, false)
}

/// True when `dir` is a folder inside `root` and every component from
/// `root` down to it is a real folder (not a symbolic link, not a file): a
/// folder whose files may be listed and removed. False when it is missing.
pub(crate) fn is_folder_within(root: &Path, dir: &Path) -> bool {
    let Ok(rel) = dir.strip_prefix(root) else {
        return false;
    };
    let mut at = root.to_path_buf();
    rel.components().all(|part| {
        at.push(part);
        matches!(part, std::path::Component::Normal(_))
            && std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir())
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_to_their_target_and_devices_stay_special() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.svg");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.path().join("link.svg");
        std::os::unix::fs::symlink("a.svg", &link).unwrap();
        assert_eq!(
            resolve(&link).unwrap(),
            Target::Regular(dir.path().canonicalize().unwrap().join("a.svg"))
        );
        assert_eq!(
            resolve(Path::new("/dev/null")).unwrap(),
            Target::Special("/dev/null".into())
        );
        let dangling = dir.path().join("new.svg");
        std::os::unix::fs::symlink("sub/out.svg", &dangling).unwrap();
        assert_eq!(
            resolve(&dangling).unwrap(),
            Target::Regular(dir.path().join("sub/out.svg"))
        );
        assert!(resolve(dir.path()).is_err());
    }

    #[test]
    fn an_input_named_as_output_is_refused_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("gmon.out");
        std::fs::write(&input, b"gmon").unwrap();
        let hard = dir.path().join("hard.pb.gz");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.path().join("soft.pb.gz");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        for out in [&input, &hard, &soft] {
            let e = refuse_input_as_output(out, &[&input]).unwrap_err();
            assert!(e.to_string().contains("same file as the input"), "{e}");
        }
        refuse_input_as_output(&dir.path().join("other.pb.gz"), &[&input]).unwrap();
    }
}
