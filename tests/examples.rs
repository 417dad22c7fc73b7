//! The files in examples/ convert as examples/README.md says, to every
//! output format.

mod common;

use common::*;

/// (input, extra arguments) of every example.
const EXAMPLES: &[(&str, &[&str])] = &[
    ("gprof/gmon.out", &["--binary", "examples/gprof/prog"]),
    ("mpatrol/mpatrol.out", &[]),
    ("dcpi/db", &[]),
    ("dcpi/xemacs.dcpicat.txt", &[]),
    ("aps/sample_cpu_0_20150716_130220", &["--group-by", "pid"]),
];

#[test]
fn every_example_converts_to_every_output() {
    let dir = tempdir();
    for (input, extra) in EXAMPLES {
        let path = manifest_dir().join("examples").join(input);
        let mut args = vec![path.to_str().unwrap().to_owned()];
        args.extend(extra.iter().map(|a| {
            a.replace(
                "examples/",
                &format!("{}/examples/", manifest_dir().display()),
            )
        }));
        for ext in ["pb.gz", "folded", "svg", "speedscope.json", "callgrind"] {
            let out = dir.path().join(format!("out.{ext}"));
            let mut a = args.clone();
            a.extend(["-o".to_owned(), out.to_str().unwrap().to_owned()]);
            let refs: Vec<&str> = a.iter().map(String::as_str).collect();
            profconv_ok(&refs);
            assert!(
                std::fs::metadata(&out).unwrap().len() > 0,
                "{input} → {ext}"
            );
            if ext == "pb.gz" {
                let p = decode_pprof(&out);
                check_pprof_invariants(&p);
                assert!(!p.sample.is_empty(), "{input}: samples");
            }
        }
    }
}

#[test]
fn the_readme_lists_every_example() {
    let readme = std::fs::read_to_string(manifest_dir().join("examples/README.md")).unwrap();
    for (input, _) in EXAMPLES {
        assert!(readme.contains(&format!("`{input}")), "{input}");
    }
}
