//! An output written to a temporary file beside it,
//! `.NAME.profconv-XXXXXX.tmp`, and renamed into place once complete
//! ([`Temporary`]): whole outputs and streamed ones alike. Several outputs
//! of one conversion are renamed together ([`commit_all`]) once all are
//! complete: all are placed or none (a replaced file is kept as a hard link
//! until every rename succeeded, and put back when one fails). A replaced
//! output keeps its permissions.
//!
//! The `profconv-` marker and the output's own name make a temporary
//! provably ours and provably that output's: [`Stale`] removes
//! only the marked temporaries of the outputs it is given, so a user's `.plan.backup.tmp` or
//! another process's live temporaries of other outputs are never touched.
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
    /// The folder `path` must stay inside, checked again before the rename.
    within: Option<PathBuf>,
    registered: Registered,
}

impl Temporary {
    /// A temporary file next to `path`, for `path`'s new contents, listed
    /// in the registry of [`remove_temporaries`] until renamed or dropped.
    /// With `within`, the folders from `within` down to `path` must be real
    /// folders, not symbolic links ([`super::target::check_within`]), both
    /// now and when the file is renamed into place.
    pub fn create(path: &Path, within: Option<&Path>) -> Result<Temporary> {
        if let Some(root) = within {
            super::target::check_within(root, path)?;
        }
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
            within: within.map(Path::to_path_buf),
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
/// disk), none is renamed and all are removed; if a rename fails (an
/// immutable file, a folder put in the output's place), the outputs already
/// renamed are put back as they were. A replaced file's permissions carry
/// over to its new contents.
pub fn commit_all(temporaries: Vec<Temporary>) -> Result<()> {
    let mut flushed = Vec::with_capacity(temporaries.len());
    for t in temporaries {
        let file = t
            .out
            .into_inner()
            .map_err(|e| Error::output_io(&t.path, e.into_error()))?;
        keep_permissions(&file, &t.path)?;
        drop(file);
        flushed.push((t.temp, t.path, t.within, t.registered));
    }
    let live = live();
    if live.closed {
        let path = flushed.first().map_or_else(PathBuf::new, |f| f.1.clone());
        drop(live);
        return Err(interrupted(&path));
    }
    let mut done = Ok(());
    let mut placed = Vec::with_capacity(flushed.len());
    let mut entries = Vec::with_capacity(flushed.len());
    for (file, path, within, registered) in flushed {
        entries.push(registered);
        if done.is_ok() {
            done = place(file, &path, within.as_deref()).map(|backup| placed.push((path, backup)));
        }
    }
    if done.is_err() {
        for (path, backup) in placed.into_iter().rev() {
            put_back(&path, backup);
        }
    }
    // The entries leave the registry (their Drop locks it) after the lock;
    // the backups of a set placed whole are removed as they drop.
    drop(live);
    drop(entries);
    done
}

/// Renames `file` to `path` (checked again to lie within `within`); what
/// `path` was before, as a hard link (or a copy) beside it, to put back if
/// a later output of the set fails; `None` when `path` did not exist.
fn place(
    file: tempfile::TempPath,
    path: &Path,
    within: Option<&Path>,
) -> Result<Option<tempfile::TempPath>> {
    // Between this check and the rename a folder could still be swapped for
    // a link (only renameat(2) on folders opened one by one with O_NOFOLLOW
    // would close that window); the check narrows it from a whole
    // conversion to two system calls.
    if let Some(root) = within {
        super::target::check_within(root, path)?;
    }
    let backup = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Some(
            marked_beside(path, |at| {
                std::fs::hard_link(path, at).or_else(|_| std::fs::copy(path, at).map(drop))
            })?
            .into_temp_path(),
        ),
        _ => None,
    };
    file.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(backup)
}

/// Undoes [`place`]: the old file back at `path`, or none if there was none.
/// Best effort: the error that made the set fail is the one reported.
fn put_back(path: &Path, backup: Option<tempfile::TempPath>) {
    let _ = match backup {
        Some(old) => old.persist(path).map_err(|e| e.error),
        None => std::fs::remove_file(path),
    };
}

/// Gives the new contents of `path` the permissions of the file they
/// replace (a private output stays private); a new output keeps the
/// umask's default.
fn keep_permissions(file: &std::fs::File, path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(old) if old.is_file() => file
            .set_permissions(old.permissions())
            .map_err(|e| Error::io(path, e)),
        _ => Ok(()),
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

/// What marks a temporary file as profconv's: `.NAME.profconv-XXXXXX.tmp`.
const MARKER: &str = "profconv-";

/// The start of the temporary files' names of the output `name`:
/// `.NAME.profconv-`. A name that is not UTF-8, or too long for a temporary
/// to fit in [`NAME_MAX`] bytes, is cut (at a character boundary) and given
/// a hash of its bytes (`.CUT~HASH.profconv-`), so that two outputs never
/// share a prefix.
fn prefix_of(name: &std::ffi::OsStr) -> String {
    let room = NAME_MAX - ".".len() - ".".len() - MARKER.len() - TEMP_RANDOM_LEN - ".tmp".len();
    if let Some(text) = name.to_str().filter(|t| t.len() <= room) {
        return format!(".{text}.{MARKER}");
    }
    let lossy = name.to_string_lossy();
    let mut end = lossy.len().min(room - "~".len() - 16);
    while !lossy.is_char_boundary(end) {
        end -= 1;
    }
    let hash = name
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!(".{}~{hash:016x}.{MARKER}", &lossy[..end])
}

/// The folder a file `path` lies in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new file named `.NAME.profconv-XXXXXX.tmp` next to `path`, made by
/// `make` (given its name; it must fail if the name exists), removed when
/// dropped. Errors are the system's, naming no temporary: the caller names
/// `path`.
fn marked_beside<R>(
    path: &Path,
    make: impl FnMut(&Path) -> io::Result<R>,
) -> Result<tempfile::NamedTempFile<R>> {
    let prefix = prefix_of(path.file_name().unwrap_or_default());
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_LEN)
        .make_in(folder_of(path), make)
        .map_err(|e| Error::io(path, e))
}

/// A temporary file for `path`'s new contents (see [`marked_beside`]).
fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    marked_beside(path, |temp| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        // A temporary file is private (0600) by default; the output is
        // an ordinary file, so ask for 0666 and let the umask decide,
        // as any program creating a file does.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o666);
        options.open(temp)
    })
}

/// The start of `name`'s name (`.NAME.profconv-`) when it is a marked
/// temporary file's, `.NAME.profconv-XXXXXX.tmp`.
fn marked_prefix(name: &std::ffi::OsStr) -> Option<&str> {
    let stem = name.to_str()?.strip_suffix(".tmp")?;
    let cut = stem.len().checked_sub(TEMP_RANDOM_LEN)?;
    let (prefix, random) = (stem.get(..cut)?, stem.get(cut..)?);
    let marked = prefix.starts_with('.') && prefix.ends_with(MARKER);
    (marked && random.chars().all(|c| c.is_ascii_alphanumeric())).then_some(prefix)
}

/// The marked temporary files a stopped run may have left in a folder,
/// read once whatever the folder's size ([`Stale::in_folder`]), for a run
/// about to write outputs there to remove those of its own outputs
/// ([`Stale::remove_for`]): it is then their only writer. Holds the marked
/// names only (none, but after a stopped run).
pub(crate) struct Stale {
    folder: PathBuf,
    marked: Vec<std::ffi::OsString>,
}

impl Stale {
    /// The marked temporaries in `folder` (none when it cannot be read).
    pub fn in_folder(folder: &Path) -> Stale {
        let marked = match std::fs::read_dir(folder) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.file_name())
                .filter(|name| marked_prefix(name).is_some())
                .collect(),
            Err(_) => Vec::new(),
        };
        Stale {
            folder: folder.to_path_buf(),
            marked,
        }
    }

    /// No temporaries: for a folder whose outputs are not looked at.
    pub fn none() -> Stale {
        Stale {
            folder: PathBuf::new(),
            marked: Vec::new(),
        }
    }

    /// Removes the marked temporaries of the outputs named (file names) by
    /// `outputs`, which is asked only when the folder holds a marked
    /// temporary (its own marked names only: a user's `.plan.backup.tmp`
    /// and the temporaries of other outputs stay); how many it removed.
    pub fn remove_for<I>(&mut self, outputs: impl FnOnce() -> I) -> usize
    where
        I: IntoIterator<Item = std::ffi::OsString>,
    {
        if self.marked.is_empty() {
            return 0;
        }
        let ours: std::collections::HashSet<String> =
            outputs().into_iter().map(|o| prefix_of(&o)).collect();
        let folder = &self.folder;
        let before = self.marked.len();
        self.marked.retain(|name| {
            let theirs = marked_prefix(name).is_none_or(|p| !ours.contains(p));
            let path = folder.join(name);
            theirs
                || !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                || std::fs::remove_file(&path).is_err()
        });
        before - self.marked.len()
    }
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
            let mut out = Temporary::create(&path, None).unwrap();
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
        let mut out = Temporary::create(&path, None).unwrap();
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
            let mut t = Temporary::create(&path, None).unwrap();
            t.write_all(b"x").unwrap();
            t.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"x");
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "no temporary left: {names:?}");
        let long = std::ffi::OsString::from("o".repeat(255));
        let temp = format!("{}abcdef.tmp", prefix_of(&long));
        assert!(temp.len() <= NAME_MAX, "{temp}");
        let prefix = marked_prefix(temp.as_ref());
        assert_eq!(prefix, Some(prefix_of(&long).as_str()));
        let other = std::ffi::OsString::from(format!("{}p", "o".repeat(254)));
        assert_ne!(prefix, Some(prefix_of(&other).as_str()));
    }

    /// A set whose second rename fails (a non-empty folder took the second
    /// output's place after its temporary was made) puts the first output
    /// back as it was: the old file where there was one, none where there
    /// was none.
    #[test]
    fn a_failed_rename_puts_back_the_outputs_already_placed() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new, blocked) = (
            dir.path().join("old.folded"),
            dir.path().join("new.svg"),
            dir.path().join("blocked.pb.gz"),
        );
        std::fs::write(&old, b"old").unwrap();
        let mut set = Vec::new();
        for path in [&old, &new, &blocked] {
            let mut t = Temporary::create(path, None).unwrap();
            t.write_all(b"new contents").unwrap();
            set.push(t);
        }
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("inside"), b"x").unwrap();
        let e = commit_all(set).unwrap_err();
        assert!(e.to_string().contains("blocked.pb.gz"), "{e}");
        assert_eq!(std::fs::read(&old).unwrap(), b"old");
        assert!(!new.exists());
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["blocked.pb.gz", "old.folded"],
            "no temporary, no backup left"
        );
    }

    /// A private output rewritten stays private; a new one gets the umask's
    /// default, as before.
    #[cfg(unix)]
    #[test]
    fn a_replaced_output_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private.svg");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut t = Temporary::create(&path, None).unwrap();
        t.write_all(b"new").unwrap();
        t.commit().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }

    /// Only the marked temporaries of the outputs named are stale: a
    /// user's `.plan.backup.tmp` and the temporaries of other outputs stay.
    #[test]
    fn only_an_outputs_own_marked_temporaries_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("gmon.out.pb.gz");
        let keep = [
            ".plan.backup.tmp",
            ".gmon.out.pb.gz.abcdef.tmp",
            ".gmon.out.svg.profconv-abcdef.tmp",
            ".gmon.out.pb.gz.profconv-abcdefg.tmp",
        ];
        for name in keep.iter().chain([&".gmon.out.pb.gz.profconv-a1B2c3.tmp"]) {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let ours = || [out.file_name().unwrap().to_owned()];
        let mut stale = Stale::in_folder(dir.path());
        assert_eq!(stale.remove_for(ours), 1);
        assert_eq!(stale.remove_for(ours), 0);
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = keep.map(String::from).to_vec();
        want.sort();
        assert_eq!(left, want);
    }

    /// A folder of the output tree swapped for a symbolic link while the
    /// output is being written: the rename is refused, nothing lands where
    /// the link points.
    #[cfg(unix)]
    #[test]
    fn a_folder_swapped_for_a_link_before_the_rename_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("out"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let path = root.join("sub/out.svg");
        let mut t = Temporary::create(&path, Some(&root)).unwrap();
        t.write_all(b"<svg/>").unwrap();
        std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sub")).unwrap();
        let e = t.commit().unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert!(Temporary::create(&path, Some(&root)).is_err());
    }
}
