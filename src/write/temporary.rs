//! An output written to a temporary file beside it, `.NAME.XXXXXX.tmp`,
//! and renamed into place once complete ([`Temporary`]): whole outputs and
//! streamed ones alike. Several outputs of one conversion are renamed
//! together ([`commit_all`]) once all are complete.
//!
//! Every temporary file alive in the process is listed in one registry, so
//! that a program stopped by a signal can remove them
//! ([`remove_temporaries`]) before it exits: the library installs no signal
//! handler and owns no thread; the command line calls it from its own.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};

/// The temporary files alive in the process, by id; `closed` once
/// [`remove_temporaries`] ran (no new one is made, none is renamed).
struct Live {
    next: u64,
    files: Vec<(u64, PathBuf)>,
    closed: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    next: 0,
    files: Vec::new(),
    closed: false,
});

/// The registry, even after a thread panicked while holding it (its list
/// stays consistent: every change is one push or one retain).
fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary output file the process has open and not yet
/// renamed into place, and returns how many it removed. Meant for a program
/// about to exit on a signal, from an ordinary thread (it takes a lock and
/// allocates, so not from the signal handler itself).
///
/// It is final: afterwards no temporary file can be created and none is
/// renamed ([`crate::convert`] and archive runs then fail with an
/// [`io::ErrorKind::Interrupted`] error), so a conversion still running
/// cannot leave one behind or complete a set of outputs halfway. Renames
/// of several outputs happen under the same lock, so it waits for a set
/// being renamed: afterwards every set is whole or absent.
pub fn remove_temporaries() -> usize {
    let mut live = live();
    live.closed = true;
    let files = std::mem::take(&mut live.files);
    files
        .iter()
        .filter(|(_, path)| std::fs::remove_file(path).is_ok())
        .count()
}

/// The error of an output started or finished after [`remove_temporaries`].
fn interrupted(path: &Path) -> Error {
    Error::io(
        path,
        io::Error::new(
            io::ErrorKind::Interrupted,
            "interrupted: temporary files were removed",
        ),
    )
}

/// A temporary file's place in the registry; leaves it when dropped.
struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        live().files.retain(|(id, _)| *id != self.0);
    }
}

/// Random characters in a temporary file's name (tempfile's default).
pub const TEMP_RANDOM_LEN: usize = 6;

/// A regular file's new contents being written, renamed into place by
/// [`Temporary::commit`] (dropped uncommitted, the temporary file is
/// removed and nothing is left).
pub struct Temporary {
    // Written as a plain file (tempfile's own Write adds the temporary's
    // name to every error); the path removes the file when dropped, then
    // the entry leaves the registry.
    out: BufWriter<std::fs::File>,
    temp: tempfile::TempPath,
    path: PathBuf,
    registered: Registered,
}

impl Temporary {
    /// A temporary file next to `path`, for `path`'s new contents, listed
    /// in the registry of [`remove_temporaries`] until renamed or dropped.
    pub fn create(path: &Path) -> Result<Temporary> {
        let mut live = live();
        if live.closed {
            return Err(interrupted(path));
        }
        let (file, temp) = temporary_beside(path)?.into_parts();
        let id = live.next;
        live.next += 1;
        live.files.push((id, temp.to_path_buf()));
        Ok(Temporary {
            out: BufWriter::new(file),
            temp,
            path: path.to_path_buf(),
            registered: Registered(id),
        })
    }

    /// Writes out what is buffered and renames the file into place.
    pub fn commit(self) -> Result<()> {
        commit_all(vec![self])
    }
}

/// Writes out what each temporary buffers, then renames them all into
/// place under the registry's lock, so that [`remove_temporaries`] sees
/// either none of them renamed or all. If writing any out fails (a full
/// disk), none is renamed and all are removed.
pub fn commit_all(temporaries: Vec<Temporary>) -> Result<()> {
    let mut flushed = Vec::with_capacity(temporaries.len());
    for t in temporaries {
        let file = t
            .out
            .into_inner()
            .map_err(|e| Error::output_io(&t.path, e.into_error()))?;
        drop(file);
        flushed.push((t.temp, t.path, t.registered));
    }
    let live = live();
    if live.closed {
        let path = flushed.first().map_or_else(PathBuf::new, |f| f.1.clone());
        drop(live);
        return Err(interrupted(&path));
    }
    let mut done = Ok(());
    let mut entries = Vec::with_capacity(flushed.len());
    for (file, path, registered) in flushed {
        entries.push(registered);
        if done.is_ok() {
            done = file
                .persist(&path)
                .map(drop)
                .map_err(|e| Error::io(&path, e.error));
        }
    }
    // The entries leave the registry (their Drop locks it) after the lock.
    drop(live);
    drop(entries);
    done
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
/// (NAME cut to fit [`NAME_MAX`]). Opened by our own closure, so that an
/// error is the system's, naming no temporary: the caller names `path`.
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
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_LEN)
        .make_in(dir, |temp| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            // A temporary file is private (0600) by default; the output is
            // an ordinary file, so ask for 0666 and let the umask decide,
            // as any program creating a file does.
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o666);
            options.open(temp)
        })
        .map_err(|e| Error::io(path, e))
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
