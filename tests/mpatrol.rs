//! mpatrol reader: files written from a description (call-site tree,
//! profiling records, names) in every byte order and word size, checked
//! value by value in every output; corrupt files; real files with mprof's
//! own numbers.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::gen::mpatrol::*;
use common::*;
use profconv::read::{self, Input};
use profconv::{Format, ReadOptions};

const TYPES: [&str; 6] = [
    "alloc_objects",
    "alloc_space",
    "free_objects",
    "free_space",
    "inuse_objects",
    "inuse_space",
];

fn combo_name(word: usize, big: bool) -> String {
    format!("w{word}-{}", if big { "be" } else { "le" })
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn convert(input: &Path, output: &Path, extra: &[&str]) {
    let mut args = vec![input.to_str().unwrap(), "-o", output.to_str().unwrap()];
    args.extend_from_slice(extra);
    profconv_ok(&args);
}

fn type_index(p: &pb::Profile, name: &str) -> usize {
    p.sample_type
        .iter()
        .position(|t| s(p, t.r#type) == name)
        .unwrap()
}

/// Each pprof sample as (leaf-first names, leaf-first addresses, values).
fn pprof_samples(p: &pb::Profile) -> Vec<(Vec<String>, Vec<u64>, Vec<i64>)> {
    let mut out: Vec<_> = p
        .sample
        .iter()
        .map(|smp| {
            let names = smp
                .location_id
                .iter()
                .map(|&l| location_leaf_name(p, l))
                .collect();
            let addrs = smp
                .location_id
                .iter()
                .map(|&l| p.location.iter().find(|x| x.id == l).unwrap().address)
                .collect();
            (names, addrs, smp.value.clone())
        })
        .collect();
    out.sort();
    out
}

fn parse_err(bytes: &[u8]) -> String {
    let input = Input::from_bytes("bad.out", bytes.to_vec());
    let options = ReadOptions {
        format: Some(Format::Mpatrol),
        ..ReadOptions::default()
    };
    match read::read_inputs(&[input], &options) {
        Ok(_) => panic!("a corrupt file was accepted"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Layout and detection (spec §2)
// ---------------------------------------------------------------------------

#[test]
fn detection_needs_the_leading_magic() {
    let bytes = encode(&example().raw(4), 4, false);
    assert_eq!(
        read::detect_input(&Input::from_bytes("x", bytes)),
        Some(Format::Mpatrol)
    );
    let not_leading = Input::from_bytes("x", b"MPTR\0\0\0\x01".to_vec());
    assert_eq!(read::detect_input(&not_leading), None);
}

// ---------------------------------------------------------------------------
// Mapping (spec §3), value by value in every output
// ---------------------------------------------------------------------------

#[test]
fn pprof_samples_are_the_records_with_leaf_first_stacks_in_every_combination() {
    let prog = example();
    let dir = tempdir();
    for (word, big) in COMBINATIONS {
        let name = combo_name(word, big);
        let input = write_file(
            dir.path(),
            &format!("{name}.out"),
            &encode(&prog.raw(word), word, big),
        );
        let out = dir.path().join(format!("{name}.pb.gz"));
        convert(&input, &out, &[]);
        let p = decode_pprof(&out);
        check_pprof_invariants(&p);

        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(&p, t.r#type), s(&p, t.unit)))
            .collect();
        let want_types: Vec<(&str, &str)> = TYPES
            .iter()
            .map(|t| {
                (
                    *t,
                    if t.ends_with("objects") {
                        "count"
                    } else {
                        "bytes"
                    },
                )
            })
            .collect();
        assert_eq!(types, want_types, "{name}");

        let mut want: Vec<(Vec<String>, Vec<u64>, Vec<i64>)> = prog
            .allocs
            .iter()
            .map(|a| {
                let addrs = a.frames.iter().map(|&f| prog.address(word, f)).collect();
                (prog.names(word, a), addrs, a.values().to_vec())
            })
            .collect();
        want.sort();
        assert_eq!(pprof_samples(&p), want, "{name}");
    }
}

#[test]
fn default_sample_type_is_inuse_space_and_period_type_is_space_bytes() {
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&example().raw(8), 8, false));
    let out = dir.path().join("m.pb");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    assert_eq!(s(&p, p.default_sample_type), "inuse_space");
    let pt = p.period_type.as_ref().unwrap();
    assert_eq!((s(&p, pt.r#type), s(&p, pt.unit)), ("space", "bytes"));
    assert_eq!(p.period, 1);
}

#[test]
fn totals_equal_the_sums_of_the_records() {
    let prog = example();
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(4), 4, true));
    let out = dir.path().join("m.pb.gz");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    for (t, name) in TYPES.iter().enumerate() {
        let got: i64 = p
            .sample
            .iter()
            .map(|smp| smp.value[type_index(&p, name)])
            .sum();
        let want: i64 = prog.allocs.iter().map(|a| a.values()[t]).sum();
        assert_eq!(got, want, "{name}");
    }
    // The example's numbers, summed by hand from `example()`.
    let alloc_space: i64 = p.sample.iter().map(|smp| smp.value[1]).sum();
    assert_eq!(
        alloc_space,
        2048 + 922 + 600 + 1500 + 10_000 + 16 + 40 + 100
    );
}

#[test]
fn folded_output_has_each_stack_root_first_with_its_value() {
    let prog = example();
    let dir = tempdir();
    for (word, big) in COMBINATIONS {
        let input = write_file(dir.path(), "m.out", &encode(&prog.raw(word), word, big));
        for (t, name) in TYPES.iter().enumerate() {
            let out = dir.path().join(format!("{name}.folded"));
            convert(&input, &out, &["--sample-type", name]);
            let got = parse_folded(&std::fs::read_to_string(&out).unwrap());
            let mut want: BTreeMap<String, i64> = BTreeMap::new();
            for a in &prog.allocs {
                let mut names = prog.names(word, a);
                names.reverse();
                *want.entry(names.join(";")).or_insert(0) += a.values()[t];
            }
            want.retain(|_, v| *v > 0);
            assert_eq!(got, want, "{name} {}", combo_name(word, big));
        }
    }
}

#[test]
fn folded_default_is_inuse_space() {
    let prog = example();
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(8), 8, false));
    let out = dir.path().join("m.folded");
    convert(&input, &out, &[]);
    let got = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let leaked: i64 = got.values().sum();
    assert_eq!(
        leaked,
        922 + (600 - 200) + 1500 + (10_000 - 5000) + 16 + 100
    );
    assert_eq!(got["_start;main;new_pair"], 922);
}

#[test]
fn speedscope_output_is_valid_and_holds_every_value() {
    let prog = example();
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(4), 4, false));
    let out = dir.path().join("m.speedscope.json");
    convert(&input, &out, &[]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    validate_speedscope(&doc);
    for (t, name) in TYPES.iter().enumerate() {
        let mut want: BTreeMap<String, f64> = BTreeMap::new();
        for a in &prog.allocs {
            let v = a.values()[t];
            if v > 0 {
                *want.entry(prog.names(4, a)[0].clone()).or_insert(0.0) += v as f64;
            }
        }
        let mut got = speedscope_flat(&doc, name);
        got.retain(|_, v| *v != 0.0);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn flamegraph_names_the_allocating_functions() {
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&example().raw(8), 8, true));
    let out = dir.path().join("allocs.svg");
    convert(&input, &out, &["--sample-type", "alloc_space"]);
    check_svg(
        &out,
        &["new_pair", "make_table", "walk_tree", "main", "_start"],
    );
}

#[test]
fn call_site_without_a_symbol_shows_its_address() {
    let prog = example();
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(4), 4, false));
    let out = dir.path().join("m.pb");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    let addr = prog.address(4, (4, 0x10));
    let loc = p.location.iter().find(|l| l.address == addr).unwrap();
    assert!(
        loc.line.is_empty(),
        "a call site without a name has no function"
    );
    assert!(pprof_flat(&p, "alloc_space").contains_key(&format!("{addr:#x}")));
}

#[test]
fn function_names_come_from_the_string_table() {
    let mut prog = example();
    prog.funcs[3].name = Some("Table::build(int)");
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(8), 8, false));
    let out = dir.path().join("m.pb");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    let names: Vec<&str> = p.function.iter().map(|f| s(&p, f.name)).collect();
    for n in [
        "_start",
        "main",
        "new_pair",
        "Table::build(int)",
        "walk_tree",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert_eq!(p.mapping.len(), 0, "no binary, no mapping");
}

#[test]
fn size_classes_option_splits_samples_by_class_with_a_label() {
    let prog = example();
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&prog.raw(8), 8, false));
    let out = dir.path().join("m.pb");
    convert(&input, &out, &["--mpatrol-size-classes"]);
    let p = decode_pprof(&out);
    check_pprof_invariants(&p);
    for smp in &p.sample {
        if let Some(m) = smp.label.iter().find(|l| s(&p, l.key) == "size_class_max") {
            assert_eq!(s(&p, m.num_unit), "bytes");
        }
    }
    let mut want = BTreeMap::new();
    let class_names = ["small", "medium", "large", "xlarge"];
    let maxes = [Some(32), Some(256), Some(2048), None];
    for a in &prog.allocs {
        for k in 0..4 {
            let c = a.classes[k];
            if c.iter().all(|&v| v == 0) {
                continue;
            }
            let (ac, ab, fc, fb) = (c[0] as i64, c[1] as i64, c[2] as i64, c[3] as i64);
            let key = (
                prog.names(8, a)[0].clone(),
                class_names[k].to_owned(),
                maxes[k],
            );
            let slot = want.entry(key).or_insert(vec![0i64; 6]);
            for (acc, v) in slot.iter_mut().zip([ac, ab, fc, fb, ac - fc, ab - fb]) {
                *acc += v;
            }
        }
    }
    // new_pair's two call sites are distinct samples with equal keys here: sum them.
    let mut got_summed: BTreeMap<_, Vec<i64>> = BTreeMap::new();
    for smp in &p.sample {
        let class = smp
            .label
            .iter()
            .find(|l| s(&p, l.key) == "size_class")
            .unwrap();
        let max = smp
            .label
            .iter()
            .find(|l| s(&p, l.key) == "size_class_max")
            .map(|m| m.num);
        let key = (
            location_leaf_name(&p, smp.location_id[0]),
            s(&p, class.str).to_owned(),
            max,
        );
        let slot = got_summed.entry(key).or_insert(vec![0i64; 6]);
        for (acc, v) in slot.iter_mut().zip(&smp.value) {
            *acc += v;
        }
    }
    assert_eq!(got_summed, want);

    // Folded output groups by class under a root frame.
    let folded = dir.path().join("m.folded");
    convert(
        &input,
        &folded,
        &["--mpatrol-size-classes", "--sample-type", "alloc_space"],
    );
    let f = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert_eq!(f["size_class xlarge;_start;main;make_table"], 10_000);
    assert_eq!(f["size_class large;_start;main;make_table"], 1500);
    assert_eq!(f["size_class medium;_start;main;make_table"], 600);
}

#[test]
fn metadata_keeps_version_bounds_and_histogram_as_comments() {
    let raw = example().raw(4);
    let (acounts, large, _, _) = raw.bins.clone().unwrap();
    let count: u64 = acounts.iter().sum();
    let bytes: u64 = acounts[..1023]
        .iter()
        .enumerate()
        .map(|(k, n)| n * (k as u64 + 1))
        .sum::<u64>()
        + large;
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&raw, 4, true));
    let out = dir.path().join("m.pb");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(&p, c)).collect();
    let has = |needle: &str| comments.iter().any(|c| c.contains(needle));
    assert!(has("mpatrol version: 1.4.8 (10408)"), "{comments:#?}");
    assert!(has("word size: 4 bytes"));
    assert!(has("byte order: big-endian"));
    assert!(has("small <= 32 < medium <= 256 < large <= 2048"));
    assert!(
        has(&format!("1024 bins: {count} allocations ({bytes} bytes)")),
        "{comments:#?}"
    );
}

#[test]
fn info_prints_version_word_size_byte_order_bounds_totals_and_histogram() {
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&example().raw(8), 8, true));
    let out = profconv_ok(&["info", input.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "mpatrol version: 1.4.8 (10408)",
        "word size: 8 bytes",
        "byte order: big-endian",
        "small <= 32 < medium <= 256 < large <= 2048 < xlarge",
        "profiling records: 5, call sites: ",
        "allocated: 524 objects, 15226 bytes",
        "freed:     262 objects, 7288 bytes",
        "in use:    262 objects, 7938 bytes",
        "size histogram (1024 bins, whole program):",
    ] {
        assert!(text.contains(needle), "info lacks {needle:?}:\n{text}");
    }
    // 256 blocks of 8 bytes: the busiest bin is listed with its bytes.
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["8", "256", "256", "2048"]),
        "{text}"
    );
    // xlarge blocks of 5000 bytes land in the last bin.
    assert!(
        text.lines().any(|l| l.trim_start().starts_with(">=1024")),
        "{text}"
    );
}

#[test]
fn info_json_holds_the_same_facts_as_the_text() {
    let input = fixture("mpatrol/linux-x86_64/mpatrol.out");
    let out = profconv_ok(&["info", "--json", input.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let block = &doc["entries"][0]["block"];
    assert!(block["title"]
        .as_str()
        .unwrap()
        .ends_with("mpatrol profiling file (mpatrol.out)"));
    let field = |key: &str| {
        block["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["field"]["key"] == key)
            .map(|e| e["field"]["value"].as_str().unwrap().to_owned())
    };
    assert_eq!(field("word size").as_deref(), Some("8 bytes"));
    assert_eq!(field("mpatrol version").as_deref(), Some("1.5.1 (10501)"));
    let text = String::from_utf8(profconv_ok(&["info", input.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("  word size: 8 bytes\n"), "{text}");
}

#[test]
fn several_files_are_summed() {
    let prog = example();
    let dir = tempdir();
    let a = write_file(dir.path(), "a.out", &encode(&prog.raw(8), 8, false));
    let b = write_file(dir.path(), "b.out", &encode(&prog.raw(8), 8, false));
    let out = dir.path().join("sum.pb");
    profconv_ok(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let p = decode_pprof(&out);
    let got: i64 = p.sample.iter().map(|smp| smp.value[1]).sum();
    let want: i64 = prog.allocs.iter().map(|a| a.values()[1]).sum();
    assert_eq!(got, 2 * want);
}

#[test]
fn gzip_compressed_input_is_read() {
    use std::io::Write;
    let dir = tempdir();
    let bytes = encode(&example().raw(4), 4, false);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes).unwrap();
    let input = write_file(dir.path(), "m.out.gz", &gz.finish().unwrap());
    let out = dir.path().join("m.folded");
    convert(&input, &out, &["--sample-type", "alloc_objects"]);
    let got: i64 = parse_folded(&std::fs::read_to_string(&out).unwrap())
        .values()
        .sum();
    assert_eq!(got, 256 + 256 + 3 + 1 + 2 + 1 + 4 + 1);
}

// ---------------------------------------------------------------------------
// go tool pprof reads the result like a Go heap profile
// ---------------------------------------------------------------------------

#[test]
fn go_pprof_top_lists_the_functions_with_their_alloc_space() {
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&example().raw(8), 8, false));
    let out = dir.path().join("heap.pb.gz");
    convert(&input, &out, &[]);
    let path = out.to_str().unwrap();
    let Some(text) = go_pprof(&[
        "-top",
        "-sample_index=alloc_space",
        "-unit=B",
        "-nodefraction=0",
        path,
    ]) else {
        return;
    };
    assert!(text.contains("Type: alloc_space"), "{text}");
    let rows = top_table(&text);
    assert_eq!(
        rows.get("new_pair").map(String::as_str),
        Some("2970B"),
        "{text}"
    ); // 2048 + 922
    assert_eq!(
        rows.get("make_table").map(String::as_str),
        Some("12100B"),
        "{text}"
    ); // 600 + 1500 + 10000
    assert_eq!(
        rows.get("walk_tree").map(String::as_str),
        Some("140B"),
        "{text}"
    ); // 40 + 100
       // A name with its unfreed remainder only: -sample_index selects the column.
    let text = go_pprof(&[
        "-top",
        "-sample_index=alloc_objects",
        "-nodefraction=0",
        path,
    ])
    .unwrap();
    assert_eq!(
        top_table(&text).get("new_pair").map(String::as_str),
        Some("512"),
        "{text}"
    );
}

#[test]
fn go_pprof_reads_inuse_space_as_a_heap_profile() {
    let dir = tempdir();
    let input = write_file(dir.path(), "m.out", &encode(&example().raw(4), 4, true));
    let out = dir.path().join("heap.pb.gz");
    convert(&input, &out, &[]);
    let path = out.to_str().unwrap();
    let Some(text) = go_pprof(&[
        "-top",
        "-sample_index=inuse_space",
        "-unit=B",
        "-nodefraction=0",
        path,
    ]) else {
        return;
    };
    assert!(text.contains("Type: inuse_space"), "{text}");
    let rows = top_table(&text);
    assert_eq!(
        rows.get("new_pair").map(String::as_str),
        Some("922B"),
        "{text}"
    );
    assert_eq!(
        rows.get("make_table").map(String::as_str),
        Some("6900B"),
        "{text}"
    ); // 400 + 1500 + 5000
    assert_eq!(
        rows.get("_start").map(String::as_str),
        Some("0"),
        "no flat bytes in _start: {text}"
    );
    // The default (no -sample_index) is inuse_space too.
    let text = go_pprof(&["-top", out.to_str().unwrap()]).unwrap();
    assert!(text.contains("Type: inuse_space"), "{text}");
}

// ---------------------------------------------------------------------------
// Corrupt and unsupported files (spec §5)
// ---------------------------------------------------------------------------

/// A small valid file to damage.
fn small() -> Raw {
    let mut prog = example();
    prog.bin_count = 4;
    prog.raw(4)
}

#[test]
fn bad_magic_is_refused_at_offset_0() {
    let mut bytes = encode(&small(), 4, false);
    bytes[0] = b'X';
    let e = parse_err(&bytes);
    assert!(e.contains("at byte 0") && e.contains("MPTL"), "{e}");
}

#[test]
fn wrong_marker_is_refused_naming_it() {
    let mut bytes = encode(&small(), 4, false);
    bytes.truncate(bytes.len() - 4);
    bytes.extend_from_slice(b"XXXX"); // no trailing magic either: not an older layout
    bytes[4..8].copy_from_slice(&7u32.to_le_bytes());
    let e = parse_err(&bytes);
    assert!(
        e.contains("at byte 4") && e.contains("endianness marker"),
        "{e}"
    );
}

#[test]
fn truncated_anywhere_is_an_error_naming_an_offset() {
    for (word, big) in COMBINATIONS {
        let mut prog = example();
        prog.bin_count = 3;
        let bytes = encode(&prog.raw(word), word, big);
        for len in 0..bytes.len() {
            let e = parse_err(&bytes[..len]);
            assert!(e.contains("bad.out"), "{e}");
            assert!(
                e.contains("at byte "),
                "cut at {len} ({}): {e}",
                combo_name(word, big)
            );
        }
    }
}

#[test]
fn trailing_magic_must_end_the_file() {
    let mut bytes = encode(&small(), 8, true);
    let end = bytes.len();
    bytes[end - 1] = b'X';
    let e = parse_err(&bytes);
    assert!(
        e.contains(&format!("at byte {}", end - 4)) && e.contains("trailing magic"),
        "{e}"
    );

    let mut bytes = encode(&small(), 8, true);
    bytes.extend_from_slice(&[0, 0]);
    let e = parse_err(&bytes);
    assert!(
        e.contains(&format!("at byte {}", bytes.len() - 2))
            && e.contains("follow the trailing magic"),
        "{e}"
    );
}

/// Offset of call-site row `i`'s word `k` in a file from `encode(raw, word, _)`.
fn site_word_offset(raw: &Raw, word: usize, i: usize, k: usize) -> usize {
    let bins = raw.bins.as_ref().map_or(0, |b| b.0.len() * 2 + 2);
    4 + word * (2 + 3 + 1 + bins + 1 + 17 * raw.records.len() + 1 + 6 * i + k)
}

#[test]
fn parent_index_out_of_range_is_refused() {
    let mut raw = small();
    raw.sites[2][1] = 99;
    let e = parse_err(&encode(&raw, 4, false));
    let at = site_word_offset(&raw, 4, 2, 1);
    assert!(
        e.contains(&format!("at byte {at}")) && e.contains("parent 99"),
        "{e}"
    );
}

#[test]
fn parent_loop_is_refused() {
    let mut raw = small();
    // Make the root (_start's call site) the child of a leaf: every chain through it loops.
    let root = raw.sites.iter().position(|s| s[1] == 0).unwrap();
    let leaf = raw.sites.iter().find(|s| s[5] != 0).unwrap()[0];
    raw.sites[root][1] = leaf;
    let e = parse_err(&encode(&raw, 8, false));
    assert!(e.contains("form a loop") && e.contains("at byte "), "{e}");

    // A call site that is its own parent.
    let mut raw = small();
    raw.sites[0][1] = raw.sites[0][0];
    let e = parse_err(&encode(&raw, 8, false));
    assert!(e.contains("form a loop"), "{e}");
}

#[test]
fn string_offset_past_the_table_is_refused() {
    let mut raw = small();
    let i = raw.sites.iter().position(|s| s[4] != 0).unwrap();
    raw.sites[i][4] = raw.strings.len() as u64 + 5;
    let e = parse_err(&encode(&raw, 4, true));
    let at = site_word_offset(&raw, 4, i, 4);
    assert!(
        e.contains(&format!("at byte {at}")) && e.contains("past the"),
        "{e}"
    );

    // A name that runs to the end of the table without its NUL.
    let mut raw = small();
    raw.strings.pop();
    let e = parse_err(&encode(&raw, 4, true));
    assert!(e.contains("no NUL"), "{e}");
}

#[test]
fn symbol_and_record_indexes_out_of_range_are_refused() {
    let mut raw = small();
    raw.sites[0][3] = 50;
    assert!(parse_err(&encode(&raw, 4, false)).contains("symbol index 50"));

    let mut raw = small();
    let i = raw.sites.iter().position(|s| s[5] != 0).unwrap();
    raw.sites[i][5] = 77;
    assert!(parse_err(&encode(&raw, 4, false)).contains("profiling record 77"));

    let mut raw = small();
    raw.records[0][0] = 0;
    assert!(parse_err(&encode(&raw, 4, false)).contains("record index 0 is not in"));

    let mut raw = small();
    raw.sites[1][0] = raw.sites[0][0];
    assert!(parse_err(&encode(&raw, 4, false)).contains("appears twice"));
}

#[test]
fn record_carried_by_no_call_site_is_refused() {
    let mut raw = small();
    for s in &mut raw.sites {
        if s[5] == 3 {
            s[5] = 0;
        }
    }
    let e = parse_err(&encode(&raw, 8, false));
    assert!(
        e.contains("profiling record 3 is carried by no call site"),
        "{e}"
    );
}

#[test]
fn counts_larger_than_the_file_are_refused_before_allocating() {
    let raw = small();
    let word = 8;
    let bytes = encode(&raw, word, false);
    let bins_len = raw.bins.as_ref().unwrap().0.len();
    let count_offsets = [
        ("bins", 4 + word * 5),
        ("profiling records", 4 + word * (6 + 2 * bins_len + 2)),
        (
            "call sites",
            4 + word * (6 + 2 * bins_len + 2 + 1 + 17 * raw.records.len()),
        ),
        (
            "symbol addresses",
            4 + word
                * (6 + 2 * bins_len + 2 + 1 + 17 * raw.records.len() + 1 + 6 * raw.sites.len()),
        ),
        (
            "string table",
            4 + word
                * (6 + 2 * bins_len
                    + 2
                    + 1
                    + 17 * raw.records.len()
                    + 1
                    + 6 * raw.sites.len()
                    + 1
                    + raw.symbols.len()),
        ),
    ];
    for (what, at) in count_offsets {
        for huge in [u64::MAX, 1 << 40, bytes.len() as u64] {
            let mut bad = bytes.clone();
            bad[at..at + 8].copy_from_slice(&huge.to_le_bytes());
            let e = parse_err(&bad);
            assert!(
                e.contains(&format!("at byte {}", at + 8)),
                "{what} = {huge}: {e}"
            );
            assert!(e.contains("do not fit"), "{what} = {huge}: {e}");
        }
    }
}

#[test]
fn older_layout_without_marker_is_refused_naming_it() {
    let bytes = encode_with(
        &small(),
        4,
        true,
        Header {
            marker: false,
            version: false,
        },
    );
    let e = parse_err(&bytes);
    assert!(
        e.contains("oldest layout") && e.contains("no endianness marker"),
        "{e}"
    );
    // The command line says the same, with exit code 1.
    let dir = tempdir();
    let input = write_file(dir.path(), "old.out", &bytes);
    let out = profconv(&[
        input.to_str().unwrap(),
        "-o",
        dir.path().join("x.pb").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("oldest layout"));
}

#[test]
fn layout_with_marker_but_no_version_is_refused_naming_it() {
    let bytes = encode_with(
        &small(),
        8,
        false,
        Header {
            marker: true,
            version: false,
        },
    );
    let e = parse_err(&bytes);
    assert!(
        e.contains("before 1.3.0") && e.contains("no version word"),
        "{e}"
    );
}

#[test]
fn sixty_four_bit_windows_files_are_refused_naming_the_abi() {
    // size_t marker of 8 bytes, then a 4-byte unsigned long version.
    let mut bytes = b"MPTL".to_vec();
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&10408u32.to_le_bytes());
    for bound in [32u64, 256, 2048] {
        bytes.extend_from_slice(&bound.to_le_bytes());
    }
    bytes.extend_from_slice(&[0u8; 40]);
    bytes.extend_from_slice(b"MPTL");
    let e = parse_err(&bytes);
    assert!(e.contains("64-bit Windows"), "{e}");
}

#[test]
fn version_word_outside_the_versions_is_refused() {
    let mut raw = small();
    raw.version = 2_000_000;
    let e = parse_err(&encode(&raw, 4, false));
    assert!(e.contains("at byte 8") && e.contains("2000000"), "{e}");
}

// ---------------------------------------------------------------------------
// --binary: files and lines from the executable (spec §3)
// ---------------------------------------------------------------------------

#[no_mangle]
#[inline(never)]
pub extern "C" fn mpatrol_probe_leaf(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn mpatrol_probe_caller(x: u64) -> u64 {
    mpatrol_probe_leaf(std::hint::black_box(x)).wrapping_add(1)
}

#[test]
fn binary_option_adds_files_and_lines_through_the_load_bias() {
    // This test executable is the profiled program: its functions' runtime
    // addresses (moved by the PIE load bias) are what mpatrol would record.
    let exe = std::env::current_exe().unwrap();
    let leaf = mpatrol_probe_leaf as *const () as usize as u64;
    let caller = mpatrol_probe_caller as *const () as usize as u64;
    let _ = mpatrol_probe_caller(1);
    let mut strings = b"\0mpatrol_probe_caller\0".to_vec();
    let leaf_name = strings.len() as u64;
    strings.extend_from_slice(b"mpatrol_probe_leaf\0");
    let raw = Raw {
        version: 10501,
        bounds: [32, 256, 2048],
        bins: None,
        records: vec![[1, 2, 0, 0, 0, 48, 0, 0, 0, 1, 0, 0, 0, 24, 0, 0, 0]],
        sites: vec![
            // A frame outside the executable (no symbol): stays an address.
            [1, 0, 0x10, 0, 0, 0],
            [2, 1, caller + 1, 1, 1, 0],
            [3, 2, leaf + 1, 2, leaf_name, 1],
        ],
        symbols: vec![caller, leaf],
        strings,
    };
    let dir = tempdir();
    let input = write_file(
        dir.path(),
        "m.out",
        &encode(&raw, 8, cfg!(target_endian = "big")),
    );
    let out = dir.path().join("m.pb");
    convert(&input, &out, &["--binary", exe.to_str().unwrap()]);
    let p = decode_pprof(&out);
    check_pprof_invariants(&p);
    assert_eq!(p.mapping.len(), 1);
    assert_eq!(s(&p, p.mapping[0].filename), exe.to_str().unwrap());
    assert!(p.mapping[0].has_functions && p.mapping[0].has_line_numbers);
    assert_eq!(p.sample.len(), 1);
    let stack = &p.sample[0].location_id;
    assert_eq!(stack.len(), 3);
    for (&id, want) in stack
        .iter()
        .zip(["mpatrol_probe_leaf", "mpatrol_probe_caller"])
    {
        let loc = p.location.iter().find(|l| l.id == id).unwrap();
        assert_eq!(loc.mapping_id, p.mapping[0].id);
        let line = loc.line.last().unwrap();
        let f = p
            .function
            .iter()
            .find(|f| f.id == line.function_id)
            .unwrap();
        assert_eq!(s(&p, f.name), want);
        assert!(
            s(&p, f.filename).ends_with("mpatrol.rs"),
            "{}",
            s(&p, f.filename)
        );
        assert!(line.line > 0);
    }
    let root = p.location.iter().find(|l| l.id == stack[2]).unwrap();
    assert_eq!(
        (root.mapping_id, root.address, root.line.len()),
        (0, 0x10, 0)
    );
    assert_eq!(p.sample[0].value, vec![2, 48, 1, 24, 1, 24]);

    // Without --binary the names still come from the file, without files.
    let out = dir.path().join("plain.pb");
    convert(&input, &out, &[]);
    let p = decode_pprof(&out);
    assert!(p.function.iter().all(|f| s(&p, f.filename).is_empty()));
    assert_eq!(
        pprof_flat(&p, "alloc_space").keys().collect::<Vec<_>>(),
        ["mpatrol_probe_leaf"]
    );
}

// ---------------------------------------------------------------------------
// A real file, checked against what mprof printed for it
// ---------------------------------------------------------------------------

fn real_dir() -> PathBuf {
    fixture("mpatrol/linux-x86_64")
}

/// The lines of one mprof table: after the line holding `title`, up to the
/// next table's title (a line of capitals only).
fn mprof_table<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| l.trim() != title).skip(1);
    let mut out = Vec::new();
    for l in lines.by_ref() {
        let t = l.trim();
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_uppercase() || c == ' ') {
            break;
        }
        out.push(l);
    }
    out
}

fn is_percent(t: &str) -> bool {
    t.contains('.') && t.parse::<f64>().is_ok()
}

/// An mprof frame (`name+17`, `name`, `0x00007F…`) as profconv names it.
fn frame_name(t: &str) -> String {
    match t.strip_prefix("0x") {
        Some(hex) => format!("{:#x}", u64::from_str_radix(hex, 16).unwrap()),
        None => t.split('+').next().unwrap().to_owned(),
    }
}

fn real_pprof(dir: &Path) -> pb::Profile {
    let out = dir.join("real.pb.gz");
    convert(&real_dir().join("mpatrol.out"), &out, &[]);
    let p = decode_pprof(&out);
    check_pprof_invariants(&p);
    p
}

#[test]
fn real_file_totals_equal_mprof_totals() {
    let text = std::fs::read_to_string(real_dir().join("mprof.txt")).unwrap();
    let bins = mprof_table(&text, "ALLOCATION BINS");
    let total: Vec<i64> = bins
        .iter()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().unwrap())
        .collect();
    let [count, bytes, unfreed_count, unfreed_bytes] = total[..] else {
        panic!("{total:?}")
    };
    let dir = tempdir();
    let p = real_pprof(dir.path());
    let sum = |name: &str| {
        p.sample
            .iter()
            .map(|smp| smp.value[type_index(&p, name)])
            .sum::<i64>()
    };
    assert_eq!(sum("alloc_objects"), count);
    assert_eq!(sum("alloc_space"), bytes);
    assert_eq!(sum("inuse_objects"), unfreed_count);
    assert_eq!(sum("inuse_space"), unfreed_bytes);
    assert_eq!(sum("free_space"), bytes - unfreed_bytes);

    let info = profconv_ok(&["info", real_dir().join("mpatrol.out").to_str().unwrap()]);
    let info = String::from_utf8(info.stdout).unwrap();
    for needle in [
        "mpatrol version: 1.5.1 (10501)".to_owned(),
        "word size: 8 bytes".to_owned(),
        "byte order: little-endian".to_owned(),
        format!("allocated: {count} objects, {bytes} bytes"),
        format!("unfreed:   {unfreed_count} objects, {unfreed_bytes} bytes"),
    ] {
        assert!(info.contains(&needle), "info lacks {needle:?}:\n{info}");
    }
    // Every bin mprof lists appears in info's histogram with its count and bytes.
    let rows: Vec<String> = bins.iter().map(|l| l.replace(">= ", ">=")).collect();
    let numeric = |r: &&String| {
        r.split_whitespace().count() == 9
            && r.trim_start()
                .starts_with(|c: char| c.is_ascii_digit() || c == '>')
    };
    let rows: Vec<&String> = rows.iter().filter(numeric).collect();
    assert_eq!(rows.len(), 11);
    // info lists the ten busiest bins with mprof's numbers and counts the rest.
    let mut listed = 0;
    for row in &rows {
        let t: Vec<&str> = row.split_whitespace().collect();
        let (size, count, unfreed, bytes) = (t[0], t[1], t[5], t[3]);
        let line = info
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size));
        if let Some(line) = line {
            let c: Vec<&str> = line.split_whitespace().collect();
            let freed = count.parse::<i64>().unwrap() - unfreed.parse::<i64>().unwrap();
            assert_eq!(c, [size, count, &freed.to_string(), bytes], "bin {size}");
            listed += 1;
        }
    }
    assert_eq!(listed, 10, "{info}");
    assert!(info.contains("(1 more non-empty bin)"), "{info}");
}

#[test]
fn real_file_functions_match_mprof_direct_allocations() {
    let text = std::fs::read_to_string(real_dir().join("mprof.txt")).unwrap();
    let mut want_alloc = BTreeMap::new();
    let mut want_inuse = BTreeMap::new();
    let mut want_count = BTreeMap::new();
    for row in mprof_table(&text, "DIRECT ALLOCATIONS") {
        let t: Vec<&str> = row.split_whitespace().collect();
        let percents: Vec<usize> = (0..t.len()).filter(|&i| is_percent(t[i])).collect();
        if percents.len() != 2 {
            continue; // headings, blank lines, the total row
        }
        let name = t[t.len() - 1].to_owned();
        want_alloc.insert(name.clone(), t[0].parse::<i64>().unwrap());
        want_inuse.insert(name.clone(), t[percents[1] - 1].parse::<i64>().unwrap());
        want_count.insert(name, t[t.len() - 2].parse::<i64>().unwrap());
    }
    assert_eq!(want_alloc.len(), 4, "mprof.txt direct table not found");
    let dir = tempdir();
    let p = real_pprof(dir.path());
    assert_eq!(pprof_flat(&p, "alloc_space"), want_alloc);
    assert_eq!(pprof_flat(&p, "alloc_objects"), want_count);
    want_inuse.retain(|_, v| *v != 0);
    assert_eq!(pprof_flat(&p, "inuse_space"), want_inuse);
}

#[test]
fn real_file_stacks_match_mprof_memory_leaks() {
    let text = std::fs::read_to_string(real_dir().join("mprof-addresses.txt")).unwrap();
    // Entries: a row of numbers ending in the leaf frame, then one line per caller.
    let mut want_bytes: BTreeMap<String, i64> = BTreeMap::new();
    let mut want_count: BTreeMap<String, i64> = BTreeMap::new();
    let mut current: Option<(i64, i64, Vec<String>)> = None;
    let mut flush = |entry: Option<(i64, i64, Vec<String>)>| {
        if let Some((bytes, count, mut frames)) = entry {
            frames.reverse();
            *want_bytes.entry(frames.join(";")).or_insert(0) += bytes;
            *want_count.entry(frames.join(";")).or_insert(0) += count;
        }
    };
    for line in mprof_table(&text, "MEMORY LEAKS") {
        let t: Vec<&str> = line.split_whitespace().collect();
        match t.len() {
            1 => {
                if let Some(c) = current.as_mut() {
                    c.2.push(frame_name(t[0]));
                }
            }
            8 if is_percent(t[0]) => {
                flush(current.take());
                current = Some((
                    t[1].parse().unwrap(),
                    t[3].parse().unwrap(),
                    vec![frame_name(t[7])],
                ));
            }
            _ => flush(current.take()),
        }
    }
    flush(current.take());
    // 7 leak entries in mprof's table; make_buffer's two (from main+106 and
    // main+129) are one stack of function names.
    assert_eq!(want_bytes.len(), 6, "{want_bytes:#?}");
    assert_eq!(want_bytes.values().sum::<i64>(), 4720);

    let dir = tempdir();
    for (kind, want) in [("inuse_space", &want_bytes), ("inuse_objects", &want_count)] {
        let out = dir.path().join(format!("{kind}.folded"));
        convert(
            &real_dir().join("mpatrol.out"),
            &out,
            &["--sample-type", kind],
        );
        let got = parse_folded(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(&got, want, "{kind}");
    }
}

#[test]
fn real_file_reads_in_go_pprof_as_a_heap_profile() {
    let dir = tempdir();
    let out = dir.path().join("real.pb.gz");
    convert(&real_dir().join("mpatrol.out"), &out, &[]);
    let Some(text) = go_pprof(&["-top", "-sample_index=alloc_space", out.to_str().unwrap()]) else {
        return;
    };
    let rows = top_table(&text);
    // mprof's direct allocations: make_buffer 6000, push 800, recurse 510, copy_name 310.
    assert_eq!(
        rows.get("make_buffer").map(String::as_str),
        Some("6000B"),
        "{text}"
    );
    assert_eq!(rows.get("push").map(String::as_str), Some("800B"), "{text}");
    assert_eq!(
        rows.get("recurse").map(String::as_str),
        Some("510B"),
        "{text}"
    );
    assert_eq!(
        rows.get("copy_name").map(String::as_str),
        Some("310B"),
        "{text}"
    );
}

#[test]
fn stacks_growing_with_the_square_of_the_file_are_refused() {
    // 6000 call sites in one chain, each carrying a record: 18 million
    // frames from a 550 kB file.
    let n = 6000u64;
    let raw = Raw {
        version: 10408,
        bounds: [32, 256, 2048],
        bins: None,
        records: (1..=n)
            .map(|i| {
                let mut r = [0u64; 17];
                r[0] = i;
                r[1] = 1;
                r[5] = 8;
                r
            })
            .collect(),
        sites: (1..=n).map(|i| [i, i - 1, 0x1000 + i, 0, 0, i]).collect(),
        symbols: vec![],
        strings: vec![0],
    };
    let dir = tempdir();
    let input = write_file(dir.path(), "deep.out", &encode(&raw, 4, false));
    // n (n + 1) / 2 frames in all: 18 003 000.
    let out = profconv(&[
        input.to_str().unwrap(),
        "-o",
        dir.path().join("x.pb").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("18003000 frames") && err.contains("limit"),
        "{err}"
    );
}

/// A call chain thousands of frames deep with an allocation at every depth:
/// the stacks add up to millions of frames (quadratic in the file), which
/// the writers must walk by frame id instead of copying (issue 13).
#[test]
fn a_deep_call_chain_converts_to_every_format_in_bounded_memory() {
    let depth = 3000;
    let funcs: Vec<Func> = (0..depth)
        .map(|i| Func {
            name: Some(Box::leak(format!("level_{i}").into_boxed_str())),
            start: 0x100 * (i as u64 + 1),
        })
        .collect();
    let allocs: Vec<Alloc> = (0..depth)
        .map(|i| Alloc {
            frames: (0..=i).rev().map(|f| (f, 0x10)).collect(),
            classes: [[1, 16, 0, 0], [0; 4], [0; 4], [0; 4]],
        })
        .collect();
    let prog = Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 0,
    };
    let dir = tempdir();
    let input = write_file(dir.path(), "deep.mpatrol", &encode(&prog.raw(8), 8, false));
    let input_bytes = std::fs::metadata(&input).unwrap().len();
    // The outputs themselves hold every frame of every stack; the process
    // may hold them once, not as per-frame objects (the speedscope writer
    // needed over 4 GB for a chain 5700 deep).
    let limit = 1_500_000_000u64;
    let prlimit = std::process::Command::new("prlimit")
        .arg("--version")
        .output();
    if prlimit.is_err() {
        assert!(!in_ci(), "prlimit (util-linux) is needed");
        crate::skip_note!("skipping: no prlimit");
        return;
    }
    for ext in ["folded", "speedscope.json", "svg", "pb.gz"] {
        let out = dir.path().join(format!("out.{ext}"));
        let run = std::process::Command::new("prlimit")
            .arg(format!("--as={limit}"))
            .arg("--")
            .arg(profconv_bin())
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{ext} under a {limit}-byte address space ({input_bytes}-byte input): {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let folded = std::fs::read_to_string(dir.path().join("out.folded")).unwrap();
    assert_eq!(folded.lines().count(), depth);
    let deepest = folded.lines().map(|l| l.matches(';').count() + 1).max();
    assert_eq!(deepest, Some(depth));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.speedscope.json")).unwrap())
            .unwrap();
    let frames: usize = doc["profiles"][0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().len())
        .sum();
    assert_eq!(frames, depth * (depth + 1) / 2);
}
