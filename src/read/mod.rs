//! The façade of the readers: one table of readers in detection order, and
//! the functions that open inputs, detect their format and dispatch.
//!
//! For a library user: [`read`] (or [`read_inputs`] for inputs already
//! opened, [`Input::from_bytes`] for bytes in memory) gives the whole
//! [`Profile`]; [`info`] describes the inputs; [`detect`] names a file's
//! format; [`ReadOptions`] holds every reader's options.
//!
//! Every reader is a module with the same entry points, registered once in
//! the crate's table of readers (`READERS`):
//! - `detect(head, len) -> Detection`: does an input (its first bytes, at most
//!   `DETECT_BYTES`, and its full length) look like this format?
//! - `detect_dir(path, survey) -> bool` for readers that take directories:
//!   is the directory, by what it holds, one profile of this format?
//! - `read(inputs, options) -> Result<Profile>`: read one or more inputs into one profile;
//! - `info(inputs, options) -> Result<Summary>`: describe what the inputs hold;
//! - optionally `read_parts(inputs, options, sink)`: hand the profile over in
//!   parts (`profile::PartSink`) for readers whose profiles can outgrow memory.
//!
//! Adding a format is a module and one row in `READERS`.

pub(crate) mod aps;
pub(crate) mod cursor;
pub(crate) mod dcpi;
mod directory;
pub(crate) mod gprof;
mod info;
pub(crate) mod input;
pub(crate) mod mpatrol;
mod options;

use std::path::{Path, PathBuf};

use directory::Survey;

use crate::error::{Error, Result};
use crate::profile::{PartSink, Profile};

pub use info::{Entry, Summary};
pub(crate) use input::Detection;
pub use input::Input;
pub use options::{
    ApsOptions, DcpiOptions, EpochSelect, Format, GprofOptions, GprofStacks, MpatrolOptions,
    Progress, ReadOptions,
};

/// The bytes a progress display can expect to be read from `paths`: the
/// sizes of the files, and of every file below the directories.
pub fn input_size(paths: &[PathBuf]) -> u64 {
    fn size(path: &Path, depth: usize) -> u64 {
        let Ok(meta) = std::fs::metadata(path) else {
            return 0;
        };
        if !meta.is_dir() {
            return meta.len();
        }
        if depth > 8 {
            return 0;
        }
        std::fs::read_dir(path).map_or(0, |entries| {
            entries.flatten().map(|e| size(&e.path(), depth + 1)).sum()
        })
    }
    paths.iter().map(|p| size(p, 0)).sum()
}

/// A yes/no question about a path (is it a capture? one of its files?).
pub(crate) type PathTest = fn(&Path) -> bool;

/// A reader's entry point that hands the profile to a sink in parts.
pub(crate) type ReadParts = fn(&[Input], &ReadOptions, &mut dyn PartSink) -> Result<()>;

/// One reader's row in [`READERS`].
pub(crate) struct ReaderSpec {
    /// The format it reads.
    pub format: Format,
    /// Recognises a file from its first bytes and its length.
    pub detect: fn(head: &[u8], len: u64) -> Detection,
    /// Recognises a directory input by its layout (what the survey found
    /// in it), for readers that take directories.
    pub detect_dir: Option<fn(&Path, &Survey) -> bool>,
    /// Recognises a directory that is one profile as a whole, converted as
    /// one unit in an archive migration (a DCPI database).
    pub unit_dir: Option<fn(&Path) -> bool>,
    /// Recognises a capture directory whose member files are read together
    /// (an APS capture), and which of its files are members.
    pub capture_dir: Option<(PathTest, PathTest)>,
    /// Reads inputs of this format into one profile.
    pub read: fn(&[Input], &ReadOptions) -> Result<Profile>,
    /// Reads inputs of this format into parts handed to a sink, for
    /// readers that can stream (`None`: the whole profile is one part).
    pub read_parts: Option<ReadParts>,
    /// Describes inputs of this format.
    pub info: fn(&[Input], &ReadOptions) -> Result<Summary>,
}

/// The readers, in detection order: among the readers that recognise an
/// input, one with a magic number wins over a heuristic one, then the
/// earlier row wins.
pub(crate) const READERS: &[ReaderSpec] = &[
    ReaderSpec {
        format: Format::Gprof,
        detect: gprof::detect_input,
        detect_dir: None,
        unit_dir: None,
        capture_dir: None,
        read: gprof::read,
        read_parts: None,
        info: gprof::info,
    },
    ReaderSpec {
        format: Format::Mpatrol,
        detect: mpatrol::detect_input,
        detect_dir: None,
        unit_dir: None,
        capture_dir: None,
        read: mpatrol::read,
        read_parts: None,
        info: mpatrol::info,
    },
    ReaderSpec {
        format: Format::Dcpi,
        detect: dcpi::detect_input,
        detect_dir: Some(dcpi::detect_dir),
        unit_dir: Some(dcpi::is_database),
        capture_dir: None,
        read: dcpi::read,
        read_parts: Some(dcpi::read_parts),
        info: dcpi::info,
    },
    ReaderSpec {
        format: Format::Aps,
        detect: aps::detect_input,
        detect_dir: Some(aps::detect_dir),
        unit_dir: None,
        capture_dir: Some((aps::is_capture, aps::is_sample_file_name)),
        read: aps::read,
        read_parts: None,
        info: aps::info,
    },
];

/// The row of a format.
pub(crate) fn reader(format: Format) -> &'static ReaderSpec {
    READERS
        .iter()
        .find(|r| r.format == format)
        .unwrap_or(&READERS[0])
}

/// The format of a file from its first bytes and its length. Formats with a
/// magic number are tried before the heuristic ones.
pub(crate) fn detect_bytes(head: &[u8], len: u64) -> Option<Format> {
    let mut best: Option<(Detection, Format)> = None;
    for r in READERS {
        let d = (r.detect)(head, len);
        if d != Detection::No && best.is_none_or(|(b, _)| d > b) {
            best = Some((d, r.format));
        }
        // Nothing beats the first magic number: the heuristics of the
        // formats after it (text scans of the head) need not run.
        if d == Detection::Magic {
            break;
        }
    }
    best.map(|(_, f)| f)
}

/// The format of an opened input, or `None` when it is of no format
/// profconv knows.
pub fn detect_input(input: &Input) -> Option<Format> {
    if input.is_dir() {
        return dir_format(input.name(), &Survey::of(input.name()));
    }
    detect_bytes(input.head(), input.len())
}

/// The format whose layout a directory has, by what `survey` found in it.
fn dir_format(path: &Path, survey: &Survey) -> Option<Format> {
    READERS
        .iter()
        .find(|r| r.detect_dir.is_some_and(|d| d(path, survey)))
        .map(|r| r.format)
}

/// The format of one input (a file or a directory), or `None` when it is of
/// no format profconv knows. A file's format is told from its first 4 KiB
/// (decompressed when gzip) and its length: a magic number first, then the
/// heuristics of formats without one.
pub fn detect(path: &Path) -> Result<Option<Format>> {
    Ok(detect_input(&Input::open(path, None)?))
}

/// True for a directory that is one profile as a whole (a DCPI database).
pub(crate) fn is_whole_profile_dir(path: &Path) -> bool {
    READERS.iter().any(|r| r.unit_dir.is_some_and(|d| d(path)))
}

/// The format of a folder that archive migration took as one unit (a DCPI
/// database, whose epochs are walked whole; an APS capture, whose sample
/// files are read together while what else the folder holds is walked on).
pub(crate) fn unit_dir_format(path: &Path) -> Option<Format> {
    READERS
        .iter()
        .find(|r| {
            r.unit_dir.is_some_and(|d| d(path))
                || r.capture_dir
                    .is_some_and(|(is_capture, _)| is_capture(path))
        })
        .map(|r| r.format)
}

/// For a capture directory (an APS capture), the test of which of its files
/// belong to the capture, read together as one profile.
pub(crate) fn capture_dir(path: &Path) -> Option<PathTest> {
    READERS
        .iter()
        .filter_map(|r| r.capture_dir)
        .find(|(is_capture, _)| is_capture(path))
        .map(|(_, is_member)| is_member)
}

/// Opens every input once (`-` = standard input).
pub(crate) fn open_all(paths: &[PathBuf], options: &ReadOptions) -> Result<Vec<Input>> {
    if paths
        .iter()
        .filter(|p| *p == Path::new(input::STDIN))
        .count()
        > 1
    {
        return Err(Error::Usage(
            "standard input (-) can be given only once".into(),
        ));
    }
    let inputs: Vec<Input> = paths
        .iter()
        .map(|p| Input::open(p, options.max_input_size))
        .collect::<Result<_>>()?;
    // A forced format reads a directory given only of its layout too.
    if let Some(f) = options.format {
        for dir in inputs.iter().filter(|i| i.is_dir()) {
            let survey = Survey::of(dir.name());
            if dir_format(dir.name(), &survey) != Some(f) {
                return Err(directory::not_one_profile(dir.name(), &survey));
            }
        }
    }
    Ok(inputs)
}

/// Reads all `paths` into one profile: files (gzip-compressed ones are
/// decompressed), directories (a DCPI database, an APS capture), `-` for
/// standard input. They are of one format, forced by `options.format` or
/// detected; several are summed, as `gprof -s` does. Malformed input is
/// [`Error::Format`], naming the file and the byte offset.
pub fn read(paths: &[PathBuf], options: &ReadOptions) -> Result<Profile> {
    read_inputs(&open_all(paths, options)?, options)
}

/// [`read`] of inputs opened already ([`Input::open`], or
/// [`Input::from_bytes`] for bytes in memory).
pub fn read_inputs(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let format = format_of(inputs, options)?;
    (reader(format).read)(inputs, options)
}

/// Reads opened inputs (of one format) into parts handed to `sink`: in
/// several parts when the reader streams (DCPI), else as one part.
pub(crate) fn read_parts(
    inputs: &[Input],
    options: &ReadOptions,
    sink: &mut dyn PartSink,
) -> Result<()> {
    let reader = reader(format_of(inputs, options)?);
    match reader.read_parts {
        Some(read_parts) => read_parts(inputs, options, sink),
        None => sink.part((reader.read)(inputs, options)?),
    }
}

/// Describes what the inputs hold (format, variant, byte order, pointer
/// size, counts, totals, time range), without converting them: as text
/// through `Display`, as JSON through `Serialize`. The inputs are taken as
/// [`read`] takes them.
pub fn info(paths: &[PathBuf], options: &ReadOptions) -> Result<Summary> {
    info_inputs(&open_all(paths, options)?, options)
}

/// Describes what opened inputs (of one format) hold, without converting
/// them.
pub fn info_inputs(inputs: &[Input], options: &ReadOptions) -> Result<Summary> {
    let format = format_of(inputs, options)?;
    (reader(format).info)(inputs, options)
}

/// The error for an input of no known format; a directory (that is no DCPI
/// database or APS capture) is refused with what it holds and pointed to
/// `profconv convert`.
fn unknown_format(input: &Input) -> Error {
    if input.is_dir() {
        return directory::not_one_profile(input.name(), &Survey::of(input.name()));
    }
    Error::unsupported(
        input.name(),
        "not a profile of any known format (gprof gmon.out, mpatrol.out, DCPI, APS); use --from to force one",
    )
}

/// The one format of all inputs: forced by the options, or detected and the
/// same for every input.
pub(crate) fn format_of(inputs: &[Input], options: &ReadOptions) -> Result<Format> {
    if let Some(f) = options.format {
        return Ok(f);
    }
    let Some(first) = inputs.first() else {
        return Err(Error::Usage("no input given".into()));
    };
    let mut format = None;
    for input in inputs {
        let this = detect_input(input).ok_or_else(|| unknown_format(input))?;
        match format {
            None => format = Some(this),
            Some(f) if f == this => {}
            Some(f) => {
                return Err(Error::Usage(format!(
                    "inputs of different formats cannot be combined: {} is {}, {} is {}",
                    first.name().display(),
                    f.name(),
                    input.name().display(),
                    this.name()
                )))
            }
        }
    }
    format.ok_or_else(|| Error::Usage("no input given".into()))
}
