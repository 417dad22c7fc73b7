//! An output written to a temporary file beside it, `.NAME.XXXXXX.tmp`,
//! and renamed into place once complete ([`Temporary`]).
//!
//! Replacing an existing file this way makes ext4 (its default
//! `auto_da_alloc`) write the new file's data back inside the rename, so
//! that a crash cannot leave an empty file where the old one was: the rename
//! waits for the disk to take the whole output (80–100 ms for a 124 MB
//! output here). On Linux, when the output replaces a file, a thread of its
//! own starts that writeback for every few megabytes written, while the
//! rest is being produced, and the rename finds little left to write.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Random characters in a temporary file's name (tempfile's default).
pub const TEMP_RANDOM_LEN: usize = 6;

/// Bytes written between two writebacks started early.
const WRITEBACK_BYTES: u64 = 8 << 20;

/// A regular file's new contents being written, renamed into place by
/// [`Temporary::commit`] (dropped uncommitted, the temporary file is
/// removed and nothing is left).
pub struct Temporary {
    out: BufWriter<Counted>,
    path: PathBuf,
}

/// The temporary file, with what has been written to it and, when it will
/// replace a file, the thread writing it back.
struct Counted {
    file: tempfile::NamedTempFile,
    written: u64,
    writeback: Option<writeback::Early>,
}

impl Temporary {
    /// A temporary file next to `path`, for `path`'s new contents.
    pub fn create(path: &Path) -> Result<Temporary> {
        let file = temporary_beside(path)?;
        let replacing = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let writeback = if replacing {
            writeback::Early::start(file.as_file())
        } else {
            None
        };
        let counted = Counted {
            file,
            written: 0,
            writeback,
        };
        Ok(Temporary {
            out: BufWriter::new(counted),
            path: path.to_path_buf(),
        })
    }

    /// Writes out what is buffered and renames the file into place.
    pub fn commit(self) -> Result<()> {
        let path = &self.path;
        let counted = self
            .out
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        if let Some(writeback) = counted.writeback {
            writeback.stop();
        }
        counted
            .file
            .persist(path)
            .map_err(|e| Error::io(path, e.error))?;
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

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        let before = self.written;
        self.written += n as u64;
        if let Some(writeback) = &self.writeback {
            if before / WRITEBACK_BYTES != self.written / WRITEBACK_BYTES {
                writeback.up_to(self.written / WRITEBACK_BYTES * WRITEBACK_BYTES);
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A temporary file `.NAME.XXXXXX.tmp` next to `path`, removed when dropped.
fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
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

#[cfg(target_os = "linux")]
mod writeback {
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;
    use std::thread::JoinHandle;

    /// A thread starting the writeback of a file's data, up to where it is
    /// told; `sync_file_range` only starts it (and may wait for the disk's
    /// queue, which is why it is not called on the writing thread).
    pub(super) struct Early {
        ends: mpsc::Sender<u64>,
        thread: JoinHandle<()>,
    }

    impl Early {
        /// Starts the thread, with its own handle on `file`; `None` if
        /// either cannot be had (the output is written all the same).
        pub(super) fn start(file: &File) -> Option<Early> {
            let file = file.try_clone().ok()?;
            let (ends, asked) = mpsc::channel::<u64>();
            let thread = std::thread::Builder::new()
                .name("writeback".into())
                .spawn(move || {
                    let mut from = 0;
                    while let Ok(end) = asked.recv() {
                        write_back(&file, from, end);
                        from = end;
                    }
                })
                .ok()?;
            Some(Early { ends, thread })
        }

        /// Asks for the writeback of the data up to byte `end`.
        pub(super) fn up_to(&self, end: u64) {
            // A thread that is gone only means no early writeback.
            let _ = self.ends.send(end);
        }

        /// Waits for the writebacks asked to be started.
        pub(super) fn stop(self) {
            drop(self.ends);
            let _ = self.thread.join();
        }
    }

    /// Starts writing back bytes `from..end` of `file`. A hint: an error
    /// changes nothing but when the data reaches the disk.
    fn write_back(file: &File, from: u64, end: u64) {
        let (Ok(offset), Ok(len)) = (i64::try_from(from), i64::try_from(end - from)) else {
            return;
        };
        // SAFETY: sync_file_range reads no memory of ours; the descriptor
        // is open for as long as `file` lives.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod writeback {
    /// No early writeback on this system.
    pub(super) enum Early {}

    impl Early {
        pub(super) fn start(_file: &std::fs::File) -> Option<Early> {
            None
        }

        pub(super) fn up_to(&self, _end: u64) {
            match *self {}
        }

        pub(super) fn stop(self) {
            match self {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replacing a file (written back early, past several writebacks) and
    /// writing a new one give the bytes written, and leave no temporary file.
    #[test]
    fn commits_replace_or_create_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let bytes: Vec<u8> = (0..3 * WRITEBACK_BYTES + 12_345)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for round in 0..2 {
            let mut out = Temporary::create(&path).unwrap();
            assert_eq!(
                out.out.get_ref().writeback.is_some(),
                round == 1 && cfg!(target_os = "linux")
            );
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
        out.write_all(&vec![7; (WRITEBACK_BYTES + 1) as usize])
            .unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
