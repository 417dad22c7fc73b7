//! The records of a run as its units finish, kept on disk rather than in
//! memory, so that a run's memory does not grow with its number of files.
//!
//! Each record is written as one JSON line to an unnamed temporary file
//! beside the report (removed by the system when the run ends, however it
//! ends); memory keeps each record's place and rank in the report (16
//! bytes, in one vector), the counts, the
//! failed and skipped records (which the summary lists) and the
//! unsymbolized reasons counted. [`Journal::save`] writes the report in
//! plan order from the file: the same JSON as [`Report::save`], one record
//! a line.

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
    /// The records, one JSON line each; `None` when no report is written.
    file: Option<BufWriter<std::fs::File>>,
    /// Bytes written to `file`.
    at: u64,
    /// Per record: its rank in the report, offset and length.
    places: Vec<(u32, u32, u64)>,
    /// The counts so far, with the failed and skipped records.
    head: Report,
    /// Unsymbolized outputs by reason.
    unsymbolized: BTreeMap<String, usize>,
    /// The run is stopped (a signal): nothing more is added.
    stopped: bool,
    /// The first error writing `file`, for [`Journal::save`] to return.
    error: Option<std::io::Error>,
}

impl Journal {
    /// A journal for a run whose report goes to `report` (its temporary
    /// file is made in the report's folder); with `None`, the records are
    /// counted only.
    pub fn new(report: Option<&Path>) -> Result<Journal> {
        let file = match report {
            None => None,
            Some(path) => {
                let dir = match path.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
                Some(BufWriter::new(file))
            }
        };
        Ok(Journal::with(file))
    }

    fn with(file: Option<BufWriter<std::fs::File>>) -> Journal {
        Journal {
            inner: Mutex::new(Inner {
                file,
                at: 0,
                places: Vec::new(),
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

    /// Adds a finished unit's record, `rank`th in the report (from 0), and
    /// runs `show` (under the journal's
    /// lock, so that nothing is shown once the run is stopped); does
    /// neither when the run is stopped. A record that cannot be written
    /// makes [`Journal::save`] fail.
    pub(crate) fn add(&self, record: &Record, rank: u32, show: impl FnOnce()) {
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        inner.count(record);
        if let Err(e) = inner.write(record, rank) {
            inner.error.get_or_insert(e);
        }
        show();
    }

    /// Stops the run: no record is added or shown from now on.
    pub fn stop(&self) {
        self.lock().stopped = true;
    }

    /// The report so far less its records: the counts, with `archive`,
    /// `out_dir`, `shard`, `formats` and `options` taken from `run` (a
    /// [`Report::of_run`] of no records) and its `seconds`. Its `inputs`
    /// are the failed and skipped records only (what the summary lists);
    /// [`Journal::save`] writes them all.
    pub fn head(&self, run: Report) -> Report {
        let inner = self.lock();
        let mut inputs = inner.head.inputs.clone();
        inputs.sort_by(|a, b| {
            (Path::new(&a.path), &a.path_bytes).cmp(&(Path::new(&b.path), &b.path_bytes))
        });
        Report {
            inputs,
            converted: inner.head.converted,
            unchanged: inner.head.unchanged,
            skipped: inner.head.skipped,
            failed: inner.head.failed,
            new_failures: inner.head.new_failures,
            unsymbolized: inner.head.unsymbolized,
            binaries: inner.head.binaries,
            ..run
        }
    }

    /// The summary of [`super::summary`] for the run so far (`head` from
    /// [`Journal::head`]).
    pub fn summary(&self, head: &Report, brief: bool) -> String {
        let reasons = self.lock().unsymbolized.clone();
        super::summary_with(head, &reasons, brief)
    }

    /// Writes the report (`head`, with every record in plan order) to
    /// `path`, through a temporary file of its own renamed into place.
    pub fn save(&self, head: &Report, path: &Path) -> Result<()> {
        let mut inner = self.lock();
        let io = |e: std::io::Error| Error::io(path, e);
        if let Some(e) = inner.error.take() {
            return Err(io(e));
        }
        let Inner { file, places, .. } = &mut *inner;
        let Some(file) = file else {
            return Err(Error::Usage("the run was started without a report".into()));
        };
        file.flush().map_err(io)?;
        let file = file.get_mut();
        places.sort_unstable();
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
        let mut line = Vec::new();
        for (i, (_, len, at)) in places.iter().enumerate() {
            file.seek(SeekFrom::Start(*at)).map_err(io)?;
            line.resize(*len as usize, 0);
            file.read_exact(&mut line).map_err(io)?;
            out.write_all(if i == 0 { b"\n" } else { b",\n" })
                .map_err(io)?;
            out.write_all(&line).map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
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
            .field("records", &inner.places.len())
            .field("stopped", &inner.stopped)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Writes `record` as a line of the file, and notes its place.
    fn write(&mut self, record: &Record, rank: u32) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let line = serde_json::to_vec(record)?;
        file.write_all(&line)?;
        let len = u32::try_from(line.len()).map_err(std::io::Error::other)?;
        self.places.push((rank, len, self.at));
        self.at += u64::from(len);
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
