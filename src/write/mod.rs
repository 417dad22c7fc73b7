//! Writers, one module per output format, and the dispatch to them. What
//! they share is beside them: the options and the rules that read them
//! (`options.rs`), frames and group frames (`frames.rs`), where an output
//! goes (`target.rs`, `output.rs`, `temporary.rs`).

pub(crate) mod callgrind;
pub(crate) mod flamegraph;
pub(crate) mod folded;
pub(crate) mod frames;
mod names;
mod options;
mod output;
pub(crate) mod pprof;
pub(crate) mod speedscope;
pub(crate) mod target;
mod temporary;

use std::io::Write;

use crate::error::Result;
use crate::profile::Profile;

pub use names::terminal_text;
pub(crate) use options::{chosen_sample_type, effective_group_by, prefer_sample_type};
pub use options::{FlamegraphOptions, OutputFormat, WriteOptions};
pub use output::write_file;
pub(crate) use output::{write_atomically, write_files, StreamedOutputs};
pub use target::refuse_input_as_output;
pub use temporary::remove_temporaries;
pub(crate) use temporary::Stale;

/// Writes `profile` in `format` to `out`.
pub fn write(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<()> {
    debug_assert_eq!(profile.check(), Ok(()), "the IR's invariants");
    match format {
        OutputFormat::Pprof => pprof::write(profile, true, out),
        OutputFormat::PprofRaw => pprof::write(profile, false, out),
        OutputFormat::Folded => folded::write(profile, options, out),
        OutputFormat::Svg => flamegraph::write(profile, options, out),
        OutputFormat::Speedscope => speedscope::write(profile, options, out),
        OutputFormat::Callgrind => callgrind::write(profile, options, out),
    }
}

/// Can `format` be written while the profile is still being read, part by
/// part ([`pprof::Stream`])? Only pprof can; the other writers need the
/// whole profile (sorted stacks, totals).
pub(crate) fn streams_format(format: OutputFormat) -> bool {
    matches!(format, OutputFormat::Pprof | OutputFormat::PprofRaw)
}

#[cfg(test)]
mod tests;
