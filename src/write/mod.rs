//! Writers, one module per output format, and the dispatch to them. What
//! they share is beside them: the options and the rules that read them
//! (`options.rs`), frames and group frames (`frames.rs`), where an output
//! goes (`target.rs`, `output.rs`, `temporary.rs`).

pub mod callgrind;
pub mod flamegraph;
pub mod folded;
pub mod frames;
mod options;
mod output;
pub mod pprof;
pub mod speedscope;
pub mod target;
mod temporary;

use std::io::Write;

use crate::error::Result;
use crate::profile::Profile;

pub use frames::group_frames;
pub use options::{chosen_sample_type, effective_group_by, OutputFormat, WriteOptions};
pub use output::{is_temporary_name, write_atomically, write_file, OutputFile, StreamedOutputs};

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
pub fn streams_format(format: OutputFormat) -> bool {
    matches!(format, OutputFormat::Pprof | OutputFormat::PprofRaw)
}

#[cfg(test)]
mod tests;
