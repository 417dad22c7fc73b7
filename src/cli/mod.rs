//! Command-line definitions (clap) and the run functions behind them: flags
//! become library options, errors become exit codes, archive runs get a
//! progress bar. No format logic lives here. Every message goes through
//! [`message::line`] (the lints below keep it so).
#![deny(clippy::print_stderr, clippy::print_stdout)]

mod message;
mod signals;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use profconv::error::{Error, Result};
use profconv::profile::GroupBy;
use profconv::read::{
    self, ApsOptions, DcpiOptions, EpochSelect, Format, GprofOptions, GprofStacks, MpatrolOptions,
    ReadOptions,
};
use profconv::write::{terminal_text, OutputFormat, WriteOptions};
use profconv::Output;

use message::say;

const EXAMPLES: &str = "\
Examples:
  profconv gmon.out --binary ./a.out -o out.pb.gz      then: go tool pprof -top out.pb.gz
  profconv gmon.1 gmon.2 --binary ./a.out -o sum.pb.gz (summed, like gprof -s)
  profconv gmon.out --binary ./a.out -o flame.svg      flamegraph of cpu time
  profconv gmon.out --binary ./a.out -o calls.folded --sample-type calls
  profconv mpatrol.out -o allocs.svg --sample-type alloc_space
  profconv dcpidb/ -o out.speedscope.json
  profconv capture/ --group-by pid,tid -o flame.svg   APS capture, a frame per process/thread
  profconv info gmon.out                               what the file holds
  profconv convert archive/ -o converted/ --to pprof --to svg --report report.json
  profconv gmon.out --binary ./a.out -o callgrind.out.a  then: kcachegrind callgrind.out.a
  profconv completions bash; profconv man              shell completions, man page
Output format follows the extension (.pb.gz .pb .folded .txt .svg .json .callgrind, callgrind.out*) or --to.
Exit codes: 0 ok, 1 bad input or output, 2 usage, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP
(temporaries removed; outputs appear whole or not at all). A closed pipe on standard output ends quietly (0).";

#[derive(Debug, Parser)]
#[command(
    name = "profconv",
    version,
    about = "Convert legacy profiles (gprof gmon.out, mpatrol, DCPI, APS) to pprof, folded stacks, flamegraph SVG, speedscope and callgrind",
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub convert: ConvertArgs,
}

// Parsed once per run: the size of `convert`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what the inputs hold (format, variant, byte order, pointer size,
    /// counts, totals, time range) without converting them.
    Info {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Print the description as JSON (the same facts, as a tree of
        /// fields, lines, blocks and tables) for scripts.
        #[arg(long)]
        json: bool,
        /// Threads of work (default 1). With more, a DCPI database's images
        /// are scanned side by side; the description is the same.
        #[arg(short, long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Convert a whole archive: every profile below ARCHIVE_DIR, in parallel,
    /// to OUT_DIR at the same relative paths with the new extensions.
    Convert(ArchiveArgs),
    /// Work with `convert --report` files.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Print a shell completion script to standard output, e.g.
    /// `profconv completions bash > ~/.local/share/bash-completion/completions/profconv`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output, e.g.
    /// `profconv man > ~/.local/share/man/man1/profconv.1`.
    Man,
}

/// `profconv report …`.
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Join the reports of `convert --shard K/N` runs into the report of
    /// the whole run, e.g. `profconv report merge shard-*.json -o report.json`.
    Merge {
        /// The shards' reports.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The merged report.
        #[arg(short, long)]
        output: PathBuf,
        /// Merge the reports found although shards are missing; the merged
        /// report lists them in `missing_shards`, and a line says so.
        #[arg(long)]
        partial: bool,
    },
}

/// Joins shard reports (`profconv report merge`).
fn merge_reports(reports: &[PathBuf], output: &Path, partial: bool) -> Result<()> {
    let read: Vec<&Path> = reports.iter().map(PathBuf::as_path).collect();
    profconv::write::refuse_input_as_output(output, &read)?;
    let loaded = reports
        .iter()
        .map(|p| Ok((p.clone(), profconv::archive::Report::load(p)?)))
        .collect::<Result<Vec<_>>>()?;
    let merged = profconv::archive::Report::merge(&loaded, partial)?;
    merged.save(output)?;
    say!("{}", shares_line(&merged));
    if !merged.missing_shards.is_empty() {
        say!(
            "profconv report merge: partial: shard {} missing; {} has {} inputs of the shards found",
            merged.missing_shards.join(", "),
            output.display(),
            merged.inputs.len()
        );
    }
    Ok(())
}

/// What `report merge` says of the shards' shares: how many inputs and
/// bytes in all, and the largest shard's bytes against the mean.
fn shares_line(merged: &profconv::archive::Report) -> String {
    let shares = &merged.shards;
    let bytes: u64 = shares.iter().map(|s| s.bytes).sum();
    let mut line = format!(
        "profconv report merge: {} inputs in {} shards, {bytes} bytes",
        merged.inputs.len(),
        shares.len()
    );
    let largest = shares.iter().rev().max_by_key(|s| s.bytes);
    if let (Some(largest), Some(spread)) = (largest, merged.shard_spread) {
        line.push_str(&format!(
            "; the largest shard, {}, has {} bytes: {spread:.2}× the mean",
            largest.shard, largest.bytes
        ));
    }
    line
}

/// Writes the completion script for `shell` (`profconv completions SHELL`).
/// clap_complete panics when its writer fails, so the script is made in
/// memory and written here, where a full disk or a closed pipe is an error.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> std::io::Result<()> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "profconv", &mut script);
    out.write_all(&script)?;
    out.flush()
}

/// Writes the man page, profconv(1), in roff (`profconv man`): clap_mangen's
/// sections, with the `--help` examples as an EXAMPLES section kept line by
/// line (clap_mangen would fill them into one paragraph).
pub fn write_man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let command = <Cli as clap::CommandFactory>::command();
    let man = clap_mangen::Man::new(command);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    man.render_subcommands_section(out)?;
    writeln!(out, ".SH EXAMPLES\n.nf")?;
    for line in EXAMPLES.lines().skip(1) {
        // roff: a backslash is `\e`, a leading dot or quote starts a request.
        let line = line.replace('\\', "\\e").replace('-', "\\-");
        let guard = if line.starts_with(['.', '\'']) {
            "\\&"
        } else {
            ""
        };
        writeln!(out, "{guard}{line}")?;
    }
    writeln!(out, ".fi")?;
    man.render_version_section(out)
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// The directory tree of legacy profiles.
    pub archive: PathBuf,
    /// The directory the converted files go to.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output formats (repeat for several).
    #[arg(long, value_enum, required = true)]
    pub to: Vec<OutputFormat>,
    /// Parallel conversions (default: all cores; at most 4 per core, and no
    /// more than there are inputs), each on one thread.
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// A file of `GLOB BINARY` lines: the binary for inputs whose relative
    /// path matches GLOB (`*`, `?`, `**`); first match wins.
    #[arg(long)]
    pub binary_map: Option<PathBuf>,
    /// Overwrite existing outputs.
    #[arg(long)]
    pub force: bool,
    /// Convert again only the outputs that are missing or made from other
    /// inputs, executables or options (what every re-run does; for scripts).
    #[arg(long)]
    pub resume: bool,
    /// No progress, no per-file log: only the summary prints, with the
    /// failures counted by reason (the report lists each).
    #[arg(short, long)]
    pub quiet: bool,
    /// A file of relative paths (as in the report, one per line, `#`
    /// comments) whose failure is known: the summary marks failures known
    /// or new, and only new ones count against the exit code.
    #[arg(long, value_name = "FILE")]
    pub known_failures: Option<PathBuf>,
    /// Exit 0 when at most N failures are new (not in --known-failures).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub allow_failures: usize,
    /// Convert only shard K of N (K from 0 to N-1): the K-th of N runs of
    /// inputs, in walk order, of about equal bytes. `auto/N` takes K from
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID
    /// (Slurm array).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Write the report (one record per input) as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub write: WriteArgs,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input profiles (several of one program are summed; `-` reads standard input).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output file (`-` for standard output); repeat it to write several
    /// formats from one reading of the inputs.
    #[arg(short, long, required = true)]
    pub output: Vec<PathBuf>,
    /// Output format of the one output, overriding its extension (needed for
    /// `-o -`). With several `-o` it is refused as ambiguous: each output's
    /// extension names its format.
    #[arg(long, value_enum)]
    pub to: Option<OutputFormat>,
    /// No progress bar (one appears on a terminal when a conversion takes
    /// more than a second) and no `wrote FILE (FORMAT, SIZE)` line per output.
    #[arg(short, long)]
    pub quiet: bool,
    /// Threads of work for this conversion (default 1). With more, an APS
    /// file's records are counted side by side; the other readers and every
    /// writer run on one thread. The outputs are the same bytes whatever N is.
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub write: WriteArgs,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// What the writers are told, for single conversions and archives alike.
#[derive(Debug, Args, Clone, Default)]
pub struct WriteArgs {
    /// Sample type to show (e.g. cpu, samples, calls, alloc_space): the one
    /// folded and SVG outputs draw, the one pprof, speedscope and callgrind
    /// open on (they keep the others). A name the profile lacks is an error.
    #[arg(long)]
    pub sample_type: Option<String>,
    /// Root frames for folded/SVG/speedscope output: comma-separated `image`,
    /// `pid`, `tid`, any label key, or `none`.
    #[arg(long, value_delimiter = ',')]
    pub group_by: Option<Vec<String>>,
    /// How finely frames are told apart (pprof's word). Each output's
    /// default is what its viewer is for: pprof keeps every address (pprof
    /// folds at view time); callgrind, source lines; folded, SVG,
    /// speedscope and the Firefox Profiler, functions (at `lines` the
    /// Firefox Profiler keeps functions and gets each frame's line for its
    /// source view). Above `addresses`, an unsymbolized address folds to
    /// its image's one frame, `[image]`.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub granularity: Option<profconv::profile::Granularity>,
    /// SVG: the title (default: the inputs and the sample type).
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub title: Option<String>,
    /// SVG: a second line under the title.
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub subtitle: Option<String>,
    /// SVG: the palette (hot, mem, io, java, js, perl, python, rust, red,
    /// green, blue, aqua, yellow, purple, orange, wakeup); default `mem` for
    /// heap profiles, else `hot`.
    #[arg(long, value_name = "PALETTE", help_heading = "Flamegraph (SVG)",
          value_parser = clap::builder::PossibleValuesParser::new(inferno::flamegraph::color::Palette::VARIANTS))]
    pub colors: Option<String>,
    /// SVG: an icicle graph (roots at the top).
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub inverted: bool,
    /// SVG: stacks reversed, leaf functions as the roots.
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub reverse: bool,
    /// SVG: leave out frames narrower than this percentage of the width
    /// (default 0.01).
    #[arg(long, value_name = "PERCENT", help_heading = "Flamegraph (SVG)")]
    pub minwidth: Option<f64>,
    /// SVG: image width in pixels (default 1200).
    #[arg(long, value_name = "PIXELS", help_heading = "Flamegraph (SVG)")]
    pub width: Option<usize>,
    /// SVG: a flame chart (stacks in order, not merged by name).
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub flamechart: bool,
    /// SVG: colours by a hash of the function name. Always on (the same
    /// input gives the same SVG); accepted as in inferno-flamegraph.
    #[arg(long, help_heading = "Flamegraph (SVG)")]
    pub hash: bool,
    /// SVG: what a count is called (default: bytes or objects for heap
    /// profiles, else the sample type's unit).
    #[arg(long, value_name = "NAME", help_heading = "Flamegraph (SVG)")]
    pub count_name: Option<String>,
}

impl WriteArgs {
    pub fn options(&self, title: String) -> WriteOptions {
        WriteOptions {
            sample_type: self.sample_type.clone(),
            group_by: self.group_by.as_deref().map(parse_group_by),
            title,
            granularity: self.granularity,
            flamegraph: profconv::write::FlamegraphOptions {
                title: self.title.clone(),
                subtitle: self.subtitle.clone(),
                colors: self.colors.clone(),
                inverted: self.inverted,
                reverse: self.reverse,
                min_width: self.minwidth,
                width: self.width,
                flame_chart: self.flamechart,
                count_name: self.count_name.clone(),
            },
        }
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct ReadArgs {
    /// Input format, instead of detecting it from the content.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
    /// Executable to symbolize addresses with (ELF symbols and DWARF).
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// gprof: address size in bytes (4 or 8) when detection is ambiguous.
    #[arg(long, value_parser = parse_pointer_size)]
    pub gmon_pointer_size: Option<usize>,
    /// gprof: clock rate (ticks per second) of 4.3BSD files, which do not record it
    /// (and of 4.4BSD files whose header says 0).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub gmon_rate: Option<u32>,
    /// gprof: stacks synthesized from the call graph, or one frame each.
    #[arg(long, value_enum, default_value_t = GprofStacks::Synthesized)]
    pub gprof_stacks: GprofStacks,
    /// gprof: convert even when --binary does not fit the profile (another
    /// build, another program); by default such a pair is refused.
    #[arg(long)]
    pub skip_binary_check: bool,
    /// gprof: give each address the frames of the functions inlined there.
    /// By default a tick goes to the function gprof credits (the one whose
    /// code holds it), so `go tool pprof -top` shows gprof's flat profile;
    /// with this, pprof credits the inlined function, as it does for C++.
    #[arg(long)]
    pub inline_frames: bool,
    /// mpatrol: split samples by allocation size class.
    #[arg(long)]
    pub mpatrol_size_classes: bool,
    /// DCPI: instruction size in bytes.
    #[arg(long)]
    pub dcpi_insn_size: Option<u32>,
    /// DCPI: epoch to read from a database: a name, `latest` or `all`.
    #[arg(long, default_value = "all")]
    pub epoch: String,
    /// DCPI: directory to find images in by their `path` header.
    #[arg(long)]
    pub image_dir: Option<PathBuf>,
    /// APS: call depth D of the records, instead of detecting it.
    #[arg(long)]
    pub aps_call_depth: Option<usize>,
    /// APS: path length P of the module and vma tables, instead of detecting it.
    #[arg(long)]
    pub aps_path_len: Option<usize>,
    /// APS: a copy of the board's file system, to symbolize with.
    #[arg(long)]
    pub image_root: Option<PathBuf>,
    /// APS: the pid_info file with thread and process names.
    #[arg(long)]
    pub pid_info: Option<PathBuf>,
    /// APS: leave pid 0 (idle) out.
    #[arg(long)]
    pub drop_idle: bool,
    /// The most bytes an input that is not a regular file (standard input,
    /// a pipe, a device) is read to (default 256 MiB), and a gzip-compressed
    /// input decompresses to (default: 64 times its compressed size, at
    /// least 256 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_input_size: Option<u64>,
}

impl ReadArgs {
    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            format: self.from,
            binary: self.binary.clone(),
            max_input_size: self.max_input_size,
            gprof: GprofOptions {
                pointer_size: self.gmon_pointer_size,
                rate: self.gmon_rate,
                stacks: self.gprof_stacks,
                skip_binary_check: self.skip_binary_check,
                inline_frames: self.inline_frames,
            },
            mpatrol: MpatrolOptions {
                size_classes: self.mpatrol_size_classes,
            },
            dcpi: DcpiOptions {
                insn_size: self.dcpi_insn_size,
                epoch: match self.epoch.as_str() {
                    "all" => EpochSelect::All,
                    "latest" => EpochSelect::Latest,
                    name => EpochSelect::Named(name.to_owned()),
                },
                image_dir: self.image_dir.clone(),
            },
            aps: ApsOptions {
                call_depth: self.aps_call_depth,
                path_len: self.aps_path_len,
                image_root: self.image_root.clone(),
                pid_info: self.pid_info.clone(),
                drop_idle: self.drop_idle,
            },
            progress: None,
            // `-j` is not a reading option: the caller sets it ([`threads`]).
            threads: 1,
        }
    }
}

fn parse_pointer_size(s: &str) -> std::result::Result<usize, String> {
    match s {
        "4" => Ok(4),
        "8" => Ok(8),
        _ => Err("the pointer size is 4 or 8 (bytes)".into()),
    }
}

/// Parses `--group-by` values.
pub fn parse_group_by(values: &[String]) -> Vec<GroupBy> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty() && *v != "none")
        .map(|v| match v {
            "image" => GroupBy::Image,
            key => GroupBy::Label(key.to_owned()),
        })
        .collect()
}

/// Reads the inputs and writes the outputs.
pub fn run_convert(args: &ConvertArgs) -> Result<()> {
    let outputs = outputs(args)?;
    let progress = std::sync::Arc::new(read::Progress::default());
    let mut read = args.read.options();
    read.threads = threads(args.jobs)?;
    read.progress = Some(progress.clone());
    let bar = {
        use std::io::IsTerminal;
        (std::io::stderr().is_terminal() && !args.quiet)
            .then(|| ProgressBar::start(progress.clone(), read::input_size(&args.inputs)))
    };
    let options = profconv::Options {
        read,
        write: args.write.options(String::new()),
    };
    let done = profconv::convert(&args.inputs, &outputs, &options);
    // On an error the bar is dropped (cleared) before main prints it; the
    // warnings come after it, so that they stay on the screen.
    drop(bar);
    for warning in progress.warnings() {
        say!("profconv: warning: {warning}");
    }
    done?;
    if !args.quiet {
        for output in outputs.iter().filter(|o| o.path != Path::new("-")) {
            say!("{}", wrote_line(output));
        }
    }
    Ok(())
}

/// `wrote out.pb.gz (pprof, 1.4 kB)`: what a conversion left where.
fn wrote_line(output: &Output) -> String {
    let format = clap::ValueEnum::to_possible_value(&output.format).map_or_else(
        || format!("{:?}", output.format),
        |v| v.get_name().to_owned(),
    );
    let size = std::fs::metadata(&output.path).map_or_else(|_| "?".into(), |m| human_size(m.len()));
    format!("wrote {} ({format}, {size})", output.path.display())
}

/// Bytes in decimal units with one decimal: `512 B`, `1.4 kB`, `119.0 MB`.
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The output extensions profconv knows, for messages.
const EXTENSIONS: &str =
    ".pb.gz .pb .folded .txt .svg .json .firefox.json.gz .firefox.json .callgrind, callgrind.out*";

/// Every output with its format, settled before anything is read. Only
/// `--to` names standard output's format, and `--to` is for a single
/// output: each message says what works in the case at hand.
fn outputs(args: &ConvertArgs) -> Result<Vec<Output>> {
    if args.output.is_empty() {
        return Err(Error::Usage("an output is required: -o FILE".into()));
    }
    let several = args.output.len() > 1;
    if several && args.output.iter().any(|o| o == Path::new("-")) {
        return Err(Error::Usage(format!(
            "-o - (standard output) has no extension to name its format, and --to names the format of a single output: write standard output in a run of its own (-o - --to FORMAT), or a file with an extension ({EXTENSIONS}) instead of -"
        )));
    }
    if args.to.is_some() && several {
        return Err(Error::Usage(format!(
            "--to names the format of a single output; with several -o, let each output's extension name its format ({EXTENSIONS})"
        )));
    }
    let mut outputs = Vec::with_capacity(args.output.len());
    for output in &args.output {
        let format = match args.to.or_else(|| OutputFormat::from_path(output)) {
            Some(f) => f,
            None if output == Path::new("-") => {
                return Err(Error::Usage(
                    "writing to standard output needs --to FORMAT (-o - --to folded)".into(),
                ))
            }
            None if several => {
                return Err(Error::Usage(format!(
                    "cannot tell the output format from {}: with several -o, each output's extension names its format ({EXTENSIONS})",
                    output.display()
                )))
            }
            None => {
                return Err(Error::Usage(format!(
                    "cannot tell the output format from {}: use an extension ({EXTENSIONS}) or --to",
                    output.display()
                )))
            }
        };
        outputs.push(Output {
            path: output.clone(),
            format,
        });
    }
    Ok(outputs)
}

/// The progress bar of a single conversion: drawn on stderr (a terminal)
/// once the conversion has run for [`ProgressBar::DELAY`], showing the bytes
/// read of the inputs' total; cleared when dropped.
struct ProgressBar {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressBar {
    /// Quick conversions show nothing.
    const DELAY: std::time::Duration = std::time::Duration::from_secs(1);

    fn start(watched: std::sync::Arc<read::Progress>, total: u64) -> Self {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Tests shorten the delay to see the bar without a large input.
        let delay = std::env::var("PROFCONV_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Self::DELAY, std::time::Duration::from_millis);
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let tick = std::time::Duration::from_millis(50);
            let start = std::time::Instant::now();
            while start.elapsed() < delay {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(tick);
            }
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let phase = |p: &read::Progress| if p.writing() { "writing" } else { "reading" };
            bar.set_message(phase(&watched));
            while !stop.load(Ordering::Relaxed) {
                bar.set_position(watched.read().min(total));
                bar.set_message(phase(&watched));
                bar.tick();
                std::thread::sleep(tick);
            }
            // A last frame with what was read, however quick the end was.
            bar.set_position(watched.read().min(total));
            bar.force_draw();
            bar.finish_and_clear();
        });
        ProgressBar {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Prints an `info` summary as text, or as pretty JSON with `--json`; a
/// failed write (a full disk, a closed pipe) is an error, not a panic.
fn print_info(summary: &read::Summary, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(summary).unwrap_or_default();
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", terminal_text(&summary.to_string()))?;
    }
    out.flush()
}

/// Runs an archive migration; `Ok(false)` when some input failed.
pub fn run_archive(args: &ArchiveArgs) -> Result<bool> {
    let mut options = archive_options(args)?;
    if let Some(report) = &args.report {
        let also_read: Vec<&Path> = [args.binary_map.as_deref(), args.known_failures.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        profconv::archive::check_report_path(report, &args.archive, &options, &also_read)?;
    }
    let shown = ArchiveProgress::new(args.quiet);
    options.progress = Some(shown.read.clone());
    let journal = std::sync::Arc::new(profconv::archive::Journal::new(args.report.as_deref())?);
    options.journal = Some(journal.clone());
    signals::SoFar::start(args, &options, shown.bar.clone());
    let report = profconv::archive::run(
        &args.archive,
        &options,
        &|record| shown.finished(record),
        &|plan| shown.plan(plan),
    );
    shown.stop();
    let report = report?;
    say!(
        "{}",
        journal.summary(&report, args.quiet).trim_end_matches('\n')
    );
    if let Some(path) = &args.report {
        journal.save(&report, path)?;
    }
    Ok(report.new_failures <= args.allow_failures)
}

/// The archive run's options from the command line, checked.
fn archive_options(args: &ArchiveArgs) -> Result<profconv::archive::ArchiveOptions> {
    let cores = cores();
    let jobs = args.jobs.unwrap_or(cores);
    if jobs == 0 {
        return Err(Error::Usage("-j takes 1 or more".into()));
    }
    let jobs = capped_jobs("profconv convert", jobs, cores);
    if args.force && args.resume {
        return Err(Error::Usage(
            "--force and --resume exclude each other".into(),
        ));
    }
    let binary_map = match &args.binary_map {
        Some(p) => profconv::archive::read_binary_map(p)?,
        None => Vec::new(),
    };
    let known_failures = match &args.known_failures {
        Some(p) => profconv::archive::read_known_failures(p)?,
        None => Default::default(),
    };
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let mut formats = args.to.clone();
    formats.dedup();
    Ok(profconv::archive::ArchiveOptions {
        out_dir: args.output.clone(),
        formats,
        read: args.read.options(),
        binary_map,
        write: args.write.options(String::new()),
        jobs,
        force: args.force,
        resume: args.resume,
        known_failures,
        shard,
        progress: None,
        journal: None,
    })
}

/// The threads of one conversion or `info` from `-j` (1 when not given):
/// the library's [`ReadOptions::threads`]. `profconv convert` runs its
/// units side by side instead, each on one thread ([`archive_options`]).
fn threads(jobs: Option<usize>) -> Result<usize> {
    match jobs.unwrap_or(1) {
        0 => Err(Error::Usage("-j takes 1 or more".into())),
        n => Ok(capped_jobs("profconv", n, cores())),
    }
}

/// The machine's cores, as the standard library sees them (1 if unknown).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The most threads per core `-j` starts: for conversions, enough to
/// overlap reading from a slow disk or network with computing; more only
/// add threads to start.
const JOBS_PER_CORE: usize = 4;

/// `-j N`, capped at [`JOBS_PER_CORE`] per core with a message that names
/// the command (`what`): thousands of threads take longer to start than
/// the work they would do.
fn capped_jobs(what: &str, jobs: usize, cores: usize) -> usize {
    let most = cores.saturating_mul(JOBS_PER_CORE).max(1);
    if jobs <= most {
        return jobs;
    }
    say!("{what}: -j {jobs} capped to {most} ({JOBS_PER_CORE} per core, {cores} cores)");
    most
}

/// `--shard K/N` or `auto/N` (K from JOB_COMPLETION_INDEX, else
/// SLURM_ARRAY_TASK_ID).
fn parse_shard(spec: &str) -> Result<profconv::archive::Shard> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "--shard {spec}: {why}; expected K/N or auto/N with 0 <= K < N"
        ))
    };
    let (k, n) = spec.split_once('/').ok_or_else(|| bad("no `/`"))?;
    let count: u64 = n.trim().parse().map_err(|_| bad("N is not a number"))?;
    let index: u64 = if k.trim() == "auto" {
        let (var, value) = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"]
            .iter()
            .find_map(|v| std::env::var(v).ok().map(|x| (*v, x)))
            .ok_or_else(|| bad("auto needs JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID set"))?;
        value
            .trim()
            .parse()
            .map_err(|_| bad(&format!("{var}={value:?} is not a number")))?
    } else {
        k.trim().parse().map_err(|_| bad("K is not a number"))?
    };
    if count == 0 || index >= count {
        return Err(bad("K is out of range"));
    }
    Ok(profconv::archive::Shard { index, count })
}

/// What an archive run shows as it goes: a progress bar on a terminal, else
/// one line per input (none with `--quiet`). The bar follows the bytes the
/// units have read so far, polled by a thread of its own, so that one large
/// input moves it too.
struct ArchiveProgress {
    terminal: bool,
    quiet: bool,
    bar: indicatif::ProgressBar,
    /// The run's input bytes read so far ([`profconv::archive::ArchiveOptions::progress`]).
    read: std::sync::Arc<read::Progress>,
    poller: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    total: std::sync::atomic::AtomicUsize,
    done: std::sync::atomic::AtomicUsize,
}

impl ArchiveProgress {
    /// How often the bar looks at the bytes read.
    const POLL: std::time::Duration = std::time::Duration::from_millis(100);

    fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        ArchiveProgress {
            terminal: std::io::stderr().is_terminal() && !quiet,
            quiet,
            bar: indicatif::ProgressBar::hidden(),
            read: Default::default(),
            poller: Default::default(),
            total: Default::default(),
            done: Default::default(),
        }
    }

    /// Moves the bar to the bytes read until the bar is finished.
    fn poll(&self) {
        let (bar, read) = (self.bar.clone(), self.read.clone());
        let thread = std::thread::spawn(move || {
            while !bar.is_finished() {
                bar.set_position(read.read());
                std::thread::sleep(Self::POLL);
            }
        });
        *self
            .poller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(thread);
    }

    /// The run is over: clear the bar and end its poller.
    fn stop(&self) {
        self.bar.finish_and_clear();
        let poller = self
            .poller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = poller {
            let _ = thread.join();
        }
    }

    /// The run's plan is counted: size the bar.
    fn plan(&self, plan: &profconv::archive::Plan) {
        self.total
            .store(plan.units, std::sync::atomic::Ordering::Relaxed);
        if !self.terminal {
            return;
        }
        self.bar
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        self.bar.set_length(plan.bytes);
        self.bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {prefix} files, ETA {eta} {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        self.poll();
    }

    /// One input is done: advance the bar (failures and warnings above
    /// it), or log its line.
    fn finished(&self, record: &profconv::archive::Record) {
        use std::sync::atomic::Ordering;
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let of = self.total.load(Ordering::Relaxed);
        if self.terminal {
            self.bar.set_position(self.read.read());
            self.bar.set_prefix(format!("{n}/{of}"));
            self.bar
                .set_message(terminal_text(&record.path).into_owned());
            if record.status == profconv::archive::Status::Failed {
                let error = record.error.as_deref().unwrap_or("");
                self.bar
                    .println(terminal_text(&format!("failed: {}: {error}", record.path)));
            }
            for warning in &record.warnings {
                self.bar.println(terminal_text(&format!(
                    "warning: {}: {warning}",
                    record.path
                )));
            }
        } else if !self.quiet {
            log_line(n, of, record);
        }
    }
}

/// `[n/of] status path: error`, then the input's warnings.
fn log_line(n: usize, of: usize, record: &profconv::archive::Record) {
    let status = match record.status {
        profconv::archive::Status::Converted => "converted",
        profconv::archive::Status::Unchanged => "unchanged",
        profconv::archive::Status::Skipped => "skipped",
        profconv::archive::Status::Failed => "failed",
        profconv::archive::Status::Binary => "binary (not a profile)",
    };
    let detail = record
        .error
        .as_deref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    let unsymbolized = record
        .unsymbolized
        .as_deref()
        .map(|why| format!(" (unsymbolized: {why})"))
        .unwrap_or_default();
    say!("[{n}/{of}] {status} {}{detail}{unsymbolized}", record.path);
    for warning in &record.warnings {
        say!("    warning: {warning}");
    }
}

/// Runs the command line; returns the process exit code.
pub fn main() -> u8 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    signals::watch();
    let result = match &cli.command {
        Some(Command::Info {
            inputs,
            json,
            jobs,
            read,
        }) => threads(*jobs)
            .and_then(|threads| {
                let options = ReadOptions {
                    threads,
                    ..read.options()
                };
                read::info(inputs, &options)
            })
            .and_then(|summary| print_info(&summary, *json).map_err(Error::stdout)),
        Some(Command::Completions { shell }) => {
            write_completions(*shell, &mut std::io::stdout().lock()).map_err(Error::stdout)
        }
        Some(Command::Man) => write_man_page(&mut std::io::stdout().lock())
            .and_then(|()| std::io::stdout().flush())
            .map_err(Error::stdout),
        Some(Command::Report(ReportCommand::Merge {
            reports,
            output,
            partial,
        })) => merge_reports(reports, output, *partial),
        Some(Command::Convert(args)) => match run_archive(args) {
            Ok(true) => Ok(()),
            Ok(false) => return 1,
            Err(e) => Err(e),
        },
        None => run_convert(&cli.convert),
    };
    match result {
        Ok(()) => 0,
        // The reader of a pipe took what it wanted and closed it (`| head`):
        // a quiet end, as ripgrep and most tools that ignore SIGPIPE do.
        Err(e) if e.is_broken_pipe_on_stdout() => 0,
        Err(e) => {
            say!("profconv: {e}");
            if e.is_usage() {
                2
            } else {
                1
            }
        }
    }
}
