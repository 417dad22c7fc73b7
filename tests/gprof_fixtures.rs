//! Real gmon.out files from `gcc -pg` (tests/fixtures/gprof, made by
//! regenerate.sh) converted and checked against what GNU gprof printed for
//! the same files, and against the real consumers of every output.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::gprof_report::*;
use common::*;

struct Case {
    binary: &'static str,
    gmons: &'static [&'static str],
    expected: &'static str,
}

const CASES: &[Case] = &[
    Case {
        binary: "callgraph-nopie",
        gmons: &["callgraph-nopie.gmon"],
        expected: "callgraph-nopie",
    },
    Case {
        binary: "callgraph-pie",
        gmons: &["callgraph-pie.gmon"],
        expected: "callgraph-pie",
    },
    Case {
        binary: "callgraph-m32",
        gmons: &["callgraph-m32.gmon"],
        expected: "callgraph-m32",
    },
    Case {
        binary: "recursion",
        gmons: &["recursion.gmon"],
        expected: "recursion",
    },
    Case {
        binary: "inlined",
        gmons: &["inlined.gmon"],
        expected: "inlined",
    },
    Case {
        binary: "cplusplus",
        gmons: &["cplusplus.gmon"],
        expected: "cplusplus",
    },
    Case {
        binary: "callgraph-nopie",
        gmons: &["callgraph-sum.gmon"],
        expected: "callgraph-sum",
    },
    Case {
        binary: "callgraph-nopie.stripped-debug",
        gmons: &["callgraph-nopie.gmon"],
        expected: "callgraph-nopie.stripped-debug",
    },
];

fn convert_case(case: &Case, dir: &Path, name: &str, extra: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let mut args: Vec<String> = case
        .gmons
        .iter()
        .map(|g| fixture(&format!("gprof/{g}")).display().to_string())
        .collect();
    args.push("--binary".into());
    args.push(
        fixture(&format!("gprof/{}", case.binary))
            .display()
            .to_string(),
    );
    args.push("-o".into());
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    profconv_ok(&refs);
    out
}

fn expected_flat(name: &str) -> BTreeMap<String, FlatRow> {
    parse_flat(&std::fs::read_to_string(fixture(&format!("gprof/{name}.flat.txt"))).unwrap())
}

fn assert_matches_gprof_flat(p: &pb::Profile, flat: &BTreeMap<String, FlatRow>, what: &str) {
    let (self_s, calls) = flat_from_pprof(p);
    assert!(
        !flat.is_empty(),
        "{what}: no rows in the expected flat profile"
    );
    for (name, row) in flat {
        let ours = self_s.get(name).copied().unwrap_or(0.0);
        // gprof prints seconds with two decimals.
        assert!(
            (ours - row.self_seconds).abs() <= 0.005 + 1e-9,
            "{what}: {name}: self {ours:.4}s, gprof says {:.2}s",
            row.self_seconds
        );
        assert_eq!(calls.get(name).copied(), row.calls, "{what}: {name}: calls");
    }
    // Nothing gprof leaves out carries time (gprof omits zero rows only).
    for (name, secs) in &self_s {
        if !flat.contains_key(name) {
            assert!(
                *secs < 0.005,
                "{what}: {name} has {secs}s but gprof does not list it"
            );
        }
    }
}

#[test]
fn self_time_and_calls_equal_gprof_flat_profile() {
    let dir = tempdir();
    for case in CASES {
        let out = convert_case(case, dir.path(), &format!("{}.pb.gz", case.expected), &[]);
        let p = decode_pprof(&out);
        check_pprof_invariants(&p);
        assert_matches_gprof_flat(&p, &expected_flat(case.expected), case.expected);
    }
}

#[test]
fn synthesized_inclusive_time_equals_gprof_self_plus_children() {
    let dir = tempdir();
    for case in CASES {
        let graph = parse_graph(
            &std::fs::read_to_string(fixture(&format!("gprof/{}.graph.txt", case.expected)))
                .unwrap(),
        );
        let out = convert_case(case, dir.path(), &format!("{}.pb.gz", case.expected), &[]);
        let p = decode_pprof(&out);
        let inclusive = inclusive_from_pprof(&p);
        let cycle_members: BTreeSet<&str> = ["is_even", "is_odd"].into_iter().collect();
        for (name, (self_s, children)) in &graph {
            if cycle_members.contains(name.as_str()) {
                continue;
            }
            let ours = inclusive.get(name).copied().unwrap_or(0.0);
            let theirs = self_s + children;
            assert!(
                (ours - theirs).abs() <= 0.011,
                "{}: {name}: inclusive {ours:.4}s, gprof self+children {theirs:.2}s",
                case.expected
            );
        }
    }
}

#[test]
fn several_gmon_files_are_summed_like_gprof() {
    let dir = tempdir();
    let case = Case {
        binary: "callgraph-nopie",
        gmons: &["callgraph-run1.gmon", "callgraph-run2.gmon"],
        expected: "callgraph-run1+2",
    };
    let out = convert_case(&case, dir.path(), "sum.pb.gz", &[]);
    let p = decode_pprof(&out);
    assert_matches_gprof_flat(&p, &expected_flat("callgraph-run1+2"), "run1+run2");
    // The same totals as the file gprof -s wrote.
    let sum = Case {
        binary: "callgraph-nopie",
        gmons: &["callgraph-sum.gmon"],
        expected: "callgraph-sum",
    };
    let q = decode_pprof(&convert_case(&sum, dir.path(), "gprof-s.pb.gz", &[]));
    let (a, _) = flat_from_pprof(&p);
    let (b, _) = flat_from_pprof(&q);
    for (name, secs) in &a {
        assert!(
            (secs - b.get(name).copied().unwrap_or(0.0)).abs() < 0.0101,
            "{name}"
        );
    }
}

#[test]
fn expected_outputs_match_the_installed_gprof() {
    let gprof = Command::new("gprof").arg("--version").output();
    if gprof.is_err() {
        assert!(
            !in_ci(),
            "gprof is not installed: .ci/run must install binutils"
        );
        crate::skip_note!("skipping live gprof check: gprof not installed");
        return;
    }
    for case in CASES {
        let mut cmd = Command::new("gprof");
        cmd.arg("-b")
            .arg("-p")
            .arg(fixture(&format!("gprof/{}", case.binary)));
        for g in case.gmons {
            cmd.arg(fixture(&format!("gprof/{g}")));
        }
        let out = cmd
            .env("LC_ALL", "C")
            .current_dir(std::env::temp_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let live = parse_flat(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(
            live,
            expected_flat(case.expected),
            "{}: live gprof differs from the committed output",
            case.expected
        );
    }
}

#[test]
fn go_tool_pprof_accepts_the_output_and_shows_gprof_functions() {
    let dir = tempdir();
    for case in CASES {
        let out = convert_case(case, dir.path(), &format!("{}.pb.gz", case.expected), &[]);
        let raw = dir.path().join(format!("{}.pb", case.expected));
        let raw = convert_case(
            case,
            dir.path(),
            raw.file_name().unwrap().to_str().unwrap(),
            &[],
        );
        let path = out.to_str().unwrap();
        let Some(raw_dump) = go_pprof(&["-raw", path]) else {
            return;
        };
        assert!(raw_dump.contains("cpu/nanoseconds"), "{raw_dump}");
        let _ = go_pprof(&["-raw", raw.to_str().unwrap()]);
        let top = pprof_top(&[
            "-top",
            "-nodecount=1000",
            "-unit=ms",
            "-sample_index=cpu",
            path,
        ])
        .unwrap();
        let calls = pprof_top(&[
            "-top",
            "-nodecount=1000",
            "-nodefraction=0",
            "-sample_index=calls",
            path,
        ])
        .unwrap();
        let flat = expected_flat(case.expected);
        for (name, row) in &flat {
            if row.self_seconds >= 0.01 {
                let ms = top
                    .get(name)
                    .copied()
                    .unwrap_or_else(|| panic!("{}: {name} not in -top:\n{top:?}", case.expected));
                assert!(
                    (ms / 1000.0 - row.self_seconds).abs() <= 0.0051,
                    "{}: {name}: {ms}ms",
                    case.expected
                );
            }
            if row.calls.is_some() {
                assert_eq!(
                    calls.get(name).map(|v| *v as u64),
                    row.calls,
                    "{}: {name} calls in -top",
                    case.expected
                );
            }
        }
    }
}

#[test]
fn speedscope_svg_and_folded_outputs_agree_with_pprof() {
    let dir = tempdir();
    for case in CASES.iter().take(4) {
        let p = decode_pprof(&convert_case(case, dir.path(), "x.pb.gz", &[]));
        let cpu = type_index(&p, "cpu");
        let total: i64 = p.sample.iter().map(|s| s.value[cpu]).sum();

        let json = convert_case(case, dir.path(), "x.speedscope.json", &[]);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        validate_speedscope(&doc);
        let cpu_profile = doc["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == "cpu (nanoseconds)")
            .unwrap();
        assert_eq!(cpu_profile["unit"], "nanoseconds");
        assert_eq!(cpu_profile["endValue"].as_i64().unwrap(), total);
        let calls_profile = doc["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == "calls (count)")
            .unwrap();
        assert_eq!(calls_profile["unit"], "none");

        let folded_path = convert_case(case, dir.path(), "x.folded", &[]);
        let folded = parse_folded(&std::fs::read_to_string(&folded_path).unwrap());
        assert_eq!(folded.values().sum::<i64>(), total, "folded cpu total");
        for stack in folded.keys() {
            assert!(
                stack.starts_with("main"),
                "{}: root first: {stack}",
                case.expected
            );
        }
        // Round trip: the folded leaves equal the pprof flat profile.
        let flat = folded_flat(&folded);
        let (self_s, _) = flat_from_pprof(&p);
        for (name, secs) in self_s {
            let ns = flat.get(&name).copied().unwrap_or(0);
            assert!((ns as f64 / 1e9 - secs).abs() < 1e-6, "{name}");
        }
        let calls_folded = convert_case(case, dir.path(), "calls.txt", &["--sample-type", "calls"]);
        let calls = parse_folded(&std::fs::read_to_string(calls_folded).unwrap());
        let calls_total: i64 = p
            .sample
            .iter()
            .map(|s| s.value[type_index(&p, "calls")])
            .sum();
        assert_eq!(calls.values().sum::<i64>(), calls_total);

        let svg = convert_case(case, dir.path(), "x.svg", &[]);
        let expected = expected_flat(case.expected);
        let names: Vec<&str> = expected
            .iter()
            .filter(|(_, r)| r.self_seconds >= 0.1)
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .into_iter()
            .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        check_svg(&svg, &names);
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains(&format!("{} — cpu (nanoseconds)", case.gmons[0])),
            "title names input and type"
        );
    }
}

#[test]
fn flat_stacks_option_gives_one_frame_per_sample() {
    let dir = tempdir();
    let out = convert_case(
        &CASES[0],
        dir.path(),
        "flat.pb.gz",
        &["--gprof-stacks", "flat"],
    );
    let p = decode_pprof(&out);
    let cpu = type_index(&p, "cpu");
    assert!(p
        .sample
        .iter()
        .filter(|s| s.value[cpu] > 0)
        .all(|s| s.location_id.len() == 1));
    assert!(p
        .comment
        .iter()
        .any(|&c| s(&p, c).contains("--gprof-stacks=flat")));
    assert_matches_gprof_flat(&p, &expected_flat("callgraph-nopie"), "flat stacks");
    let synthesized = decode_pprof(&convert_case(&CASES[0], dir.path(), "syn.pb.gz", &[]));
    assert!(synthesized
        .comment
        .iter()
        .any(|&c| s(&synthesized, c).contains("synthesized")));
    assert!(synthesized
        .sample
        .iter()
        .any(|s| s.value[cpu] > 0 && s.location_id.len() >= 3));
}

#[test]
fn dwarf_gives_files_and_lines_and_inlined_frames_on_request() {
    let dir = tempdir();
    let inner_names = |p: &pb::Profile| -> BTreeSet<String> {
        p.location
            .iter()
            .filter(|l| l.line.len() > 1)
            .map(|l| {
                let f = p
                    .function
                    .iter()
                    .find(|f| f.id == l.line[0].function_id)
                    .unwrap();
                s(p, f.name).to_owned()
            })
            .collect()
    };
    // By default each address has one frame: the function gprof credits,
    // with the line table's file and line.
    let p = decode_pprof(&convert_case(&CASES[4], dir.path(), "one.pb.gz", &[]));
    let m = &p.mapping[0];
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers && !m.has_inline_frames);
    assert!(inner_names(&p).is_empty(), "no inlined frames by default");
    assert_matches_gprof_flat(&p, &expected_flat(CASES[4].expected), "default frames");
    let p = decode_pprof(&convert_case(
        &CASES[4],
        dir.path(),
        "inl.pb.gz",
        &["--inline-frames"],
    ));
    let m = &p.mapping[0];
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers && m.has_inline_frames);
    let inlined = inner_names(&p);
    assert!(
        inlined.iter().any(|n| n.ends_with("_step")),
        "inlined helpers appear as inner frames: {inlined:?}"
    );
    assert!(p
        .function
        .iter()
        .any(|f| s(&p, f.filename).ends_with("inlined.c")));
    assert!(p.location.iter().flat_map(|l| &l.line).any(|l| l.line > 0));
}

#[test]
fn separate_debug_file_is_found_through_debuglink() {
    let dir = tempdir();
    let p = decode_pprof(&convert_case(&CASES[7], dir.path(), "dbg.pb.gz", &[]));
    assert!(
        p.mapping[0].has_line_numbers,
        "DWARF from callgraph-nopie.debug"
    );
    assert!(p
        .function
        .iter()
        .any(|f| s(&p, f.filename).ends_with("callgraph.c")));
}

#[test]
fn binary_without_symbols_is_refused_as_gprof_does_and_converts_on_request() {
    let dir = tempdir();
    let case = Case {
        binary: "callgraph-nopie.nosyms",
        gmons: &["callgraph-nopie.gmon"],
        expected: "",
    };
    // gprof: "file `callgraph-nopie.nosyms' has no symbols".
    let (gmon, binary) = (
        fixture("gprof/callgraph-nopie.gmon"),
        fixture("gprof/callgraph-nopie.nosyms"),
    );
    let refused_out = dir.path().join("refused.pb.gz");
    let out = profconv(&[
        gmon.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        refused_out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("callgraph-nopie.nosyms") && err.contains("has no symbols"),
        "{err}"
    );
    assert!(!refused_out.exists());
    let skip = ["--skip-binary-check"];
    let p = decode_pprof(&convert_case(&case, dir.path(), "nosyms.pb.gz", &skip));
    check_pprof_invariants(&p);
    assert!(!p.mapping[0].has_functions);
    assert!(p.location.iter().all(|l| l.line.is_empty()));
    // Later symbolization by pprof with the real binary still names the functions.
    let path = dir.path().join("nosyms.pb.gz");
    let bin = fixture("gprof/callgraph-nopie");
    if let Some(top) = pprof_top(&["-top", bin.to_str().unwrap(), path.to_str().unwrap()]) {
        assert!(top.contains_key("leaf_heavy"), "{top:?}");
    }
}

#[test]
fn without_binary_pprof_can_symbolize_later_for_pie_and_non_pie() {
    let dir = tempdir();
    for name in ["callgraph-nopie", "callgraph-pie"] {
        let out = dir.path().join(format!("{name}.pb.gz"));
        let gmon = fixture(&format!("gprof/{name}.gmon"));
        profconv_ok(&[gmon.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let bin = fixture(&format!("gprof/{name}"));
        let Some(top) = pprof_top(&[
            "-top",
            "-unit=ms",
            bin.to_str().unwrap(),
            out.to_str().unwrap(),
        ]) else {
            return;
        };
        assert!(
            top.get("leaf_heavy").copied().unwrap_or(0.0) > 100.0,
            "{name}: {top:?}"
        );
    }
}

#[test]
fn cplusplus_names_are_demangled() {
    let dir = tempdir();
    let p = decode_pprof(&convert_case(&CASES[5], dir.path(), "cc.pb.gz", &[]));
    let names: BTreeSet<&str> = p.function.iter().map(|f| s(&p, f.name)).collect();
    assert!(names.contains("geom::Shape::area(int) const"), "{names:?}");
    let systems: BTreeSet<&str> = p.function.iter().map(|f| s(&p, f.system_name)).collect();
    assert!(
        systems.iter().any(|n| n.starts_with("_ZN")),
        "mangled names kept as system names"
    );
}

#[test]
fn info_reports_the_real_fixture() {
    let gmon = fixture("gprof/callgraph-m32.gmon");
    let out = profconv_ok(&["info", gmon.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("pointer size:  4 bytes"), "{text}");
    assert!(text.contains("little-endian"), "{text}");
}

#[test]
fn several_outputs_are_written_from_one_reading() {
    let dir = tempdir();
    let pb = dir.path().join("out.pb.gz");
    let svg = dir.path().join("flame.svg");
    let gmon = fixture("gprof/callgraph-nopie.gmon");
    let bin = fixture("gprof/callgraph-nopie");
    profconv_ok(&[
        gmon.to_str().unwrap(),
        "--binary",
        bin.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    check_pprof_invariants(&decode_pprof(&pb));
    check_svg(&svg, &["leaf_heavy", "main"]);
}

#[test]
fn standard_output_needs_an_explicit_format() {
    let gmon = fixture("gprof/callgraph-nopie.gmon");
    let r = profconv(&[gmon.to_str().unwrap(), "-o", "-"]);
    assert_eq!(r.status.code(), Some(2));
    let r = profconv_ok(&[
        gmon.to_str().unwrap(),
        "-o",
        "-",
        "--to",
        "folded",
        "--sample-type",
        "samples",
    ]);
    let folded = parse_folded(&String::from_utf8(r.stdout).unwrap());
    let ticks: i64 = folded.values().sum();
    assert!(ticks > 100, "the fixture has over 100 ticks: {ticks}");
}

#[test]
fn separate_debug_file_is_found_by_build_id() {
    // A copy of the stripped binary without its debuglink, with the debug file
    // under .build-id/xx/rest.debug next to it: only the build id leads there.
    let dir = tempdir();
    let bin = dir.path().join("prog");
    let status = Command::new("objcopy")
        .arg("--remove-section=.gnu_debuglink")
        .arg(fixture("gprof/callgraph-nopie.stripped-debug"))
        .arg(&bin)
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => {
            assert!(!in_ci(), "objcopy (binutils) is needed");
            return;
        }
    }
    let gmon = fixture("gprof/callgraph-nopie.gmon");
    // Where leaf_heavy's source file is, and whether some line is known, as
    // the conversion with the copy found them (on a thread of its own: a
    // thread keeps the binaries it opened for the next conversion).
    let leaf_source = || {
        let options = profconv::ReadOptions {
            binary: Some(bin.clone()),
            ..Default::default()
        };
        let read = || profconv::read(std::slice::from_ref(&gmon), &options).unwrap();
        let p = std::thread::scope(|s| s.spawn(read).join().unwrap());
        let leaf = p
            .functions()
            .iter()
            .find(|f| p.str(f.name) == "leaf_heavy")
            .unwrap();
        let line = p
            .locations()
            .iter()
            .flat_map(|l| &l.lines)
            .any(|l| l.line > 0);
        (p.str(leaf.filename).to_owned(), line)
    };
    assert_eq!(
        leaf_source(),
        (String::new(), false),
        "no DWARF before the debug file is in place"
    );
    let data = std::fs::read(&bin).unwrap();
    let build_id = object::Object::build_id(&object::File::parse(&*data).unwrap())
        .unwrap()
        .expect("the copy has a build id");
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let (head, rest) = hex.split_at(2);
    let debug_dir = dir.path().join(".build-id").join(head);
    std::fs::create_dir_all(&debug_dir).unwrap();
    std::fs::copy(
        fixture("gprof/callgraph-nopie.debug"),
        debug_dir.join(format!("{rest}.debug")),
    )
    .unwrap();
    let (file, line) = leaf_source();
    assert!(
        file.ends_with("callgraph.c") && line,
        "DWARF found by build id: {file:?}"
    );
}
