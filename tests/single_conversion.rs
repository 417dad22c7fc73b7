//! What a single conversion tells its user: an ambiguous `--to` refused,
//! `--sample-type` checked for every output, a directory pointed to
//! `profconv convert`, one short pprof comment, a `wrote` line per output.

mod common;

use common::*;

fn gmon() -> String {
    fixture("gprof/callgraph-nopie.gmon").display().to_string()
}

fn binary() -> String {
    fixture("gprof/callgraph-nopie").display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn to_with_several_outputs_is_refused_as_ambiguous() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("t1.svg"), dir.path().join("t2.pb.gz"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = profconv(&[&gmon(), "-o", a, "-o", b, "--to", "pprof"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--to names the format of a single output"));
    assert!(!std::path::Path::new(a).exists());
}

#[test]
fn unknown_sample_type_is_refused_for_a_pprof_output() {
    let dir = tempdir();
    let pb = dir.path().join("out.pb.gz");
    let out = profconv(&[
        &gmon(),
        "--binary",
        &binary(),
        "-o",
        pb.to_str().unwrap(),
        "--sample-type",
        "foo",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no sample type \"foo\""),
        "{}",
        stderr(&out)
    );
    assert!(!pb.exists(), "nothing is left behind");
}

#[test]
fn sample_type_becomes_the_default_of_a_pprof_output_which_keeps_every_type() {
    let dir = tempdir();
    for name in ["out.pb.gz", "out.pb"] {
        let pb = dir.path().join(name);
        let pb = pb.to_str().unwrap();
        profconv_ok(&[
            &gmon(),
            "--binary",
            &binary(),
            "-o",
            pb,
            "--sample-type",
            "calls",
        ]);
        let p = decode_pprof(std::path::Path::new(pb));
        assert_eq!(p.sample_type.len(), 3, "every sample type is kept");
        let default = s(&p, p.default_sample_type);
        assert_eq!(default, "calls");
    }
}

#[test]
fn a_directory_that_is_no_profile_points_to_convert() {
    let dir = tempdir();
    std::fs::copy(gmon(), dir.path().join("gmon.out")).unwrap();
    let out_file = dir.path().join("x.pb.gz");
    let out = profconv(&[
        dir.path().to_str().unwrap(),
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for says in [
        "is not one profile",
        "1 gprof file (gmon.out)",
        "`profconv convert DIR -o OUT_DIR",
    ] {
        assert!(err.contains(says), "{says}: {err}");
    }
}

#[test]
fn the_pprof_comment_on_synthesized_stacks_is_one_short_line() {
    let dir = tempdir();
    let pb = dir.path().join("out.pb.gz");
    profconv_ok(&[&gmon(), "--binary", &binary(), "-o", pb.to_str().unwrap()]);
    let p = decode_pprof(&pb);
    let stacks: Vec<&str> = p
        .comment
        .iter()
        .map(|&c| s(&p, c))
        .filter(|c| c.starts_with("stacks:"))
        .collect();
    assert_eq!(stacks.len(), 1);
    assert!(stacks[0].len() <= 100, "{:?}", stacks[0]);
    assert!(stacks[0].contains("docs/formats/gprof.md §4.3"));
}

#[test]
fn each_written_output_gets_a_line_on_stderr_unless_quiet() {
    let dir = tempdir();
    let (pb, svg) = (dir.path().join("out.pb.gz"), dir.path().join("flame.svg"));
    let (pb, svg) = (pb.to_str().unwrap(), svg.to_str().unwrap());
    let out = profconv_ok(&[&gmon(), "--binary", &binary(), "-o", pb, "-o", svg]);
    let lines: Vec<String> = stderr(&out).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("wrote {pb} (pprof, ")),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(&format!("wrote {svg} (svg, ")),
        "{lines:?}"
    );
    assert!(lines[1].ends_with(" kB)"), "{lines:?}");
    let quiet = profconv_ok(&[&gmon(), "--binary", &binary(), "-o", pb, "-q"]);
    assert_eq!(stderr(&quiet), "");
}

/// The fill colours of the frames' rectangles, as (r, g, b).
fn frame_fills(svg: &str) -> Vec<(u32, u32, u32)> {
    svg.split("<rect ")
        .skip(1)
        .filter_map(|r| r.split("fill=\"rgb(").nth(1))
        .filter_map(|r| r.split(')').next())
        .map(|rgb| {
            let v: Vec<u32> = rgb.split(',').map(|x| x.parse().unwrap()).collect();
            (v[0], v[1], v[2])
        })
        .collect()
}

fn svg_of(input: &[&str], flags: &[&str]) -> String {
    let dir = tempdir();
    let svg = dir.path().join("f.svg");
    let mut args = input.to_vec();
    args.extend(["-o", svg.to_str().unwrap(), "-q"]);
    args.extend_from_slice(flags);
    profconv_ok(&args);
    check_svg(&svg, &[]);
    std::fs::read_to_string(&svg).unwrap()
}

#[test]
fn a_heap_flamegraph_is_drawn_in_the_mem_palette_counting_bytes() {
    let mpatrol = fixture("mpatrol/linux-x86_64/mpatrol.out");
    let svg = svg_of(
        &[mpatrol.to_str().unwrap()],
        &["--sample-type", "alloc_space"],
    );
    let fills = frame_fills(&svg);
    assert!(fills.len() > 3);
    assert!(
        fills.iter().all(|&(r, _, _)| r == 0),
        "mem is green-blue: {fills:?}"
    );
    assert!(svg.contains(" bytes, "), "tooltips count bytes");
    let hot = svg_of(
        &[mpatrol.to_str().unwrap()],
        &["--sample-type", "alloc_space", "--colors", "hot"],
    );
    let hot = frame_fills(&hot);
    let red = hot.iter().filter(|&&(r, _, _)| r >= 200).count();
    assert!(red > hot.len() / 2, "hot is red-yellow: {hot:?}");
}

#[test]
fn flamegraph_options_reach_the_svg() {
    let (g, b) = (gmon(), binary());
    let input = [g.as_str(), "--binary", b.as_str()];
    let plain = svg_of(&input, &[]);
    let svg = svg_of(
        &input,
        &[
            "--title",
            "My title",
            "--subtitle",
            "Run 7",
            "--width",
            "600",
            "--inverted",
            "--count-name",
            "ticks",
            "--hash",
        ],
    );
    assert!(svg.contains(">My title<") && svg.contains(">Run 7<"));
    assert!(svg.contains("<svg version=\"1.1\" width=\"600\""));
    assert!(svg.contains("var inverted = true;") && !plain.contains("var inverted = true;"));
    assert!(svg.contains(" ticks, ") && !plain.contains(" ticks, "));
    for flags in [
        &["--reverse"][..],
        &["--flamechart"],
        &["--minwidth", "300"],
        &["--colors", "io"],
    ] {
        assert_ne!(svg_of(&input, flags), plain, "{flags:?} changes the SVG");
    }
    let bad = profconv(&[&g, "-o", "/dev/null", "--to", "svg", "--colors", "plaid"]);
    assert_eq!(bad.status.code(), Some(2));
}
