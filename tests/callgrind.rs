//! callgrind output checked by valgrind's own reader, `callgrind_annotate`:
//! totals, self costs per function equal to the pprof output's, `main`'s
//! inclusive share for gprof profiles rooted at main, `calls=` equal to
//! gprof's arc counts; the outputs of the other readers load too.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;

/// The gprof fixtures whose stacks are rooted at `main`: (gmon, binary).
const GPROF_CASES: &[(&str, &str)] = &[
    ("callgraph-nopie.gmon", "callgraph-nopie"),
    ("callgraph-pie.gmon", "callgraph-pie"),
    ("callgraph-m32.gmon", "callgraph-m32"),
    ("callgraph-sum.gmon", "callgraph-nopie"),
    ("recursion.gmon", "recursion"),
    ("inlined.gmon", "inlined"),
    ("cplusplus.gmon", "cplusplus"),
];

/// Converts one gprof fixture to callgrind and pprof; returns both paths.
fn convert_gprof(dir: &Path, gmon: &str, binary: &str) -> (String, String) {
    let cg = dir.join(format!("{gmon}.callgrind"));
    let pb = dir.join(format!("{gmon}.pb.gz"));
    profconv_ok(&[
        fixture(&format!("gprof/{gmon}")).to_str().unwrap(),
        "--binary",
        fixture(&format!("gprof/{binary}")).to_str().unwrap(),
        "-o",
        cg.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
    ]);
    (
        cg.to_str().unwrap().to_owned(),
        pb.to_str().unwrap().to_owned(),
    )
}

#[test]
fn gprof_profiles_load_in_callgrind_annotate_with_pprofs_self_costs_and_main_inclusive() {
    let dir = tempdir();
    for (gmon, binary) in GPROF_CASES {
        let (cg, pb) = convert_gprof(dir.path(), gmon, binary);
        let pprof = decode_pprof(Path::new(&pb));
        for event in ["cpu", "samples", "calls"] {
            let Some((total, own)) = annotate(&cg, event, false) else {
                return;
            };
            let flat = pprof_flat(&pprof, event);
            assert_eq!(own, flat, "{gmon}: self {event} per function");
            assert_eq!(total, flat.values().sum::<i64>(), "{gmon}: total {event}");
        }
        let (total, inclusive) = annotate(&cg, "cpu", true).unwrap();
        let main = inclusive.get("main").copied().unwrap_or(0);
        assert!(
            main as f64 >= 0.99 * total as f64 && main <= total,
            "{gmon}: main's inclusive cpu is {main} of {total}"
        );
    }
}

/// `(caller, callee) → calls` from a callgrind file, names uncompressed.
fn calls_of(text: &str) -> BTreeMap<(String, String), u64> {
    let mut names: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut name = |kind: &str, value: &str| -> String {
        match value.strip_prefix('(').and_then(|v| v.split_once(')')) {
            Some((id, rest)) if rest.trim().is_empty() => {
                names[&(kind.to_owned(), id.to_owned())].clone()
            }
            Some((id, rest)) => {
                let n = rest.trim().to_owned();
                names.insert((kind.to_owned(), id.to_owned()), n.clone());
                n
            }
            None => value.to_owned(),
        }
    };
    let (mut current, mut callee) = (String::new(), String::new());
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("fn=") {
            current = name("fn", v);
        } else if let Some(v) = line.strip_prefix("cfn=") {
            callee = name("fn", v);
        } else if let Some(v) = line.strip_prefix("fl=").or(line.strip_prefix("cfl=")) {
            name("fl", v);
        } else if let Some(v) = line.strip_prefix("ob=").or(line.strip_prefix("cob=")) {
            name("ob", v);
        } else if let Some(v) = line.strip_prefix("calls=") {
            let count: u64 = v.split_whitespace().next().unwrap().parse().unwrap();
            *out.entry((current.clone(), callee.clone())).or_insert(0) += count;
        }
    }
    out
}

#[test]
fn calls_are_gprofs_arc_counts() {
    let dir = tempdir();
    let (cg, _) = convert_gprof(dir.path(), "callgraph-nopie.gmon", "callgraph-nopie");
    let calls = calls_of(&std::fs::read_to_string(&cg).unwrap());
    // The "called" column of callgraph-nopie.graph.txt (gprof 2.40).
    let gprof: BTreeMap<(String, String), u64> = [
        ("main", "a", 3),
        ("main", "b", 1),
        ("a", "leaf_heavy", 12),
        ("a", "c", 6),
        ("b", "c", 5),
        ("b", "scale_helper", 7),
        ("c", "leaf_light", 11),
    ]
    .into_iter()
    .map(|(a, b, n)| ((a.to_owned(), b.to_owned()), n))
    .collect();
    assert_eq!(calls, gprof);

    // And for every fixture, the arcs the pprof output carries.
    for (gmon, binary) in GPROF_CASES {
        let (cg, pb) = convert_gprof(dir.path(), gmon, binary);
        let p = decode_pprof(Path::new(&pb));
        let t = p
            .sample_type
            .iter()
            .position(|vt| s(&p, vt.r#type) == "calls")
            .unwrap();
        let mut arcs = BTreeMap::new();
        for sample in p.sample.iter().filter(|x| x.value[t] > 0) {
            let callee = location_leaf_name(&p, sample.location_id[0]);
            let caller = location_leaf_name(&p, sample.location_id[1]);
            *arcs.entry((caller, callee)).or_insert(0) += sample.value[t] as u64;
        }
        let calls = calls_of(&std::fs::read_to_string(&cg).unwrap());
        for (arc, count) in &arcs {
            assert_eq!(calls.get(arc), Some(count), "{gmon}: calls= of {arc:?}");
        }
        // The other edges go into inlined frames, which gprof does not
        // count: callgrind needs a count, 1 per call site says "called".
        for (edge, count) in &calls {
            assert!(
                arcs.contains_key(edge) || *count >= 1,
                "{gmon}: {edge:?} {count}"
            );
        }
    }
}

#[test]
fn callgrind_format_is_inferred_from_the_file_name() {
    let dir = tempdir();
    let out = dir.path().join("callgrind.out.1234");
    profconv_ok(&[
        fixture("gprof/callgraph-nopie.gmon").to_str().unwrap(),
        "--binary",
        fixture("gprof/callgraph-nopie").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("# callgrind format\n"), "{text}");
    assert!(text.contains("\nevents: cpu samples calls\n"), "{text}");
}

#[test]
fn mpatrol_dcpi_and_aps_outputs_load_in_callgrind_annotate() {
    let dir = tempdir();
    let aps = dir.path().join("sample_cpu_0_20150716_130220");
    std::fs::write(&aps, small_aps_file()).unwrap();
    let inputs = [
        fixture("mpatrol/linux-x86_64/mpatrol.out"),
        fixture("dcpi/dcpicat-manpage.txt"),
        aps,
    ];
    for input in &inputs {
        let name = input.file_name().unwrap().to_str().unwrap();
        let cg = dir.path().join(format!("{name}.callgrind"));
        let pb = dir.path().join(format!("{name}.pb.gz"));
        // Every address a function of its own, as pprof keeps them.
        profconv_ok(&[
            input.to_str().unwrap(),
            "-o",
            cg.to_str().unwrap(),
            "-o",
            pb.to_str().unwrap(),
            "--granularity",
            "addresses",
        ]);
        // By default (lines), the same total.
        let lines = dir.path().join(format!("{name}.lines.callgrind"));
        profconv_ok(&[input.to_str().unwrap(), "-o", lines.to_str().unwrap()]);
        let p = decode_pprof(&pb);
        let default = s(&p, p.default_sample_type).to_owned();
        let event: String = default
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let Some((total, own)) = annotate(cg.to_str().unwrap(), &event, false) else {
            return;
        };
        let flat = pprof_flat(&p, &default);
        assert_eq!(total, flat.values().sum::<i64>(), "{name}: total {event}");
        let (lines_total, _) = annotate(lines.to_str().unwrap(), &event, false).unwrap();
        assert_eq!(lines_total, total, "{name}: total {event} by lines");
        // Unsymbolized frames are `image+0xOFFSET` in callgrind and bare
        // addresses in pprof_flat: compare the costs per function.
        let sorted = |m: &BTreeMap<String, i64>| {
            let mut v: Vec<i64> = m.values().copied().collect();
            v.sort();
            v
        };
        assert_eq!(
            sorted(&own),
            sorted(&flat),
            "{name}: self {event} per function"
        );
        assert!(total > 0, "{name}: nothing in {event}");
    }
}

#[test]
fn a_database_of_more_addresses_than_memory_holds_at_once_loads_in_callgrind_annotate() {
    // 90 000 sampled addresses: more than one run of folded lines,
    // callgrind bodies and speedscope samples (src/write/output.rs,
    // RUN_SAMPLES), so the outputs at every address are written from runs
    // spilled to disk.
    let dir = tempdir();
    let db = dir.path().join("db");
    let spec = common::gen::dcpi::DbSpec::sparse(3, 300_000, 100);
    let truth = common::gen::dcpi::build_db(&db, &spec);
    assert!(truth.addresses > 1 << 16, "{} addresses", truth.addresses);
    let (cg, pb, folded, speedscope) = (
        dir.path().join("db.callgrind"),
        dir.path().join("db.pb.gz"),
        dir.path().join("db.folded"),
        dir.path().join("db.speedscope.json"),
    );
    profconv_ok(&[
        db.to_str().unwrap(),
        "--granularity",
        "addresses",
        "-o",
        cg.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
        "-o",
        folded.to_str().unwrap(),
        "-o",
        speedscope.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&cg).unwrap();
    assert!(text.contains("\npositions: instr line\n"), "spilled runs");
    let p = decode_pprof(&pb);
    let default = s(&p, p.default_sample_type).to_owned();
    let flat = pprof_flat(&p, &default);
    assert_eq!(flat.len() as u64, truth.addresses, "an address a function");
    // The folded lines: an image's frame, then the address's.
    let lines = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert_eq!(lines.len() as u64, truth.addresses, "an address a line");
    let mut by_line: Vec<i64> = lines.values().copied().collect();
    let mut by_address: Vec<i64> = flat.values().copied().collect();
    by_line.sort();
    by_address.sort();
    assert!(by_line == by_address, "folded counts are pprof's");
    // speedscope: valid, every address's weight in the default profile.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&speedscope).unwrap()).unwrap();
    validate_speedscope(&doc);
    let active = doc["activeProfileIndex"].as_u64().unwrap() as usize;
    let weights = doc["profiles"][active]["weights"].as_array().unwrap();
    let mut by_sample: Vec<i64> = weights.iter().map(|w| w.as_i64().unwrap()).collect();
    by_sample.sort();
    assert!(by_sample == by_address, "speedscope weights are pprof's");
    let event: String = default
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let Some((total, own)) = annotate(cg.to_str().unwrap(), &event, false) else {
        return;
    };
    assert_eq!(total, flat.values().sum::<i64>(), "total {default}");
    let mut by_function: Vec<i64> = own.values().copied().collect();
    by_function.sort();
    assert!(by_function == by_address, "self {default} per function");
}

#[test]
fn inclusive_costs_count_each_stack_once_under_recursion() {
    // mpatrol's fixture has `recurse` calling itself three deep.
    let dir = tempdir();
    let cg = dir.path().join("m.callgrind");
    let folded = dir.path().join("m.folded");
    profconv_ok(&[
        fixture("mpatrol/linux-x86_64/mpatrol.out")
            .to_str()
            .unwrap(),
        "--sample-type",
        "alloc_objects",
        "-o",
        cg.to_str().unwrap(),
        "-o",
        folded.to_str().unwrap(),
    ]);
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let stacks = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert!(stacks.keys().any(|s| s.contains("recurse;recurse")));
    for (stack, n) in stacks {
        let mut frames: Vec<&str> = stack.split(';').collect();
        frames.sort();
        frames.dedup();
        for f in frames {
            *expected.entry(f.to_owned()).or_insert(0) += n;
        }
    }
    let Some((_, inclusive)) = annotate(cg.to_str().unwrap(), "alloc_objects", true) else {
        return;
    };
    assert_eq!(inclusive, expected);
}
