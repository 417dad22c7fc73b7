//! SIGINT, SIGTERM and SIGHUP: one thread of the command line waits for
//! them (signal-hook's handler only wakes it), removes every temporary
//! output the run has open ([`profconv::write::remove_temporaries`]), and
//! exits 128 + the signal's number: 130, 143, 129. Outputs already renamed
//! into place stay, whole; a set of outputs being renamed is waited for.
//! During `profconv convert` it also writes the `--report` and prints the
//! summary of the inputs finished so far, so that a rerun with `--resume`
//! picks up where this one stopped.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use profconv::archive::{self, ArchiveOptions, Record, Report};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::message::say;

/// What an archive run has done so far, shared between its workers (which
/// add records) and the signal thread (which reports them).
pub struct SoFar {
    archive: PathBuf,
    /// The run's options: what its report says besides the records.
    options: ArchiveOptions,
    report: Option<PathBuf>,
    /// `-q`: the summary counts failures by reason.
    quiet: bool,
    started: Instant,
    /// The records so far, and whether the run is stopped (its summary
    /// printed, so nothing more is shown).
    records: Mutex<(Vec<Record>, bool)>,
    bar: indicatif::ProgressBar,
}

impl SoFar {
    /// Registers an archive run with the signal thread.
    pub fn start(
        args: &super::ArchiveArgs,
        options: &ArchiveOptions,
        bar: indicatif::ProgressBar,
    ) -> Arc<SoFar> {
        let so_far = Arc::new(SoFar {
            archive: args.archive.clone(),
            options: options.clone(),
            report: args.report.clone(),
            quiet: args.quiet,
            started: Instant::now(),
            records: Mutex::new((Vec::new(), false)),
            bar,
        });
        *RUN.lock().unwrap_or_else(PoisonError::into_inner) = Some(so_far.clone());
        so_far
    }

    /// One more input finished: kept, and `show`n unless the run is
    /// stopped (its summary printed: nothing is shown after it).
    pub fn add(&self, record: &Record, show: impl FnOnce()) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if !records.1 {
            records.0.push(record.clone());
            show();
        }
    }

    /// Stops the run: the report of the inputs finished so far, in path
    /// order; [`SoFar::add`] shows nothing from now on.
    fn stop(&self) -> Report {
        let inputs = {
            let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
            records.1 = true;
            std::mem::take(&mut records.0)
        };
        Report::of_run(
            &self.archive,
            &self.options,
            self.started.elapsed().as_secs_f64(),
            inputs,
        )
    }
}

/// The archive run in progress, if any.
static RUN: Mutex<Option<Arc<SoFar>>> = Mutex::new(None);

/// Starts the signal thread. Without it (the handlers cannot be installed)
/// the signals keep their default action: the process ends, and the next
/// `profconv convert` writing the same outputs removes what temporaries it
/// left.
pub fn watch() {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                stop(signal);
            }
        });
}

/// Removes the temporaries, reports an archive run so far, and exits.
fn stop(signal: i32) -> ! {
    // First, so that no output completes after the report is taken.
    profconv::write::remove_temporaries();
    let name = match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    };
    let run = RUN.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(run) = run {
        run.bar.finish_and_clear();
        let report = run.stop();
        say!(
            "{}",
            archive::summary(&report, run.quiet).trim_end_matches('\n')
        );
        if let Some(path) = &run.report {
            if let Err(e) = save(&report, path) {
                say!("profconv: {}: {e}", path.display());
            }
        }
        say!("profconv convert: interrupted by {name}; `--resume` continues the run");
    } else {
        say!("profconv: interrupted by {name}; no output was left unfinished");
    }
    std::process::exit(128 + signal)
}

/// Writes the report through a temporary file of its own (the registry is
/// closed now) renamed into place.
fn save(report: &Report, path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".report.").suffix(".tmp");
    // An ordinary file, as `Report::save` makes: 0666 less the umask.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir)?;
    serde_json::to_writer_pretty(&mut tmp, report)?;
    tmp.write_all(b"\n")?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
