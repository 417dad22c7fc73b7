//! The one place profconv reads files, and every read has a bound.
//!
//! A regular file (an input, an executable, a debug file) is read with
//! positional reads of at most the length it had when it was opened; a file
//! that turns out shorter (truncated by log rotation, a copy restarted, a
//! network file system) or different by the end of a whole read fails with
//! its name and the offset where it ended, and the run goes on with its
//! other inputs. Nothing is memory-mapped: a map of a file that shrinks
//! kills the process with SIGBUS, which no check can catch.
//!
//! Anything else (standard input, a FIFO, a device) and every auxiliary file
//! (`--known-failures`, `--binary-map`, reports, `--pid-info`) is read
//! within a [`Limit`], so that `/dev/zero` or an endless pipe is refused
//! quickly with the limit named, never read until memory runs out.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;
use std::time::SystemTime;

use crate::error::{Error, Result};

/// The default bound on what is read from a pipe, a device or an auxiliary
/// file (256 MiB).
pub(crate) const DEFAULT_LIMIT: u64 = 256 << 20;

/// At most how many bytes a read may return, and what the user can do
/// about it (said in the message when the limit is passed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    /// The most bytes read.
    pub bytes: u64,
    /// Where the limit comes from and how to raise it.
    pub why: &'static str,
}

impl Limit {
    /// `--max-input-size` when the user gave it, else [`DEFAULT_LIMIT`].
    pub(crate) fn max_input_size(given: Option<u64>) -> Limit {
        match given {
            Some(bytes) => Limit {
                bytes,
                why: "the limit given with --max-input-size; raise it with --max-input-size BYTES",
            },
            None => Limit {
                bytes: DEFAULT_LIMIT,
                why: "the default limit, 256 MiB; raise it with --max-input-size BYTES",
            },
        }
    }
}

/// A regular file opened for reading, with the length and modification
/// time it had when opened: reads past that length, or a file that shrank
/// below it, are errors.
#[derive(Debug)]
pub(crate) struct RegularFile {
    file: File,
    len: u64,
    modified: Option<SystemTime>,
}

impl RegularFile {
    /// Wraps `file`, already opened, whose metadata is `meta`.
    pub(crate) fn new(file: File, meta: &std::fs::Metadata) -> RegularFile {
        RegularFile {
            file,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    /// The file's length when it was opened.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Fills `buf` with the bytes at `offset` (which the caller keeps within
    /// [`RegularFile::len`]); a file that ends before is an error naming
    /// `name` and the offset where it ended.
    pub(crate) fn read_at(&self, name: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut done = 0usize;
        while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
            let at = offset.saturating_add(done as u64);
            match positional_read(&self.file, rest, at) {
                Ok(0) => return Err(self.shorter(name, at)),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(name, e)),
            }
        }
        Ok(())
    }

    /// The whole file, as long as it was when opened; an error naming `name`
    /// when it ended early or changed (its length or modification time)
    /// while it was read.
    pub(crate) fn read_all(&self, name: &Path) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.len_in_memory(name)?];
        self.fill_whole(name, &mut bytes)?;
        Ok(bytes)
    }

    /// [`RegularFile::read_all`] into one shared buffer, without a copy:
    /// for bytes that several readers keep (an executable and the DWARF
    /// reader of its own debug information).
    pub(crate) fn read_all_shared(&self, name: &Path) -> Result<Rc<[u8]>> {
        // Collected from an iterator of known length: one allocation, which
        // the fresh `Rc` owns alone.
        let mut bytes: Rc<[u8]> = std::iter::repeat_n(0u8, self.len_in_memory(name)?).collect();
        match Rc::get_mut(&mut bytes) {
            Some(buf) => self.fill_whole(name, buf)?,
            None => unreachable!("a fresh Rc is not shared"),
        }
        Ok(bytes)
    }

    /// The file's length at open as a buffer length.
    fn len_in_memory(&self, name: &Path) -> Result<usize> {
        usize::try_from(self.len).map_err(|_| {
            Error::unsupported(name, format!("{} bytes do not fit in memory", self.len))
        })
    }

    /// Fills `bytes` (as long as the file was at open) with the whole
    /// file, as [`RegularFile::read_all`] says.
    fn fill_whole(&self, name: &Path, bytes: &mut [u8]) -> Result<()> {
        self.read_at(name, 0, bytes)?;
        let now = self.file.metadata().map_err(|e| Error::io(name, e))?;
        if now.len() != self.len || now.modified().ok() != self.modified {
            return Err(Error::format(
                name,
                now.len().min(self.len),
                format!(
                    "the file changed while it was read: {} bytes when opened, {} now; convert it again once it is complete",
                    self.len,
                    now.len()
                ),
            ));
        }
        Ok(())
    }

    /// The error of a file that ended at or before `at`, short of its
    /// length at open.
    fn shorter(&self, name: &Path, at: u64) -> Error {
        let now = self
            .file
            .metadata()
            .map_or(String::new(), |m| format!(", {} now", m.len()));
        Error::format(
            name,
            at,
            format!(
                "expected more bytes, but the file ends before here: it is shorter than the {} bytes it had when opened{now}, so it changed while it was read (truncated or rewritten); convert it again once it is complete",
                self.len
            ),
        )
    }
}

#[cfg(unix)]
fn positional_read(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn positional_read(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// Reads all of `from` (a pipe, a device, a file) into memory, refusing to
/// go past `limit`. `what` names what was read in the message (`"not a
/// regular file"`, `"a --known-failures list"`).
pub(crate) fn read_bounded(
    name: &Path,
    from: impl Read,
    limit: Limit,
    what: &str,
) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    from.take(limit.bytes.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(|e| Error::io(name, e))?;
    if raw.len() as u64 > limit.bytes {
        return Err(too_long(name, limit, what));
    }
    Ok(raw)
}

fn too_long(name: &Path, limit: Limit, what: &str) -> Error {
    Error::unsupported(
        name,
        format!("{what}, longer than {} bytes ({})", limit.bytes, limit.why),
    )
}

/// Reads a whole auxiliary file (a list, a map, a report) of at most
/// `limit` bytes: a regular file longer than that is refused before it is
/// read, anything else (`/dev/zero`, a FIFO) once past it. `what` says what
/// the file is for, as messages name it (`"a --binary-map file"`).
pub(crate) fn read_small(path: &Path, limit: Limit, what: &str) -> Result<Vec<u8>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::unsupported(
            path,
            format!("a directory, where {what} was expected"),
        ));
    }
    if meta.is_file() && meta.len() > 0 {
        if meta.len() > limit.bytes {
            return Err(too_long(path, limit, what));
        }
        return RegularFile::new(file, &meta).read_all(path);
    }
    // FIFOs, devices, empty files (some of /proc): read up to the limit.
    read_bounded(path, file, limit, what)
}

/// Reads a whole auxiliary text file as [`read_small`] does, decoding it as
/// UTF-8 (an error at the first byte that is not).
pub(crate) fn read_small_text(path: &Path, limit: Limit, what: &str) -> Result<String> {
    let bytes = read_small(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to() as u64;
        Error::format(path, at, format!("{what} must be UTF-8 text"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(bytes: u64) -> Limit {
        Limit {
            bytes,
            why: "a test's limit",
        }
    }

    #[test]
    fn an_endless_device_is_read_up_to_the_limit_only() {
        let e = read_bounded(
            Path::new("/dev/zero"),
            std::io::repeat(0),
            Limit::max_input_size(Some(1 << 20)),
            "not a regular file",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("1048576 bytes") && e.contains("--max-input-size"),
            "{e}"
        );
        let ok = read_bounded(Path::new("-"), &[1u8, 2, 3][..], limit(3), "x").unwrap();
        assert_eq!(ok, [1, 2, 3]);
    }

    #[test]
    fn a_file_that_shrinks_between_open_and_read_fails_with_its_name_and_where_it_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rotated.log");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        let file = File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let opened = RegularFile::new(file, &meta);
        // Log rotation: the same file cut to 4000 bytes after it was opened.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4000)
            .unwrap();
        let e = opened.read_all(&path).unwrap_err();
        match &e {
            Error::Format { file, offset, what } => {
                assert_eq!(file, &path);
                assert_eq!(*offset, 4000);
                assert!(
                    what.contains("shorter than the 10000 bytes it had when opened, 4000 now"),
                    "{e}"
                );
            }
            other => panic!("expected a format error, got {other:?}"),
        }
        let mut window = [0u8; 100];
        opened.read_at(&path, 0, &mut window).unwrap();
        let e = opened.read_at(&path, 3950, &mut window).unwrap_err();
        assert!(e.to_string().contains("at byte 4000"), "{e}");
    }

    #[test]
    fn a_file_that_grows_while_read_whole_is_said_to_have_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("growing");
        std::fs::write(&path, b"first").unwrap();
        let file = File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let opened = RegularFile::new(file, &meta);
        let mut appended = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut appended, b" and more").unwrap();
        let e = opened.read_all(&path).unwrap_err().to_string();
        assert!(e.contains("changed while it was read"), "{e}");
    }

    #[test]
    fn an_auxiliary_file_past_its_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list");
        std::fs::write(&path, vec![b'a'; 100]).unwrap();
        let e = read_small(&path, limit(10), "a --known-failures list")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a --known-failures list, longer than 10 bytes (a test's limit)"),
            "{e}"
        );
        assert_eq!(read_small(&path, limit(100), "x").unwrap().len(), 100);
        let e = read_small(Path::new("/dev/zero"), limit(1000), "a report")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero: a report, longer than 1000 bytes"),
            "{e}"
        );
    }
}
