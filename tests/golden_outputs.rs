//! profconv's own outputs of the committed fixtures, against golden files
//! (`tests/golden/`; `PROFCONV_UPDATE_GOLDEN=1` rewrites them). The
//! reference tools' outputs are checked elsewhere; these catch any change in
//! what profconv writes: `info` text, folded stacks, speedscope JSON.

mod common;

use std::process::Command;

use common::*;

/// Runs profconv in the crate's folder (so that paths in outputs are the
/// relative ones given) and returns its standard output.
fn run(args: &[&str]) -> Vec<u8> {
    let out = Command::new(profconv_bin())
        .current_dir(manifest_dir())
        .args(args)
        .output()
        .expect("profconv runs");
    assert!(
        out.status.success(),
        "profconv {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `(golden name, inputs and read options)` of every case.
const CASES: &[(&str, &[&str])] = &[
    (
        "gprof-callgraph-nopie",
        &[
            "tests/fixtures/gprof/callgraph-nopie.gmon",
            "--binary",
            "tests/fixtures/gprof/callgraph-nopie",
        ],
    ),
    (
        "gprof-recursion",
        &[
            "tests/fixtures/gprof/recursion.gmon",
            "--binary",
            "tests/fixtures/gprof/recursion",
        ],
    ),
    (
        "gprof-cplusplus-flat",
        &[
            "tests/fixtures/gprof/cplusplus.gmon",
            "--binary",
            "tests/fixtures/gprof/cplusplus",
            "--gprof-stacks",
            "flat",
        ],
    ),
    (
        "mpatrol-linux-x86_64",
        &["tests/fixtures/mpatrol/linux-x86_64/mpatrol.out"],
    ),
    (
        "dcpicat-manpage",
        &["tests/fixtures/dcpi/dcpicat-manpage.txt"],
    ),
];

#[test]
fn info_text_of_every_fixture_matches_its_golden_file() {
    for (name, args) in CASES {
        let mut full = vec!["info"];
        full.extend(
            args.iter()
                .filter(|a| **a != "flat" && **a != "--gprof-stacks"),
        );
        assert_golden(&format!("{name}.info.txt"), &run(&full));
    }
}

#[test]
fn folded_stacks_of_every_fixture_match_their_golden_file() {
    for (name, args) in CASES {
        let mut full = args.to_vec();
        full.extend(["--to", "folded", "-o", "-"]);
        assert_golden(&format!("{name}.folded"), &run(&full));
    }
}

#[test]
fn speedscope_json_of_every_fixture_matches_its_golden_file() {
    for (name, args) in CASES {
        let mut full = args.to_vec();
        full.extend(["--to", "speedscope", "-o", "-"]);
        assert_golden(&format!("{name}.speedscope.json"), &run(&full));
    }
}
