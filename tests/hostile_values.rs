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
    mpatrol_file(&dir.join("huge.mpatrol"), funcs, allocs, 8)
}

/// Writes the mpatrol file of a program of `funcs` and `allocs` (no size
/// bins) in words of `word` bytes to `path`.
fn mpatrol_file(
    path: &Path,
    funcs: Vec<mpatrol::Func>,
    allocs: Vec<mpatrol::Alloc>,
    word: usize,
) -> PathBuf {
    let program = mpatrol::Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 0,
    };
    std::fs::write(path, mpatrol::encode(&program.raw(word), word, false)).unwrap();
    path.to_path_buf()
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

/// A C++ name of 201 bytes that demangles to 851 895: each of 16 template
/// arguments `B<X, X>` names the one before it twice by substitution, so
/// the text doubles at each (what binutils' `c++filt` prints too).
fn doubling_cxx_name() -> String {
    fn substitution(i: usize) -> String {
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        match i {
            0 => "S_".to_owned(),
            _ => {
                let (mut n, mut digits) = (i - 1, Vec::new());
                loop {
                    digits.insert(0, DIGITS[n % 36]);
                    n /= 36;
                    if n == 0 {
                        break;
                    }
                }
                format!("S{}_", String::from_utf8(digits).unwrap())
            }
        }
    }
    // Substitutions: 0 = A, 1 = the template B, 2 = B<A, A>, then one more
    // per argument.
    let mut name = "_Z1f1A1BIS_S_E".to_owned();
    for previous in 2..17 {
        let s = substitution(previous);
        name.push_str(&format!("S0_I{s}{s}E"));
    }
    name
}

/// An mpatrol file of `sites` call sites in one function named `name`,
/// each allocating from its own address, called from `main`.
fn many_sites_of_one_name(dir: &Path, name: &str, sites: u64) -> PathBuf {
    let funcs = vec![
        mpatrol::Func {
            name: Some("main"),
            start: 0x1000,
        },
        mpatrol::Func {
            name: Some(Box::leak(name.to_owned().into_boxed_str())),
            start: 0x10_0000,
        },
    ];
    let allocs = (0..sites)
        .map(|i| mpatrol::Alloc {
            frames: vec![(1, 4 * i), (0, 0x10)],
            classes: [[1, 16, 0, 0], [0; 4], [0; 4], [0; 4]],
        })
        .collect();
    mpatrol_file(&dir.join("sites.mpatrol"), funcs, allocs, 4)
}

/// Runs profconv under `/usr/bin/time`: its output, seconds and peak RSS in
/// KiB. `None` (outside CI) when `/usr/bin/time` is missing.
fn timed(args: &[&str]) -> Option<(std::process::Output, f64, u64)> {
    let dir = tempdir();
    let report = dir.path().join("time");
    let run = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(&report)
        .args(["-f", "%e %M"])
        .arg(profconv_bin())
        .args(args)
        .output();
    let Ok(out) = run else {
        assert!(!in_ci(), "/usr/bin/time is needed for the resource checks");
        skip_note!("skipping: /usr/bin/time is not installed");
        return None;
    };
    let text = std::fs::read_to_string(&report).unwrap();
    let last = text.lines().last().unwrap_or_default();
    let (secs, kib) = last.split_once(' ').unwrap_or_else(|| panic!("{text}"));
    Some((out, secs.parse().unwrap(), kib.parse().unwrap()))
}

/// Every output format of `input`, written in one run into `dir`.
fn every_output(dir: &Path, stem: &str) -> Vec<PathBuf> {
    ["pb.gz", "folded", "svg", "speedscope.json"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .chain([dir.join(format!("callgrind.out.{stem}"))])
        .collect()
}

#[test]
fn a_long_cxx_name_named_by_3000_call_sites_is_demangled_and_kept_once() {
    let name = doubling_cxx_name();
    let demangled = profconv::symbolize::demangle(&name);
    assert_eq!(demangled.len(), 851_895, "{}", &demangled[..80]);
    let dir = tempdir();
    let input = many_sites_of_one_name(dir.path(), &name, 3000);
    let outs = every_output(dir.path(), "sites");
    let mut args = vec![st(&input)];
    for o in &outs {
        args.extend(["-o", st(o)]);
    }
    let Some((out, secs, kib)) = timed(&args) else {
        return;
    };
    assert!(out.status.success(), "{}", stderr_of(&out));
    // Once per site, it took 20 s (release) and every output held the
    // name per site; once, it is one name's time and memory in each.
    assert!(secs < 10.0, "{secs} s");
    assert!(kib < 150 << 10, "{kib} KiB");
    let p = decode_pprof(&outs[0]);
    let long: Vec<&String> = p.string_table.iter().filter(|s| s.len() > 1000).collect();
    assert_eq!(long.len(), 1, "the pprof string table holds the name once");
    let folded = std::fs::read_to_string(&outs[1]).unwrap();
    assert_eq!(folded.lines().count(), 1, "one stack: main;NAME");
    for o in &outs {
        let size = std::fs::metadata(o).unwrap().len();
        assert!(size < 4 * 851_895, "{}: {size} bytes", o.display());
    }
}

/// An executable whose symbol table has `copies` local functions, each at
/// its own address, all named `name` (a static function of as many object
/// files). `None` (outside CI) when gcc is missing.
fn executable_with_symbols_named(dir: &Path, name: &str, copies: usize) -> Option<PathBuf> {
    let source = dir.join("lib.c");
    std::fs::write(
        &source,
        format!(
            "__attribute__((used)) static void f(void) __asm__(\"{name}\");\nstatic void f(void) {{}}\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let object = dir.join("lib.o");
    let compiled = Command::new("gcc")
        .args(["-O0", "-c", "-o"])
        .arg(&object)
        .arg(&source)
        .status();
    if !compiled.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "gcc is needed for the symbol-table test");
        skip_note!("skipping: gcc not available");
        return None;
    }
    let exe = dir.join("many");
    let linked = Command::new("gcc")
        .args(["-O0", "-o"])
        .arg(&exe)
        .arg(dir.join("main.c"))
        .args(std::iter::repeat_n(&object, copies))
        .status()
        .unwrap();
    assert!(linked.success());
    Some(exe)
}

#[test]
fn a_thousand_symbols_sharing_a_long_name_keep_it_once() {
    let name = doubling_cxx_name();
    let dir = tempdir();
    let Some(exe) = executable_with_symbols_named(dir.path(), &name, 1000) else {
        return;
    };
    let input = many_sites_of_one_name(dir.path(), &name, 300);
    let outs = every_output(dir.path(), "bin");
    let mut args = vec![st(&input), "--binary", st(&exe)];
    for o in &outs {
        args.extend(["-o", st(o)]);
    }
    let Some((out, secs, kib)) = timed(&args) else {
        return;
    };
    assert!(out.status.success(), "{}", stderr_of(&out));
    // One demangled copy per symbol was 840 MB and 7 s.
    assert!(kib < 150 << 10, "{kib} KiB");
    assert!(secs < 20.0, "{secs} s");
}

/// A GNU gmon.out of one histogram of `bins` bins, every one sampled
/// (1 to 65 535 ticks): each bin is a distinct address.
fn large_histogram(dir: &Path, bins: u32) -> PathBuf {
    let counts = (0..bins).map(|i| (i.wrapping_mul(7919) % 65_535 + 1) as u16);
    let hist = common::gen::gprof::Hist {
        low: 0x40_0000,
        high: 0x40_0000 + 2 * u64::from(bins),
        rate: 100,
        bins: counts.collect(),
    };
    let layout = common::gen::gprof::Layout {
        big: false,
        word: 8,
    };
    let path = dir.join("large.gmon");
    std::fs::write(&path, common::gen::gprof::gnu(layout, &[hist], &[], &[])).unwrap();
    path
}

#[test]
fn memory_of_every_output_of_a_large_histogram_follows_the_input() {
    let dir = tempdir();
    let input = large_histogram(dir.path(), 200_000);
    let bytes = std::fs::metadata(&input).unwrap().len();
    // Peak RSS allowed per input byte, beyond 16 MiB: what each writer
    // builds per sampled address on top of the profile (measured: pprof
    // 165, folded, SVG and speedscope 250, callgrind 380 with this input).
    for (format, per_byte) in [
        ("pprof", 200),
        ("folded", 300),
        ("svg", 300),
        ("speedscope", 300),
        ("callgrind", 450),
    ] {
        let output = dir.path().join(format!("out.{format}"));
        let Some((out, _, kib)) = timed(&[st(&input), "-o", st(&output), "--to", format]) else {
            return;
        };
        assert!(out.status.success(), "{format}: {}", stderr_of(&out));
        let bound = (per_byte * bytes + (16 << 20)) >> 10;
        assert!(kib < bound, "{format}: {kib} KiB, more than {bound} KiB");
    }
}
