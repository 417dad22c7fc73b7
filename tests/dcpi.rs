//! DCPI reader tests (spec dcpi.md). No real DCPI file is public, so binary
//! profiles are built here by a generator that follows dcpiformat(4) §2.3;
//! the expected values come from the generator's inputs, not from profconv.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::gen::dcpi::*;
use common::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs profconv on `inputs` (plus `extra` flags) to pprof and decodes it.
fn to_pprof(dir: &Path, inputs: &[&Path], extra: &[&str]) -> pb::Profile {
    let out = dir.join("out.pb.gz");
    let mut args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    args.extend_from_slice(&["-o", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    profconv_ok(&args);
    let p = decode_pprof(&out);
    check_pprof_invariants(&p);
    p
}

fn type_index(p: &pb::Profile, name: &str) -> usize {
    p.sample_type
        .iter()
        .position(|t| s(p, t.r#type) == name)
        .unwrap_or_else(|| panic!("no sample type {name}"))
}

/// Values of sample type `type_name` by sampled address.
fn by_address(p: &pb::Profile, type_name: &str) -> BTreeMap<u64, i64> {
    let t = type_index(p, type_name);
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        assert_eq!(
            sample.location_id.len(),
            1,
            "DCPI samples are one-frame stacks"
        );
        let loc = p
            .location
            .iter()
            .find(|l| l.id == sample.location_id[0])
            .unwrap();
        *out.entry(loc.address).or_insert(0) += sample.value[t];
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Expected per-address counts of one file: `tstart + offset + 4·i`.
fn expected(tstart: u64, chunks: &[(u32, Vec<u32>)], scale: i64, into: &mut BTreeMap<u64, i64>) {
    for (offset, counts) in chunks {
        for (i, &c) in counts.iter().enumerate() {
            if c != 0 {
                *into
                    .entry(tstart + u64::from(*offset) + 4 * i as u64)
                    .or_insert(0) += i64::from(c) * scale;
            }
        }
    }
}

fn sample_types(p: &pb::Profile) -> Vec<(String, String)> {
    p.sample_type
        .iter()
        .map(|t| (s(p, t.r#type).to_owned(), s(p, t.unit).to_owned()))
        .collect()
}

fn comments(p: &pb::Profile) -> Vec<String> {
    p.comment.iter().map(|&c| s(p, c).to_owned()).collect()
}

fn read_lib(paths: &[PathBuf]) -> profconv::Result<profconv::Profile> {
    let options = profconv::ReadOptions {
        format: Some(profconv::Format::Dcpi),
        ..Default::default()
    };
    profconv::read(paths, &options)
}

// ---------------------------------------------------------------------------
// Binary profile files (§2.2, §2.3)
// ---------------------------------------------------------------------------

#[test]
fn one_chunk_counts_belong_to_tstart_plus_offset_plus_4i() {
    let dir = tempdir();
    let chunks = vec![(0x40, vec![3, 0, 7, 1])];
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(
            header(&APP, "199805191724", "cycles", 63488),
            chunks.clone(),
        )
        .bytes(),
    );
    let p = to_pprof(dir.path(), &[&file], &[]);
    let mut want = BTreeMap::new();
    expected(APP.tstart, &chunks, 1, &mut want);
    assert_eq!(
        want.keys().copied().collect::<Vec<_>>(),
        vec![0x1_2000_0040, 0x1_2000_0048, 0x1_2000_004c]
    );
    assert_eq!(by_address(&p, "cycles_samples"), want);
    let mut events = BTreeMap::new();
    expected(APP.tstart, &chunks, 63488, &mut events);
    assert_eq!(by_address(&p, "cycles"), events);
    assert_eq!(
        sample_types(&p),
        vec![
            ("cycles_samples".into(), "count".into()),
            ("cycles".into(), "events".into())
        ]
    );
    assert_eq!(p.default_sample_type, p.sample_type[1].r#type);
    assert_eq!(s(&p, p.period_type.unwrap().r#type), "cycles");
    assert_eq!(p.period, 63488);
}

#[test]
fn many_chunks_with_gaps_keep_every_count() {
    let dir = tempdir();
    let chunks = vec![
        (0x0, vec![1, 2]),
        (0x10, vec![0, 5, 0, 6]),
        (0x100, vec![9]),
        (0xffc, vec![4]),
    ];
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(header(&APP, "199805191724", "cycles", 10), chunks.clone()).bytes(),
    );
    let p = to_pprof(dir.path(), &[&file], &[]);
    let mut want = BTreeMap::new();
    expected(APP.tstart, &chunks, 1, &mut want);
    assert_eq!(want.len(), 6);
    assert_eq!(by_address(&p, "cycles_samples"), want);
    assert_eq!(by_address(&p, "cycles_samples").values().sum::<i64>(), 27);
}

#[test]
fn header_padding_to_four_bytes_is_optional() {
    let dir = tempdir();
    let chunks = vec![(0x20, vec![2, 4, 8])];
    let mut padded = BinaryProfile::new(header(&APP, "199805191724", "cycles", 1), chunks.clone());
    padded.header.push("note x".into()); // make the unpadded start misaligned
    let mut unpadded = padded.clone();
    unpadded.pad = false;
    assert_eq!(padded.binary_start() % 4, 0);
    assert_ne!(
        unpadded.binary_start() % 4,
        0,
        "the test needs a misaligned binary section"
    );
    let mut want = BTreeMap::new();
    expected(APP.tstart, &chunks, 1, &mut want);
    for (name, profile) in [("padded", padded), ("unpadded", unpadded)] {
        let file = write(&dir.path().join(name), &profile.bytes());
        let p = to_pprof(dir.path(), &[&file], &[]);
        assert_eq!(by_address(&p, "cycles_samples"), want, "{name}");
    }
}

#[test]
fn unknown_header_lines_survive_as_comments_and_metadata() {
    let dir = tempdir();
    let mut profile = BinaryProfile::new(
        header(&APP, "199805191724", "cycles", 1),
        vec![(0, vec![1])],
    );
    profile
        .header
        .insert(3, "collector dcpid 3.2 -slot cycles".into());
    profile.header.push("x-site \tbuilding 5".into());
    let file = write(&dir.path().join("app.prof"), &profile.bytes());
    let p = to_pprof(dir.path(), &[&file], &[]);
    let comments = comments(&p);
    assert!(
        comments.contains(&"collector: dcpid 3.2 -slot cycles".to_owned()),
        "{comments:?}"
    );
    assert!(
        comments.contains(&"x-site: building 5".to_owned()),
        "{comments:?}"
    );

    let json = dir.path().join("out.speedscope.json");
    profconv_ok(&[file.to_str().unwrap(), "-o", json.to_str().unwrap()]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate_speedscope(&doc);
    assert_eq!(doc["metadata"]["collector"], "dcpid 3.2 -slot cycles");
    assert_eq!(doc["metadata"]["x-site"], "building 5");
}

#[test]
fn epoch_platform_and_cpu_facts_are_kept() {
    let dir = tempdir();
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(
            header(&APP, "199805191724", "cycles", 1),
            vec![(0, vec![1])],
        )
        .bytes(),
    );
    let p = to_pprof(dir.path(), &[&file], &[]);
    // 1998-05-19 17:24 UTC.
    assert_eq!(p.time_nanos, 895_598_640 * 1_000_000_000);
    let comments = comments(&p);
    for want in [
        "epoch: 199805191724",
        "platform: walnut",
        "cpuspeed: 500",
        "cpuimplv: 2",
        "cpucount: 4",
    ] {
        assert!(
            comments.contains(&want.to_owned()),
            "{want} missing from {comments:?}"
        );
    }
}

#[test]
fn mapping_is_the_image_text_with_path_and_image_id() {
    let dir = tempdir();
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(
            header(&APP, "199805191724", "cycles", 1),
            vec![(0x8, vec![1])],
        )
        .bytes(),
    );
    let p = to_pprof(dir.path(), &[&file], &[]);
    assert_eq!(p.mapping.len(), 1);
    let m = &p.mapping[0];
    assert_eq!(m.memory_start, APP.tstart);
    assert_eq!(m.memory_limit, APP.tstart + APP.tsize);
    assert_eq!(s(&p, m.filename), APP.path);
    assert_eq!(s(&p, m.build_id), APP.id);
}

#[test]
fn older_variant_without_version_and_tstart_reads_offsets_from_zero() {
    let dir = tempdir();
    let lines: Vec<String> = header(&APP, "9805191724", "cycles", 1)
        .into_iter()
        .filter(|l| !l.starts_with("version") && !l.starts_with("tstart"))
        .collect();
    let chunks = vec![(0x30, vec![4, 5])];
    let file = write(
        &dir.path().join("vms.prof"),
        &BinaryProfile::new(lines, chunks.clone()).bytes(),
    );
    let out_path = dir.path().join("out.pb.gz");
    let out = profconv_ok(&[file.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(err.contains("no `version` line"), "{err}");
    assert!(err.contains("tstart 0"), "{err}");
    let p = decode_pprof(&out_path);
    let mut want = BTreeMap::new();
    expected(0, &chunks, 1, &mut want);
    assert_eq!(by_address(&p, "cycles_samples"), want);
    // The 10-digit epoch is YYMMDDHHMM.
    assert_eq!(p.time_nanos, 895_598_640 * 1_000_000_000);
}

#[test]
fn major_version_1_is_refused_with_dcpicat_advice() {
    let dir = tempdir();
    let mut lines = header(&APP, "199805191724", "cycles", 1);
    lines[0] = "version pdb-1.01".into();
    let file = write(
        &dir.path().join("v1.prof"),
        &BinaryProfile::new(lines, vec![(0, vec![1])]).bytes(),
    );
    let out = profconv(&[
        file.to_str().unwrap(),
        "-o",
        dir.path().join("o.pb.gz").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("v1.prof"), "{err}");
    assert!(err.contains("pdb-1.01"), "{err}");
    assert!(err.contains("undocumented"), "{err}");
    assert!(err.contains("dcpicat"), "{err}");
}

#[test]
fn insn_size_option_sets_the_address_step() {
    let dir = tempdir();
    let chunks = vec![(0x10, vec![1, 2, 3])];
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(header(&APP, "199805191724", "cycles", 1), chunks).bytes(),
    );
    let p = to_pprof(dir.path(), &[&file], &["--dcpi-insn-size", "2"]);
    let want: BTreeMap<u64, i64> = [
        (APP.tstart + 0x10, 1),
        (APP.tstart + 0x12, 2),
        (APP.tstart + 0x14, 3),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_address(&p, "cycles_samples"), want);
}

#[test]
fn footer_total_offsets_counting_covered_addresses_is_a_warning() {
    let dir = tempdir();
    let mut profile = BinaryProfile::new(
        header(&APP, "199805191724", "cycles", 1),
        vec![(0, vec![1, 0, 2])],
    );
    profile.footer = Some((3, 3));
    let file = write(&dir.path().join("app.prof"), &profile.bytes());
    let out_path = dir.path().join("o.pb.gz");
    let out = profconv_ok(&[file.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("total_offsets 3 counts every address"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        by_address(&decode_pprof(&out_path), "cycles_samples")
            .values()
            .sum::<i64>(),
        3
    );
}

#[test]
fn a_warning_is_shown_once_kept_in_pprof_and_listed_in_the_archive_report() {
    let dir = tempdir();
    let mut profile = BinaryProfile::new(
        header(&APP, "199805191724", "cycles", 1),
        vec![(0, vec![1, 0, 2])],
    );
    profile.footer = Some((3, 3));
    let archive = dir.path().join("archive");
    let file = write(&archive.join("app.prof"), &profile.bytes());
    let out_path = dir.path().join("o.pb.gz");
    let out = profconv_ok(&[file.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    let err = stderr(&out);
    let warning = "total_offsets 3 counts every address";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    assert_eq!(err.matches("profconv: warning: ").count(), 1, "{err}");
    let p = decode_pprof(&out_path);
    let comments: Vec<&str> = p
        .comment
        .iter()
        .map(|&i| p.string_table[i as usize].as_str())
        .filter(|c| c.starts_with("warning: ") && c.contains(warning))
        .collect();
    assert_eq!(comments.len(), 1, "{comments:?}");

    let report_path = dir.path().join("report.json");
    let converted = dir.path().join("converted");
    profconv_ok(&[
        "convert",
        archive.to_str().unwrap(),
        "-o",
        converted.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
        "--to",
        "pprof",
        "-q",
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let record = &report["inputs"][0];
    assert_eq!(record["status"], "converted", "{report:#}");
    let warnings = record["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report:#}");
    assert!(
        warnings[0].as_str().unwrap().contains(warning),
        "{report:#}"
    );
}

// ---------------------------------------------------------------------------
// Corrupt files: each a clear error naming the file and the offset
// ---------------------------------------------------------------------------

/// Converts `bytes` and returns the error message; asserts exit code 1 and
/// that the message names the file and `at byte {offset}`.
fn conversion_error(bytes: &[u8], offset: usize) -> String {
    let dir = tempdir();
    let file = write(&dir.path().join("bad.prof"), bytes);
    let out = profconv(&[
        "--from",
        "dcpi",
        file.to_str().unwrap(),
        "-o",
        dir.path().join("o.pb.gz").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("bad.prof"), "{err}");
    assert!(
        err.contains(&format!("at byte {offset}:")),
        "expected offset {offset}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn valid_profile() -> BinaryProfile {
    BinaryProfile::new(
        header(&APP, "199805191724", "cycles", 1),
        vec![(0x0, vec![1, 2]), (0x20, vec![3]), (0x40, vec![0, 4])],
    )
}

#[test]
fn footer_total_samples_mismatch_is_an_error() {
    let mut profile = valid_profile();
    profile.footer = Some((profile.nonzero(), profile.sum() + 1));
    let bytes = profile.bytes();
    let err = conversion_error(&bytes, bytes.len() - 4);
    assert!(err.contains("total_samples is 11"), "{err}");
}

#[test]
fn footer_total_offsets_mismatch_is_an_error() {
    let mut profile = valid_profile();
    profile.footer = Some((9, profile.sum()));
    let bytes = profile.bytes();
    let err = conversion_error(&bytes, bytes.len() - 8);
    assert!(err.contains("total_offsets is 9"), "{err}");
}

#[test]
fn overlapping_chunks_are_an_error() {
    let mut profile = valid_profile();
    profile.chunks[1].0 = 0x4; // the first chunk covers 0x0..0x8
    let second_chunk = profile.binary_start() + 16;
    let err = conversion_error(&profile.bytes(), second_chunk);
    assert!(err.contains("overlaps"), "{err}");
}

#[test]
fn decreasing_chunk_offsets_are_an_error() {
    let mut profile = valid_profile();
    profile.chunks.swap(1, 2); // offsets 0x0, 0x40, 0x20
    let third_chunk = profile.binary_start() + 16 + 16;
    let err = conversion_error(&profile.bytes(), third_chunk);
    assert!(err.contains("strictly increase"), "{err}");
}

#[test]
fn truncated_chunk_is_an_error() {
    let mut bytes = valid_profile().bytes();
    let start = valid_profile().binary_start();
    // The last chunk claims 200 counts.
    let last_chunk = start + 16 + 12;
    bytes[last_chunk + 4..last_chunk + 8].copy_from_slice(&200u32.to_le_bytes());
    let err = conversion_error(&bytes, last_chunk);
    assert!(err.contains("truncated chunk"), "{err}");
}

#[test]
fn chunks_must_end_where_the_footer_begins() {
    let mut bytes = valid_profile().bytes();
    let footer = bytes.split_off(bytes.len() - 8);
    bytes.extend_from_slice(&[0, 0, 0, 0]); // 4 stray bytes before the footer
    let stray = bytes.len() - 4;
    bytes.extend_from_slice(&footer);
    let err = conversion_error(&bytes, stray);
    assert!(err.contains("footer"), "{err}");
}

#[test]
fn missing_samples_line_is_an_error() {
    let text = header(&APP, "199805191724", "cycles", 1).join("\n") + "\n";
    let err = conversion_error(text.as_bytes(), text.len());
    assert!(err.contains("without a `samples` line"), "{err}");
}

#[test]
fn header_of_10_mb_without_newline_is_an_error() {
    let mut bytes = b"version pdb-0.07\nimage ".to_vec();
    let line = bytes.len() - 6;
    bytes.resize(10 * 1024 * 1024, b'a');
    let err = conversion_error(&bytes, line);
    assert!(err.contains("without a newline"), "{err}");
}

#[test]
fn missing_required_header_line_is_an_error() {
    let lines: Vec<String> = header(&APP, "199805191724", "cycles", 1)
        .into_iter()
        .filter(|l| !l.starts_with("event"))
        .collect();
    let bytes = BinaryProfile::new(lines, vec![(0, vec![1])]).bytes();
    let at = bytes.windows(7).position(|w| w == b"samples").unwrap();
    let err = conversion_error(&bytes, at);
    assert!(err.contains("no `event` line"), "{err}");
}

#[test]
fn malformed_number_in_header_names_its_line() {
    let mut lines = header(&APP, "199805191724", "cycles", 1);
    lines[6] = "period lots".into();
    let offset: usize = lines[..6].iter().map(|l| l.len() + 1).sum();
    let err = conversion_error(
        &BinaryProfile::new(lines, vec![(0, vec![1])]).bytes(),
        offset,
    );
    assert!(err.contains("period `lots`"), "{err}");
}

#[test]
fn every_prefix_of_a_valid_file_fails_cleanly_or_parses() {
    let dir = tempdir();
    let bytes = valid_profile().bytes();
    let path = dir.path().join("prefix.prof");
    for len in 0..bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        match read_lib(std::slice::from_ref(&path)) {
            Ok(p) => assert!(
                p.total(0) <= 10,
                "prefix {len} parsed to more samples than the file holds"
            ),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("prefix.prof"), "prefix {len}: {text}");
            }
        }
    }
    let whole = read_lib(&[write(&path, &bytes)]).unwrap();
    assert_eq!(whole.total(0), 10);
}

#[test]
fn flipped_bytes_never_panic() {
    let dir = tempdir();
    let bytes = valid_profile().bytes();
    let path = dir.path().join("flip.prof");
    for i in 0..bytes.len() {
        for value in [0x00, 0xff, 0x0a, 0x7f] {
            let mut damaged = bytes.clone();
            damaged[i] = value;
            std::fs::write(&path, &damaged).unwrap();
            let _ = read_lib(std::slice::from_ref(&path));
        }
    }
}

// ---------------------------------------------------------------------------
// Databases (§3): epochs, images, events
// ---------------------------------------------------------------------------

/// Expected `(image path, address) → value` of one event over the chosen epochs.
fn db_expected(event: &str, epochs: &[&str], events: bool) -> BTreeMap<(String, u64), i64> {
    let mut out = BTreeMap::new();
    for f in db_files()
        .iter()
        .filter(|f| f.event == event && epochs.contains(&f.epoch))
    {
        let mut per = BTreeMap::new();
        expected(
            f.image.tstart,
            &f.chunks,
            if events { f.period as i64 } else { 1 },
            &mut per,
        );
        for (a, v) in per {
            *out.entry((f.image.path.to_owned(), a)).or_insert(0) += v;
        }
    }
    out
}

fn by_image_address(p: &pb::Profile, type_name: &str) -> BTreeMap<(String, u64), i64> {
    let t = type_index(p, type_name);
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        let loc = p
            .location
            .iter()
            .find(|l| l.id == sample.location_id[0])
            .unwrap();
        let m = p.mapping.iter().find(|m| m.id == loc.mapping_id).unwrap();
        *out.entry((s(p, m.filename).to_owned(), loc.address))
            .or_insert(0) += sample.value[t];
    }
    out.retain(|_, v| *v != 0);
    out
}

/// `image;image+0xOFF` folded keys of the expected values.
fn folded_keys(values: &BTreeMap<(String, u64), i64>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for ((path, address), v) in values {
        let image = path.rsplit('/').next().unwrap();
        let start = if path == APP.path {
            APP.tstart
        } else {
            LIBC.tstart
        };
        *out.entry(format!("{image};{image}+{:#x}", address - start))
            .or_insert(0) += v;
    }
    out
}

const BOTH: &[&str] = &["199805191724", "199805201724"];

#[test]
fn database_sums_epochs_per_image_and_event_in_pprof() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let p = to_pprof(dir.path(), &[&root], &[]);
    assert_eq!(
        sample_types(&p),
        vec![
            ("cycles_samples".into(), "count".into()),
            ("cycles".into(), "events".into()),
            ("imiss_samples".into(), "count".into()),
            ("imiss".into(), "events".into()),
        ]
    );
    for event in ["cycles", "imiss"] {
        assert_eq!(
            by_image_address(&p, &format!("{event}_samples")),
            db_expected(event, BOTH, false),
            "{event}"
        );
        assert_eq!(
            by_image_address(&p, event),
            db_expected(event, BOTH, true),
            "{event} events"
        );
    }
    // Totals, worked out by hand from db_files().
    let totals: Vec<i64> = (0..4)
        .map(|t| p.sample.iter().map(|s| s.value[t]).sum())
        .collect();
    assert_eq!(totals, vec![90, 90 * 63488, 15, 15 * 4096]);
    // One mapping per image.
    let mut files: Vec<&str> = p.mapping.iter().map(|m| s(&p, m.filename)).collect();
    files.sort();
    assert_eq!(files, vec![APP.path, LIBC.path]);
    let libc = p
        .mapping
        .iter()
        .find(|m| s(&p, m.filename) == LIBC.path)
        .unwrap();
    assert_eq!(
        (libc.memory_start, libc.memory_limit),
        (LIBC.tstart, LIBC.tstart + LIBC.tsize)
    );
    assert_eq!(s(&p, libc.build_id), LIBC.id);
    // The profile starts with the first epoch.
    assert_eq!(p.time_nanos, 895_598_640 * 1_000_000_000);
    assert!(comments(&p).contains(&"epoch: 199805191724, 199805201724".to_owned()));
}

#[test]
fn database_folded_output_groups_addresses_under_their_image() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = dir.path().join("out.folded");
    let root = root.to_str().unwrap();
    let addresses = ["--granularity", "addresses"];
    profconv_ok(&[&[root, "-o", out.to_str().unwrap()], &addresses[..]].concat());
    let folded = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let cycles = folded_keys(&db_expected("cycles", BOTH, true));
    assert_eq!(folded, cycles, "default: cycles events");
    let imiss = ["--sample-type", "imiss_samples"];
    profconv_ok(
        &[
            &[root, "-o", out.to_str().unwrap()],
            &addresses[..],
            &imiss[..],
        ]
        .concat(),
    );
    let folded = parse_folded(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(folded, folded_keys(&db_expected("imiss", BOTH, false)));

    // By default (functions), the images are not at hand: each image's
    // addresses are its one frame, `[image]`, with their sum.
    profconv_ok(&[root, "-o", out.to_str().unwrap()]);
    let folded = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let mut by_image: BTreeMap<String, i64> = BTreeMap::new();
    for (stack, count) in &cycles {
        let image = stack.split(';').next().unwrap();
        *by_image.entry(format!("{image};[{image}]")).or_default() += count;
    }
    assert_eq!(folded, by_image);
}

#[test]
fn database_speedscope_has_a_profile_per_sample_type() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = dir.path().join("out.speedscope.json");
    let (root, out_path) = (root.to_str().unwrap(), out.to_str().unwrap());
    profconv_ok(&[root, "-o", out_path, "--granularity", "addresses"]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    validate_speedscope(&doc);
    for (kind, event, events) in [
        ("cycles_samples", "cycles", false),
        ("cycles", "cycles", true),
        ("imiss_samples", "imiss", false),
        ("imiss", "imiss", true),
    ] {
        let want: BTreeMap<String, f64> = folded_keys(&db_expected(event, BOTH, events))
            .into_iter()
            .map(|(k, v)| (k.rsplit(';').next().unwrap().to_owned(), v as f64))
            .collect();
        assert_eq!(speedscope_flat(&doc, kind), want, "{kind}");
    }
    // Every stack is image → address.
    let frames = doc["shared"]["frames"].as_array().unwrap();
    for sample in doc["profiles"][0]["samples"].as_array().unwrap() {
        let names: Vec<&str> = sample
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                frames[f.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names[1].starts_with(&format!("{}+0x", names[0])),
            "{names:?}"
        );
    }
}

#[test]
fn svg_of_a_database_shows_images() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = dir.path().join("out.svg");
    profconv_ok(&[root.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    check_svg(&out, &["app", "libc.so"]);
    // The image frames are boxes of their own: titles `app (…)`, `libc.so (…)`.
    let text = std::fs::read_to_string(&out).unwrap();
    for image in ["app", "libc.so"] {
        assert!(
            text.contains(&format!("<title>{image} (")),
            "no frame {image}"
        );
    }
}

#[test]
fn epoch_latest_reads_only_the_newest_epoch() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let p = to_pprof(dir.path(), &[&root], &["--epoch", "latest"]);
    let latest = &["199805201724"];
    assert_eq!(
        by_image_address(&p, "cycles_samples"),
        db_expected("cycles", latest, false)
    );
    assert_eq!(
        by_image_address(&p, "imiss_samples"),
        db_expected("imiss", latest, false)
    );
}

#[test]
fn epoch_by_name_reads_that_epoch() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let p = to_pprof(dir.path(), &[&root], &["--epoch", "199805191724"]);
    let first = &["199805191724"];
    assert_eq!(
        by_image_address(&p, "cycles_samples"),
        db_expected("cycles", first, false)
    );
    assert_eq!(
        by_image_address(&p, "imiss_samples"),
        db_expected("imiss", first, false)
    );
}

#[test]
fn unknown_epoch_is_a_usage_error_listing_the_epochs() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = profconv(&[
        root.to_str().unwrap(),
        "--epoch",
        "200001010000",
        "-o",
        dir.path().join("o.pb.gz").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("199805191724, 199805201724"), "{err}");
}

#[test]
fn profile_files_are_picked_by_content_not_name() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = profconv_ok(&["info", root.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("5 profile files"), "{text}");
    assert!(text.contains("2 other files skipped"), "{text}");
}

#[test]
fn same_image_id_and_event_in_two_files_are_summed() {
    let dir = tempdir();
    let a = write(
        &dir.path().join("a"),
        &BinaryProfile::new(
            header(&APP, "199805191724", "cycles", 2),
            vec![(0, vec![1, 2])],
        )
        .bytes(),
    );
    let b = write(
        &dir.path().join("b"),
        &BinaryProfile::new(
            header(&APP, "199805201724", "cycles", 2),
            vec![(4, vec![10, 20])],
        )
        .bytes(),
    );
    let p = to_pprof(dir.path(), &[&a, &b], &[]);
    let want: BTreeMap<u64, i64> = [(APP.tstart, 1), (APP.tstart + 4, 12), (APP.tstart + 8, 20)]
        .into_iter()
        .collect();
    assert_eq!(by_address(&p, "cycles_samples"), want);
    assert_eq!(p.mapping.len(), 1);
}

#[test]
fn info_prints_header_fields_events_images_and_epochs() {
    let dir = tempdir();
    let root = dir.path().join("dcpidb");
    make_db(&root);
    let out = profconv_ok(&["info", root.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "199805191724  (3 files)",
        "199805201724  (2 files)",
        "cycles: period 63488, 90 samples, 5713920 events",
        "imiss: period 4096, 15 samples, 61440 events",
        "19980519000000aaaaaa /usr/bin/app: text 0x120000000+0x1000, 3 files; cycles 76 imiss 3",
        "19970101000000bbbbbb /usr/shlib/libc.so: text 0x3ff80000000+0x2000, 2 files; cycles 14 imiss 12",
        "platform: walnut",
        "cpuspeed: 500",
    ] {
        assert!(text.contains(want), "info lacks {want:?}:\n{text}");
    }
    let one = root.join("199805191724/walnut/app.cyc");
    let out = profconv_ok(&["info", one.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("version pdb-0.07"), "{text}");
    assert!(text.contains("tstart 120000000"), "{text}");
    assert!(
        text.contains("2 chunks, 3 addresses with samples"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// dcpicat dumps (§2.5)
// ---------------------------------------------------------------------------

#[test]
fn dcpicat_man_page_example_converts_with_its_event_columns() {
    let dir = tempdir();
    let input = fixture("dcpi/dcpicat-manpage.txt");
    let out_path = dir.path().join("out.pb.gz");
    let out = profconv_ok(&[input.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    // The man page shows one row of many: the declared totals do not match.
    let err = stderr(&out);
    assert!(
        err.contains("rows sum to 29 samples, the event line declares 470352"),
        "{err}"
    );
    let p = decode_pprof(&out_path);
    check_pprof_invariants(&p);
    let pc = 0x1_2006_cbb8;
    assert_eq!(
        by_address(&p, "cycles_samples"),
        [(pc, 29)].into_iter().collect()
    );
    assert_eq!(
        by_address(&p, "imiss_samples"),
        [(pc, 27)].into_iter().collect()
    );
    assert_eq!(
        by_address(&p, "cycles"),
        [(pc, 29 * 63488)].into_iter().collect()
    );
    assert_eq!(
        by_address(&p, "imiss"),
        [(pc, 27 * 4096)].into_iter().collect()
    );
    let m = &p.mapping[0];
    assert_eq!(
        (m.memory_start, m.memory_limit),
        (0x1_2000_0000, 0x1_2080_0000)
    );
    assert_eq!(s(&p, m.filename), "/usr/local/bin/xemacs");
    assert_eq!(s(&p, m.build_id), "19970328081403c0c18b");
    assert_eq!(p.time_nanos, 895_598_640 * 1_000_000_000);
    assert!(comments(&p).contains(&"platform: walnut".to_owned()));

    let info = profconv_ok(&["info", input.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains("cycles period 63488 29 samples (declared 470352)"),
        "{text}"
    );
    assert!(
        text.contains("imiss period 4096 27 samples (declared 134705)"),
        "{text}"
    );
}

#[test]
fn dcpicat_rows_that_sum_to_the_declared_totals_convert_without_warning() {
    let dir = tempdir();
    let text = "name        xemacs\nimage       19970328081403c0c18b\nlabel       foo\n\
                path        /usr/local/bin/xemacs\npath        /opt/xemacs\nepoch       199805191724\n\
                platform    walnut\ntext_start  0x000120000000\ntext_size   0x000000800000\n\
                event       40 cycles:63488:10000\nevent       9 imiss:4096:5000\n\
                0x00012006cbb8  29  7\n0x00012006cbbc  0  2\n0x000120070000  11  0\n";
    let input = write(&dir.path().join("xemacs.dump"), text.as_bytes());
    let out_path = dir.path().join("out.pb.gz");
    let out = profconv_ok(&[input.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let p = decode_pprof(&out_path);
    let t = type_index(&p, "cycles_samples");
    assert_eq!(p.sample.iter().map(|s| s.value[t]).sum::<i64>(), 40);
    let t = type_index(&p, "imiss_samples");
    assert_eq!(p.sample.iter().map(|s| s.value[t]).sum::<i64>(), 9);
    assert_eq!(
        by_address(&p, "imiss_samples"),
        [(0x1_2006_cbb8, 7), (0x1_2006_cbbc, 2)]
            .into_iter()
            .collect()
    );
    // The label line becomes a sample label.
    for sample in &p.sample {
        assert_eq!(sample.label.len(), 1);
        assert_eq!(s(&p, sample.label[0].key), "label");
        assert_eq!(s(&p, sample.label[0].str), "foo");
    }
    assert!(
        comments(&p).contains(&"imiss monitored fraction: 50.00%".to_owned()),
        "{:?}",
        comments(&p)
    );
}

#[test]
fn dcpicat_profileme_event_names_keep_their_colons() {
    let dir = tempdir();
    let text = "name a.out\nimage 0abc\nepoch 200212042334\nplatform p\ntext_start 0x120000000\n\
                text_size 0x100\nevent 5 retired^!notrap:m0count:1024:10000\n0x120000010 5\n";
    let input = write(&dir.path().join("pm.dump"), text.as_bytes());
    let p = to_pprof(dir.path(), &[&input], &[]);
    assert_eq!(
        sample_types(&p),
        vec![
            ("retired^!notrap:m0count_samples".into(), "count".into()),
            ("retired^!notrap:m0count".into(), "events".into()),
        ]
    );
    assert_eq!(
        by_address(&p, "retired^!notrap:m0count"),
        [(0x1_2000_0010, 5 * 1024)].into_iter().collect()
    );
}

#[test]
fn dcpicat_row_with_wrong_column_count_is_an_error() {
    let text = "name a\nimage 0abc\ntext_start 0x1000\nevent 3 cycles:1:10000\nevent 0 imiss:1:10000\n0x1000 3\n";
    let dir = tempdir();
    let input = write(&dir.path().join("bad.dump"), text.as_bytes());
    let out = profconv(&[
        input.to_str().unwrap(),
        "-o",
        dir.path().join("o.pb.gz").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let row = text.find("0x1000 3").unwrap();
    assert!(err.contains(&format!("bad.dump: at byte {row}:")), "{err}");
    assert!(err.contains("expected 2 counts"), "{err}");
}

// ---------------------------------------------------------------------------
// Symbolization and go tool pprof
// ---------------------------------------------------------------------------

/// Compiles procs.c; `None` when no C compiler is installed (outside CI).
fn compile_procs(dir: &Path) -> Option<PathBuf> {
    let exe = dir.join("procs");
    let status = std::process::Command::new("gcc")
        .args(["-O0", "-g", "-o"])
        .arg(&exe)
        .arg(fixture("dcpi/procs.c"))
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        _ => {
            assert!(!in_ci(), "gcc is needed for the DCPI symbolization tests");
            crate::skip_note!("skipping: gcc not available");
            None
        }
    }
}

/// `.text` address and size, and the (address, size) of two symbols, read
/// with the `object` crate directly.
fn procs_layout(exe: &Path) -> ((u64, u64), (u64, u64), (u64, u64)) {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let sym = |name: &str| {
        let s = file.symbols().find(|s| s.name() == Ok(name)).unwrap();
        (s.address(), s.size())
    };
    (
        (text.address(), text.size()),
        sym("alpha_proc"),
        sym("beta_proc"),
    )
}

/// A database of `procs` with samples on alpha_proc's first three
/// instructions (5, 6, 7) and beta_proc's first two (1, 2), period 1000.
fn procs_db(root: &Path, exe: &Path) -> (u64, u64) {
    let ((text, text_size), (alpha, alpha_size), (beta, beta_size)) = procs_layout(exe);
    assert!(
        alpha_size >= 12 && beta_size >= 8,
        "procedures too small for the test"
    );
    let image = ImageSpec {
        id: "20261122000000123456",
        path: "/nonexistent/procs",
        tstart: text,
        tsize: text_size,
    };
    let mut lines = header(&image, "202611220000", "cycles", 1000);
    lines[2] = format!("path {}", exe.display());
    let (a, b) = ((alpha - text) as u32, (beta - text) as u32);
    let chunks = if a < b {
        vec![(a, vec![5, 6, 7]), (b, vec![1, 2])]
    } else {
        vec![(b, vec![1, 2]), (a, vec![5, 6, 7])]
    };
    let bytes = BinaryProfile::new(lines, chunks).bytes();
    write(&root.join("202611220000/host/procs.prof"), &bytes);
    (alpha, beta)
}

#[test]
fn binary_option_symbolizes_addresses_to_procedures() {
    let dir = tempdir();
    let Some(exe) = compile_procs(dir.path()) else {
        return;
    };
    let root = dir.path().join("db");
    procs_db(&root, &exe);
    let p = to_pprof(dir.path(), &[&root], &["--binary", exe.to_str().unwrap()]);
    let flat = pprof_flat(&p, "cycles_samples");
    assert_eq!(flat.get("alpha_proc"), Some(&18));
    assert_eq!(flat.get("beta_proc"), Some(&3));
    let out = dir.path().join("out.folded");
    profconv_ok(&[
        root.to_str().unwrap(),
        "--binary",
        exe.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let folded = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let want: BTreeMap<String, i64> = [
        ("procs;alpha_proc".to_owned(), 18_000),
        ("procs;beta_proc".to_owned(), 3_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(folded, want);
}

#[test]
fn image_dir_finds_images_by_their_path() {
    let dir = tempdir();
    let Some(exe) = compile_procs(dir.path()) else {
        return;
    };
    let root = dir.path().join("db");
    procs_db(&root, &exe);
    // The image dir holds the image under the basename of its path.
    let images = dir.path().join("images");
    std::fs::create_dir_all(&images).unwrap();
    std::fs::copy(&exe, images.join("procs")).unwrap();
    let p = to_pprof(
        dir.path(),
        &[&root],
        &["--image-dir", images.to_str().unwrap()],
    );
    let flat = pprof_flat(&p, "cycles");
    assert_eq!(flat.get("alpha_proc"), Some(&18_000));
    assert_eq!(flat.get("beta_proc"), Some(&3_000));
}

#[test]
fn go_tool_pprof_top_lists_the_procedures_of_a_database() {
    let dir = tempdir();
    let Some(exe) = compile_procs(dir.path()) else {
        return;
    };
    let root = dir.path().join("db");
    let (alpha, _) = procs_db(&root, &exe);
    let out = dir.path().join("sym.pb.gz");
    profconv_ok(&[
        root.to_str().unwrap(),
        "--binary",
        exe.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let Some(top) = go_pprof(&["-top", out.to_str().unwrap()]) else {
        return;
    };
    // pprof appends the unit it does not know to the number.
    assert_eq!(line_in(&top, "alpha_proc"), "18000events");
    assert_eq!(line_in(&top, "beta_proc"), "3000events");
    let top = go_pprof(&[
        "-top",
        "-sample_index=cycles_samples",
        out.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(line_in(&top, "alpha_proc"), "18");

    // Without a binary, pprof lists the sampled addresses.
    let raw = dir.path().join("raw.pb.gz");
    profconv_ok(&[root.to_str().unwrap(), "-o", raw.to_str().unwrap()]);
    let top = go_pprof(&["-top", "-addresses", raw.to_str().unwrap()]).unwrap();
    assert!(
        top.contains(&format!("{alpha:x}")),
        "address {alpha:#x} missing from:\n{top}"
    );
}

fn line_in(top: &str, name: &str) -> String {
    top.lines()
        .find(|l| l.trim_end().ends_with(name))
        .unwrap_or_else(|| panic!("{name} missing from:\n{top}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn single_profile_file_is_detected_without_from() {
    let dir = tempdir();
    let file = write(&dir.path().join("whatever.bin"), &valid_profile().bytes());
    let dcpi = Some(profconv::Format::Dcpi);
    assert_eq!(profconv::read::detect(&file).unwrap(), dcpi);
    let dump = fixture("dcpi/dcpicat-manpage.txt");
    assert_eq!(profconv::read::detect(&dump).unwrap(), dcpi);
}

#[test]
fn period_given_twice_keeps_the_first_and_warns() {
    let dir = tempdir();
    let mut lines = header(&APP, "199805191724", "cycles", 100);
    lines.push("period 7".into());
    let file = write(
        &dir.path().join("app.prof"),
        &BinaryProfile::new(lines, vec![(0, vec![3])]).bytes(),
    );
    let out_path = dir.path().join("o.pb.gz");
    let out = profconv_ok(&[file.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("`period` line appears more than once"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        by_address(&decode_pprof(&out_path), "cycles"),
        [(APP.tstart, 300)].into_iter().collect()
    );
}

#[test]
fn every_prefix_of_the_dcpicat_example_fails_cleanly_or_parses() {
    let dir = tempdir();
    let bytes = std::fs::read(fixture("dcpi/dcpicat-manpage.txt")).unwrap();
    let path = dir.path().join("prefix.dump");
    for len in 0..=bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        if let Err(e) = read_lib(std::slice::from_ref(&path)) {
            assert!(e.to_string().contains("prefix.dump"), "prefix {len}: {e}");
        }
    }
}

#[test]
fn gzip_compressed_profile_files_are_read() {
    use std::io::Write;
    let dir = tempdir();
    let chunks = vec![(0x8, vec![2, 3])];
    let bytes =
        BinaryProfile::new(header(&APP, "199805191724", "cycles", 1), chunks.clone()).bytes();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).unwrap();
    let root = dir.path().join("db");
    write(
        &root.join("199805191724/app.prof.gz"),
        &gz.finish().unwrap(),
    );
    let p = to_pprof(dir.path(), &[&root], &[]);
    let mut want = BTreeMap::new();
    expected(APP.tstart, &chunks, 1, &mut want);
    assert_eq!(by_address(&p, "cycles_samples"), want);
}
