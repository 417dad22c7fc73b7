//! An output written to a temporary file beside it, `.NAME.XXXXXX.tmp`,
//! and renamed into place once complete ([`Temporary`]): whole outputs and
//! streamed ones alike.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Random characters in a temporary file's name (tempfile's default).
pub const TEMP_RANDOM_LEN: usize = 6;

/// A regular file's new contents being written, renamed into place by
/// [`Temporary::commit`] (dropped uncommitted, the temporary file is
/// removed and nothing is left).
pub struct Temporary {
    out: BufWriter<tempfile::NamedTempFile>,
    path: PathBuf,
}

impl Temporary {
    /// A temporary file next to `path`, for `path`'s new contents.
    pub fn create(path: &Path) -> Result<Temporary> {
        Ok(Temporary {
            out: BufWriter::new(temporary_beside(path)?),
            path: path.to_path_buf(),
        })
    }

    /// Writes out what is buffered and renames the file into place.
    pub fn commit(self) -> Result<()> {
        let path = &self.path;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        file.persist(path).map_err(|e| Error::io(path, e.error))?;
        Ok(())
    }
}

impl Write for Temporary {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The longest file name most file systems take (`NAME_MAX`, in bytes).
const NAME_MAX: usize = 255;

/// `name` cut (at a character boundary) so that `.NAME.XXXXXX.tmp` fits in
/// [`NAME_MAX`] bytes: an output named with up to 255 bytes still gets a
/// temporary beside it.
fn within_name_max(name: &str) -> &str {
    let room = NAME_MAX - ".".len() - ".".len() - TEMP_RANDOM_LEN - ".tmp".len();
    if name.len() <= room {
        return name;
    }
    let mut end = room;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// A temporary file `.NAME.XXXXXX.tmp` next to `path`, removed when dropped
/// (NAME cut to fit [`NAME_MAX`]).
fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{}.", within_name_max(&name));
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_LEN);
    // A temporary file is private (0600) by default; the output is an
    // ordinary file, so ask for 0666 and let the umask decide, as any
    // program creating a file does.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.tempfile_in(dir).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing a new file and replacing it give the bytes written, and leave
    /// no temporary file.
    #[test]
    fn commits_replace_or_create_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let bytes: Vec<u8> = (0..3_000_000u64).map(|i| (i * 31 % 251) as u8).collect();
        for round in 0..2 {
            let mut out = Temporary::create(&path).unwrap();
            for piece in bytes.chunks(1_000_003) {
                out.write_all(piece).unwrap();
            }
            out.commit().unwrap();
            assert!(std::fs::read(&path).unwrap() == bytes, "round {round}");
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(names, vec![std::ffi::OsString::from("out.bin")]);
        }
    }

    /// Dropped uncommitted, the temporary file goes and the old file stays.
    #[test]
    fn a_dropped_output_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let mut out = Temporary::create(&path).unwrap();
        out.write_all(&vec![7; 100_000]).unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn outputs_named_with_255_bytes_get_a_temporary_that_fits() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["o".repeat(255), format!("{}.folded", "é".repeat(120))] {
            let path = dir.path().join(&name);
            let mut t = Temporary::create(&path).unwrap();
            t.write_all(b"x").unwrap();
            t.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"x");
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "no temporary left: {names:?}");
        assert!(super::super::is_temporary_name(&format!(
            ".{}.abcdef.tmp",
            within_name_max(&"o".repeat(255))
        )));
    }
}
