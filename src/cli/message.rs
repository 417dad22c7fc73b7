//! The one way the command prints to standard error: errors, warnings, the
//! per-file log, the summary, the `wrote` lines and the signal notes all go
//! through [`say!`]. Each line is escaped for a terminal
//! ([`profconv::write::terminal_text`]: a file or module name's ESC sequence
//! shows as `\x1b`), written whole under the lock, and never panics: once
//! standard error fails (its reader quit, `2>&1 | head -1`), the rest of the
//! messages are dropped and the run goes on to its end (outputs, report,
//! exit code) without them.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to standard error has failed: later messages are dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Prints `text` and a line break on standard error, escaped for a
/// terminal; a failed write (a closed pipe, a full disk) silences the
/// messages that follow instead of ending the run.
pub fn line(text: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut line = profconv::write::terminal_text(text).into_owned();
    line.push('\n');
    let mut err = std::io::stderr().lock();
    if err
        .write_all(line.as_bytes())
        .and_then(|()| err.flush())
        .is_err()
    {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// [`line`] with `format!`'s arguments: `say!("profconv: {e}")`.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::message::line(&format!($($arg)*))
    };
}
pub(crate) use say;
