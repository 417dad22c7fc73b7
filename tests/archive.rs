//! Archive migration (`profconv convert`): a generated archive of mixed
//! formats converted in one run, re-runs, parallelism and killed runs.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use common::*;

/// Builds the archive: gprof files (one beside its executable, one
/// gzip-compressed, one corrupt), an mpatrol file, a dcpicat dump, a DCPI
/// database nested two levels down (epochs below it), an unknown file.
fn make_archive(root: &Path) {
    let fx = |p: &str| fixture(p);
    let mk = |p: &str| std::fs::create_dir_all(root.join(p)).unwrap();
    mk("2001/prog");
    mk("2002/runs");
    mk("2003/heap");
    mk("sites/alpha/dcpidb/200212042334");
    mk("sites/alpha/dcpidb/200212050101");
    mk("notes");
    std::fs::copy(
        fx("gprof/callgraph-nopie.gmon"),
        root.join("2001/prog/gmon.out"),
    )
    .unwrap();
    std::fs::copy(fx("gprof/callgraph-nopie"), root.join("2001/prog/a.out")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&std::fs::read(fx("gprof/callgraph-pie.gmon")).unwrap())
        .unwrap();
    std::fs::write(root.join("2002/runs/gmon.out.gz"), gz.finish().unwrap()).unwrap();
    let gmon = std::fs::read(fx("gprof/recursion.gmon")).unwrap();
    std::fs::write(root.join("2002/runs/broken.gmon"), &gmon[..60]).unwrap();
    std::fs::copy(
        fx("mpatrol/linux-x86_64/mpatrol.out"),
        root.join("2003/heap/mpatrol.out"),
    )
    .unwrap();
    std::fs::copy(
        fx("dcpi/dcpicat-manpage.txt"),
        root.join("2003/xemacs.dcpicat"),
    )
    .unwrap();
    for epoch in ["200212042334", "200212050101"] {
        std::fs::copy(
            fx("dcpi/dcpicat-manpage.txt"),
            root.join(format!("sites/alpha/dcpidb/{epoch}/xemacs.cycles")),
        )
        .unwrap();
    }
    std::fs::write(
        root.join("notes/README.txt"),
        "profiles from the old lab machines\n",
    )
    .unwrap();
}

fn convert(archive: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "convert",
        archive.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    profconv(&args)
}

/// Every file below `dir`: relative path → bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.ends_with(".profconv") {
                // The stamps of what each output is made from: not outputs.
                continue;
            } else if p.is_dir() {
                go(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    go(dir, dir, &mut out);
    out
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn record<'a>(report: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("no record for {path}: {report:#}"))
}

#[test]
fn a_mixed_archive_converts_in_one_run_with_a_truthful_report() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    let out = dir.path().join("out");
    let report_path = dir.path().join("report.json");
    let r = convert(
        &archive,
        &out,
        &[
            "--to",
            "pprof",
            "--to",
            "svg",
            "--to",
            "speedscope",
            "-j",
            "1",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert_eq!(
        r.status.code(),
        Some(1),
        "a corrupt input makes the exit code 1"
    );
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr
            .contains("5 converted, 0 unchanged, 1 skipped, 1 failed, 1 unsymbolized, 1 binaries"),
        "{stderr}"
    );

    let rep = report(&report_path);
    check_mixed_report(&rep);
    check_mixed_outputs(&out, &rep);
    // The input is untouched.
    let fresh = dir.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    make_archive(&fresh);
    assert_eq!(tree(&archive), tree(&fresh));
}

/// The report of [`make_archive`] converted: what each input is and became.
fn check_mixed_report(rep: &serde_json::Value) {
    assert_eq!(
        (rep["converted"].as_u64(), rep["failed"].as_u64()),
        (Some(5), Some(1))
    );
    let broken = record(rep, "2002/runs/broken.gmon");
    assert_eq!(broken["status"], "failed");
    assert_eq!(broken["format"], "gprof");
    let error = broken["error"].as_str().unwrap();
    assert!(
        error.contains("broken.gmon") && error.contains("at byte"),
        "{error}"
    );
    assert_eq!(record(rep, "notes/README.txt")["status"], "skipped");
    // The executable symbolizes its gmon.out: a binary, not a skipped input.
    assert_eq!(record(rep, "2001/prog/a.out")["status"], "binary");
    for unknown in ["notes/README.txt", "2001/prog/a.out"] {
        assert!(record(rep, unknown)["format"].is_null());
    }
    // The database is one unit, not two files.
    let db = record(rep, "sites/alpha/dcpidb");
    assert_eq!(
        (db["status"].as_str(), db["format"].as_str()),
        (Some("converted"), Some("dcpi"))
    );
    assert!(rep["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| !r["path"].as_str().unwrap().contains("200212")));
}

/// The outputs in `out` of [`make_archive`] converted to pprof, SVG and
/// speedscope: each exists and decodes, and nothing else is written.
fn check_mixed_outputs(out: &Path, rep: &serde_json::Value) {
    // Every expected output exists and decodes.
    let expected = [
        ("2001/prog/gmon.out", "leaf_heavy"),
        ("2002/runs/gmon.out", "0x"),
        ("2003/heap/mpatrol.out", "main"),
        ("2003/xemacs.dcpicat", "xemacs"),
        ("sites/alpha/dcpidb", "xemacs"),
    ];
    for (stem, frame) in expected {
        let p = decode_pprof(&out.join(format!("{stem}.pb.gz")));
        check_pprof_invariants(&p);
        check_svg(&out.join(format!("{stem}.svg")), &[frame]);
        let doc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(format!("{stem}.speedscope.json"))).unwrap(),
        )
        .unwrap();
        validate_speedscope(&doc);
    }
    // The gmon.out beside a.out was symbolized with it; the database sums its two epochs.
    assert!(record(rep, "2001/prog/gmon.out")["binary"]
        .as_str()
        .unwrap()
        .ends_with("a.out"));
    let gprof = decode_pprof(&out.join("2001/prog/gmon.out.pb.gz"));
    assert!(gprof.string_table.iter().any(|s| s == "leaf_heavy"));
    let single = decode_pprof(&out.join("2003/xemacs.dcpicat.pb.gz"));
    let summed = decode_pprof(&out.join("sites/alpha/dcpidb.pb.gz"));
    let total = |p: &pb::Profile| p.sample.iter().map(|s| s.value[0]).sum::<i64>();
    assert_eq!(total(&summed), 2 * total(&single), "two epochs summed");
    assert!(!out.join("2002/runs/broken.gmon.pb.gz").exists());
    assert!(
        !out.join("notes").exists(),
        "nothing written for skipped inputs"
    );
}

#[test]
fn outputs_are_byte_identical_whatever_the_parallelism() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    // An APS file too. Each unit is read on one thread whatever -j is; a
    // single conversion's threads are compared below.
    std::fs::create_dir_all(archive.join("board")).unwrap();
    std::fs::copy(
        manifest_dir().join("examples/aps/sample_cpu_0_20150716_130220"),
        archive.join("board/sample_cpu_0_20150716_130220"),
    )
    .unwrap();
    let formats: Vec<&str> = [
        "pprof",
        "pprof-raw",
        "folded",
        "svg",
        "speedscope",
        "callgrind",
    ]
    .iter()
    .flat_map(|f| ["--to", f])
    .collect();
    let one = dir.path().join("j1");
    let four = dir.path().join("j4");
    convert(
        &archive,
        &one,
        &[&formats[..], &["-j", "1", "--quiet"]].concat(),
    );
    convert(
        &archive,
        &four,
        &[&formats[..], &["-j", "4", "--quiet"]].concat(),
    );
    let (a, b) = (tree(&one), tree(&four));
    assert_eq!(
        a.len(),
        36,
        "6 units × 6 formats: {:?}",
        a.keys().collect::<Vec<_>>()
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let differ: Vec<&String> = a.keys().filter(|k| a[*k] != b[*k]).collect();
    assert!(differ.is_empty(), "-j 1 and -j 4 differ in {differ:?}");
}

/// One conversion with `-j 1` and `-j 4`, every output format at once:
/// the outputs' bytes, by name.
fn single_conversion_outputs(input: &Path, out: &Path) -> [BTreeMap<String, Vec<u8>>; 2] {
    const NAMES: [&str; 6] = [
        "out.pb.gz",
        "out.pb",
        "out.folded",
        "out.svg",
        "out.json",
        "out.callgrind",
    ];
    ["1", "4"].map(|j| {
        let dir = out.join(format!("j{j}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = vec![input.to_str().unwrap().to_owned(), "-j".into(), j.into()];
        for name in NAMES {
            args.extend(["-o".into(), dir.join(name).to_str().unwrap().to_owned()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        profconv_ok(&[&args[..], &["--quiet"]].concat());
        tree(&dir)
    })
}

#[test]
fn a_single_conversion_writes_the_same_bytes_whatever_the_threads() {
    let dir = tempdir();
    // An APS file of 17 MB: 4 chunks of records, counted side by side with
    // -j 4.
    let aps = dir.path().join("sample_cpu_0_20150716_130220");
    std::fs::write(&aps, aps_of_few_stacks(300_000)).unwrap();
    // A DCPI database of 24 images, scanned side by side by `info -j 4`.
    let db = dir.path().join("db");
    common::gen::dcpi::build_db(&db, &common::gen::dcpi::DbSpec::sparse(24, 4000, 100));
    for input in [&aps, &db] {
        let [one, four] = single_conversion_outputs(input, &dir.path().join("out"));
        assert_eq!(one.len(), 6, "{:?}", one.keys().collect::<Vec<_>>());
        assert!(one == four, "{}: -j 1 and -j 4 differ", input.display());
        std::fs::remove_dir_all(dir.path().join("out")).unwrap();
        let info = |j| profconv_ok(&["info", "--json", "-j", j, input.to_str().unwrap()]).stdout;
        assert_eq!(info("1"), info("4"), "info of {}", input.display());
    }
}

#[test]
fn re_runs_keep_outputs_unless_forced_and_resume_redoes_stale_ones() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    let out = dir.path().join("out");
    let rep = dir.path().join("r.json");
    let rep_arg = rep.to_str().unwrap();
    convert(&archive, &out, &["--to", "pprof", "--quiet"]);
    let before = tree(&out);
    let times: Vec<SystemTime> = before
        .keys()
        .map(|k| std::fs::metadata(out.join(k)).unwrap().modified().unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(20));

    convert(
        &archive,
        &out,
        &["--to", "pprof", "--quiet", "--report", rep_arg],
    );
    let r = report(&rep);
    assert_eq!(
        (r["converted"].as_u64(), r["unchanged"].as_u64()),
        (Some(0), Some(5))
    );
    assert_eq!(tree(&out), before);
    let after: Vec<SystemTime> = before
        .keys()
        .map(|k| std::fs::metadata(out.join(k)).unwrap().modified().unwrap())
        .collect();
    assert_eq!(times, after, "nothing rewritten");

    // An input newer than its output is redone by --resume, and only it.
    std::thread::sleep(Duration::from_millis(20));
    let gmon = archive.join("2001/prog/gmon.out");
    let data = std::fs::read(&gmon).unwrap();
    std::fs::write(&gmon, data).unwrap();
    convert(
        &archive,
        &out,
        &["--to", "pprof", "--quiet", "--resume", "--report", rep_arg],
    );
    let r = report(&rep);
    assert_eq!(
        (r["converted"].as_u64(), r["unchanged"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(record(&r, "2001/prog/gmon.out")["status"], "converted");

    convert(
        &archive,
        &out,
        &["--to", "pprof", "--quiet", "--force", "--report", rep_arg],
    );
    assert_eq!(report(&rep)["converted"].as_u64(), Some(5));

    // Outputs made at another granularity are stale: converted again.
    let functions = ["--granularity", "functions"];
    let args = [
        &["--to", "pprof", "--quiet", "--report", rep_arg][..],
        &functions,
    ]
    .concat();
    convert(&archive, &out, &args);
    assert_eq!(report(&rep)["converted"].as_u64(), Some(5));
    convert(&archive, &out, &args);
    assert_eq!(report(&rep)["unchanged"].as_u64(), Some(5));
}

#[test]
fn a_binary_map_names_the_executable_per_input() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    let map = dir.path().join("binaries.txt");
    std::fs::write(
        &map,
        format!(
            "# glob binary\n2002/**/*.gz {}\n",
            fixture("gprof/callgraph-pie").display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let rep = dir.path().join("r.json");
    convert(
        &archive,
        &out,
        &[
            "--to",
            "pprof",
            "--quiet",
            "--binary-map",
            map.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ],
    );
    let r = report(&rep);
    assert!(record(&r, "2002/runs/gmon.out.gz")["binary"]
        .as_str()
        .unwrap()
        .ends_with("callgraph-pie"));
    let p = decode_pprof(&out.join("2002/runs/gmon.out.pb.gz"));
    assert!(
        p.string_table.iter().any(|s| s == "leaf_heavy"),
        "symbolized through the map"
    );
}

/// A larger archive: many copies of the fixture, so that a run takes a while.
fn make_big_archive(root: &Path, n: usize) {
    let gmon = std::fs::read(fixture("gprof/callgraph-nopie.gmon")).unwrap();
    for i in 0..n {
        let d = root.join(format!("d{:02}", i % 20));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("gmon.{i:04}.out")), &gmon).unwrap();
    }
}

/// The name of a temporary file a conversion writes before renaming it into
/// place: `.NAME.profconv-XXXXXX.tmp`.
fn is_temporary_name(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    inner
        .rsplit_once(".profconv-")
        .is_some_and(|(stem, random)| {
            !stem.is_empty()
                && random.len() == 6
                && random.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

fn outputs_all_decode(out: &Path) -> usize {
    let mut n = 0;
    for (name, bytes) in tree(out) {
        assert!(
            !is_temporary_name(Path::new(&name).file_name().unwrap().to_str().unwrap()),
            "temporary file left: {name}"
        );
        if name.ends_with(".pb.gz") {
            decode_pprof_bytes(&bytes).unwrap_or_else(|e| panic!("{name} is half-written: {e}"));
        } else if name.ends_with(".svg") {
            let text = String::from_utf8(bytes).unwrap();
            assert!(
                text.trim_end().ends_with("</svg>"),
                "{name} is half-written"
            );
        }
        n += 1;
    }
    n
}

/// Whether this process ignores SIGINT (`SigIgn` in /proc/self/status):
/// a command started in the background by a non-interactive shell does,
/// and profconv, started from it, inherits that and is not stopped by it.
fn sigint_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (2 - 1)) != 0)
}

fn killed_run_leaves_no_partial_output(signal: &str) {
    if signal == "INT" && sigint_ignored() {
        crate::skip_note!("skipping: SIGINT is ignored here (started in the background), so profconv would ignore it too");
        return;
    }
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_big_archive(&archive, 600);
    let out = dir.path().join("out");
    let binary = fixture("gprof/callgraph-nopie");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "convert",
            archive.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(
            [
                "--to", "pprof", "--to", "svg", "--quiet", "-j", "2", "--binary",
            ]
            .map(String::from),
        );
        v.push(binary.display().to_string());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let mut child = Command::new(profconv_bin())
        .args(args(&[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    signal_when_outputs_exist(&child, &out, 40, signal);
    let status = child.wait().unwrap();
    assert!(!status.success(), "the run was stopped before it finished");
    outputs_complete_but_temporaries(&out);
    // The next run removes the temporary files and finishes the job.
    let finish = Command::new(profconv_bin())
        .args(args(&[]))
        .output()
        .unwrap();
    assert!(
        finish.status.success(),
        "{}",
        String::from_utf8_lossy(&finish.stderr)
    );
    assert_eq!(outputs_all_decode(&out), 1200);
}

/// Whatever is at an output path under `out` is complete: a pprof that
/// decodes, an SVG that ends; temporary files may remain.
fn outputs_complete_but_temporaries(out: &Path) {
    for (name, bytes) in tree(out) {
        let file = Path::new(&name)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        if is_temporary_name(&file) {
            continue;
        }
        if name.ends_with(".pb.gz") {
            decode_pprof_bytes(&bytes).unwrap_or_else(|e| panic!("{name} is half-written: {e}"));
        } else {
            assert!(
                String::from_utf8(bytes)
                    .unwrap()
                    .trim_end()
                    .ends_with("</svg>"),
                "{name}"
            );
        }
    }
}

/// Waits until `out` holds `n` files (a minute at most), then sends
/// `signal` (`KILL`, `INT`…) to `child`: a run stopped mid-way.
fn signal_when_outputs_exist(child: &std::process::Child, out: &Path, n: usize, signal: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tree_len(out) < n && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
}

/// A temporary folder with the archive of [`make_archive`] in it, and the
/// output folder's path.
fn archive_and_out() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_archive(&archive);
    (dir, archive, out)
}

fn tree_len(dir: &Path) -> usize {
    fn go(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| if e.path().is_dir() { go(&e.path()) } else { 1 })
                    .sum()
            })
            .unwrap_or(0)
    }
    go(dir)
}

#[test]
fn a_run_killed_with_sigkill_leaves_no_partial_output() {
    killed_run_leaves_no_partial_output("KILL");
}

#[test]
fn a_run_interrupted_with_sigint_leaves_no_partial_output() {
    killed_run_leaves_no_partial_output("INT");
}

#[test]
fn an_archive_path_that_is_not_a_directory_is_a_usage_error() {
    let dir = tempdir();
    let file = dir.path().join("gmon.out");
    std::fs::copy(fixture("gprof/callgraph-nopie.gmon"), &file).unwrap();
    let r = convert(&file, &dir.path().join("o"), &["--to", "pprof"]);
    assert_eq!(r.status.code(), Some(2));
}

/// A report without what differs between equal runs: timings and the
/// output folder's name.
fn without_timings(mut report: serde_json::Value) -> serde_json::Value {
    report["seconds"] = serde_json::Value::Null;
    report["out_dir"] = serde_json::Value::Null;
    for r in report["inputs"].as_array_mut().unwrap() {
        r["seconds"] = serde_json::Value::Null;
    }
    report
}

#[test]
fn unsymbolized_profiles_and_binaries_are_reported_and_quiet_prints_only_the_summary() {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_archive(&archive);
    let rep = dir.path().join("report.json");
    let run = convert(
        &archive,
        &out,
        &["--to", "folded", "-q", "--report", rep.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    let report = report(&rep);
    let gz = record(&report, "2002/runs/gmon.out.gz");
    assert!(gz["unsymbolized"]
        .as_str()
        .unwrap()
        .contains("without a binary"));
    assert!(record(&report, "2001/prog/gmon.out")["unsymbolized"].is_null());
    assert_eq!(record(&report, "2001/prog/a.out")["status"], "binary");
    assert_eq!(report["unsymbolized"], 1);
    assert_eq!(report["binaries"], 1);
    assert!(stderr.contains(", 1 unsymbolized"), "{stderr}");
    assert!(
        stderr.contains("unsymbolized: 1 (gmon.out without a binary"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("prog/a.out"),
        "binaries are not listed: {stderr}"
    );
    assert!(
        !stderr.contains("skipped: notes"),
        "-q lists no skipped file: {stderr}"
    );
    assert!(!stderr.contains("[1/"), "-q logs no file: {stderr}");
    assert!(
        stderr.contains("failed (new): 1 × the records parse neither with N-byte addresses\n"),
        "-q counts failures by reason: {stderr}"
    );
    assert!(
        !stderr.contains("broken.gmon"),
        "-q names no failed file: {stderr}"
    );
}

#[test]
fn known_failures_exit_0_and_the_summary_says_which_failures_are_new() {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_archive(&archive);
    let run = convert(&archive, &out, &["--to", "folded", "-q"]);
    assert_eq!(run.status.code(), Some(1));
    let known = dir.path().join("known.txt");
    std::fs::write(&known, "# old lab files\n2002/runs/broken.gmon\n").unwrap();
    let run = convert(
        &archive,
        &out,
        &[
            "--to",
            "folded",
            "-q",
            "--known-failures",
            known.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 failed (1 known, 0 new)"), "{stderr}");
    assert!(
        stderr.contains("failed (known): 1 × the records parse neither"),
        "-q counts the failures by reason, known or new: {stderr}"
    );
    let run = convert(
        &archive,
        &out,
        &["--to", "folded", "-q", "--allow-failures", "1"],
    );
    assert_eq!(run.status.code(), Some(0));
}

#[test]
fn shards_in_any_order_give_the_outputs_and_merged_report_of_one_run() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    let (whole, sharded) = (dir.path().join("whole"), dir.path().join("sharded"));
    let whole_report = dir.path().join("whole.json");
    convert(
        &archive,
        &whole,
        &[
            "--to",
            "pprof",
            "--to",
            "folded",
            "--report",
            whole_report.to_str().unwrap(),
        ],
    );
    let mut reports = Vec::new();
    for k in [2, 0, 1] {
        let rep = dir.path().join(format!("shard-{k}.json"));
        let shard = format!("{k}/3");
        convert(
            &archive,
            &sharded,
            &[
                "--to",
                "pprof",
                "--to",
                "folded",
                "--shard",
                &shard,
                "--report",
                rep.to_str().unwrap(),
            ],
        );
        assert_eq!(report(&rep)["shard"], shard.as_str());
        reports.push(rep.to_str().unwrap().to_owned());
    }
    assert_eq!(tree(&whole), tree(&sharded));
    let merged = dir.path().join("merged.json");
    let mut args = vec!["report", "merge"];
    args.extend(reports.iter().map(String::as_str));
    args.extend(["-o", merged.to_str().unwrap()]);
    profconv_ok(&args);
    let mut merged = report(&merged);
    let shares = merged["shards"].as_array().unwrap();
    let shards: Vec<&str> = shares
        .iter()
        .map(|s| s["shard"].as_str().unwrap())
        .collect();
    assert_eq!(shards, ["0/3", "1/3", "2/3"], "{merged:#}");
    assert!(
        merged["shard_spread"].as_f64().unwrap() >= 1.0,
        "{merged:#}"
    );
    // The shards' shares are all the merged report has that a whole run's
    // has not.
    let whole = report(&whole_report);
    assert_eq!(whole["shards"], serde_json::json!([]));
    assert_eq!(whole["shard_spread"], serde_json::Value::Null);
    merged["shards"] = serde_json::json!([]);
    merged["shard_spread"] = serde_json::Value::Null;
    assert_eq!(without_timings(merged), without_timings(whole));
}

/// An archive of `sizes.len()` files named `f00`, `f01`… of those sizes,
/// in two folders (the second half in `b/`); none is a profile, each is one
/// input of its size.
fn make_sized_archive(root: &Path, sizes: &[usize]) {
    for (i, &size) in sizes.iter().enumerate() {
        let folder = if i < sizes.len() / 2 { "a" } else { "b" };
        let path = root.join(folder).join(format!("f{i:02}"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, vec![b'x'; size]).unwrap();
    }
}

/// Each shard's inputs (paths) and bytes, from the reports of `archive`
/// converted in `n` shards.
fn shares(archive: &Path, out: &Path, n: usize) -> Vec<(Vec<String>, u64)> {
    (0..n)
        .map(|k| {
            let rep = out.with_extension(format!("{k}of{n}.json"));
            let shard = format!("{k}/{n}");
            let args = ["--to", "folded", "-q", "--shard", &shard, "--report"];
            let mut args = args.to_vec();
            args.push(rep.to_str().unwrap());
            convert(archive, out, &args);
            let doc = report(&rep);
            let inputs = doc["inputs"].as_array().unwrap();
            let paths = inputs
                .iter()
                .map(|r| r["path"].as_str().unwrap().to_owned());
            let bytes = inputs.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
            (paths.collect(), bytes)
        })
        .collect()
}

#[test]
fn every_input_is_in_exactly_one_shard_whatever_the_shard_count() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    let sizes = [300, 5, 0, 4000, 70, 70, 1, 0, 900, 20, 20, 6000, 3];
    make_sized_archive(&archive, &sizes);
    let mut all: Vec<String> = (0..sizes.len())
        .map(|i| format!("{}/f{i:02}", if i < sizes.len() / 2 { "a" } else { "b" }))
        .collect();
    all.sort();
    for n in [1, 2, 3, 5, 8, 13, 20] {
        let mut seen: Vec<String> = shares(&archive, &dir.path().join(format!("out{n}")), n)
            .into_iter()
            .flat_map(|(paths, _)| paths)
            .collect();
        seen.sort();
        assert_eq!(seen, all, "{n} shards");
    }
}

#[test]
fn shards_are_balanced_by_input_bytes() {
    let dir = tempdir();
    let archive = dir.path().join("equal");
    make_sized_archive(&archive, &[1000; 12]);
    let equal = shares(&archive, &dir.path().join("equal-out"), 3);
    let counts: Vec<(usize, u64)> = equal.iter().map(|(p, b)| (p.len(), *b)).collect();
    assert_eq!(counts, [(4, 4000), (4, 4000), (4, 4000)]);

    // Mixed sizes: a shard is the mean give or take the largest input.
    let archive = dir.path().join("mixed");
    let sizes: Vec<usize> = (0..30).map(|i| 200 + (i * 7919) % 5000).collect();
    make_sized_archive(&archive, &sizes);
    let total: usize = sizes.iter().sum();
    let mean = total as u64 / 8;
    let largest = *sizes.iter().max().unwrap() as u64;
    let mixed = shares(&archive, &dir.path().join("mixed-out"), 8);
    for (k, (paths, bytes)) in mixed.iter().enumerate() {
        assert!(
            bytes.abs_diff(mean) <= largest,
            "shard {k}: {} inputs, {bytes} bytes, mean {mean}: {mixed:?}",
            paths.len()
        );
    }
    let most = mixed.iter().map(|(_, b)| *b).max().unwrap();
    assert!(
        most as f64 <= 1.35 * mean as f64,
        "{most} against {mean}: {mixed:?}"
    );
}

#[test]
fn a_shard_rerun_after_a_crash_resumes_and_auto_takes_the_index_from_the_job() {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_archive(&archive);
    let rep = dir.path().join("shard.json");
    let args = [
        "--to",
        "folded",
        "--shard",
        "auto/2",
        "--report",
        rep.to_str().unwrap(),
    ];
    let mut command = std::process::Command::new(profconv_bin());
    command
        .arg("convert")
        .arg(&archive)
        .arg("-o")
        .arg(&out)
        .args(args);
    command.env("JOB_COMPLETION_INDEX", "1").output().unwrap();
    let first = report(&rep);
    let converted: Vec<&serde_json::Value> = first["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "converted")
        .collect();
    assert!(!converted.is_empty(), "{first:#}");
    // A crash: one output lost (a killed run leaves none half-written).
    let lost = out.join(converted[0]["outputs"][0].as_str().unwrap());
    std::fs::remove_file(&lost).unwrap();
    let again = convert(
        &archive,
        &out,
        &[
            "--to",
            "folded",
            "--shard",
            "1/2",
            "--resume",
            "--report",
            rep.to_str().unwrap(),
        ],
    );
    let second = report(&rep);
    assert!(lost.exists(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(second["converted"], 1);
    assert_eq!(
        second["unchanged"].as_u64().unwrap() as usize,
        converted.len() - 1
    );
    let paths = |r: &serde_json::Value| -> Vec<String> {
        r["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["path"].to_string())
            .collect()
    };
    assert_eq!(paths(&first), paths(&second));
}

#[test]
fn the_shared_progress_counts_bytes_as_a_large_input_is_read_and_ends_at_the_total() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempdir();
    let archive = dir.path().join("archive");
    std::fs::create_dir_all(archive.join("a")).unwrap();
    // An 8 MB APS file, read in pieces, and a small file that is skipped.
    let big = aps_file(150_000);
    std::fs::write(archive.join("a/sample_cpu_0_20150716_130220"), &big).unwrap();
    std::fs::write(archive.join("notes.txt"), b"not a profile\n").unwrap();
    let read = Arc::new(profconv::read::Progress::default());
    let mut options = profconv::archive::ArchiveOptions::new(
        dir.path().join("out"),
        vec![profconv::OutputFormat::Pprof],
    );
    options.progress = Some(read.clone());
    let (total, small) = (big.len() as u64 + 14, 14);
    let done = AtomicBool::new(false);
    let (report, seen) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                seen.push(read.read());
                std::thread::sleep(Duration::from_millis(1));
            }
            seen
        });
        let report = profconv::archive::run(&archive, &options, &|_| {}, &|_| {});
        done.store(true, Ordering::Relaxed);
        (report.unwrap(), watcher.join().unwrap())
    });
    assert_eq!(report.inputs.iter().map(|r| r.bytes).sum::<u64>(), total);
    assert_eq!(
        read.read(),
        total,
        "the counter ends at the archive's bytes"
    );
    // Part of the large input was counted before it finished.
    assert!(
        seen.iter().any(|&v| v > 0 && v < total && v != small),
        "only whole units were counted: {:?}",
        seen.iter().collect::<std::collections::BTreeSet<_>>()
    );
}

#[test]
fn an_input_changed_in_place_with_its_size_and_time_kept_is_converted_again() {
    let (dir, archive, out) = archive_and_out();
    let rep = dir.path().join("r.json");
    let args = ["--to", "pprof", "-q", "--report", rep.to_str().unwrap()];
    convert(&archive, &out, &args);
    let gmon = archive.join("2001/prog/gmon.out");
    let time = std::fs::metadata(&gmon).unwrap().modified().unwrap();
    let mut data = std::fs::read(&gmon).unwrap();
    let last = data.len() - 1;
    data[last] ^= 1;
    std::fs::write(&gmon, &data).unwrap();
    let file = std::fs::File::options().write(true).open(&gmon).unwrap();
    file.set_modified(time).unwrap();
    drop(file);
    assert_eq!(std::fs::metadata(&gmon).unwrap().modified().unwrap(), time);
    convert(&archive, &out, &args);
    let r = report(&rep);
    assert_eq!(record(&r, "2001/prog/gmon.out")["status"], "converted");
    assert_eq!(
        (r["converted"].as_u64(), r["unchanged"].as_u64()),
        (Some(1), Some(4))
    );
    let made = &record(&r, "2001/prog/gmon.out")["made_from"];
    assert_eq!(made["input"]["bytes"].as_u64(), Some(data.len() as u64));
    assert!(
        made["binary"]["path"].as_str().unwrap().ends_with("a.out"),
        "{made}"
    );
}

#[test]
fn adding_a_binary_map_redoes_exactly_the_unsymbolized_outputs() {
    let (dir, archive, out) = archive_and_out();
    let map = dir.path().join("binaries.txt");
    let binary = fixture("gprof/callgraph-pie");
    std::fs::write(&map, format!("2002/**/*.gz {}\n", binary.display())).unwrap();
    let rep = dir.path().join("r.json");
    let mut args = vec!["--to", "folded", "-q", "--report", rep.to_str().unwrap()];
    convert(&archive, &out, &args);
    assert_eq!(report(&rep)["unsymbolized"], 1);
    args.extend(["--binary-map", map.to_str().unwrap()]);
    for flags in [&["--resume"][..], &[]] {
        let mut with = args.clone();
        with.extend_from_slice(flags);
        convert(&archive, &out, &with);
        let r = report(&rep);
        let again = flags.is_empty();
        // Redone once (with --resume), unchanged after (a plain re-run).
        let gz = record(&r, "2002/runs/gmon.out.gz");
        assert_eq!(gz["status"], if again { "unchanged" } else { "converted" });
        assert_eq!(r["unsymbolized"], 0, "{r:#}");
        assert_eq!(r["converted"], if again { 0 } else { 1 });
    }
    let folded = std::fs::read_to_string(out.join("2002/runs/gmon.out.folded")).unwrap();
    assert!(folded.contains("leaf_heavy"), "{folded}");
    // Without the map again: the unsymbolized output is back, and counted.
    args.truncate(5);
    convert(&archive, &out, &args);
    let r = report(&rep);
    assert_eq!(
        (r["converted"].as_u64(), r["unsymbolized"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn after_a_killed_run_and_a_resume_the_counts_describe_the_outputs_on_disk() {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    // No executable anywhere: every output is unsymbolized.
    make_big_archive(&archive, 400);
    let rep = dir.path().join("r.json");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "convert",
            archive.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        v.extend([
            "--to",
            "pprof",
            "-q",
            "-j",
            "2",
            "--report",
            rep.to_str().unwrap(),
        ]);
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let mut child = Command::new(profconv_bin())
        .args(args(&[]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    signal_when_outputs_exist(&child, &out, 40, "KILL");
    child.wait().unwrap();
    let done = tree(&out).len();
    assert!(
        done < 400,
        "the run was stopped before it finished ({done})"
    );
    let run = Command::new(profconv_bin())
        .args(args(&["--resume"]))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r = report(&rep);
    assert_eq!(tree(&out).len(), 400);
    assert_eq!(
        r["unsymbolized"],
        400,
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        r["converted"].as_u64().unwrap() + r["unchanged"].as_u64().unwrap(),
        400
    );
    assert!(r["unchanged"].as_u64().unwrap() >= 1);
}

#[test]
fn report_merge_refuses_missing_or_repeated_shards_and_reports_of_other_runs() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    make_archive(&archive);
    let shard_report = |shard: &str, out: &str, to: &str| -> String {
        let rep = dir
            .path()
            .join(format!("{}-{out}-{to}.json", shard.replace('/', "of")));
        let args = [
            "--to",
            to,
            "-q",
            "--shard",
            shard,
            "--report",
            rep.to_str().unwrap(),
        ];
        convert(&archive, &dir.path().join(out), &args);
        rep.to_str().unwrap().to_owned()
    };
    let merged = dir.path().join("merged.json");
    let merge = |reports: &[&str], extra: &[&str]| {
        let mut args = vec!["report", "merge"];
        args.extend_from_slice(reports);
        args.extend(["-o", merged.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let run = profconv(&args);
        (
            run.status.code(),
            String::from_utf8_lossy(&run.stderr).into_owned(),
        )
    };
    let (a0, a1) = (
        shard_report("0/2", "out", "pprof"),
        shard_report("1/2", "out", "pprof"),
    );
    let (code, stderr) = merge(&[&a0], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("shard 1/2 of the run missing (found 1 of 2)"),
        "{stderr}"
    );
    assert!(!merged.exists());
    let (code, stderr) = merge(&[&a0], &["--partial"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("partial: shard 1/2 missing"), "{stderr}");
    assert_eq!(
        report(&merged)["missing_shards"],
        serde_json::json!(["1/2"])
    );
    std::fs::remove_file(&merged).unwrap();

    let (code, stderr) = merge(&[&a0, &a1, &a0], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("shard 0/2 is in"), "{stderr}");
    let b1 = shard_report("1/3", "out", "pprof");
    let (code, stderr) = merge(&[&a0, &b1], &[]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("shard 1/3 (of 3 shards)") && stderr.contains("one of 2 shards"),
        "{stderr}"
    );
    let elsewhere = shard_report("1/2", "other", "pprof");
    let (code, stderr) = merge(&[&a0, &elsewhere], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("the output folder differ"), "{stderr}");
    let folded = shard_report("1/2", "out", "folded");
    let (code, stderr) = merge(&[&a0, &folded], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("the formats differ"), "{stderr}");
    assert!(!merged.exists(), "nothing merged");
    let (code, stderr) = merge(&[&a1, &a0], &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report(&merged)["missing_shards"], serde_json::json!([]));
    assert!(stderr.contains("inputs in 2 shards"), "{stderr}");
    assert!(stderr.contains("× the mean"), "{stderr}");
    std::fs::remove_file(&merged).unwrap();

    // An input added between the shards' runs moves the cut: refused.
    std::fs::write(archive.join("added.gmon"), vec![0u8; 5000]).unwrap();
    let later = shard_report("1/2", "out", "pprof");
    let (code, stderr) = merge(&[&a0, &later], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the archive changed between the shards' runs")
            && stderr.contains("re-run every shard"),
        "{stderr}"
    );
    assert!(!merged.exists(), "nothing merged");
    let again = shard_report("0/2", "out", "pprof");
    let (code, stderr) = merge(&[&again, &later], &[]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn after_ctrl_c_nothing_follows_the_summary_but_the_line_saying_so() {
    if sigint_ignored() {
        crate::skip_note!("skipping: SIGINT is ignored here (started in the background)");
        return;
    }
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_big_archive(&archive, 600);
    for quiet in [false, true] {
        let _ = std::fs::remove_dir_all(&out);
        let mut args = vec![
            "convert",
            archive.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend(["--to", "pprof", "--to", "svg", "-j", "2"]);
        if quiet {
            args.push("-q");
        }
        let child = Command::new(profconv_bin())
            .args(&args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        signal_when_outputs_exist(&child, &out, 40, "INT");
        let run = child.wait_with_output().unwrap();
        assert_eq!(run.status.code(), Some(130));
        let stderr = String::from_utf8_lossy(&run.stderr);
        let at = stderr.find("profconv convert: ").expect("a summary");
        let after: Vec<&str> = stderr[at..].lines().skip(1).collect();
        let (last, summary) = after.split_last().unwrap();
        assert!(last.contains("interrupted by SIGINT"), "{stderr}");
        assert!(
            summary.iter().all(|l| l.starts_with("  ")),
            "lines after the summary: {after:?}"
        );
        assert!(summary.len() <= 3, "{after:?}");
        if quiet {
            assert_eq!(at, 0, "-q prints nothing before the summary: {stderr}");
        }
    }
}

/// An archive laid out as real ones are: `n` copies of a small gmon.out
/// (no executable), `crowded` of them in one folder, the others in folders
/// of 100.
fn make_wide_archive(root: &Path, n: usize, crowded: usize) {
    let gmon = std::fs::read(fixture("gprof/callgraph-nopie.gmon")).unwrap();
    for i in 0..n {
        let d = match i.checked_sub(crowded) {
            None => root.join("crowded"),
            Some(k) => root.join(format!("run{:04}", k / 100)),
        };
        if i == 0 || i == crowded || i.checked_sub(crowded).is_some_and(|k| k % 100 == 0) {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(d.join(format!("gmon.{i:06}.out")), &gmon).unwrap();
    }
}

/// Peak resident memory (kB) of `profconv convert` over
/// [`make_wide_archive`]`(n, crowded)`, measured by `/usr/bin/time -v` on
/// the child.
fn convert_peak_rss_kb(n: usize, crowded: usize) -> u64 {
    let dir = tempdir();
    let (archive, out) = (dir.path().join("archive"), dir.path().join("out"));
    make_wide_archive(&archive, n, crowded);
    let rep = dir.path().join("r.json");
    let run = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(profconv_bin())
        .args([
            "convert",
            archive.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .args([
            "--to",
            "folded",
            "-q",
            "-j",
            "2",
            "--report",
            rep.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        report(&rep)["converted"].as_u64(),
        Some(n as u64),
        "{stderr}"
    );
    stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|kb| kb.parse().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr}"))
}

/// Memory follows the largest folder, not the number of files: the peak
/// over 10 000 files (80 folders of 100 and one of 2 000) is within twice
/// the peak over 1 000 (10 folders of 100), and less than 2 MB above it.
///
/// The issue asks this of 100 000 files. In the debug build `cargo test`
/// makes, a conversion takes about a millisecond of CPU, so 100 000 files
/// would take minutes on CI's 2 cores; 10 000 is the most that runs in
/// about 30 s, the archive's making included. 100 000 was measured by hand
/// (release, -j 2, one folder of 5 000 and folders of 100): 8.0 MB against
/// 7.2 MB at 1 000.
///
/// The second bound is the one that catches a regression at 10 000 files:
/// the debug binary's code alone makes the smaller peak about 17 MB, so
/// twice that would let through 2 KB a file, while a plan of every file's
/// paths costs about 400 bytes a file (+3.8 MB at 10 000, release). Measured:
/// +0.4 MB (17.0 against 16.5 MB in debug, 7.4 against 7.0 MB in release),
/// the listing of the crowded folder and allocator slack.
#[test]
fn convert_memory_on_10000_files_is_within_twice_that_on_1000() {
    if !Path::new("/usr/bin/time").exists() {
        crate::skip_note!("skipping: no /usr/bin/time to measure the peak");
        return;
    }
    let small = convert_peak_rss_kb(1_000, 0);
    let large = convert_peak_rss_kb(10_000, 2_000);
    assert!(
        large <= 2 * small,
        "peak RSS {large} kB on 10 000 files, {small} kB on 1 000"
    );
    assert!(
        large <= small + 2048,
        "peak RSS {large} kB on 10 000 files, more than 2 MB above the {small} kB on 1 000"
    );
}
