//! profconv's outputs in a real browser: writes speedscope JSON, flamegraph
//! SVG and pprof from inputs of all four formats, then runs
//! `tests/browser/run.mjs` (node + puppeteer-core + Debian's Chromium) on
//! them: speedscope's own app, inferno's SVG search, `go tool pprof -http`;
//! and flamegraphs made with each of the SVG options, checked for the
//! option's effect on the drawing.
//!
//! Needs node, `npm ci` done in tests/browser, and /usr/bin/chromium (or
//! `PROFCONV_CHROMIUM`); `.ci/run` installs them. Outside CI a missing one
//! skips with the reason printed; in CI it fails. `PROFCONV_BROWSER_SHOTS=DIR`
//! keeps a screenshot of every page.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use common::*;

/// Why the browser run cannot happen here, if it cannot.
fn missing_tool() -> Option<String> {
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return Some("node is not installed (apt-get install nodejs npm)".into());
    }
    let modules = manifest_dir().join("tests/browser/node_modules");
    for package in ["puppeteer-core", "speedscope"] {
        if !modules.join(package).is_dir() {
            return Some(format!(
                "{package} is not installed: run `npm ci` in tests/browser"
            ));
        }
    }
    if !chromium().is_file() {
        return Some(format!(
            "{} is missing (apt-get install chromium)",
            chromium().display()
        ));
    }
    None
}

fn chromium() -> PathBuf {
    std::env::var_os("PROFCONV_CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from)
}

/// Converts `input` (with `extra` arguments) to `NAME.speedscope.json`,
/// `NAME.svg` and `NAME.pb.gz` in `dir`; returns the sample type names
/// (`type (unit)`) and the default one, read from the pprof output.
fn convert(dir: &Path, name: &str, input: &Path, extra: &[&str]) -> (Vec<String>, String) {
    let out = |ext: &str| {
        dir.join(format!("{name}.{ext}"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let mut args = vec![input.to_str().unwrap().to_owned()];
    for ext in ["speedscope.json", "svg", "pb.gz"] {
        args.push("-o".into());
        args.push(out(ext));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    profconv_ok(&args);
    let p = decode_pprof(Path::new(&out("pb.gz")));
    let names: Vec<String> = p
        .sample_type
        .iter()
        .map(|t| format!("{} ({})", s(&p, t.r#type), s(&p, t.unit)))
        .collect();
    let default = p
        .sample_type
        .iter()
        .position(|t| t.r#type == p.default_sample_type)
        .unwrap_or(names.len() - 1);
    let active = names[default].clone();
    (names, active)
}

/// What the browser must see for one input: a known frame for speedscope's
/// table, frames the SVG must have, and a function its search must find.
struct Case {
    name: &'static str,
    input: PathBuf,
    extra: Vec<String>,
    frame: &'static str,
    svg_frames: &'static [&'static str],
    search: &'static str,
}

fn cases(dir: &Path) -> Vec<Case> {
    let aps = dir.join("sample_cpu_0_20150716_130220");
    std::fs::write(&aps, small_aps_file()).unwrap();
    let gprof_binary = fixture("gprof/callgraph-nopie")
        .to_str()
        .unwrap()
        .to_owned();
    vec![
        Case {
            name: "gprof",
            input: fixture("gprof/callgraph-nopie.gmon"),
            extra: vec!["--binary".into(), gprof_binary],
            frame: "main",
            svg_frames: &["main", "a", "leaf_heavy"],
            search: "leaf_heavy",
        },
        Case {
            name: "mpatrol",
            input: fixture("mpatrol/linux-x86_64/mpatrol.out"),
            extra: vec![],
            frame: "main",
            svg_frames: &["main", "push"],
            search: "copy_name",
        },
        Case {
            name: "dcpi",
            input: fixture("dcpi/dcpicat-manpage.txt"),
            extra: vec![],
            // Its image is not at hand: the address is the image's frame.
            frame: "[xemacs]",
            svg_frames: &["[xemacs]"],
            search: "xemacs",
        },
        Case {
            name: "aps",
            input: aps,
            extra: vec![],
            frame: "[app]",
            svg_frames: &["[app]"],
            search: "app",
        },
    ]
}

/// One flamegraph per SVG option (the gprof fixture, the mpatrol one as a
/// heap profile), each with what the browser must see: the manifest's
/// `svg_options` (tests/browser/run.mjs).
fn option_cases(dir: &Path) -> Vec<Value> {
    let gmon = fixture("gprof/callgraph-nopie.gmon");
    let binary = fixture("gprof/callgraph-nopie");
    let mpatrol = fixture("mpatrol/linux-x86_64/mpatrol.out");
    let gprof_frames = json!(["all", "main", "a", "b", "leaf_heavy"]);
    let cases = [
        (
            "default",
            &gmon,
            vec![],
            json!({ "root_at": "bottom", "roots": ["main"],
            "left_of": ["a", "b"], "palette": "hot", "width": 1200 }),
        ),
        (
            "inverted",
            &gmon,
            vec!["--inverted"],
            json!({ "root_at": "top" }),
        ),
        (
            "reverse",
            &gmon,
            vec!["--reverse"],
            json!({ "root_at": "bottom", "roots": ["leaf_heavy", "leaf_light"] }),
        ),
        (
            "flamechart",
            &gmon,
            vec!["--flamechart"],
            json!({ "left_of": ["b", "a"] }),
        ),
        (
            "title",
            &gmon,
            vec!["--title", "Run 7", "--subtitle", "after the fix"],
            json!({ "title": "Run 7", "subtitle": "after the fix" }),
        ),
        (
            "width",
            &gmon,
            vec!["--width", "800"],
            json!({ "width": 800 }),
        ),
        (
            "minwidth",
            &gmon,
            vec!["--minwidth", "20"],
            json!({ "min_percent": 20, "absent": ["c", "leaf_light", "scale_helper"] }),
        ),
        (
            "colors",
            &mpatrol,
            vec!["--colors", "mem"],
            json!({ "palette": "mem", "count_name": "bytes", "frames": ["main", "make_buffer"] }),
        ),
    ];
    cases
        .into_iter()
        .map(|(option, input, extra, mut expect)| {
            let file = format!("option-{option}.svg");
            let out = dir.join(&file);
            let mut args = vec![input.to_str().unwrap(), "-o", out.to_str().unwrap()];
            if input == &gmon {
                args.extend(["--binary", binary.to_str().unwrap()]);
            }
            args.extend(extra.iter().copied());
            profconv_ok(&args);
            expect["file"] = json!(file);
            expect["option"] = json!(extra.first().copied().unwrap_or("no option"));
            if expect.get("frames").is_none() {
                expect["frames"] = gprof_frames.clone();
            }
            expect
        })
        .collect()
}

/// The speedscope output, at its default granularity, of the database of
/// `benches/dcpi.sh` (200 images of 500 000 instructions, 10 % of them
/// sampled: 383 MiB, ten million addresses, made by `benches/dcpi_gen.py`),
/// and what speedscope must show of it: the largest speedscope file
/// profconv writes for that database unless asked for every address.
fn dcpi_database_speedscope(dir: &Path) -> Value {
    let db = dir.join("dcpi-database");
    let made = Command::new("python3")
        .arg(manifest_dir().join("benches/dcpi_gen.py"))
        .args([db.to_str().unwrap(), "--images", "200", "--insns", "500000"])
        .args(["--sampled", "0.10"])
        .output()
        .expect("python3 runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = dir.join("dcpi-database.speedscope.json");
    profconv_ok(&[db.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    std::fs::remove_dir_all(&db).unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let profiles: Vec<&str> = doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let index = doc["activeProfileIndex"].as_u64().unwrap() as usize;
    // The heaviest image: at the top of speedscope's table, sorted by self
    // time.
    let shown = &doc["profiles"][index];
    let weights = shown["weights"].as_array().unwrap();
    let heaviest = (0..weights.len())
        .max_by(|&a, &b| {
            weights[a]
                .as_f64()
                .unwrap()
                .total_cmp(&weights[b].as_f64().unwrap())
        })
        .unwrap();
    let leaf = shown["samples"][heaviest]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    let frame = doc["shared"]["frames"][leaf.as_u64().unwrap() as usize]["name"].clone();
    assert!(frame.as_str().unwrap().starts_with("[lib"), "{frame}");
    json!({
        "file": "dcpi-database.speedscope.json",
        "profiles": profiles,
        "active": profiles[index],
        "frame": frame,
    })
}

#[test]
fn outputs_of_every_format_open_in_speedscope_chromium_and_pprofs_web_ui() {
    if let Some(reason) = missing_tool() {
        assert!(!in_ci(), "browser tests cannot run in CI: {reason}");
        crate::skip_note!("skipping the browser tests: {reason}");
        return;
    }
    let Some(go) = go_command() else {
        return;
    };
    let dir = tempdir();
    let mut speedscope = Vec::new();
    let mut svg = Vec::new();
    for case in cases(dir.path()) {
        let extra: Vec<&str> = case.extra.iter().map(String::as_str).collect();
        let (profiles, active) = convert(dir.path(), case.name, &case.input, &extra);
        speedscope.push(json!({
            "file": format!("{}.speedscope.json", case.name),
            "profiles": profiles,
            "active": active,
            "frame": case.frame,
        }));
        svg.push(json!({
            "file": format!("{}.svg", case.name),
            "frames": case.svg_frames,
            "search": case.search,
        }));
    }
    speedscope.push(dcpi_database_speedscope(dir.path()));
    let shots = std::env::var_os("PROFCONV_BROWSER_SHOTS").map(PathBuf::from);
    if let Some(d) = &shots {
        std::fs::create_dir_all(d).unwrap();
    }
    let manifest: Value = json!({
        "dir": dir.path(),
        "chromium": chromium(),
        "go": go,
        "screenshots": shots,
        "speedscope": speedscope,
        "svg": svg,
        "pprof": [{ "file": "gprof.pb.gz", "frame": "main" }],
        "svg_options": option_cases(dir.path()),
    });
    let manifest_path = dir.path().join("manifest.json");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let out = Command::new("node")
        .arg(manifest_dir().join("tests/browser/run.mjs"))
        .arg(&manifest_path)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    // Which browser ran the checks, shown in a plain `cargo test` too (the
    // harness captures `println!`, not the process's standard error).
    if let Some(line) = stdout.lines().find(|l| l.starts_with("# browser: ")) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{}", &line[2..]);
    }
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
