//! Hostile values (issue 41): sums that 64 bits cannot hold, strings given
//! on the command line with control characters, one C++ name of 850 KB
//! named thousands of times, and a gmon.out whose histogram is large. The
//! rules checked: a sum never wraps (it is capped and said, once, on
//! standard error and in the output), every output stays valid, a name is
//! demangled and kept once, and memory follows the input's size.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::gen::mpatrol;
use common::*;

fn st(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An mpatrol file of four allocations of 2^63−1 bytes each, from four
/// distinct call stacks `main → fN`: 4 × (2^63−1) bytes in all.
fn four_huge_allocations(dir: &Path) -> PathBuf {
    let names = ["main", "f1", "f2", "f3", "f4"];
    let funcs = names
        .iter()
        .enumerate()
        .map(|(i, &name)| mpatrol::Func {
            name: Some(name),
            start: 0x1000 * (i as u64 + 1),
        })
        .collect();
    let allocs = (1..=4)
        .map(|f| mpatrol::Alloc {
            frames: vec![(f, 0x10), (0, 0x20)],
            classes: [[0; 4], [0; 4], [0; 4], [1, i64::MAX as u64, 0, 0]],
        })
        .collect();
    let program = mpatrol::Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 0,
    };
    let path = dir.join("huge.mpatrol");
    std::fs::write(&path, mpatrol::encode(&program.raw(8), 8, false)).unwrap();
    path
}

/// 4 × (2^63−1), as the warning prints it.
const FOUR_MAX: &str = "36893488147419103228";

/// The count a flamegraph frame's tooltip shows (`name (1,234 bytes, …)`).
fn tooltip_count(svg: &str, name: &str) -> u128 {
    let start = svg
        .find(&format!("<title>{name} ("))
        .unwrap_or_else(|| panic!("no frame {name} in the SVG"));
    let rest = &svg[start + name.len() + 9..];
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    digits.parse().unwrap()
}

#[test]
fn values_past_i64_are_capped_and_said_in_every_output_never_wrapped() {
    let dir = tempdir();
    let input = four_huge_allocations(dir.path());
    let outs = [
        "huge.pb.gz",
        "huge.folded",
        "huge.svg",
        "huge.speedscope.json",
        "callgrind.out.huge",
    ]
    .map(|n| dir.path().join(n));
    let mut args = vec![st(&input), "--sample-type", "alloc_space"];
    for o in &outs {
        args.extend(["-o", st(o)]);
    }
    let out = profconv_ok(&args);
    let err = stderr_of(&out);
    // alloc_space and inuse_space (nothing was freed), each said once.
    for kind in ["alloc_space", "inuse_space"] {
        let said: Vec<&str> = err.lines().filter(|l| l.contains(kind)).collect();
        assert_eq!(said.len(), 1, "one warning for {kind}:\n{err}");
        assert!(
            said[0].starts_with(&format!(
                "profconv: warning: {kind} (bytes): values add up to {FOUR_MAX}"
            )) && said[0].contains("capped"),
            "{err}"
        );
    }

    let p = decode_pprof(&outs[0]);
    let comments: Vec<&str> = p.comment.iter().map(|&i| s(&p, i)).collect();
    assert!(
        comments.iter().any(|c| c.contains(FOUR_MAX)),
        "the pprof output carries the warning: {comments:?}"
    );
    let flat = pprof_flat(&p, "alloc_space");
    assert_eq!(flat.len(), 4, "{flat:?}");
    assert!(flat.values().all(|&v| v == i64::MAX), "{flat:?}");

    // Folded: one line per stack, each count exact (none had to be capped).
    let folded = std::fs::read_to_string(&outs[1]).unwrap();
    let lines: Vec<&str> = folded.lines().collect();
    assert_eq!(lines.len(), 4, "{folded}");
    assert!(lines.iter().all(|l| l.ends_with(&format!(" {}", i64::MAX))));

    // inferno adds counts in a u64: 4 × (2^63−1) would wrap to a small
    // number. Each function shows its own 2^63 bytes (to rounding), and the
    // whole graph at least as much as any one of them.
    let svg = std::fs::read_to_string(&outs[2]).unwrap();
    check_svg(&outs[2], &["f1", "f4"]);
    for f in ["f1", "f2", "f3", "f4"] {
        let shown = tooltip_count(&svg, f);
        let exact = i64::MAX as u128;
        assert!(shown.abs_diff(exact) < exact / 1000, "{f}: {shown}");
    }
    assert!(tooltip_count(&svg, "main") >= u64::MAX as u128, "{svg}");

    // speedscope's end value is the exact sum: JSON numbers have no width.
    let json = std::fs::read_to_string(&outs[3]).unwrap();
    assert!(json.contains(&format!("\"endValue\":{FOUR_MAX}")), "{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    validate_speedscope(&doc);
}

#[test]
fn a_pprof_only_conversion_says_a_total_past_i64_too() {
    let dir = tempdir();
    let input = four_huge_allocations(dir.path());
    let output = dir.path().join("huge.pb.gz");
    let out = profconv_ok(&[st(&input), "-o", st(&output)]);
    let err = stderr_of(&out);
    assert_eq!(
        err.matches("alloc_space (bytes): values add up to").count(),
        1,
        "{err}"
    );
    let p = decode_pprof(&output);
    let comments: Vec<&str> = p.comment.iter().map(|&i| s(&p, i)).collect();
    let said = comments.iter().filter(|c| c.contains(FOUR_MAX));
    assert_eq!(said.count(), 2, "alloc_space and inuse_space: {comments:?}");
}

#[test]
fn ordinary_values_bring_no_warning_about_totals() {
    let dir = tempdir();
    let input = dir.path().join("example.mpatrol");
    std::fs::write(
        &input,
        mpatrol::encode(&mpatrol::example().raw(8), 8, false),
    )
    .unwrap();
    let output = dir.path().join("x.svg");
    let out = profconv_ok(&[st(&input), "-o", st(&output)]);
    assert!(!stderr_of(&out).contains("2^63"), "{}", stderr_of(&out));
}

#[test]
fn command_line_strings_with_control_characters_keep_the_svg_valid_xml() {
    let dir = tempdir();
    let output = dir.path().join("x.svg");
    let hostile = "by\u{1b}[31mte\u{7}s <&> \u{fffe}";
    profconv_ok(&[
        st(&fixture("gprof/callgraph-nopie.gmon")),
        "--binary",
        st(&fixture("gprof/callgraph-nopie")),
        "-o",
        st(&output),
        "--count-name",
        hostile,
        "--title",
        hostile,
        "--subtitle",
        hostile,
    ]);
    check_svg(&output, &["main"]);
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(!svg.contains('\u{1b}') && !svg.contains('\u{7}'), "{svg}");
    assert!(
        svg.contains("by\\x1b[31mte\\x07s &lt;&amp;&gt; \\u{fffe}"),
        "the count name, escaped as names are"
    );
    let titles = svg.matches("by\\x1b[31mte\\x07s").count();
    assert!(titles > 3, "title, subtitle and every tooltip: {titles}");
}
