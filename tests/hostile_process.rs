//! The process against its environment (issue 41, part C): a standard
//! error closed early, `-j 5000`, names with terminal escape sequences, a
//! report written after SIGTERM, names that are not UTF-8 in reports, and
//! the messages about `--to` and several `-o`. The rules checked: no panic
//! and no lost report when standard error goes away, no raw control
//! character on a terminal, every report with the same fields, and a
//! message that names what works.

mod common;

use std::collections::BTreeSet;
use std::io::BufRead;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::gen::aps;
use common::*;

/// The gprof fixture most cases copy (its executable is the name less
/// `.gmon`).
const GMON: &str = "gprof/callgraph-nopie.gmon";

fn gmon() -> PathBuf {
    fixture(GMON)
}

fn st(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `profconv convert ARCHIVE -o OUT --to folded` and `extra`.
fn to_folded<'a>(archive: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["convert", st(archive), "-o", st(out), "--to", "folded"];
    args.extend(extra);
    args
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An archive of `n` copies of the gprof fixture (`run00.gmon`…) and its
/// executable as `a.out`.
fn gprof_archive(root: &Path, n: usize) {
    std::fs::create_dir_all(root).unwrap();
    for i in 0..n {
        std::fs::copy(gmon(), root.join(format!("run{i:02}.gmon"))).unwrap();
    }
    let binary = fixture(GMON.trim_end_matches(".gmon"));
    std::fs::copy(binary, root.join("a.out")).unwrap();
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs profconv with standard error a pipe whose reader takes the first
/// line and closes it, as `profconv … 2>&1 | head -1` does; returns the
/// exit status and that line.
fn with_stderr_closed_after_one_line(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(profconv_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let _ = err.read_line(&mut first);
    }
    (child.wait().unwrap(), first)
}

#[test]
fn an_archive_run_whose_standard_error_closes_finishes_and_writes_its_report() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    gprof_archive(&archive, 40);
    let (out, rep) = (dir.path().join("out"), dir.path().join("report.json"));
    let (status, first) = with_stderr_closed_after_one_line(&to_folded(
        &archive,
        &out,
        &["-j", "1", "--report", st(&rep)],
    ));
    assert!(first.starts_with("[1/41] "), "{first}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let doc = report(&rep);
    assert_eq!(doc["converted"], 40, "{doc}");
    assert_eq!(doc["inputs"].as_array().unwrap().len(), 41);
    for i in 0..40 {
        assert!(out.join(format!("run{i:02}.gmon.folded")).is_file(), "{i}");
    }
}

/// APS samples in three images none of which is under `--image-root`: a
/// warning for each; the images' names and a kernel module's hold
/// terminal escapes.
fn aps_with_missing_images(names: &[&str]) -> Vec<u8> {
    let mut records = Vec::new();
    let mut vmas = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let base = 0x10_0000 * (i as u32 + 1);
        records.push(aps::user(100, 100, 17, base + 0x10, &[]));
        vmas.push(aps::vma(100, base, base + 0xffff, name));
    }
    aps::Aps {
        records,
        modules: vec![
            (0xbf00_0000, 0xbf0f_ffff, "\x1b]2;owned\x07drv.ko".into()),
            (0xc000_8000, 0xc03f_ffff, "vmlinux".into()),
        ],
        vmas,
        begin: (1_437_051_740, 0),
        end: (1_437_051_752, 0),
        ..aps::Aps::default()
    }
    .bytes()
}

const HOSTILE_IMAGES: [&str; 3] = [
    "/usr/bin/\x1b]0;owned\x07app",
    "/lib/\x1b[2Jlibc.so",
    "/lib/\u{9b}31mlibm.so",
];

/// A capture of [`aps_with_missing_images`] named `name` in `dir`, and an
/// empty folder to give as `--image-root`.
fn hostile_capture(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let input = dir.join(name);
    std::fs::write(&input, aps_with_missing_images(&HOSTILE_IMAGES)).unwrap();
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    (input, root)
}

#[test]
fn a_single_conversion_with_warnings_and_a_closed_standard_error_writes_its_output() {
    let dir = tempdir();
    let (input, root) = hostile_capture(dir.path(), "capture.aps");
    let output = dir.path().join("o.folded");
    // The warnings and the `wrote` line: four lines for a reader that
    // takes one.
    let (status, first) = with_stderr_closed_after_one_line(&[
        st(&input),
        "--image-root",
        st(&root),
        "-o",
        st(&output),
    ]);
    assert!(first.contains("warning"), "{first}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(std::fs::read_to_string(&output).unwrap().lines().count(), 3);
}

/// The gprof fixture cut inside its first record: a gmon.out that fails.
fn truncated_gmon() -> Vec<u8> {
    std::fs::read(gmon()).unwrap()[..30].to_vec()
}

/// True when `text` holds a control character other than a line break.
fn has_raw_control(text: &[u8]) -> bool {
    String::from_utf8_lossy(text)
        .chars()
        .any(|c| c.is_control() && c != '\n')
}

#[test]
fn names_with_escape_sequences_reach_standard_error_escaped() {
    let dir = tempdir();
    let (input, root) = hostile_capture(dir.path(), "\x1b[31mred\x1b[0m.aps");
    // Warnings naming the images, and the `wrote` line naming the output.
    let output = dir.path().join("\x1b]0;title\x07.folded");
    let out = profconv_ok(&[st(&input), "--image-root", st(&root), "-o", st(&output)]);
    let err = stderr_of(&out);
    assert!(!has_raw_control(&out.stderr), "{err:?}");
    assert!(
        err.contains("/usr/bin/\\x1b]0;owned\\x07app")
            && err.contains("/lib/\\u{9b}31mlibm.so")
            && err.contains("\\x1b]0;title\\x07.folded"),
        "{err}"
    );
    // An error naming the input.
    let missing = dir.path().join("\x1b[2Jgone.gmon");
    let out = profconv(&[st(&missing), "-o", st(&dir.path().join("x.folded"))]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!has_raw_control(&out.stderr), "{:?}", stderr_of(&out));
    assert!(stderr_of(&out).contains("\\x1b[2Jgone.gmon"));
}

#[test]
fn info_prints_module_and_file_names_escaped_and_json_keeps_them_exact() {
    let dir = tempdir();
    let (input, _) = hostile_capture(dir.path(), "\x1b[31mcapture.aps");
    let out = profconv_ok(&["info", st(&input)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!has_raw_control(&out.stdout), "{text:?}");
    assert!(
        text.contains("\\x1b[31mcapture.aps") && text.contains("\\x1b]2;owned\\x07drv.ko"),
        "{text}"
    );
    let json = profconv_ok(&["info", "--json", st(&input)]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        doc.to_string().contains("\\u001b]2;owned\\u0007drv.ko"),
        "{doc}"
    );
}

#[test]
fn an_archive_run_logs_escaped_names_and_reports_them_exact() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    let name = "\x1b]0;owned\x07run.gmon";
    std::fs::copy(gmon(), archive.join(name)).unwrap();
    std::fs::write(archive.join("\x1b[31mnotes.txt"), "not a profile").unwrap();
    std::fs::write(archive.join("\x1b[2Jbad.gmon"), truncated_gmon()).unwrap();
    let (out, rep) = (dir.path().join("out"), dir.path().join("report.json"));
    let run = profconv(&to_folded(&archive, &out, &["--report", st(&rep)]));
    let err = stderr_of(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(!has_raw_control(&run.stderr), "{err:?}");
    assert!(
        err.contains("converted \\x1b]0;owned\\x07run.gmon")
            && err.contains("skipped: \\x1b[31mnotes.txt")
            && err.contains("failed (new): \\x1b[2Jbad.gmon"),
        "{err}"
    );
    let doc = report(&rep);
    let paths: Vec<&str> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&name), "{paths:?}");
}

#[test]
fn j_5000_of_a_single_conversion_is_capped_with_a_message() {
    let dir = tempdir();
    let input = dir.path().join("sample_cpu_0_20150716_130220");
    std::fs::write(&input, small_aps_file()).unwrap();
    let out = dir.path().join("out.pb.gz");
    let started = Instant::now();
    let run = profconv_ok(&[st(&input), "-o", st(&out), "-j", "5000"]);
    let err = stderr_of(&run);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let cap: Vec<&str> = err.lines().filter(|l| l.contains("-j 5000")).collect();
    assert_eq!(cap.len(), 1, "{err}");
    assert!(cap[0].starts_with("profconv: -j 5000 capped to"), "{err}");
    assert!(decode_pprof(&out)
        .sample
        .iter()
        .any(|s| !s.value.is_empty()));
}

#[test]
fn j_5000_is_capped_with_a_message_and_the_run_converts_everything() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    gprof_archive(&archive, 3);
    let out = dir.path().join("out");
    let started = Instant::now();
    let run = profconv_ok(&to_folded(&archive, &out, &["-j", "5000"]));
    let err = stderr_of(&run);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let cap: Vec<&str> = err.lines().filter(|l| l.contains("-j 5000")).collect();
    assert_eq!(cap.len(), 1, "{err}");
    assert!(cap[0].contains("capped to"), "{err}");
    assert!(err.contains("3 converted"), "{err}");
    // A -j within the cap says nothing.
    let out2 = dir.path().join("out2");
    let again = profconv_ok(&to_folded(&archive, &out2, &["-j", "2"]));
    assert!(
        !stderr_of(&again).contains("capped"),
        "{}",
        stderr_of(&again)
    );
}

/// The keys of a report and the keys of each of its records.
fn key_sets(doc: &serde_json::Value) -> (BTreeSet<String>, BTreeSet<BTreeSet<String>>) {
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect();
    let records = doc["inputs"].as_array().unwrap().iter().map(keys).collect();
    (keys(doc), records)
}

#[test]
fn a_report_written_after_sigterm_has_every_field_a_finished_one_has() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    // Sorted first: failed (a known failure) and converted before the
    // signal, with a warning and no binary; the slow ones after.
    std::fs::write(archive.join("a-bad.gmon"), truncated_gmon()).unwrap();
    std::fs::copy(gmon(), archive.join("b-unsymbolized.gmon")).unwrap();
    let slow = big_aps(15_000);
    for i in 0..5 {
        std::fs::write(archive.join(format!("c-run{i}.aps")), &slow).unwrap();
    }
    let known = dir.path().join("known.txt");
    std::fs::write(&known, "a-bad.gmon\n").unwrap();
    let (out, rep) = (dir.path().join("out"), dir.path().join("report.json"));
    let args = [
        "convert",
        st(&archive),
        "-o",
        st(&out),
        "--to",
        "pprof",
        "--to",
        "speedscope",
        "-j",
        "1",
        "--shard",
        "0/1",
        "--known-failures",
        st(&known),
        "--report",
        st(&rep),
    ];
    let (status, err) = signal_after_line(&args, "converted c-run0.aps", "TERM");
    assert_eq!(status.code(), Some(143), "{err}");
    let stopped = report(&rep);
    assert!(stopped["inputs"].as_array().unwrap().len() < 7, "{stopped}");
    assert_eq!(stopped["shard"], "0/1", "{stopped}");
    assert_eq!(stopped["new_failures"], 0, "{stopped}");
    let bad = &stopped["inputs"][0];
    assert_eq!(
        (&bad["path"], &bad["known_failure"]),
        (&"a-bad.gmon".into(), &true.into()),
        "{stopped}"
    );

    let finished_run = profconv(&args);
    assert_eq!(
        finished_run.status.code(),
        Some(0),
        "{}",
        stderr_of(&finished_run)
    );
    let finished = report(&rep);
    assert_eq!(finished["inputs"].as_array().unwrap().len(), 7);
    let (top, records) = key_sets(&finished);
    assert_eq!(
        records.len(),
        1,
        "every record has the same keys: {records:?}"
    );
    assert_eq!(key_sets(&stopped), (top.clone(), records.clone()));
    for key in ["shard", "unsymbolized"] {
        assert!(top.contains(key), "{top:?}");
    }
    let record_keys = records.first().unwrap();
    for key in [
        "path_bytes",
        "unsymbolized",
        "known_failure",
        "warnings",
        "error",
    ] {
        assert!(record_keys.contains(key), "{record_keys:?}");
    }
    // A merge, too.
    let merged = dir.path().join("merged.json");
    profconv_ok(&["report", "merge", st(&rep), "-o", st(&merged)]);
    assert_eq!(key_sets(&report(&merged)), (top, records));
}

/// A file name of these bytes, in `dir`.
fn named(dir: &Path, bytes: &[u8]) -> PathBuf {
    dir.join(std::ffi::OsStr::from_bytes(bytes))
}

#[test]
fn names_that_are_not_utf8_round_trip_through_reports_and_merge() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    // Two names that are one text once made lossy, and a backslash.
    for name in [&b"run\xff.gmon"[..], b"run\xfe.gmon", b"run\\xff.gmon"] {
        std::fs::copy(gmon(), named(&archive, name)).unwrap();
    }
    let out = dir.path().join("out");
    let mut reports = Vec::new();
    for k in 0..3 {
        let rep = dir.path().join(format!("shard-{k}.json"));
        let shard = format!("{k}/3");
        let extra = ["-q", "--shard", &shard, "--report", st(&rep)];
        profconv_ok(&to_folded(&archive, &out, &extra));
        reports.push(rep);
    }
    let merged = dir.path().join("merged.json");
    let mut args = vec!["report", "merge"];
    args.extend(reports.iter().map(|r| st(r)));
    args.extend(["-o", st(&merged)]);
    let run = profconv_ok(&args);
    // One line on the shards' shares, nothing else.
    let said = stderr_of(&run);
    assert!(
        said.starts_with("profconv report merge: 3 inputs in 3 shards")
            && said.lines().count() == 1,
        "{said}"
    );
    let doc = report(&merged);
    let names: Vec<(String, serde_json::Value)> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["path_bytes"].clone(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("run\\xff.gmon".to_owned(), serde_json::Value::Null),
            ("run\u{fffd}.gmon".to_owned(), "run\\xfe.gmon".into()),
            ("run\u{fffd}.gmon".to_owned(), "run\\xff.gmon".into()),
        ],
        "{doc}"
    );
    assert_eq!(doc["converted"], 3);
    // One report twice is still two runs of one shard.
    let twice = profconv(&[
        "report",
        "merge",
        st(&reports[0]),
        st(&reports[0]),
        st(&reports[1]),
        st(&reports[2]),
        "-o",
        st(&merged),
    ]);
    assert_eq!(twice.status.code(), Some(1), "{}", stderr_of(&twice));
    assert!(
        stderr_of(&twice).contains(" is in "),
        "{}",
        stderr_of(&twice)
    );
    assert!(stderr_of(&twice).contains("merge each shard's last report once"));
}

#[test]
fn standard_output_among_several_outputs_is_told_what_works() {
    let dir = tempdir();
    let svg = dir.path().join("x.svg");
    let g = gmon();
    for args in [
        vec![st(&g), "-o", "-", "-o", st(&svg)],
        vec![st(&g), "-o", "-", "-o", st(&svg), "--to", "folded"],
    ] {
        let out = profconv(&args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("needs --to"), "{args:?}: {err}");
        assert!(
            err.contains("-o -") && err.contains("a run of its own"),
            "{args:?}: {err}"
        );
        assert!(!svg.exists());
    }
    // A file without an extension among several: --to cannot help there.
    let out = profconv(&[st(&g), "-o", st(&dir.path().join("noext")), "-o", st(&svg)]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("noext") && !err.contains("--to"), "{err}");
    // Alone, standard output still takes --to.
    let out = profconv_ok(&[st(&g), "-o", "-", "--to", "folded"]);
    assert!(!out.stdout.is_empty());
}
