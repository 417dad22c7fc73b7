//! Hostile inputs (issue 41): an input cut short while it is read (log
//! rotation, a copy restarted, a network file system), auxiliary files that
//! never end (`/dev/zero` as a `--known-failures` list, a `--binary-map`,
//! a report, a `pid_info`), and gzip inputs padded with zeros. The rules
//! checked: a changing input fails alone, with its name and offset, and the
//! process never dies of a signal; every read stops at a limit it names;
//! what `gzip -d` reads, profconv reads.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::gen::aps;
use common::*;

fn st(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An APS sample file of `records` copies of one user record (56 bytes
/// each): about `56 × records` bytes, built without a record list in memory.
fn big_aps_file(path: &Path, records: usize) {
    let one = aps::Aps {
        records: vec![aps::user(100, 100, 17, 0x8010, &[0x8200])],
        vmas: vec![aps::vma(100, 0x8000, 0x17fff, "/usr/bin/app")],
        ..aps::Aps::default()
    }
    .bytes();
    let (head, rest) = one.split_at(56);
    let (record, tables) = rest.split_at(56);
    let mut bytes = Vec::with_capacity(56 + 56 * records + tables.len());
    bytes.extend_from_slice(&head[..4]);
    bytes.extend_from_slice(&(records as u32).to_le_bytes()); // the record count
    bytes.extend_from_slice(&head[8..]);
    bytes.extend_from_slice(&record.repeat(records));
    bytes.extend_from_slice(tables);
    std::fs::write(path, bytes).unwrap();
}

/// Bytes the process `pid` has read so far (`rchar` of /proc/PID/io).
fn bytes_read(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Runs profconv with `args` until it has read `past` bytes, stops it,
/// cuts `victim` to `keep` bytes (as log rotation would), and lets it
/// finish. Panics when profconv finished before or had already read all of
/// `victim` when it was stopped: the cut must come while it reads.
fn cut_while_read(args: &[&str], victim: &Path, past: u64, keep: u64) -> Output {
    let len = std::fs::metadata(victim).unwrap().len();
    let child = Command::new(profconv_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while bytes_read(pid).is_none_or(|n| n < past) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "profconv did not read {past} bytes in 2 minutes"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    signal(pid, "-STOP");
    let read = bytes_read(pid).unwrap();
    assert!(
        read < len,
        "profconv had read {read} bytes when stopped, not less than the {len} of {}: the cut would come too late",
        victim.display()
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(victim)
        .unwrap()
        .set_len(keep)
        .unwrap();
    signal(pid, "-CONT");
    child.wait_with_output().unwrap()
}

/// 4 M records: 224 MB, read for long enough to be cut part-way.
const BIG_RECORDS: usize = 4_000_000;

#[test]
fn an_input_cut_short_while_convert_reads_it_fails_alone_and_the_run_finishes() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir_all(&archive).unwrap();
    std::fs::write(archive.join("a.aps"), small_aps_file()).unwrap();
    std::fs::write(archive.join("c.aps"), small_aps_file()).unwrap();
    let big = archive.join("b.aps");
    big_aps_file(&big, BIG_RECORDS);
    let len = std::fs::metadata(&big).unwrap().len();
    let (out, report) = (dir.path().join("out"), dir.path().join("report.json"));
    let r = cut_while_read(
        &[
            "convert",
            st(&archive),
            "-o",
            st(&out),
            "--to",
            "pprof",
            "-j",
            "1",
            "--report",
            st(&report),
        ],
        &big,
        16 << 20,
        8 << 20,
    );
    let stderr = stderr_of(&r);
    assert_eq!(
        r.status.code(),
        Some(1),
        "one failed unit: exit code 1, not a signal ({:?}): {stderr}",
        r.status
    );
    assert!(stderr.contains("2 converted"), "{stderr}");
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let status = |path: &str| {
        rep["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap_or_else(|| panic!("no record of {path}: {rep:#}"))
            .clone()
    };
    let failed = status("b.aps");
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("b.aps")
            && error.contains("at byte")
            && error.contains(&format!(
                "shorter than the {len} bytes it had when opened, {} now",
                8 << 20
            ))
            && error.contains("changed while it was read"),
        "{error}"
    );
    for done in ["a.aps", "c.aps"] {
        assert_eq!(status(done)["status"], "converted", "{rep:#}");
        assert!(out.join(format!("{done}.pb.gz")).is_file(), "{done}");
    }
    assert!(!out.join("b.aps.pb.gz").exists());
}

#[test]
fn a_single_conversion_of_an_input_cut_short_while_read_fails_with_its_name_not_a_signal() {
    let dir = tempdir();
    let big = dir.path().join("sample_cpu_0");
    big_aps_file(&big, BIG_RECORDS);
    let out = dir.path().join("out.pb.gz");
    let r = cut_while_read(&[st(&big), "-o", st(&out)], &big, 16 << 20, 1 << 20);
    let stderr = stderr_of(&r);
    assert_eq!(r.status.code(), Some(1), "{:?}: {stderr}", r.status);
    assert!(
        stderr.contains(st(&big)) && stderr.contains("changed while it was read"),
        "{stderr}"
    );
    assert!(!out.exists(), "no output of a failed conversion");
}

/// Runs profconv, which must fail within 30 s with a message naming
/// `/dev/zero`, the limit in bytes and `what`.
fn refuses_dev_zero(args: &[&str], limit: u64, what: &str) {
    let started = Instant::now();
    let r = profconv(args);
    let stderr = stderr_of(&r);
    assert_ne!(r.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(r.status.code().is_some(), "{args:?}: {:?}", r.status);
    assert!(
        stderr.contains("/dev/zero")
            && stderr.contains(&format!("longer than {limit} bytes"))
            && stderr.contains(what),
        "{args:?}: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

#[test]
fn auxiliary_files_that_never_end_are_refused_at_a_limit_they_name() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir_all(&archive).unwrap();
    std::fs::write(archive.join("sample_cpu_0"), small_aps_file()).unwrap();
    let out = dir.path().join("out");
    let convert = |flag: &str| {
        vec![
            "convert".to_owned(),
            st(&archive).to_owned(),
            "-o".to_owned(),
            st(&out).to_owned(),
            "--to".to_owned(),
            "folded".to_owned(),
            flag.to_owned(),
            "/dev/zero".to_owned(),
        ]
    };
    let strings = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let merged = dir.path().join("merged.json");
    let aps_file = archive.join("sample_cpu_0");
    let folded = dir.path().join("x.folded");
    for (args, limit, what) in [
        (
            convert("--known-failures"),
            256 << 20,
            "a --known-failures list",
        ),
        (convert("--binary-map"), 256 << 20, "a --binary-map file"),
        (
            strings(&["report", "merge", "/dev/zero", "-o", st(&merged)]),
            1 << 30,
            "a profconv convert report",
        ),
        (
            strings(&[st(&aps_file), "--pid-info", "/dev/zero", "-o", st(&folded)]),
            64 << 20,
            "a pid_info file",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refuses_dev_zero(&args, limit, what);
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, bytes).unwrap();
    enc.finish().unwrap()
}

fn gmon() -> PathBuf {
    fixture("gprof/callgraph-nopie.gmon")
}

#[test]
fn a_gzip_input_padded_with_zeros_converts_as_gzip_d_reads_it() {
    let dir = tempdir();
    let plain = std::fs::read(gmon()).unwrap();
    let mut padded = gzip(&plain);
    padded.resize(padded.len().next_multiple_of(10240) + 10240, 0); // tar's records
    let path = dir.path().join("padded.gmon.gz");
    std::fs::write(&path, &padded).unwrap();
    if let Ok(out) = Command::new("gzip").args(["-dc", st(&path)]).output() {
        assert_eq!(out.stdout, plain, "gzip -d reads the padded file whole");
    }
    let binary = fixture("gprof/callgraph-nopie");
    let folded = |input: &Path, name: &str| {
        let out = dir.path().join(name);
        profconv_ok(&[st(input), "--binary", st(&binary), "-o", st(&out)]);
        std::fs::read_to_string(out).unwrap()
    };
    assert_eq!(
        folded(&path, "padded.folded"),
        folded(&gmon(), "plain.folded")
    );

    let mut garbage = gzip(&plain);
    let member_end = garbage.len();
    garbage.extend_from_slice(b"\0\0\0\0not zeros");
    let bad = dir.path().join("garbage.gmon.gz");
    std::fs::write(&bad, &garbage).unwrap();
    let r = profconv(&[st(&bad), "-o", st(&dir.path().join("bad.folded"))]);
    let stderr = stderr_of(&r);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("at byte {member_end}"))
            && stderr.contains("zero padding after the last member"),
        "{stderr}"
    );
}
