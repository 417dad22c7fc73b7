//! Writers, one module per output format, and the dispatch to them. What
//! they share is beside them: the options and the rules that read them
//! (`options.rs`), frames and group frames (`frames.rs`), where an output
//! goes (`target.rs`, `output.rs`, `temporary.rs`), and what each viewer
//! opens (`limits.rs`).

pub(crate) mod callgrind;
pub(crate) mod firefox;
pub(crate) mod flamegraph;
pub(crate) mod folded;
pub(crate) mod frames;
mod limits;
mod names;
mod options;
mod output;
pub(crate) mod pprof;
mod runs;
pub(crate) mod speedscope;
pub(crate) mod target;
mod temporary;

use std::io::Write;

use crate::error::Result;
use crate::profile::{Granularity, Profile};

pub use names::terminal_text;
pub use options::granularity_of;
pub(crate) use options::{chosen_sample_type, effective_group_by, prefer_sample_type};
pub use options::{FlamegraphOptions, OutputFormat, WriteOptions};
pub use output::write_file;
pub(crate) use output::{write_atomically, StreamedOutputs};
pub use target::refuse_input_as_output;
pub use temporary::remove_temporaries;
pub(crate) use temporary::Stale;

/// Writes `profile` in `format` to `out`, its locations folded to the
/// granularity the options or the format ask for ([`granularity_of`]).
pub fn write(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<()> {
    write_viewed(profile, format, options, out).map(drop)
}

/// [`write`], returning the length of the text the output's viewer reads
/// when it is not the bytes written: a compressed document's.
pub(crate) fn write_viewed(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<Option<u64>> {
    match granularity_of(format, options) {
        Granularity::Addresses => write_folded(profile, format, options, out),
        granularity => {
            let mut folded = Profile::default();
            folded.merge_folded(profile, granularity)?;
            write_folded(&folded, format, options, out)
        }
    }
}

/// [`write_viewed`] of a profile folded to the granularity already.
pub(crate) fn write_folded(
    profile: &Profile,
    format: OutputFormat,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<Option<u64>> {
    debug_assert_eq!(profile.check(), Ok(()), "the IR's invariants");
    match format {
        OutputFormat::Pprof => pprof::write(profile, true, out),
        OutputFormat::PprofRaw => pprof::write(profile, false, out),
        OutputFormat::Folded => folded::write(profile, options, out),
        OutputFormat::Svg => flamegraph::write(profile, options, out),
        OutputFormat::Speedscope => speedscope::write(profile, options, out),
        OutputFormat::Callgrind => callgrind::write(profile, options, out),
        OutputFormat::Firefox => return firefox::write(profile, options, true, out).map(Some),
        OutputFormat::FirefoxRaw => firefox::write(profile, options, false, out).map(drop),
    }
    .map(|()| None)
}

/// Can `format` be written while the profile is still being read, part by
/// part ([`pprof::Stream`])? Only pprof at every address can; the other
/// writers need the profile whole (sorted stacks, totals), folded to their
/// granularity as it is read, or, at every address, spilled in sorted runs
/// ([`StreamedOutputs`]).
pub(crate) fn streams_format(format: OutputFormat, options: &WriteOptions) -> bool {
    matches!(format, OutputFormat::Pprof | OutputFormat::PprofRaw)
        && granularity_of(format, options) == Granularity::Addresses
}

#[cfg(test)]
mod tests;
