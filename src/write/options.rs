//! What the writers are told: the output format (from a file name or a
//! choice), the sample type to show and the synthetic root frames, and the
//! rules that pick them from a profile when the options say nothing.

use std::path::Path;

use super::callgrind;
use crate::error::{Error, Result};
use crate::profile::{Granularity, GroupBy, Profile};

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// gzip-compressed pprof protobuf (`.pb.gz`).
    Pprof,
    /// Uncompressed pprof protobuf (`.pb`).
    PprofRaw,
    /// Folded stacks (`.folded`, `.txt`).
    Folded,
    /// Flamegraph SVG rendered with inferno (`.svg`).
    Svg,
    /// speedscope JSON (`.speedscope.json`, `.json`).
    Speedscope,
    /// callgrind profile for KCachegrind/QCachegrind and callgrind_annotate
    /// (`.callgrind`, `callgrind.out*`).
    Callgrind,
    /// Firefox Profiler processed profile, gzip-compressed
    /// (`.firefox.json.gz`; profiler.firefox.com loads it as is).
    Firefox,
    /// Firefox Profiler processed profile, uncompressed (`.firefox.json`).
    FirefoxRaw,
}

impl OutputFormat {
    /// The format a file name asks for by its extension.
    pub fn from_path(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let format = if callgrind::is_callgrind_name(&name) {
            OutputFormat::Callgrind
        } else if name.ends_with(".pb.gz")
            || name.ends_with(".pprof")
            || name.ends_with(".pprof.gz")
        {
            OutputFormat::Pprof
        } else if name.ends_with(".pb") {
            OutputFormat::PprofRaw
        } else if name.ends_with(".folded")
            || name.ends_with(".txt")
            || name.ends_with(".collapsed")
        {
            OutputFormat::Folded
        } else if name.ends_with(".firefox.json.gz") {
            OutputFormat::Firefox
        } else if name.ends_with(".firefox.json") {
            // Before `.json`, which stays speedscope's.
            OutputFormat::FirefoxRaw
        } else if name.ends_with(".svg") {
            OutputFormat::Svg
        } else if name.ends_with(".json") {
            OutputFormat::Speedscope
        } else {
            return None;
        };
        Some(format)
    }

    /// How finely the format's viewer tells frames apart unless asked
    /// ([`WriteOptions::granularity`]): pprof keeps every address (its
    /// viewer folds them at view time with its own `-granularity`);
    /// callgrind keeps source lines (KCachegrind's and callgrind_annotate's
    /// source views); folded stacks, flamegraphs, speedscope and the Firefox
    /// Profiler show functions, where a frame per instruction would help
    /// nobody (the profiler's own call tree merges frames by function too).
    pub fn default_granularity(self) -> Granularity {
        match self {
            OutputFormat::Pprof | OutputFormat::PprofRaw => Granularity::Addresses,
            OutputFormat::Callgrind => Granularity::Lines,
            OutputFormat::Folded
            | OutputFormat::Svg
            | OutputFormat::Speedscope
            | OutputFormat::Firefox
            | OutputFormat::FirefoxRaw => Granularity::Functions,
        }
    }

    /// The conventional extension of the format (used when converting archives).
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Pprof => "pb.gz",
            OutputFormat::PprofRaw => "pb",
            OutputFormat::Folded => "folded",
            OutputFormat::Svg => "svg",
            OutputFormat::Speedscope => "speedscope.json",
            OutputFormat::Callgrind => "callgrind",
            OutputFormat::Firefox => "firefox.json.gz",
            OutputFormat::FirefoxRaw => "firefox.json",
        }
    }
}

/// Options of the writers.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The sample type folded and SVG outputs show, and the default one of
    /// the other outputs (default: the profile's default); a name the
    /// profile lacks is an [`Error::Usage`].
    pub sample_type: Option<String>,
    /// Synthetic root frames for folded, SVG and speedscope outputs; `None`
    /// keeps what the reader suggested.
    pub group_by: Option<Vec<GroupBy>>,
    /// The name of the input, for titles.
    pub title: String,
    /// How finely frames are told apart in every output; `None`: each
    /// format's own default ([`OutputFormat::default_granularity`]).
    pub granularity: Option<Granularity>,
    /// How SVG flamegraphs are drawn (inferno's options).
    pub flamegraph: FlamegraphOptions,
}

/// The flamegraph options people know from `inferno-flamegraph` and
/// `flamegraph.pl`, passed to inferno. `None` and `false` keep profconv's
/// defaults, which depend on the sample type: heap types (`*_space`,
/// `*_objects`, a `bytes` unit) get the `mem` palette and count `bytes` or
/// `objects`; the others the `hot` palette and count in the type's unit.
#[derive(Debug, Clone, Default)]
pub struct FlamegraphOptions {
    /// The title (default: the inputs' names and the sample type).
    pub title: Option<String>,
    /// A second line under the title.
    pub subtitle: Option<String>,
    /// The palette: hot, mem, io, java, js, perl, python, rust, red, green,
    /// blue, aqua, yellow, purple, orange, wakeup.
    pub colors: Option<String>,
    /// Icicle graph: roots at the top.
    pub inverted: bool,
    /// Stacks reversed (leaf first, as the root).
    pub reverse: bool,
    /// Frames narrower than this percentage of the image width are left
    /// out (inferno 0.12 measures it so; default 0.01).
    pub min_width: Option<f64>,
    /// The image width in pixels (inferno: 1200).
    pub width: Option<usize>,
    /// A flame chart: stacks in input order, not merged alphabetically.
    pub flame_chart: bool,
    /// What a count is called in the tooltips (`samples`, `bytes`, …).
    pub count_name: Option<String>,
}

/// The index of the sample type to show: the one named in the options, else
/// the profile's default, else the last (pprof's rule).
pub fn chosen_sample_type(profile: &Profile, options: &WriteOptions) -> Result<usize> {
    if profile.sample_types().is_empty() {
        return Err(Error::Usage("the profile has no sample types".into()));
    }
    if let Some(name) = &options.sample_type {
        return profile.sample_type_index(name).ok_or_else(|| {
            let known: Vec<&str> = (0..profile.sample_types().len())
                .map(|i| profile.sample_type_name(i).0)
                .collect();
            Error::Usage(format!(
                "no sample type {name:?} in this profile; it has: {}",
                known.join(", ")
            ))
        });
    }
    Ok(profile
        .default_sample_type
        .unwrap_or(profile.sample_types().len() - 1))
}

/// Makes the sample type named by `--sample-type` the profile's default:
/// what pprof viewers and speedscope open on and callgrind lists first (the
/// other types are kept). A name the profile lacks is refused, whatever the
/// output, so that a typo never goes unnoticed.
pub(crate) fn prefer_sample_type(profile: &mut Profile, name: Option<&str>) -> Result<()> {
    let Some(name) = name else {
        return Ok(());
    };
    let options = WriteOptions {
        sample_type: Some(name.to_owned()),
        ..WriteOptions::default()
    };
    profile.default_sample_type = Some(chosen_sample_type(profile, &options)?);
    Ok(())
}

/// The granularity `format` is written at under `options`.
pub fn granularity_of(format: OutputFormat, options: &WriteOptions) -> Granularity {
    options
        .granularity
        .unwrap_or_else(|| format.default_granularity())
}

/// The group frames to use: the options' choice, else the reader's.
pub fn effective_group_by<'a>(profile: &'a Profile, options: &'a WriteOptions) -> &'a [GroupBy] {
    options.group_by.as_deref().unwrap_or(profile.group_by())
}
