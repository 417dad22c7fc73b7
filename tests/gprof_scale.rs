//! gprof at a real size: a generated program of thousands of functions
//! (tests/common/gprof_program.rs) is built with `gcc -pg`, run, and its
//! gmon.out converted; the synthesized stacks must agree with GNU gprof's own
//! call graph (`gprof -b -q`) on every function and every arc, and every
//! stack must start at a root of the call graph.
//!
//! `PROFCONV_SCALE_FUNCTIONS=20000 cargo test --release --test gprof_scale`
//! runs the same checks on a larger program; `PROFCONV_SCALE_KEEP=DIR` keeps
//! its gmon.out, executable and pprof output in DIR.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::gprof_program::{self, Shape};
use common::*;

/// One function's entry in gprof's call graph.
#[derive(Debug, Default)]
struct Entry {
    self_s: f64,
    children_s: f64,
    in_cycle: bool,
    /// Timed parent lines: (parent, self + children propagated along the arc,
    /// parent in a cycle).
    parents: Vec<(String, f64, bool)>,
}

/// `name <cycle 1> [4]` → (`name`, in a cycle).
fn entry_name(tokens: &[&str]) -> (String, bool) {
    let mut t = tokens;
    if t.last().is_some_and(|s| s.starts_with('[')) {
        t = &t[..t.len() - 1];
    }
    let in_cycle = t.len() >= 2 && t[t.len() - 2] == "<cycle";
    if in_cycle {
        t = &t[..t.len() - 2];
    }
    (t.join(" "), in_cycle)
}

fn is_time(s: &str) -> bool {
    s.contains('.') && s.parse::<f64>().is_ok()
}

/// Parses `gprof -b -q`: every function's entry, cycles-as-a-whole left out.
fn parse_call_graph(text: &str) -> BTreeMap<String, Entry> {
    let body = text
        .split_once("index % time")
        .map(|(_, b)| b)
        .expect("gprof -q output has a call graph header");
    let body = body.split("Index by function name").next().unwrap();
    let mut out = BTreeMap::new();
    for block in body.split("-----------------------------------------------") {
        let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some(primary) = lines.iter().position(|l| l.starts_with('[')) else {
            continue;
        };
        let t: Vec<&str> = lines[primary].split_whitespace().collect();
        // [idx] %time self children [called] name... [idx]
        let name_at = if t.len() > 5 && t[4].chars().next().is_some_and(|c| c.is_ascii_digit()) {
            5
        } else {
            4
        };
        let (name, in_cycle) = entry_name(&t[name_at..]);
        if name.contains("as a whole") {
            continue;
        }
        let mut e = Entry {
            self_s: t[2].parse().unwrap(),
            children_s: t[3].parse().unwrap(),
            in_cycle,
            parents: Vec::new(),
        };
        for l in &lines[..primary] {
            let p: Vec<&str> = l.split_whitespace().collect();
            if p.len() >= 4 && is_time(p[0]) && is_time(p[1]) {
                let (parent, parent_cycle) = entry_name(&p[3..]);
                let t: f64 = p[0].parse::<f64>().unwrap() + p[1].parse::<f64>().unwrap();
                e.parents.push((parent, t, parent_cycle));
            }
        }
        out.insert(name, e);
    }
    out
}

struct Run {
    _dir: tempfile::TempDir,
    graph: BTreeMap<String, Entry>,
    pprof: pb::Profile,
    speedscope: serde_json::Value,
    pb_path: PathBuf,
}

fn run() -> Option<&'static Run> {
    static RUN: OnceLock<Option<Run>> = OnceLock::new();
    RUN.get_or_init(|| {
        let functions = std::env::var("PROFCONV_SCALE_FUNCTIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000);
        let dir = tempdir();
        let (_, exe) = gprof_program::build_and_run(&Shape::new(functions), dir.path())?;
        let gmon = dir.path().join("gmon.out");
        let out = match Command::new("gprof")
            .args(["-b", "-q"])
            .arg(&exe)
            .arg(&gmon)
            .output()
        {
            Ok(out) => out,
            Err(_) => {
                assert!(!in_ci(), "GNU gprof is needed: .ci/run installs binutils");
                crate::skip_note!("skipping: gprof not installed");
                return None;
            }
        };
        assert!(out.status.success(), "gprof -b -q failed");
        let graph = parse_call_graph(&String::from_utf8_lossy(&out.stdout));
        assert!(
            graph.len() >= functions / 2,
            "gprof shows {} functions",
            graph.len()
        );
        assert!(
            graph.values().filter(|e| e.in_cycle).count() >= 2,
            "gprof shows the mutual-recursion cycle"
        );
        let pb_path = dir.path().join("out.pb.gz");
        let ss_path = dir.path().join("out.speedscope.json");
        let (g, e, p, s) = (
            gmon.to_str().unwrap(),
            exe.to_str().unwrap(),
            pb_path.to_str().unwrap(),
            ss_path.to_str().unwrap(),
        );
        profconv_ok(&[g, "--binary", e, "-o", p, "-o", s]);
        if let Some(keep) = std::env::var_os("PROFCONV_SCALE_KEEP") {
            // For looking at by hand (and the README's picture).
            std::fs::create_dir_all(&keep).unwrap();
            for f in ["gmon.out", "prog", "out.pb.gz"] {
                std::fs::copy(dir.path().join(f), PathBuf::from(&keep).join(f)).unwrap();
            }
        }
        let pprof = decode_pprof(&pb_path);
        let main = &graph["main"];
        eprintln!(
            "{functions} functions: gprof shows {} entries, main {:.2} s, {} functions with self time, {} pprof samples",
            graph.len(),
            main.self_s + main.children_s,
            graph.values().filter(|e| e.self_s > 0.0).count(),
            pprof.sample.len()
        );
        check_pprof_invariants(&pprof);
        let speedscope =
            serde_json::from_slice(&std::fs::read(&ss_path).unwrap()).expect("speedscope JSON");
        Some(Run {
            _dir: dir,
            graph,
            pprof,
            speedscope,
            pb_path,
        })
    })
    .as_ref()
}

fn location_names(p: &pb::Profile) -> HashMap<u64, Vec<String>> {
    let funcs: HashMap<u64, &str> = p.function.iter().map(|f| (f.id, s(p, f.name))).collect();
    p.location
        .iter()
        .map(|l| {
            let names = if l.line.is_empty() {
                vec![format!("{:#x}", l.address)]
            } else {
                l.line
                    .iter()
                    .map(|line| funcs[&line.function_id].to_owned())
                    .collect()
            };
            (l.id, names)
        })
        .collect()
}

const NS: f64 = 1e9;

/// gprof prints seconds with two decimals; the issue allows 1 % or one
/// sample (10 ms at gprof's 100 Hz), whichever is larger.
fn close(got_s: f64, want_s: f64) -> bool {
    (got_s - want_s).abs() <= (0.01 * want_s).max(0.01) + 0.005
}

/// What `go tool pprof` computes from the cpu samples: cumulative time per
/// function (each function once per stack, as `-top -cum` counts it), time
/// per caller→callee edge, and the stacks as function names, leaf first.
struct CpuView {
    cum: HashMap<String, f64>,
    edges: HashMap<(String, String), f64>,
    stacks: Vec<(Vec<String>, i64)>,
}

fn cpu_view(p: &pb::Profile) -> CpuView {
    let cpu = p
        .sample_type
        .iter()
        .position(|t| s(p, t.r#type) == "cpu")
        .unwrap();
    let names = location_names(p);
    let mut view = CpuView {
        cum: HashMap::new(),
        edges: HashMap::new(),
        stacks: Vec::new(),
    };
    for sample in &p.sample {
        let v = sample.value[cpu];
        if v == 0 {
            continue;
        }
        let frames: Vec<String> = sample
            .location_id
            .iter()
            .flat_map(|id| names[id].iter().cloned())
            .collect();
        let seen: BTreeSet<&String> = frames.iter().collect();
        for f in seen {
            *view.cum.entry(f.clone()).or_default() += v as f64 / NS;
        }
        let pairs: BTreeSet<(String, String)> = frames
            .windows(2)
            .map(|w| (w[1].clone(), w[0].clone()))
            .collect();
        for e in pairs {
            *view.edges.entry(e).or_default() += v as f64 / NS;
        }
        view.stacks.push((frames, v));
    }
    view
}

#[test]
fn inclusive_time_of_every_function_outside_cycles_equals_gprofs_self_plus_children() {
    let Some(run) = run() else { return };
    let cum = cpu_view(&run.pprof).cum;
    let mut checked = 0;
    let mut bad = Vec::new();
    for (name, e) in &run.graph {
        if e.in_cycle {
            continue;
        }
        let want = e.self_s + e.children_s;
        let got = cum.get(name).copied().unwrap_or(0.0);
        if !close(got, want) {
            bad.push(format!("{name}: profconv {got:.3} s, gprof {want:.2} s"));
        }
        checked += 1;
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} functions differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
    let busy = run.graph.values().filter(|e| e.children_s >= 0.05).count();
    assert!(
        busy >= 20,
        "only {busy} functions with children time: a weak test"
    );
}

#[test]
fn every_arc_outside_cycles_carries_gprofs_propagated_time() {
    let Some(run) = run() else { return };
    let edges = cpu_view(&run.pprof).edges;
    let mut checked = 0;
    let mut bad = Vec::new();
    for (child, e) in &run.graph {
        if e.in_cycle {
            continue;
        }
        for (parent, want, parent_cycle) in &e.parents {
            if *parent_cycle || parent == child {
                continue;
            }
            let got = edges
                .get(&(parent.clone(), child.clone()))
                .copied()
                .unwrap_or(0.0);
            if !close(got, *want) {
                bad.push(format!(
                    "{parent} → {child}: profconv {got:.3} s, gprof {want:.2} s"
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "only {checked} arcs checked");
    assert!(
        bad.is_empty(),
        "{} of {checked} arcs differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn all_time_is_on_stacks_rooted_where_gprof_roots_the_call_graph() {
    let Some(run) = run() else { return };
    let mut roots: BTreeSet<&String> = run
        .graph
        .iter()
        .filter(|(name, e)| e.parents.iter().all(|(p, _, _)| p == *name))
        .map(|(name, _)| name)
        .collect();
    assert!(roots.contains(&"main".to_owned()), "main is a root");
    let CpuView { cum, stacks, .. } = cpu_view(&run.pprof);
    // What gprof's arithmetic credits to no function (part of a bin; in
    // its report nowhere) is a frame of its own, alone on its stack
    // (docs/formats/gprof.md §3.2): a root outside gprof's graph.
    let uncredited = "[uncredited by gprof]".to_owned();
    for (frames, ns) in &stacks {
        if frames.contains(&uncredited) {
            assert_eq!(frames.len(), 1, "{ns} ns uncredited under {frames:?}");
        }
    }
    roots.insert(&uncredited);
    let total: i64 = stacks.iter().map(|s| s.1).sum();
    let (rooted, mid_graph): (Vec<_>, Vec<_>) = stacks
        .iter()
        .partition(|(frames, _)| roots.contains(frames.last().unwrap()));
    let rooted: i64 = rooted.iter().map(|s| s.1).sum();
    let mid_graph: Vec<String> = mid_graph
        .iter()
        .take(10)
        .map(|(frames, ns)| format!("{ns} ns: {}", frames.join(" <- ")))
        .collect();
    assert_eq!(
        rooted,
        total,
        "time on stacks that start mid-graph:\n{}",
        mid_graph.join("\n")
    );
    // main holds (nearly) everything: what is not under main is time in
    // functions gprof shows as spontaneous roots of their own.
    let main = &run.graph["main"];
    assert!(close(cum["main"], main.self_s + main.children_s));
    assert!(
        cum["main"] >= 0.99 * total as f64 / NS,
        "main has {} s",
        cum["main"]
    );
}

#[test]
fn go_tool_pprof_shows_mains_inclusive_time_as_gprof_does() {
    let Some(run) = run() else { return };
    let Some(top) = go_pprof(&[
        "-top",
        "-cum",
        "-unit=ms",
        "-nodecount=5",
        run.pb_path.to_str().unwrap(),
    ]) else {
        return;
    };
    let row = top
        .lines()
        .find(|l| l.split_whitespace().last() == Some("main"))
        .unwrap_or_else(|| panic!("no main in go tool pprof -top -cum:\n{top}"));
    let cum_ms: f64 = row
        .split_whitespace()
        .nth(3)
        .unwrap()
        .trim_end_matches("ms")
        .parse()
        .unwrap();
    let main = &run.graph["main"];
    assert!(
        close(cum_ms / 1e3, main.self_s + main.children_s),
        "go tool pprof: main {cum_ms} ms; gprof {} s\n{top}",
        main.self_s + main.children_s
    );
}

#[test]
fn speedscope_samples_come_in_flame_chart_order() {
    let Some(run) = run() else { return };
    for profile in run.speedscope["profiles"].as_array().unwrap() {
        let samples: Vec<Vec<u64>> = profile["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_u64().unwrap())
                    .collect()
            })
            .collect();
        let depth = samples.iter().map(Vec::len).max().unwrap_or(0);
        if profile["name"].as_str().unwrap().starts_with("cpu") {
            assert!(depth > 10, "a deep profile: {depth} frames at most");
        }
        for d in 1..=depth {
            // Each prefix of length d, once it ends, never comes back.
            let mut done: BTreeSet<&[u64]> = BTreeSet::new();
            let mut current: Option<&[u64]> = None;
            for s in samples.iter().filter(|s| s.len() >= d) {
                let prefix = &s[..d];
                if current != Some(prefix) {
                    assert!(
                        !done.contains(prefix),
                        "{}: prefix {prefix:?} comes back after others",
                        profile["name"]
                    );
                    if let Some(c) = current {
                        done.insert(c);
                    }
                    current = Some(prefix);
                }
            }
        }
    }
}

#[test]
fn callgrind_annotate_shows_mains_inclusive_time_as_gprof_does() {
    let Some(run) = run() else { return };
    let dir = run.pb_path.parent().unwrap();
    let cg = dir.join("callgrind.out.prog");
    let (g, e) = (dir.join("gmon.out"), dir.join("prog"));
    profconv_ok(&[
        g.to_str().unwrap(),
        "--binary",
        e.to_str().unwrap(),
        "-o",
        cg.to_str().unwrap(),
    ]);
    let Some((total, inclusive)) = annotate(cg.to_str().unwrap(), "cpu", true) else {
        return;
    };
    let main_ns = inclusive["main"];
    assert!(
        main_ns as f64 >= 0.99 * total as f64 && main_ns <= total,
        "callgrind_annotate: main {main_ns} of {total} ns"
    );
    let main = &run.graph["main"];
    assert!(
        close(main_ns as f64 / 1e9, main.self_s + main.children_s),
        "callgrind_annotate: main {main_ns} ns; gprof {} s",
        main.self_s + main.children_s
    );
    // Self time per function as in the pprof output.
    let Some((_, own)) = annotate(cg.to_str().unwrap(), "cpu", false) else {
        return;
    };
    assert_eq!(own, pprof_flat(&run.pprof, "cpu"));
}
