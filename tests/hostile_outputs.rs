//! Hostile places to write and hostile names (issue 34): `/dev/full`, a
//! closed pipe, a full 1 MiB tmpfs, signals in the middle of a conversion,
//! 255-byte output names, and frame names made of control bytes and
//! invalid UTF-8. The rule checked throughout: a failed or stopped run
//! exits with its code (1, or 128 + the signal), names the output in its
//! message, and leaves no temporary file and no partial output; outputs of
//! one run appear together, whole, or not at all.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::gen::{aps, mpatrol};
use common::*;

fn gmon() -> PathBuf {
    fixture("gprof/callgraph-nopie.gmon")
}

fn binary() -> PathBuf {
    fixture("gprof/callgraph-nopie")
}

fn st(p: &Path) -> &str {
    p.to_str().unwrap()
}

const FORMATS: [&str; 6] = [
    "pprof",
    "pprof-raw",
    "folded",
    "svg",
    "speedscope",
    "callgrind",
];

/// The names in `dir` (recursively) that look like temporary files.
fn temporaries(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            found.extend(temporaries(&e.path()));
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            found.push(name);
        }
    }
    found
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn dev_full_fails_every_format_with_the_output_named() {
    for format in FORMATS {
        let out = profconv(&[
            st(&gmon()),
            "--binary",
            st(&binary()),
            "-o",
            "/dev/full",
            "--to",
            format,
        ]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{format}: {err}");
        assert!(
            err.contains("/dev/full") && err.contains("No space left"),
            "{format}: {err}"
        );
        assert!(
            !err.contains("<output>") && !err.contains("panicked"),
            "{format}: {err}"
        );
    }
}

/// Runs profconv with standard output on `/dev/full`.
fn to_dev_full(args: &[&str]) -> std::process::Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    Command::new(profconv_bin())
        .args(args)
        .stdout(Stdio::from(full))
        .output()
        .unwrap()
}

#[test]
fn a_full_standard_output_is_an_error_naming_it_for_every_command() {
    let g = gmon();
    let cases: Vec<Vec<&str>> = vec![
        vec!["info", st(&g)],
        vec!["info", "--json", st(&g)],
        vec!["completions", "bash"],
        vec!["man"],
        vec![st(&g), "-o", "-", "--to", "folded"],
        vec![st(&g), "-o", "-", "--to", "svg"],
        vec![st(&g), "-o", "-", "--to", "pprof"],
    ];
    for args in cases {
        let out = to_dev_full(&args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("standard output"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Runs profconv, reads one byte of its standard output and closes it.
fn head_c1(args: &[&str]) -> std::process::Output {
    let mut child = Command::new(profconv_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    let _ = stdout.read(&mut one);
    drop(stdout);
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let (g, b) = (gmon(), binary());
    let many: Vec<&str> = std::iter::once("info")
        .chain(std::iter::repeat_n(st(&g), 300))
        .collect();
    let cases: Vec<Vec<&str>> = vec![
        many,
        vec!["completions", "bash"],
        vec!["man"],
        vec![st(&g), "--binary", st(&b), "-o", "-", "--to", "speedscope"],
    ];
    for args in cases {
        let out = head_c1(&args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{:?}: {err}", &args[..2]);
        assert!(err.is_empty(), "{:?}: {err}", &args[..2]);
    }
}

#[test]
fn errors_name_the_users_path_never_the_temporary() {
    let dir = tempdir();
    let missing = dir.path().join("nodir/x.pb.gz");
    let out = profconv(&[st(&gmon()), "-o", st(&missing)]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nodir/x.pb.gz: No such file or directory"),
        "{err}"
    );
    assert!(
        !err.contains("/.x.pb.gz.") && !err.contains("at path"),
        "{err}"
    );
}

#[test]
fn outputs_named_with_255_bytes_are_written() {
    let dir = tempdir();
    let name = format!("{}.folded", "o".repeat(255 - ".folded".len()));
    let path = dir.path().join(&name);
    profconv_ok(&[st(&gmon()), "-o", st(&path)]);
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn endless_devices_are_read_up_to_the_limit_and_refused() {
    let started = Instant::now();
    let out = profconv(&[
        "/dev/zero",
        "-o",
        "/dev/null",
        "--to",
        "folded",
        "--max-input-size",
        "1000000",
    ]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1000000 bytes") && err.contains("--max-input-size"),
        "{err}"
    );
    let out = profconv(&["/dev/zero", "-o", "/dev/null", "--to", "folded"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("256 MiB") && err.contains("--max-input-size"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// Every output of a run, if present, is whole: it parses.
fn check_whole(outputs: &[PathBuf]) {
    for o in outputs {
        let Ok(bytes) = std::fs::read(o) else {
            continue;
        };
        let name = o.to_string_lossy();
        if name.ends_with(".json") {
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if name.ends_with(".svg") {
            check_svg(o, &[]);
        } else if name.ends_with(".pb.gz") {
            decode_pprof_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn signals_remove_temporaries_and_exit_with_128_plus_the_signal() {
    let dir = tempdir();
    let input = dir.path().join("big.aps");
    std::fs::write(&input, big_aps(400_000)).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let outputs: Vec<PathBuf> = ["o.speedscope.json", "o.svg", "o.pb.gz", "o.folded"]
        .iter()
        .map(|n| out_dir.join(n))
        .collect();
    let mut checked = 0;
    for (sig, code) in [(2, 130), (15, 143), (1, 129)] {
        for after_ms in [50u64, 400, 1500] {
            for o in &outputs {
                let _ = std::fs::remove_file(o);
            }
            let mut args = vec![st(&input).to_owned()];
            for o in &outputs {
                args.extend(["-o".to_owned(), st(o).to_owned()]);
            }
            let child = Command::new(profconv_bin())
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(after_ms));
            signal(&child, sig);
            let out = child.wait_with_output().unwrap();
            let err = stderr_of(&out);
            let present = outputs.iter().filter(|o| o.exists()).count();
            match out.status.code() {
                Some(0) => assert_eq!(present, outputs.len(), "finished before signal {sig}"),
                Some(c) => {
                    assert_eq!(c, code, "signal {sig} after {after_ms} ms: {err}");
                    assert!(
                        present == 0 || present == outputs.len(),
                        "a partial set: {present}"
                    );
                    checked += 1;
                }
                None => panic!("killed by signal {sig} after {after_ms} ms: {err}"),
            }
            assert!(
                temporaries(&out_dir).is_empty(),
                "{:?}",
                temporaries(&out_dir)
            );
            check_whole(&outputs);
        }
    }
    assert!(
        checked >= 6,
        "the conversion ended before most signals: only {checked} landed"
    );
}

#[test]
fn an_interrupted_archive_run_reports_so_far_and_resumes() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    let big = big_aps(60_000);
    for i in 0..6 {
        std::fs::write(archive.join(format!("run{i:02}.aps")), &big).unwrap();
    }
    let out_dir = dir.path().join("out");
    let report = dir.path().join("report.json");
    let args = [
        "convert",
        st(&archive),
        "-o",
        st(&out_dir),
        "--to",
        "speedscope",
        "--to",
        "pprof",
        "-j",
        "1",
        "--report",
        st(&report),
    ];
    // Interrupted once the first file is converted (a line per file when
    // standard error is not a terminal): five are left, whatever the
    // machine's speed.
    let (status, err) = signal_after_line(&args, "[1/6] converted", "INT");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("profconv convert:") && err.contains("SIGINT"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(doc["inputs"].is_array(), "{doc}");
    assert!(
        temporaries(&out_dir).is_empty(),
        "{:?}",
        temporaries(&out_dir)
    );
    // Less the stamps of what each output is made from.
    let written: Vec<PathBuf> = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.ends_with(".profconv"))
        .collect();
    check_whole(&written);
    let mut resume: Vec<&str> = args.to_vec();
    resume.push("--resume");
    profconv_ok(&resume);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(doc["failed"], 0, "{doc}");
    assert_eq!(
        std::fs::read_dir(&out_dir).unwrap().count(),
        12 + 1,
        "outputs and .profconv"
    );
}

/// Mounts a 1 MiB tmpfs on `dir`; false (with a visible message) where the
/// machine does not allow it.
fn mount_small_tmpfs(dir: &Path) -> bool {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs", st(dir)])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        // Also under CI: a container may forbid mounts even to root.
        crate::skip_note!("cannot mount a 1 MiB tmpfs here (needs root and CAP_SYS_ADMIN)");
    }
    ok
}

#[test]
fn a_full_disk_leaves_no_output_and_no_temporary() {
    let dir = tempdir();
    let input = dir.path().join("big.aps");
    std::fs::write(&input, big_aps(100_000)).unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    if !mount_small_tmpfs(&small) {
        return;
    }
    let outputs = [small.join("a.folded"), small.join("b.speedscope.json")];
    // Every address a frame of its own: outputs larger than the disk.
    let (a, b) = (st(&outputs[0]), st(&outputs[1]));
    let out = profconv(&[st(&input), "-o", a, "-o", b, "--granularity", "addresses"]);
    let listing: Vec<_> = std::fs::read_dir(&small)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let _ = Command::new("umount").arg(&small).status();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("No space left") && err.contains(st(&small)),
        "{err}"
    );
    assert!(
        !err.contains("/.a.folded.") && !err.contains("/.b.speedscope"),
        "{err}"
    );
    assert!(listing.is_empty(), "all outputs or none: {listing:?}");
}

/// Every C0 control byte, U+FFFE, U+FFFF, an encoded lone surrogate and
/// invalid UTF-8: the bytes of hostile names.
fn hostile_names() -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = (0u8..32)
        .filter(|&b| b != 0)
        .map(|b| vec![b'f', b, b'g'])
        .collect();
    names.push("f\u{fffe}g".into());
    names.push("f\u{ffff}g".into());
    names.push(b"f\xed\xa0\x80g".to_vec()); // CESU-8 lone surrogate
    names.push(b"f\xff\xfeg".to_vec());
    names.push(b"a;b c\x7f<&>\"'".to_vec());
    names
}

/// An mpatrol file whose functions are named `names` (each a frame).
fn mpatrol_named(names: &[Vec<u8>]) -> Vec<u8> {
    let placeholders: Vec<String> = (0..names.len())
        .map(|i| format!("PLACEHOLDER{i:04}"))
        .collect();
    let funcs: Vec<mpatrol::Func> = placeholders
        .iter()
        .enumerate()
        .map(|(i, p)| mpatrol::Func {
            name: Some(Box::leak(p.clone().into_boxed_str())),
            start: 0x1000 * (i as u64 + 1),
        })
        .collect();
    let allocs = (0..names.len())
        .map(|i| mpatrol::Alloc {
            frames: vec![(i, 4), ((i + 1) % names.len(), 8)],
            classes: [[1, 16, 0, 0], [0; 4], [0; 4], [0; 4]],
        })
        .collect();
    let program = mpatrol::Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 0,
    };
    let mut raw = program.raw(8);
    for (p, name) in placeholders.iter().zip(names) {
        let at = raw
            .strings
            .windows(p.len())
            .position(|w| w == p.as_bytes())
            .unwrap();
        // Same length, so that the name offsets stay right.
        let mut patch = name.clone();
        patch.resize(p.len(), b'_');
        raw.strings[at..at + p.len()].copy_from_slice(&patch[..p.len()]);
    }
    mpatrol::encode(&raw, 8, false)
}

/// An APS file whose process maps one module per hostile name.
fn aps_named(names: &[Vec<u8>]) -> Vec<u8> {
    let placeholders: Vec<String> = (0..names.len())
        .map(|i| format!("/PLACEHOLDER{i:04}"))
        .collect();
    let vmas = placeholders
        .iter()
        .enumerate()
        .map(|(i, p)| {
            aps::vma(
                100,
                0x10_0000 * (i as u32 + 1),
                0x10_0000 * (i as u32 + 1) + 0xffff,
                p,
            )
        })
        .collect();
    let records = (0..names.len() as u32)
        .map(|i| {
            aps::user(
                100,
                100,
                17,
                0x10_0000 * (i + 1) + 0x10,
                &[0x10_0000 * ((i + 1) % names.len() as u32 + 1) + 0x20],
            )
        })
        .collect();
    let mut bytes = aps::Aps {
        records,
        vmas,
        begin: (1, 0),
        end: (2, 0),
        ..aps::Aps::default()
    }
    .bytes();
    for (p, name) in placeholders.iter().zip(names) {
        let at = bytes
            .windows(p.len())
            .position(|w| w == p.as_bytes())
            .unwrap();
        // Same length: the path buffer is fixed; pad a short name with `_`.
        let mut patch = name.clone();
        patch.resize(p.len(), b'_');
        bytes[at..at + p.len()].copy_from_slice(&patch[..p.len()]);
    }
    bytes
}

fn check_outputs_parse(dir: &Path, input: &Path) {
    let outs: Vec<PathBuf> = ["n.svg", "n.speedscope.json", "n.folded", "callgrind.out.n"]
        .iter()
        .map(|n| dir.join(n))
        .collect();
    let mut args = vec![st(input)];
    for o in &outs {
        args.extend(["-o", st(o)]);
    }
    profconv_ok(&args);
    check_svg(&outs[0], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&outs[1]).unwrap()).unwrap();
    validate_speedscope(&doc);
    let folded = std::fs::read(&outs[2]).unwrap();
    let folded = String::from_utf8(folded).expect("folded output is UTF-8");
    for line in folded.lines().filter(|l| !l.starts_with('#')) {
        let (frames, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        assert!(count.parse::<u64>().is_ok(), "{line:?}");
        assert!(
            !frames.is_empty() && !frames.chars().any(|c| c.is_control()),
            "{line:?}"
        );
    }
    callgrind_annotate(&["--auto=no", st(&outs[3])]);
}

#[test]
fn control_bytes_and_invalid_utf8_in_names_give_valid_outputs() {
    let names = hostile_names();
    let dir = tempdir();
    let input = dir.path().join("hostile.mpatrol");
    std::fs::write(&input, mpatrol_named(&names)).unwrap();
    check_outputs_parse(dir.path(), &input);
    let dir = tempdir();
    let input = dir.path().join("hostile.aps");
    std::fs::write(&input, aps_named(&names)).unwrap();
    check_outputs_parse(dir.path(), &input);
}

#[test]
fn an_output_past_what_its_viewer_opens_is_written_and_said() {
    // 170 000 sampled addresses drawn one frame each (--minwidth 0): a
    // flamegraph of over 32 MiB, which a browser takes minutes to draw.
    let dir = tempdir();
    let db = dir.path().join("db");
    let spec = common::gen::dcpi::DbSpec::sparse(1, 1_700_000, 100);
    common::gen::dcpi::build_db(&db, &spec);
    let svg = dir.path().join("db.svg");
    let run = profconv_ok(&[
        db.to_str().unwrap(),
        "--granularity",
        "addresses",
        "--minwidth",
        "0",
        "-o",
        svg.to_str().unwrap(),
    ]);
    let bytes = std::fs::metadata(&svg).unwrap().len();
    assert!(bytes > 32 << 20, "{bytes} bytes of SVG");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let said = format!(
        "db.svg: {} MB of SVG takes a browser a minute",
        bytes / 1_000_000
    );
    assert!(stderr.contains(&said), "{stderr}");
}
