//! What each fuzz target does with its bytes, shared by the libFuzzer
//! targets (`fuzz/fuzz_targets/*.rs`) and the regression tests that replay
//! the inputs they found (`tests/fuzz_regressions.rs`), so that a kept input
//! goes through exactly the path that made it fail.
//!
//! Every input stays in memory: an [`Input`] is made from the bytes, never
//! from a file. The reader targets take their options from the first byte
//! (the *control byte*, decoded below) and the file from the rest; the
//! pipeline target takes the whole input as a file, as the command line
//! would with no flags.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use profconv::read::{self, Format, GprofStacks, Input, ReadOptions};
use profconv::write::{self, OutputFormat, WriteOptions};
use profconv::Result;

/// A fixture of the main crate, found from either crate's manifest folder.
fn fixture(relative: &str) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = if here.ends_with("fuzz") {
        here.parent().unwrap_or(here)
    } else {
        here
    };
    root.join("tests/fixtures").join(relative)
}

/// Splits an input into its control byte and the file.
fn split(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(&c, rest)| (c, rest))
}

/// The input as one in-memory file. The folder does not exist, so readers
/// that look beside their input (APS's `pid_info`) find nothing.
fn input(name: &str, bytes: &[u8]) -> Vec<Input> {
    vec![Input::from_bytes(
        Path::new("/nonexistent-profconv-fuzz").join(name),
        bytes.to_vec(),
    )]
}

/// gprof options from the control byte: bits 0–1 the pointer size (detect,
/// 4, 8, detect), bit 2 flat stacks, bits 3–4 the executable (none,
/// callgraph-nopie, callgraph-m32, callgraph-pie), bits 5–7 the 4.3BSD rate.
fn gprof_options(control: u8) -> ReadOptions {
    let mut o = ReadOptions {
        format: Some(Format::Gprof),
        ..ReadOptions::default()
    };
    o.gprof.pointer_size = match control & 3 {
        1 => Some(4),
        2 => Some(8),
        _ => None,
    };
    if control & 4 != 0 {
        o.gprof.stacks = GprofStacks::Flat;
    }
    o.binary = match (control >> 3) & 3 {
        1 => Some(fixture("gprof/callgraph-nopie")),
        2 => Some(fixture("gprof/callgraph-m32")),
        3 => Some(fixture("gprof/callgraph-pie")),
        _ => None,
    };
    o.gprof.rate = match control >> 5 {
        0 => None,
        1 => Some(1),
        2 => Some(60),
        3 => Some(100),
        4 => Some(1000),
        5 => Some(1_000_000),
        6 => Some(u32::MAX),
        _ => Some(0),
    };
    o
}

/// Target `gprof_gnu`: GNU tagged gmon.out (files starting with `gmon`).
pub fn gprof_gnu(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    if !file.starts_with(b"gmon") {
        return Ok(());
    }
    read::read_inputs(&input("gmon.out", file), &gprof_options(control)).map(drop)
}

/// Target `gprof_bsd`: 4.4BSD and 4.3BSD gmon.out (anything without the
/// GNU magic, recognised by its header's sizes or refused).
pub fn gprof_bsd(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    if file.starts_with(b"gmon") {
        return Ok(());
    }
    read::read_inputs(&input("gmon.out", file), &gprof_options(control)).map(drop)
}

/// Target `mpatrol`: bit 0 of the control byte splits by size class.
pub fn mpatrol(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    let mut o = ReadOptions {
        format: Some(Format::Mpatrol),
        ..ReadOptions::default()
    };
    o.mpatrol.size_classes = control & 1 != 0;
    read::read_inputs(&input("mpatrol.out", file), &o).map(drop)
}

/// DCPI options from the control byte: bits 0–1 the instruction size
/// (default, 4, 1, 64).
fn dcpi_options(control: u8) -> ReadOptions {
    let mut o = ReadOptions {
        format: Some(Format::Dcpi),
        ..ReadOptions::default()
    };
    o.dcpi.insn_size = match control & 3 {
        1 => Some(4),
        2 => Some(1),
        3 => Some(64),
        _ => None,
    };
    o
}

/// True for what the reader takes for a dcpicat dump: a `name` line first.
fn starts_like_dcpicat(file: &[u8]) -> bool {
    file.starts_with(b"name")
}

/// Target `dcpi`: binary DCPI profile files (header lines, `samples`, then
/// chunks and a footer).
pub fn dcpi(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    if starts_like_dcpicat(file) {
        return Ok(());
    }
    read::read_inputs(&input("profile", file), &dcpi_options(control)).map(drop)
}

/// Target `dcpicat`: `dcpicat` text dumps (first line `name ...`).
pub fn dcpicat(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    if !starts_like_dcpicat(file) {
        return Ok(());
    }
    read::read_inputs(&input("dump.txt", file), &dcpi_options(control)).map(drop)
}

/// Target `aps`: APS sample files. Control byte: bits 0–1 the call depth
/// (detect, 0, 5, 64), bits 2–3 the path length (detect, 256, 16, 0), bit 4
/// drops pid 0, bit 5 names the file without a CPU number.
pub fn aps(data: &[u8]) -> Result<()> {
    let Some((control, file)) = split(data) else {
        return Ok(());
    };
    let mut o = ReadOptions {
        format: Some(Format::Aps),
        ..ReadOptions::default()
    };
    o.aps.call_depth = match control & 3 {
        1 => Some(0),
        2 => Some(5),
        3 => Some(64),
        _ => None,
    };
    o.aps.path_len = match (control >> 2) & 3 {
        1 => Some(256),
        2 => Some(16),
        3 => Some(0),
        _ => None,
    };
    o.aps.drop_idle = control & 16 != 0;
    let name = if control & 32 != 0 {
        "samples.bin"
    } else {
        "sample_cpu_1_20150716_130220"
    };
    read::read_inputs(&input(name, file), &o).map(drop)
}

/// Every output format the library writes.
pub const OUTPUTS: [OutputFormat; 7] = [
    OutputFormat::Pprof,
    OutputFormat::PprofRaw,
    OutputFormat::Folded,
    OutputFormat::Svg,
    OutputFormat::Speedscope,
    OutputFormat::Callgrind,
    OutputFormat::FirefoxRaw,
];

/// What the pipeline target lets a gzip input decompress to: small, so
/// that a run stays fast; the cap itself is what is exercised.
const PIPELINE_GZIP_CAP: u64 = 4 << 20;

/// Target `pipeline`: the command line's path with no flags: detection,
/// `info`, the reader of the detected format, then every writer.
pub fn pipeline(data: &[u8]) -> Result<()> {
    // As a file's bytes are read: gzip is decompressed, within a cap.
    let name = Path::new("/nonexistent-profconv-fuzz/input");
    let inputs = vec![Input::from_file_bytes(
        name,
        data.to_vec(),
        Some(PIPELINE_GZIP_CAP),
    )?];
    if read::detect_input(&inputs[0]).is_none() {
        return Ok(());
    }
    let options = ReadOptions::default();
    let info = read::info_inputs(&inputs, &options);
    let profile = read::read_inputs(&inputs, &options);
    let (_, profile) = (info?, profile?);
    let write_options = WriteOptions {
        title: "input".into(),
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    for format in OUTPUTS {
        out.clear();
        write::write(&profile, format, &write_options, &mut out)?;
    }
    Ok(())
}

/// A target: reads the bytes the fuzzer made, as its reader would.
pub type Target = fn(&[u8]) -> Result<()>;

/// The targets by name, for the regression tests.
pub const TARGETS: [(&str, Target); 8] = [
    ("gprof_gnu", gprof_gnu),
    ("gprof_bsd", gprof_bsd),
    ("mpatrol", mpatrol),
    ("dcpi", dcpi),
    ("dcpicat", dcpicat),
    ("aps", aps),
    ("pipeline", pipeline),
    ("names", names),
];

/// Target `names`: arbitrary frame names (the input split at NUL bytes,
/// as a reader's string table would give them, invalid UTF-8 replaced as
/// readers do) through every writer; each output must parse in its own
/// syntax: XML for SVG, JSON for speedscope, `frames COUNT` lines without
/// control characters for folded, callgrind's line grammar. A violation
/// panics (the fuzzer's finding); `Ok` otherwise.
pub fn names(data: &[u8]) -> Result<()> {
    use profconv::profile::{Label, LabelValue, Line, Location, Mapping};
    let names: Vec<String> = data
        .split(|&b| b == 0)
        .take(64)
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    let mut p = profconv::Profile::new(&[("samples", "count")]);
    let file = p.intern(names.first().map_or("", String::as_str));
    let build_id = p.intern("");
    let m = p.add_mapping(Mapping::new(0x1000, 0x100_0000, 0, file, build_id));
    let mut locations = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let function = p.add_function(name, name, name, 1);
        locations.push(p.add_location(Location {
            mapping: Some(m),
            address: 0x1000 + 16 * i as u64,
            is_return_address: i > 0,
            lines: vec![Line { function, line: 1 }].into(),
        }));
    }
    let key = p.intern("thread");
    for (i, pair) in locations.windows(2).enumerate() {
        let value = p.intern(&names[i]);
        let label = Label {
            key,
            value: LabelValue::Str(value),
        };
        p.add_sample(pair, &[1 + i as i64], &[label]);
    }
    if let Some(&only) = locations.first() {
        p.add_sample(&[only], &[1], &[]);
    }
    let options = WriteOptions {
        title: names.last().cloned().unwrap_or_default(),
        group_by: Some(vec![profconv::profile::GroupBy::Label("thread".into())]),
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    for format in OUTPUTS {
        out.clear();
        write::write(&p, format, &options, &mut out)?;
        check_syntax(format, &out);
    }
    Ok(())
}

/// Panics when `out` is not valid `format` syntax.
fn check_syntax(format: OutputFormat, out: &[u8]) {
    match format {
        OutputFormat::Svg => {
            let text = std::str::from_utf8(out).expect("SVG is UTF-8");
            let text = &without_cdata_bodies(text);
            let options = roxmltree::ParsingOptions {
                allow_dtd: true,
                ..Default::default()
            };
            if let Err(e) = roxmltree::Document::parse_with_options(text, options) {
                panic!("SVG is not XML: {e}");
            }
        }
        OutputFormat::Speedscope => {
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(out) {
                panic!("speedscope is not JSON: {e}");
            }
        }
        OutputFormat::Folded => {
            let text = std::str::from_utf8(out).expect("folded is UTF-8");
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                let (frames, count) = line.rsplit_once(' ').expect("`frames COUNT`");
                assert!(count.parse::<u64>().is_ok(), "count of {line:?}");
                assert!(!frames.is_empty(), "frames of {line:?}");
                // An empty name gives an empty frame (`a;;b`), which
                // flamegraph.pl and inferno draw as an empty box: allowed.
                assert!(!frames.chars().any(char::is_control), "{line:?}");
            }
        }
        OutputFormat::FirefoxRaw => {
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(out) {
                panic!("the Firefox profile is not JSON: {e}");
            }
        }
        OutputFormat::Callgrind => check_callgrind(out),
        OutputFormat::Pprof | OutputFormat::PprofRaw | OutputFormat::Firefox => {}
    }
}

/// `text` with the body of each CDATA section (up to its first `]]>`, as an
/// XML parser reads it) emptied, once checked to hold only XML characters:
/// inferno's script is 20 kB of every SVG, and parsing it with coverage
/// instrumentation made this target 10 times slower without testing profconv.
/// A long body equal to one already checked (the script, in every SVG) is
/// not checked again: comparing it is one `memcmp`, which coverage does not
/// instrument, where checking it char by char took a fifth of the target's
/// time.
fn without_cdata_bodies(text: &str) -> String {
    thread_local! {
        static CHECKED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<![CDATA[") {
        let body_start = start + "<![CDATA[".len();
        kept.push_str(&rest[..body_start]);
        let Some(len) = rest[body_start..].find("]]>") else {
            rest = &rest[body_start..];
            break;
        };
        let body = &rest[body_start..body_start + len];
        CHECKED.with_borrow_mut(|checked| {
            if !checked.iter().any(|seen| seen == body) {
                assert!(
                    !body.contains(|c: char| c.is_control() && !matches!(c, '\t' | '\n' | '\r')),
                    "control character in a CDATA section"
                );
                // Only long bodies are kept (inferno's script), a few at
                // most: short ones, which carry the options, are cheap.
                if body.len() >= 1024 {
                    if checked.len() == 4 {
                        checked.remove(0);
                    }
                    checked.push(body.to_owned());
                }
            }
        });
        rest = &rest[body_start + len..];
    }
    kept.push_str(rest);
    kept
}

/// callgrind's format (valgrind's docs, "Callgrind Format Specification"):
/// every line is blank, a comment, `key: value` (header), `spec=name`
/// (a position specification) or a cost line of numbers; no line holds a
/// control character but the tab, and names never start a line.
fn check_callgrind(out: &[u8]) {
    let text = std::str::from_utf8(out).expect("callgrind is UTF-8");
    for line in text.lines() {
        assert!(
            !line.chars().any(|c| c.is_control() && c != '\t'),
            "control character in {line:?}"
        );
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.chars().next().unwrap_or(' ');
        if first.is_ascii_digit() || matches!(first, '+' | '-' | '*') {
            for token in line.split_whitespace() {
                let digits = token.trim_start_matches(['+', '-']);
                let number = token == "*"
                    || digits.strip_prefix("0x").map_or_else(
                        || digits.parse::<u64>().is_ok(),
                        |h| u64::from_str_radix(h, 16).is_ok(),
                    );
                assert!(number, "cost line {line:?}");
            }
            continue;
        }
        let key_end = line.find(['=', ':']).expect("`key=value` or `key: value`");
        let key = &line[..key_end];
        assert!(
            !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "key of {line:?}"
        );
    }
}
