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

use profconv::archive::{self, ArchiveOptions, Report};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::message::say;

/// What an archive run has done so far, shared between its workers (which
/// add records to its journal) and the signal thread (which reports them).
pub struct SoFar {
    archive: PathBuf,
    /// The run's options: what its report says besides the records.
    options: ArchiveOptions,
    report: Option<PathBuf>,
    /// `-q`: the summary counts failures by reason.
    quiet: bool,
    started: Instant,
    /// The records so far, on disk.
    journal: Arc<archive::Journal>,
    bar: indicatif::ProgressBar,
}

impl SoFar {
    /// Registers an archive run with the signal thread.
    pub fn start(args: &super::ArchiveArgs, options: &ArchiveOptions, bar: indicatif::ProgressBar) {
        let so_far = Arc::new(SoFar {
            archive: args.archive.clone(),
            options: options.clone(),
            report: args.report.clone(),
            quiet: args.quiet,
            started: Instant::now(),
            journal: options.journal.clone().unwrap_or_default(),
            bar,
        });
        *RUN.lock().unwrap_or_else(PoisonError::into_inner) = Some(so_far);
    }

    /// Stops the run: the report of the inputs finished so far, less the
    /// records ([`archive::Journal::head`]); the journal adds and shows
    /// nothing from now on.
    fn stop(&self) -> Report {
        self.journal.stop();
        self.journal.head(Report::of_run(
            &self.archive,
            &self.options,
            self.started.elapsed().as_secs_f64(),
            Vec::new(),
        ))
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
            run.journal
                .summary(&report, run.quiet)
                .trim_end_matches('\n')
        );
        if let Some(path) = &run.report {
            if let Err(e) = run.journal.save(&report, path) {
                say!("profconv: {e}");
            }
        }
        say!("profconv convert: interrupted by {name}; `--resume` continues the run");
    } else {
        say!("profconv: interrupted by {name}; no output was left unfinished");
    }
    std::process::exit(128 + signal)
}
