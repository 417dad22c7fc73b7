//! Where an output goes. Inputs are never written: an output that is the
//! same file as an input (same device and inode, so also through symbolic and
//! hard links, or the same canonical path) is refused before anything is
//! read. Special files (devices, FIFOs, sockets) are written through as they
//! are, and a symbolic link's target is replaced, never the link itself, so
//! `-o /dev/null`, `-o /dev/stdout` or `-o link.svg` do what they say.

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

/// Refuses an output that is one of the inputs (or the `--binary`, or any
/// other file the run reads). Special files are exempt: `-o /dev/stdout`
/// while reading `/dev/stdin` is no overwrite.
pub fn refuse_input_as_output(output: &Path, inputs: &[&Path]) -> Result<()> {
    let Target::Regular(file) = resolve(output)? else {
        return Ok(());
    };
    match inputs.iter().find(|input| same_file(&file, input)) {
        Some(input) => Err(Error::Usage(format!(
            "the output {} is the same file as the input {}: refusing to overwrite an input",
            output.display(),
            input.display()
        ))),
        None => Ok(()),
    }
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
