//! Hostile and unusual requests (issue 13): inputs are never written, outputs
//! go through special files and symbolic links without replacing them, and an
//! archive run accounts for every entry of the tree and never writes outside
//! its output directory.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn gmon() -> PathBuf {
    fixture("gprof/callgraph-nopie.gmon")
}

fn binary() -> PathBuf {
    fixture("gprof/callgraph-nopie")
}

/// A copy of the fixture gmon.out in `dir`.
fn copy_gmon(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(gmon(), &p).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn an_input_named_as_output_is_refused_and_left_unchanged() {
    let dir = tempdir();
    let input = copy_gmon(dir.path(), "in.gmon");
    let before = std::fs::read(&input).unwrap();
    let hard = dir.path().join("hard.pb.gz");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.path().join("soft.folded");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let bin_copy = dir.path().join("a.out");
    std::fs::copy(binary(), &bin_copy).unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec![s(&input), "-o", s(&input), "--to", "pprof"],
        vec![s(&input), "-o", s(&hard)],
        vec![s(&input), "-o", s(&soft)],
        vec![
            s(&input),
            "--binary",
            s(&bin_copy),
            "-o",
            s(&bin_copy),
            "--to",
            "folded",
        ],
    ];
    for args in cases {
        let out = profconv(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("same file as the input"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), before, "input unchanged");
    assert_eq!(
        std::fs::read(&bin_copy).unwrap(),
        std::fs::read(binary()).unwrap()
    );
    assert!(std::fs::symlink_metadata(&soft)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_symbolic_link_output_writes_its_target_and_stays_a_link() {
    let dir = tempdir();
    let target = dir.path().join("real.folded");
    let link = dir.path().join("link.folded");
    std::os::unix::fs::symlink("real.folded", &link).unwrap();
    profconv_ok(&[s(&gmon()), "--binary", s(&binary()), "-o", s(&link)]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("main;"), "{text}");
}

#[test]
fn special_files_are_written_through_not_replaced() {
    let dir = tempdir();
    // /dev/stdout is a pipe here: written in place.
    let out = profconv_ok(&[
        s(&gmon()),
        "--binary",
        s(&binary()),
        "-o",
        "/dev/stdout",
        "--to",
        "folded",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("main;"));
    // /dev/null stays a character device (the test may run as root).
    profconv_ok(&[s(&gmon()), "-o", "/dev/null", "--to", "pprof"]);
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &meta.file_type()
    ));
    // A FIFO gets the bytes and stays a FIFO.
    let fifo = dir.path().join("out.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "mkfifo (coreutils) is missing");
        crate::skip_note!("skipping the FIFO case: mkfifo failed");
        return;
    }
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    profconv_ok(&[
        s(&gmon()),
        "--binary",
        s(&binary()),
        "-o",
        s(&fifo),
        "--to",
        "folded",
    ]);
    let got = reader.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&got.stdout).contains("main;"));
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
}

fn archive_run(
    archive: &Path,
    out: &Path,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let report = out.with_extension("report.json");
    let mut args = vec!["convert", s(archive), "-o", s(out), "--report", s(&report)];
    args.extend_from_slice(extra);
    let output = profconv(&args);
    let json = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (output, json)
}

/// An archive run that must succeed; its report.
fn archive_ok(archive: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let (run, report) = archive_run(archive, out, extra);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    report
}

/// The report's record for `path`: (status, error).
fn record<'a>(report: &'a serde_json::Value, path: &str) -> (&'a str, &'a str) {
    let r = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("no record for {path} in {report:#}"));
    (
        r["status"].as_str().unwrap(),
        r["error"].as_str().unwrap_or(""),
    )
}

#[test]
fn plain_and_gzip_inputs_of_one_name_get_outputs_of_their_own() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    copy_gmon(&archive, "gmon.out");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &std::fs::read(gmon()).unwrap()).unwrap();
    std::fs::write(archive.join("gmon.out.gz"), gz.finish().unwrap()).unwrap();
    // Two names that are not UTF-8 and read the same when made lossy.
    use std::os::unix::ffi::OsStrExt;
    for name in [&b"run\xff1.gmon"[..], &b"run\xfe1.gmon"[..]] {
        std::fs::copy(gmon(), archive.join(std::ffi::OsStr::from_bytes(name))).unwrap();
    }
    let out = dir.path().join("out");
    let report = archive_ok(&archive, &out, &["--to", "folded"]);
    assert_eq!(report["converted"], 4, "{report:#}");
    let mut outputs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|name| name != ".profconv")
        .collect();
    outputs.sort();
    assert_eq!(outputs.len(), 4, "{outputs:?}");
    assert!(out.join("gmon.out.folded").is_file());
    assert!(out.join("gmon.out.gz.folded").is_file());
}

#[test]
fn an_archive_run_lists_fifos_and_too_deep_folders_and_goes_on() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    let mut deep = archive.clone();
    for i in 0..70 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    copy_gmon(&deep, "gmon.out");
    copy_gmon(&archive, "gmon.out");
    let fifo = archive.join("pipe.gmon");
    if !Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(!in_ci(), "mkfifo (coreutils) is missing");
        return;
    }
    let out = dir.path().join("out");
    let report = archive_ok(&archive, &out, &["--to", "folded"]);
    assert_eq!(record(&report, "gmon.out").0, "converted");
    let (status, why) = record(&report, "pipe.gmon");
    assert_eq!(status, "skipped");
    assert!(why.contains("FIFO"), "{why}");
    let too_deep: Vec<String> = (0..65).map(|i| format!("d{i}")).collect();
    let (status, why) = record(&report, &too_deep.join("/"));
    assert_eq!(status, "skipped");
    assert!(why.contains("deeper than"), "{why}");
}

#[test]
fn a_symbolic_link_in_the_output_directory_is_not_followed() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir_all(archive.join("sub")).unwrap();
    copy_gmon(&archive.join("sub"), "gmon.out");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("sub")).unwrap();
    let (_, report) = archive_run(&archive, &out, &["--to", "folded"]);
    let (status, why) = record(&report, "sub/gmon.out");
    assert_eq!(status, "failed");
    assert!(why.contains("symbolic link"), "{why}");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );
}

#[test]
fn an_output_directory_holding_the_archive_is_refused() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    let input = copy_gmon(&archive, "gmon.out");
    for out in [&archive, &dir.path().to_path_buf()] {
        let (run, _) = archive_run(&archive, out, &["--to", "folded"]);
        assert_eq!(run.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&run.stderr).contains("holds the archive"));
    }
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(gmon()).unwrap()
    );
    // Inside the archive is fine: the output folder is left out of the walk.
    let inner = archive.join("converted");
    let (run, report) = archive_run(&archive, &inner, &["--to", "folded"]);
    assert!(run.status.success());
    assert_eq!(report["converted"], 1, "{report:#}");
    let (run, report) = archive_run(&archive, &inner, &["--to", "folded", "--force"]);
    assert!(run.status.success());
    assert_eq!(
        report["converted"], 1,
        "outputs are not read back as inputs: {report:#}"
    );
}

#[test]
fn a_glob_that_backtracks_exponentially_matches_in_linear_time() {
    let name = format!("{}.out", "_".repeat(240));
    // The old backtracking matcher never finished this one.
    let matches = |glob| profconv::archive::Glob::new(glob).unwrap().is_match(&name);
    assert!(!matches("**/*_*_*_*_*.outx"));
    assert!(matches("**/*_*_*_*_*.out"));
}

#[test]
fn special_and_non_elf_binaries_are_refused_before_they_are_read() {
    let dir = tempdir();
    // A large file of zeros (sparse: no disk used) is not read whole.
    let big = dir.path().join("big.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(3 << 30).unwrap();
    for binary in ["/dev/zero", s(&big)] {
        let out = profconv(&[
            s(&gmon()),
            "--binary",
            binary,
            "-o",
            "/dev/null",
            "--to",
            "pprof",
        ]);
        assert_eq!(out.status.code(), Some(1), "{binary}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not a regular file") || err.contains("not an executable"),
            "{binary}: {err}"
        );
    }
}

/// A streamed pprof output is the same bytes on every run: one gzip
/// stream of what was encoded, in the order the parts came.
#[test]
fn a_streamed_pprof_output_is_the_same_bytes_on_every_run() {
    use common::gen::dcpi::{build_db, DbSpec};
    let dir = tempdir();
    // 400 000 sampled addresses: streamed, a megabyte at a time.
    let db = dir.path().join("db");
    build_db(
        &db,
        &DbSpec {
            images: 2,
            insns: 200_000,
            sampled_per_mille: 1000,
            epochs: 1,
            events: vec![("cycles".into(), 63488)],
            one_event_each: false,
            seed: 7,
        },
    );
    let convert = |name: &str| {
        let out = dir.path().join(name);
        profconv_ok(&[s(&db), "-o", s(&out), "--quiet"]);
        std::fs::read(out).unwrap()
    };
    let first = convert("a.pb.gz");
    assert_eq!(gzip_members(&first).len(), 1, "one gzip stream");
    assert!(first == convert("b.pb.gz"), "the same bytes on each run");
}

/// A large streamed output reads in `go tool pprof` as the whole profile.
#[test]
fn a_large_streamed_pprof_output_reads_whole_in_go_tool_pprof() {
    let dir = tempdir();
    let db = dir.path().join("db");
    let gen = manifest_dir().join("benches/dcpi_gen.py");
    let made = Command::new("python3")
        .arg(&gen)
        .arg(&db)
        .args(["--images", "4", "--insns", "100000", "--sampled", "0.3"])
        .output();
    if !made.as_ref().is_ok_and(|o| o.status.success()) {
        assert!(!in_ci(), "python3 is needed for the DCPI generator");
        crate::skip_note!("skipping: python3 could not run {}", gen.display());
        return;
    }
    let out = dir.path().join("big.pb.gz");
    profconv_ok(&[s(&db), "-o", s(&out)]);
    let p = decode_pprof(&out);
    let Some(raw) = go_pprof(&["-raw", s(&out)]) else {
        return;
    };
    let samples = raw
        .split("Locations")
        .next()
        .unwrap()
        .lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
                && l.contains(':')
        })
        .count();
    assert_eq!(samples, p.sample.len(), "go tool pprof reads every sample");
}
