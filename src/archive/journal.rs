//! The records of a run as its units finish, kept on disk rather than in
//! memory, so that a run's memory does not grow with its number of files.
//!
//! Each record is written as one JSON line to an unnamed temporary file
//! beside the report (removed by the system when the run ends, however it
//! ends), in walk order: the units are numbered as the walk hands them on,
//! and a record that finishes before an earlier one waits in a second such
//! file until the records before it are in. Memory keeps the places of those
//! waiting records only (a few dozen bytes each, and few: the pool converts
//! units in walk order), the counts, the failed and skipped records (which
//! the summary lists) and the unsymbolized reasons counted.
//! [`Journal::save`] writes the report from the files: the same JSON as
//! [`Report::save`], one record a line.

use std::collections::BTreeMap;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::{Record, Report, Status};
use crate::error::{Error, Result};

/// Where an archive run's records go as its units finish.
pub struct Journal {
    inner: Mutex<Inner>,
}

struct Inner {
    /// The records' files; `None` when no report is written.
    files: Option<Files>,
    /// The number of the next record in walk order.
    next: u64,
    /// The records finished before an earlier one, by number: their offset
    /// and length in the waiting file.
    waiting: BTreeMap<u64, (u64, u32)>,
    /// The counts so far, with the failed and skipped records.
    head: Report,
    /// Unsymbolized outputs by reason.
    unsymbolized: BTreeMap<String, usize>,
    /// The run is stopped (a signal): nothing more is added.
    stopped: bool,
    /// The first error writing the files, for [`Journal::save`] to return.
    error: Option<std::io::Error>,
}

/// The records in walk order (the report's `inputs`, from its first `\n`
/// to its last record), and those waiting for an earlier one.
struct Files {
    in_order: BufWriter<std::fs::File>,
    /// Records in `in_order`.
    written: u64,
    waiting: std::fs::File,
    /// Bytes in `waiting` (emptied when no record waits).
    waiting_len: u64,
}

impl Journal {
    /// A journal for a run whose report goes to `report` (its temporary
    /// files are made in the report's folder); with `None`, the records are
    /// counted only.
    pub fn new(report: Option<&Path>) -> Result<Journal> {
        let files = match report {
            None => None,
            Some(path) => {
                let dir = match path.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let temp = || tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e));
                Some(Files {
                    in_order: BufWriter::new(temp()?),
                    written: 0,
                    waiting: temp()?,
                    waiting_len: 0,
                })
            }
        };
        Ok(Journal::with(files))
    }

    fn with(files: Option<Files>) -> Journal {
        Journal {
            inner: Mutex::new(Inner {
                files,
                next: 0,
                waiting: BTreeMap::new(),
                head: Report::of(String::new(), String::new(), 0.0, Vec::new()),
                unsymbolized: BTreeMap::new(),
                stopped: false,
                error: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a finished unit's record, the unit `number`th in walk order
    /// (from 0, each number once), and runs `show` (under the journal's
    /// lock, so that nothing is shown once the run is stopped); does
    /// neither when the run is stopped. A record that cannot be written
    /// makes [`Journal::save`] fail.
    pub(crate) fn add(&self, record: &Record, number: u64, show: impl FnOnce()) {
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        inner.count(record);
        if let Err(e) = inner.write(record, number) {
            inner.error.get_or_insert(e);
        }
        show();
    }

    /// Stops the run: no record is added or shown from now on.
    pub fn stop(&self) {
        self.lock().stopped = true;
    }

    /// Keeps the tree the run listed ([`Report::tree`]), for the report of
    /// a run stopped before it ends.
    pub(crate) fn listed(&self, tree: &super::Tree) {
        self.lock().head.tree = Some(tree.clone());
    }

    /// The report so far less its records: the counts, with `archive`,
    /// `out_dir`, `shard`, `formats` and `options` taken from `run` (a
    /// [`Report::of_run`] of no records) and its `seconds`, and the tree
    /// listed when `run` has none. Its `inputs`
    /// are the failed and skipped records only (what the summary lists);
    /// [`Journal::save`] writes them all.
    pub fn head(&self, run: Report) -> Report {
        let inner = self.lock();
        let mut inputs = inner.head.inputs.clone();
        inputs.sort_by(super::walk_order);
        Report {
            inputs,
            converted: inner.head.converted,
            unchanged: inner.head.unchanged,
            skipped: inner.head.skipped,
            failed: inner.head.failed,
            new_failures: inner.head.new_failures,
            unsymbolized: inner.head.unsymbolized,
            binaries: inner.head.binaries,
            tree: run.tree.clone().or_else(|| inner.head.tree.clone()),
            ..run
        }
    }

    /// The summary of [`super::summary`] for the run so far (`head` from
    /// [`Journal::head`]).
    pub fn summary(&self, head: &Report, brief: bool) -> String {
        let reasons = self.lock().unsymbolized.clone();
        super::summary_with(head, &reasons, brief)
    }

    /// Writes the report (`head`, with every record in walk order) to
    /// `path`, through a temporary file of its own renamed into place. For
    /// a stopped run, the records that wait for an earlier unfinished one
    /// follow those in order, in walk order too.
    pub fn save(&self, head: &Report, path: &Path) -> Result<()> {
        let mut inner = self.lock();
        let io = |e: std::io::Error| Error::io(path, e);
        if let Some(e) = inner.error.take() {
            return Err(io(e));
        }
        let Inner { files, waiting, .. } = &mut *inner;
        let Some(files) = files else {
            return Err(Error::Usage("the run was started without a report".into()));
        };
        let mut out = temporary_beside(path).map_err(io)?;
        let mut header = serde_json::to_value(Report {
            inputs: Vec::new(),
            ..head.clone()
        })
        .map_err(|e| io(e.into()))?;
        if let Some(map) = header.as_object_mut() {
            map.remove("inputs");
        }
        let text = serde_json::to_string(&header).map_err(|e| io(e.into()))?;
        // `{…fields…, "inputs": [` then the records, a line each.
        let fields = text.strip_suffix('}').unwrap_or(&text);
        let sep = if fields.len() > 1 { "," } else { "" };
        write!(out, "{fields}{sep}\"inputs\":[").map_err(io)?;
        files.copy_in_order(&mut out).map_err(io)?;
        let mut line = Vec::new();
        let mut first = files.written == 0;
        for &(at, len) in waiting.values() {
            files.read_waiting(at, len, &mut line).map_err(io)?;
            out.write_all(if first { b"\n" } else { b",\n" })
                .map_err(io)?;
            out.write_all(&line).map_err(io)?;
            first = false;
        }
        out.write_all(b"\n]}\n").map_err(io)?;
        let tmp = out.into_inner().map_err(|e| io(e.into_error()))?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// A temporary file beside `path`, made as [`Report::save`] makes files:
/// 0666 less the umask.
fn temporary_beside(path: &Path) -> std::io::Result<BufWriter<tempfile::NamedTempFile>> {
    let dir: PathBuf = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".report.").suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    Ok(BufWriter::new(builder.tempfile_in(dir)?))
}

/// A journal that counts the records and keeps none on disk.
impl Default for Journal {
    fn default() -> Journal {
        Journal::with(None)
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Journal")
            .field(
                "records",
                &(inner.files.as_ref().map_or(0, |f| f.written) + inner.waiting.len() as u64),
            )
            .field("stopped", &inner.stopped)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Writes `record`, of the unit `number`th in walk order: after the
    /// records before it, or to wait for them; then the waiting records
    /// that now follow in order.
    fn write(&mut self, record: &Record, number: u64) -> std::io::Result<()> {
        let Some(files) = self.files.as_mut() else {
            return Ok(());
        };
        let line = serde_json::to_vec(record)?;
        if number != self.next {
            let at = files.wait(&line)?;
            let len = u32::try_from(line.len()).map_err(std::io::Error::other)?;
            self.waiting.insert(number, (at, len));
            return Ok(());
        }
        files.append(&line)?;
        self.next += 1;
        let mut line = line;
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (at, len) = entry.remove();
            files.read_waiting(at, len, &mut line)?;
            files.append(&line)?;
            self.next += 1;
        }
        if self.waiting.is_empty() && files.waiting_len > 0 {
            files.waiting.set_len(0)?;
            files.waiting_len = 0;
        }
        Ok(())
    }

    /// Counts `record` into the head (keeping it when the summary lists it).
    fn count(&mut self, record: &Record) {
        let head = &mut self.head;
        match record.status {
            Status::Converted => head.converted += 1,
            Status::Unchanged => head.unchanged += 1,
            Status::Skipped => head.skipped += 1,
            Status::Failed => head.failed += 1,
            Status::Binary => head.binaries += 1,
        }
        if record.status == Status::Failed && !record.known_failure {
            head.new_failures += 1;
        }
        if let Some(why) = &record.unsymbolized {
            head.unsymbolized += 1;
            *self.unsymbolized.entry(why.clone()).or_default() += 1;
        }
        if matches!(record.status, Status::Failed | Status::Skipped) {
            head.inputs.push(record.clone());
        }
    }
}

impl Files {
    /// Appends a record after those in walk order.
    fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let sep: &[u8] = if self.written == 0 { b"\n" } else { b",\n" };
        self.in_order.write_all(sep)?;
        self.in_order.write_all(line)?;
        self.written += 1;
        Ok(())
    }

    /// Keeps a record that waits for an earlier one; its offset.
    fn wait(&mut self, line: &[u8]) -> std::io::Result<u64> {
        let at = self.waiting_len;
        self.waiting.seek(SeekFrom::Start(at))?;
        self.waiting.write_all(line)?;
        self.waiting_len += line.len() as u64;
        Ok(at)
    }

    /// Reads the waiting record at `at`, `len` bytes, into `line`.
    fn read_waiting(&mut self, at: u64, len: u32, line: &mut Vec<u8>) -> std::io::Result<()> {
        self.waiting.seek(SeekFrom::Start(at))?;
        line.resize(len as usize, 0);
        self.waiting.read_exact(line)
    }

    /// Copies the records in walk order to `out`, leaving the file ready
    /// for more.
    fn copy_in_order(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.in_order.flush()?;
        let file = self.in_order.get_mut();
        file.seek(SeekFrom::Start(0))?;
        std::io::copy(file, out)?;
        file.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(path: &str) -> Record {
        Record::new(path.into(), None, Status::Converted)
    }

    /// The paths of the records of the report `journal` saves to `path`.
    fn saved(journal: &Journal, path: &Path) -> Vec<String> {
        let head = journal.head(Report::of(String::new(), String::new(), 0.0, Vec::new()));
        journal.save(&head, path).unwrap();
        let report = Report::load(path).unwrap();
        assert_eq!(report.converted, report.inputs.len());
        report.inputs.into_iter().map(|r| r.path).collect()
    }

    #[test]
    fn records_finished_out_of_order_are_saved_in_walk_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let journal = Journal::new(Some(&path)).unwrap();
        for n in [2, 0, 4, 3] {
            journal.add(&record(&format!("r{n}")), n, || {});
        }
        // Stopped here, the report has what finished: those after the
        // missing one too, in order.
        assert_eq!(saved(&journal, &path), ["r0", "r2", "r3", "r4"]);
        assert_eq!(journal.lock().waiting.len(), 3);
        journal.add(&record("r1"), 1, || {});
        assert!(journal.lock().waiting.is_empty());
        assert_eq!(journal.lock().files.as_ref().unwrap().waiting_len, 0);
        journal.add(&record("r5"), 5, || {});
        assert_eq!(saved(&journal, &path), ["r0", "r1", "r2", "r3", "r4", "r5"]);
    }
}
