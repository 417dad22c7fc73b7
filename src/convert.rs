//! The front door: [`convert`] reads inputs once and writes every output.
//! The inputs are read in parts into one sink for every output
//! ([`write::StreamedOutputs`]): pprof outputs are written part by part as
//! the inputs are read, the others from the profile folded to their
//! granularity as it comes, so that a profile larger than memory (a DCPI
//! database) never has to be whole. The command line and archive
//! migrations both come through here.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::read::{self, Input, ReadOptions};
use crate::write::{self, OutputFormat, WriteOptions};

/// What a conversion is asked to do: how to read the inputs and how to
/// write the outputs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How the inputs are read: format (detected when `None`), the binary to
    /// symbolize with, each format's options, and a [`read::Progress`] to
    /// report to.
    pub read: ReadOptions,
    /// How the outputs are written. An empty `title` becomes the inputs'
    /// file names, joined by ` + `.
    pub write: WriteOptions,
}

/// One output of a conversion: where it goes and in which format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The file to write (`-`: standard output). A regular file is written
    /// through a temporary file renamed into place, so a failed conversion
    /// leaves the old file or none, never half a file; a device or FIFO is
    /// written in place.
    pub path: PathBuf,
    /// The format to write.
    pub format: OutputFormat,
}

impl Output {
    /// An output whose format follows its file name's extension
    /// ([`OutputFormat::from_path`]); [`Error::Usage`] when it names none.
    pub fn new(path: impl Into<PathBuf>) -> Result<Output> {
        let path = path.into();
        match OutputFormat::from_path(&path) {
            Some(format) => Ok(Output { path, format }),
            None => Err(Error::Usage(format!(
                "cannot tell the output format from {}: use an extension (.pb.gz .pb .folded .txt .svg .json .callgrind, callgrind.out*) or name the format",
                path.display()
            ))),
        }
    }
}

/// Reads `inputs` (files or directories of one format, `-` for standard
/// input; several are summed, as `gprof -s` does) and writes each of
/// `outputs`. Returns the warnings about the inputs ([`crate::Profile::warn`]),
/// which the outputs also carry among their comments.
///
/// Once the inputs are opened and their format detected, before anything is
/// converted or written, an output that is a file the conversion reads is
/// refused ([`crate::write::refuse_input_as_output`]): an input, a file
/// inside an input folder, standard input's file, `binary`, APS `pid_info`,
/// a file under DCPI `image_dir` or APS `image_root`. pprof outputs are
/// written as the inputs are read; the others once they are read, from the
/// profile folded to each output's granularity ([`WriteOptions::granularity`]).
/// Either way the outputs that are files appear whole or not at all, and
/// together: each is written to a temporary file beside it, and they are
/// renamed into place only once every one is complete, so a failure (a full
/// disk) or [`crate::write::remove_temporaries`] (a signal) leaves none of
/// them (standard output and devices are written in place, as they come).
/// `options.read.progress`, when set, sees the bytes read, the start of
/// writing and the warnings (the input's before the outputs kept whole are
/// written, so that they are known even when writing fails; then those of
/// outputs their viewers cannot open, [`crate::write::WriteOptions`]).
pub fn convert<P: AsRef<Path>>(
    inputs: &[P],
    outputs: &[Output],
    options: &Options,
) -> Result<Vec<String>> {
    let paths: Vec<PathBuf> = inputs.iter().map(|p| p.as_ref().to_path_buf()).collect();
    let opened = read::open_all(&paths, &options.read)?;
    // Detected first, so that a folder that is no profile is pointed to
    // `profconv convert` rather than refused as an output's folder.
    let format = read::format_of(&opened, &options.read)?;
    let mut read_paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    read_paths.extend(read_besides(&options.read));
    for output in outputs {
        write::refuse_input_as_output(&output.path, &read_paths)?;
    }
    let mut options = options.clone();
    options.read.format = Some(format);
    if options.write.title.is_empty() {
        options.write.title = title_of(&paths);
    }
    convert_inputs(&opened, outputs, &options, None)
}

/// What a conversion reads besides its inputs: the binary, APS `pid_info`,
/// and the folders images are found in (everything below them).
pub(crate) fn read_besides(options: &ReadOptions) -> impl Iterator<Item = &Path> {
    [
        options.binary.as_deref(),
        options.aps.pid_info.as_deref(),
        options.dcpi.image_dir.as_deref(),
        options.aps.image_root.as_deref(),
    ]
    .into_iter()
    .flatten()
}

/// [`convert`] of inputs opened already (an archive migration opens each
/// input once, to detect its format), with no check of the outputs against
/// the inputs and the title as it is. With `within`, the outputs are files
/// inside that folder, never written through a link.
pub(crate) fn convert_inputs(
    inputs: &[Input],
    outputs: &[Output],
    options: &Options,
    within: Option<&Path>,
) -> Result<Vec<String>> {
    let progress = options.read.progress.as_deref();
    let targets: Vec<(&Path, OutputFormat)> = outputs
        .iter()
        .map(|o| (o.path.as_path(), o.format))
        .collect();
    let mut streamed = write::StreamedOutputs::create(&targets, &options.write, within)?;
    read::read_parts(inputs, &options.read, &mut streamed)?;
    let warnings = streamed.finish(|warnings| {
        if let Some(p) = progress {
            p.set_warnings(warnings);
            p.start_writing();
        }
    })?;
    if let Some(p) = progress {
        p.set_warnings(&warnings);
    }
    Ok(warnings)
}

/// The title outputs show by default: the inputs' file names.
fn title_of(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .collect::<Vec<_>>()
        .join(" + ")
}
