//! APS sample files (spec aps.md §3–§10), written by a generator from a
//! description: both byte orders, call depths and path lengths, kernel and
//! user frames, overlapping processes, pid_info, an ELF built here to
//! symbolize with, and hostile input.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::gen::aps::*;
use common::*;
use profconv::read::{self, ApsOptions, Input, ReadOptions};
use profconv::Format;

/// Opens a file as the library's readers take it.
fn open(path: &Path) -> Vec<Input> {
    vec![Input::open(path, None).unwrap()]
}

/// `options` with the format forced to APS, as `--from aps`.
fn as_aps(options: &ReadOptions) -> ReadOptions {
    ReadOptions {
        format: Some(Format::Aps),
        ..options.clone()
    }
}

/// What the format of `bytes` is detected as.
fn detected(bytes: &[u8]) -> Option<Format> {
    read::detect_input(&Input::from_bytes("sample", bytes.to_vec()))
}

// ---------------------------------------------------------------------------
// The board most tests use.

const CPU_CYCLES: u32 = 17;
const L1D_CACHE_REFILL: u32 = 3;

/// Two processes whose executables overlap (same range, other files) and who
/// map the same libc range; vmlinux in two entries and one module.
fn board() -> Aps {
    let mut records = Vec::new();
    for _ in 0..3 {
        records.push(user(100, 100, CPU_CYCLES, 0x8010, &[0x4000_0104, 0x8200]));
    }
    records.push(user(100, 101, CPU_CYCLES, 0x4000_0050, &[]));
    for _ in 0..2 {
        records.push(user(200, 200, CPU_CYCLES, 0x8010, &[0x8300]));
    }
    records.push(user(200, 200, CPU_CYCLES, 0x4000_0050, &[]));
    records.push(kernel(100, 100, CPU_CYCLES, 0xc040_0010, &[0xbf00_0020]));
    for _ in 0..4 {
        records.push(kernel(0, 0, CPU_CYCLES, 0xc000_8000, &[]));
    }
    for _ in 0..2 {
        records.push(user(100, 100, L1D_CACHE_REFILL, 0x8010, &[]));
    }
    records.push(user(200, 201, 99, 0x9000, &[]));
    Aps {
        records,
        modules: vec![
            (0xc000_8000, 0xc03f_ffff, "vmlinux".into()),
            (0xbf00_0000, 0xbf00_ffff, "ext4".into()),
            (0xc040_0000, 0xc04f_ffff, "vmlinux".into()),
        ],
        vmas: vec![
            vma(100, 0x4000_0000, 0x400f_ffff, "/lib/libc.so.6"),
            vma(100, 0x8000, 0x17fff, "/usr/bin/app"),
            vma(200, 0x8000, 0x17fff, "/usr/bin/other"),
            vma(200, 0x4000_0000, 0x400f_ffff, "/lib/libc.so.6"),
        ],
        ..Aps::default()
    }
}

const BOARD_FILE: &str = "sample_cpu_1_20150716_130220";

// ---------------------------------------------------------------------------
// Reading outputs back.

/// Runs a conversion and returns the output path.
fn convert(inputs: &[&Path], out: &Path, extra: &[&str]) -> PathBuf {
    let mut args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    args.extend(["-o", out.to_str().unwrap()]);
    args.extend(extra);
    profconv_ok(&args);
    out.to_path_buf()
}

/// A location's name as a reader of the pprof sees it: the innermost
/// function, else `basename(mapping file)+0xOFFSET`, else `0xADDRESS`.
fn location_name(p: &pb::Profile, id: u64) -> String {
    let loc = p.location.iter().find(|l| l.id == id).unwrap();
    if let Some(line) = loc.line.first() {
        let f = p
            .function
            .iter()
            .find(|f| f.id == line.function_id)
            .unwrap();
        return s(p, f.name).to_owned();
    }
    match p.mapping.iter().find(|m| m.id == loc.mapping_id) {
        Some(m) => {
            let file = s(p, m.filename);
            let base = file.rsplit('/').next().unwrap();
            format!("{base}+{:#x}", loc.address - m.memory_start + m.file_offset)
        }
        None => format!("{:#x}", loc.address),
    }
}

fn label_text(p: &pb::Profile, l: &pb::Label) -> String {
    if l.str != 0 {
        format!("{}={}", s(p, l.key), s(p, l.str))
    } else {
        format!("{}={}", s(p, l.key), l.num)
    }
}

/// Samples as `"labels | leaf;caller;..."` → values, labels sorted by key.
fn pprof_samples(p: &pb::Profile) -> BTreeMap<String, Vec<i64>> {
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        let mut labels: Vec<String> = sample.label.iter().map(|l| label_text(p, l)).collect();
        labels.sort();
        let stack: Vec<String> = sample
            .location_id
            .iter()
            .map(|&id| location_name(p, id))
            .collect();
        let key = format!("{} | {}", labels.join(" "), stack.join(";"));
        let slot = out
            .entry(key)
            .or_insert_with(|| vec![0; sample.value.len()]);
        for (a, v) in slot.iter_mut().zip(&sample.value) {
            *a += v;
        }
    }
    out
}

fn sample_types(p: &pb::Profile) -> Vec<String> {
    p.sample_type
        .iter()
        .map(|t| format!("{}/{}", s(p, t.r#type), s(p, t.unit)))
        .collect()
}

fn read_pprof(path: &Path) -> pb::Profile {
    let p = decode_pprof(path);
    check_pprof_invariants(&p);
    p
}

fn folded(path: &Path) -> BTreeMap<String, i64> {
    parse_folded(&std::fs::read_to_string(path).unwrap())
}

fn speedscope(path: &Path) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    validate_speedscope(&doc);
    doc
}

/// Root-first stacks → weight of the speedscope profile named `kind (...)`.
fn speedscope_stacks(doc: &serde_json::Value, kind: &str) -> BTreeMap<String, f64> {
    let frames = doc["shared"]["frames"].as_array().unwrap();
    let profile = doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{kind} ("))
        })
        .unwrap_or_else(|| panic!("no speedscope profile {kind}"));
    let mut out = BTreeMap::new();
    for (sample, w) in profile["samples"]
        .as_array()
        .unwrap()
        .iter()
        .zip(profile["weights"].as_array().unwrap())
    {
        let names: Vec<&str> = sample
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        *out.entry(names.join(";")).or_insert(0.0) += w.as_f64().unwrap();
    }
    out
}

fn read_err(path: &Path, options: &ReadOptions) -> String {
    match read::read_inputs(&open(path), &as_aps(options)) {
        Ok(_) => panic!("{} was read without error", path.display()),
        Err(e) => e.to_string(),
    }
}

fn info(args: &[&str]) -> String {
    let mut all = vec!["info"];
    all.extend(args);
    String::from_utf8(profconv_ok(&all).stdout).unwrap()
}

// The board's expected samples, in pprof order (leaf first), with the
// values [samples, L1D_CACHE_REFILL events, CPU_CYCLES events, event@99 events].
const APP: &str = "process_name=app";
const OTHER: &str = "process_name=other";

fn board_expected(cpu: Option<u32>) -> BTreeMap<String, Vec<i64>> {
    let cpu = cpu.map(|c| format!("cpu={c} ")).unwrap_or_default();
    let rows: Vec<(String, &str, Vec<i64>)> = vec![
        (
            format!("{cpu}mode=user pid=100 {APP} tid=100"),
            "app+0x10;libc.so.6+0x104;app+0x200",
            vec![3, 0, 3000, 0],
        ),
        (
            format!("{cpu}mode=user pid=100 {APP} tid=101"),
            "libc.so.6+0x50",
            vec![1, 0, 1000, 0],
        ),
        (
            format!("{cpu}mode=user pid=200 {OTHER} tid=200"),
            "other+0x10;other+0x300",
            vec![2, 0, 2000, 0],
        ),
        (
            format!("{cpu}mode=user pid=200 {OTHER} tid=200"),
            "libc.so.6+0x50",
            vec![1, 0, 1000, 0],
        ),
        (
            format!("{cpu}mode=kernel pid=100 {APP} tid=100"),
            "vmlinux+0x3f8010;ext4.ko+0x20",
            vec![1, 0, 1000, 0],
        ),
        (
            format!("{cpu}mode=kernel pid=0 tid=0"),
            "vmlinux+0x0",
            vec![4, 0, 4000, 0],
        ),
        (
            format!("{cpu}mode=user pid=100 {APP} tid=100"),
            "app+0x10",
            vec![2, 2000, 0, 0],
        ),
        (
            format!("{cpu}mode=user pid=200 {OTHER} tid=201"),
            "other+0x1000",
            vec![1, 0, 0, 1000],
        ),
    ];
    rows.into_iter()
        .map(|(l, s, v)| (format!("{l} | {s}"), v))
        .collect()
}

// ---------------------------------------------------------------------------
// Layout and byte order (§3, §4, §10).

#[test]
fn little_endian_board_converts_with_every_count_label_and_mapping() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let out = convert(&[&input], &dir.path().join("out.pb.gz"), &[]);
    let p = read_pprof(&out);
    assert_eq!(
        sample_types(&p),
        [
            "samples/count",
            "L1D_CACHE_REFILL/events",
            "CPU_CYCLES/events",
            "event@99/events"
        ]
    );
    assert_eq!(s(&p, p.default_sample_type), "samples");
    assert_eq!(pprof_samples(&p), board_expected(Some(1)));
    go_pprof(&["-raw", out.to_str().unwrap()]);
}

#[test]
fn big_endian_file_reads_like_the_little_endian_one() {
    let dir = tempdir();
    let input = board().all_big().write(dir.path(), BOARD_FILE);
    let out = convert(&[&input], &dir.path().join("out.pb"), &[]);
    let p = read_pprof(&out);
    assert_eq!(pprof_samples(&p), board_expected(Some(1)));
    assert!(info(&[input.to_str().unwrap()])
        .contains("head and records big-endian, module table big-endian, vma table big-endian"));
}

#[test]
fn each_section_takes_its_byte_order_from_its_own_magic() {
    let dir = tempdir();
    let mut mixed = board();
    mixed.big = true;
    mixed.module_big = false;
    mixed.vma_big = true;
    let input = mixed.write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    assert_eq!(pprof_samples(&p), board_expected(Some(1)));
    let text = info(&[input.to_str().unwrap()]);
    assert!(
        text.contains(
            "head and records big-endian, module table little-endian, vma table big-endian"
        ),
        "{text}"
    );
}

#[test]
fn call_depth_and_path_length_are_detected_from_the_magics_and_the_file_size() {
    let dir = tempdir();
    for (depth, path_len) in [
        (5, 256),
        (8, 256),
        (5, 128),
        (3, 260),
        (16, 4096),
        (1, 64),
        (12, 1000),
    ] {
        let mut a = board();
        a.depth = depth;
        a.path_len = path_len;
        // Keep cs entries within this depth.
        for r in &mut a.records {
            r.cs.truncate(depth);
            r.cs_layer = r.cs.len() as i32;
        }
        let input = a.write(dir.path(), &format!("sample_cpu_0_{depth}_{path_len}"));
        let text = info(&[input.to_str().unwrap()]);
        assert!(
            text.contains(&format!("call depth:    {depth} (detected)")),
            "{text}"
        );
        assert!(
            text.contains(&format!("path length:   {path_len} (detected)")),
            "{text}"
        );
        assert!(
            text.contains(&format!("record size:   {} bytes", 36 + 4 * depth)),
            "{text}"
        );
        let p = read_pprof(&convert(
            &[&input],
            &dir.path().join(format!("{depth}-{path_len}.pb")),
            &[],
        ));
        let samples = pprof_samples(&p);
        let total: i64 = samples.values().map(|v| v[0]).sum();
        assert_eq!(total, a.records.len() as i64, "D={depth} P={path_len}");
        if depth >= 2 {
            assert_eq!(samples, board_expected(Some(0)), "D={depth} P={path_len}");
        }
    }
}

#[test]
fn path_length_is_found_from_the_vma_table_when_there_are_no_modules() {
    let dir = tempdir();
    let mut a = board();
    a.modules.clear();
    a.records.retain(|r| r.user);
    a.path_len = 300;
    let input = a.write(dir.path(), "nomods");
    let text = info(&[input.to_str().unwrap()]);
    assert!(text.contains("path length:   300 (detected)"), "{text}");
}

#[test]
fn call_depth_of_a_file_without_records_is_the_default() {
    let dir = tempdir();
    let mut a = board();
    a.records.clear();
    a.depth = 9;
    let input = a.write(dir.path(), "empty");
    let text = info(&[input.to_str().unwrap()]);
    assert!(
        text.contains("call depth:    5 (default: the file does not tell)"),
        "{text}"
    );
    assert!(text.contains("path length:   256 (detected)"), "{text}");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    assert!(p.sample.is_empty());
}

#[test]
fn depth_and_path_length_flags_override_detection() {
    let dir = tempdir();
    let mut a = board();
    a.depth = 7;
    a.path_len = 100;
    let input = a.write(dir.path(), "given");
    let path = input.to_str().unwrap();
    let text = info(&[path, "--aps-call-depth", "7", "--aps-path-len", "100"]);
    assert!(text.contains("call depth:    7 (given)"), "{text}");
    assert!(text.contains("path length:   100 (given)"), "{text}");
    let text = info(&[path, "--aps-call-depth", "7"]);
    assert!(
        text.contains("call depth:    7 (given)") && text.contains("path length:   100 (detected)"),
        "{text}"
    );

    // Wrong values are errors that say where the magic was expected.
    let options = ReadOptions {
        aps: ApsOptions {
            call_depth: Some(5),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = read_err(&input, &options);
    let offset = 56 + a.records.len() * 56;
    assert!(
        e.contains(&format!("at byte {offset}")) && e.contains("module table magic"),
        "{e}"
    );
    let options = ReadOptions {
        aps: ApsOptions {
            path_len: Some(256),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = read_err(&input, &options);
    assert!(e.contains("vma table magic"), "{e}");
}

#[test]
fn strings_end_at_the_first_nul_and_decode_lossily() {
    let dir = tempdir();
    let mut a = board();
    a.records = vec![user(100, 100, CPU_CYCLES, 0x8010, &[])];
    // path_buffer puts junk after the NUL; one byte of the name is not UTF-8.
    a.vmas = vec![vma(100, 0x8000, 0x17fff, "/usr/bin/apXp")];
    let mut bytes = a.bytes();
    let name_at = bytes.len() - 256;
    assert_eq!(&bytes[name_at..name_at + 14], b"/usr/bin/apXp\0");
    assert_eq!(bytes[name_at + 14], b'J');
    bytes[name_at + 11] = 0xff;
    let input = write_bytes(dir.path(), "lossy", &bytes);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let files: Vec<&str> = p.mapping.iter().map(|m| s(&p, m.filename)).collect();
    assert_eq!(files, ["/usr/bin/ap\u{fffd}p"]);
}

// ---------------------------------------------------------------------------
// Stacks (§5, §10).

#[test]
fn stack_is_pc_then_cs_up_to_cs_layer_clamped_to_the_call_depth() {
    let dir = tempdir();
    let mut a = board();
    a.depth = 4;
    let cs = [0x8100, 0x8200, 0x8300, 0x8400];
    a.records = Vec::new();
    for layer in [-3, 0, 1, 2, 3, 4, 5, 1000] {
        let mut r = user(100, 100, CPU_CYCLES, 0x8010, &cs);
        r.tid = 1000 + layer;
        r.cs_layer = layer;
        a.records.push(r);
    }
    let input = a.write(dir.path(), "layers");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let got: BTreeMap<i64, String> = p
        .sample
        .iter()
        .map(|sample| {
            let tid = sample
                .label
                .iter()
                .find(|l| s(&p, l.key) == "tid")
                .unwrap()
                .num;
            let names: Vec<String> = sample
                .location_id
                .iter()
                .map(|&id| location_name(&p, id))
                .collect();
            (tid - 1000, names.join(";"))
        })
        .collect();
    let full = "app+0x10;app+0x100;app+0x200;app+0x300;app+0x400";
    let expected: BTreeMap<i64, String> = [
        (-3, "app+0x10"),
        (0, "app+0x10"),
        (1, "app+0x10;app+0x100"),
        (2, "app+0x10;app+0x100;app+0x200"),
        (3, "app+0x10;app+0x100;app+0x200;app+0x300"),
        (4, full),
        (5, full),
        (1000, full),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect();
    assert_eq!(got, expected);
    let text = info(&[input.to_str().unwrap()]);
    assert!(
        text.contains("3 records have cs_layer outside 0..=4 (clamped)"),
        "{text}"
    );
}

#[test]
fn stack_stops_at_the_first_zero_call_site() {
    let dir = tempdir();
    let mut a = board();
    a.records = vec![user(100, 100, CPU_CYCLES, 0x8010, &[0x8100, 0, 0x8300])];
    let input = a.write(dir.path(), "zero");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let samples = pprof_samples(&p);
    assert_eq!(
        samples.keys().next().unwrap().split(" | ").nth(1),
        Some("app+0x10;app+0x100")
    );
}

#[test]
fn caller_frames_are_return_addresses_and_the_leaf_is_not() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    // Unsymbolized, both keep their exact address; the pprof model has no
    // flag, so check the IR through the library.
    let profile = read::read_inputs(&open(&input), &as_aps(&ReadOptions::default())).unwrap();
    for sample in profile.samples() {
        for (i, &loc) in sample.stack.iter().enumerate() {
            assert_eq!(profile.locations()[loc.index()].is_return_address, i > 0);
        }
    }
    assert!(p.location.iter().any(|l| l.address == 0x4000_0104));
}

// ---------------------------------------------------------------------------
// Mappings (§5, §10).

#[test]
fn user_frames_map_per_pid_and_vma_even_where_processes_overlap() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let mapping = |id: u64| p.mapping.iter().find(|m| m.id == id).unwrap();
    // 0x8010 in pid 100 (app) and in pid 200 (other): two locations, two mappings.
    let at_8010: Vec<&pb::Location> = p.location.iter().filter(|l| l.address == 0x8010).collect();
    let files: BTreeSet<&str> = at_8010
        .iter()
        .map(|l| s(&p, mapping(l.mapping_id).filename))
        .collect();
    assert_eq!(files, BTreeSet::from(["/usr/bin/app", "/usr/bin/other"]));
    // The same libc range in both pids is two mappings.
    let libc: Vec<&pb::Mapping> = p
        .mapping
        .iter()
        .filter(|m| s(&p, m.filename) == "/lib/libc.so.6")
        .collect();
    assert_eq!(libc.len(), 2);
    for m in &libc {
        assert_eq!(
            (m.memory_start, m.memory_limit, m.file_offset),
            (0x4000_0000, 0x4010_0000, 0)
        );
    }
    let at_libc: BTreeSet<u64> = p
        .location
        .iter()
        .filter(|l| l.address == 0x4000_0050)
        .map(|l| l.mapping_id)
        .collect();
    assert_eq!(at_libc.len(), 2, "one libc location per process");
    let app = p
        .mapping
        .iter()
        .find(|m| s(&p, m.filename) == "/usr/bin/app")
        .unwrap();
    assert_eq!(
        (app.memory_start, app.memory_limit),
        (0x8000, 0x18000),
        "vm_end is inclusive"
    );
}

#[test]
fn kernel_frames_map_to_module_ranges_merged_by_name() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let kernel: BTreeMap<&str, (u64, u64)> = p
        .mapping
        .iter()
        .filter(|m| !s(&p, m.filename).starts_with('/'))
        .map(|m| (s(&p, m.filename), (m.memory_start, m.memory_limit)))
        .collect();
    assert_eq!(
        kernel,
        BTreeMap::from([
            ("vmlinux", (0xc000_8000, 0xc050_0000)),
            ("ext4.ko", (0xbf00_0000, 0xbf01_0000))
        ])
    );
    let text = info(&[input.to_str().unwrap()]);
    assert!(text.contains("modules:       3 entries at byte"), "{text}");
    assert!(text.contains("0xc0008000..=0xc04fffff vmlinux"), "{text}");
}

#[test]
fn addresses_outside_every_mapping_keep_their_address() {
    let dir = tempdir();
    let mut a = board();
    a.records = vec![
        user(300, 300, CPU_CYCLES, 0x1234, &[]),
        kernel(300, 300, CPU_CYCLES, 0xd000_0000, &[]),
    ];
    let input = a.write(dir.path(), "unmapped");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    let stacks: BTreeSet<String> = pprof_samples(&p)
        .keys()
        .map(|k| k.split(" | ").nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(
        stacks,
        BTreeSet::from(["0x1234".to_owned(), "0xd0000000".to_owned()])
    );
}

// ---------------------------------------------------------------------------
// Sample types, labels, time (§5, §10).

#[test]
fn events_are_samples_times_reset_value_named_from_the_armv7_numbers() {
    let dir = tempdir();
    let mut a = board();
    a.reset = 250_000;
    a.records = vec![
        user(1, 1, 17, 0x8010, &[]),
        user(1, 1, 3, 0x8010, &[]),
        user(1, 1, 5, 0x8010, &[]),
        user(1, 1, 5, 0x8010, &[]),
        user(1, 1, 21, 0x8010, &[]),
    ];
    let input = a.write(dir.path(), "events");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    assert_eq!(
        sample_types(&p),
        [
            "samples/count",
            "L1D_CACHE_REFILL/events",
            "L1D_TLB_REFILL/events",
            "CPU_CYCLES/events",
            "event@21/events"
        ]
    );
    let totals: Vec<i64> = (0..5)
        .map(|t| p.sample.iter().map(|s| s.value[t]).sum())
        .collect();
    assert_eq!(totals, [5, 250_000, 500_000, 250_000, 250_000]);
    assert_eq!(p.period, 250_000);
    let period_type = p.period_type.as_ref().unwrap();
    assert_eq!(
        (s(&p, period_type.r#type), s(&p, period_type.unit)),
        ("L1D_TLB_REFILL", "events"),
        "the period is in the most sampled event"
    );
    let text = info(&[input.to_str().unwrap()]);
    assert!(
        text.contains("L1D_TLB_REFILL (event 5): 2 samples"),
        "{text}"
    );
}

/// Keys that differ only in their event are one sample with a value per
/// event; the same stack in two files whose labels are equal (no cpu in
/// their names) is one sample, summed, on the same locations and mapping.
#[test]
fn one_sample_per_stack_and_labels_across_events_and_files() {
    let dir = tempdir();
    let mut a = board();
    a.records = vec![
        user(100, 100, CPU_CYCLES, 0x8010, &[0x8200]),
        user(100, 100, L1D_CACHE_REFILL, 0x8010, &[0x8200]),
        user(100, 100, CPU_CYCLES, 0x8010, &[0x8200]),
    ];
    let first = a.write(dir.path(), "first.aps");
    let second = a.write(dir.path(), "second.aps");
    let out = dir.path().join("out.pb");
    let p = read_pprof(&convert(&[&first, &second], &out, &[]));
    assert_eq!(
        sample_types(&p),
        [
            "samples/count",
            "L1D_CACHE_REFILL/events",
            "CPU_CYCLES/events"
        ]
    );
    assert_eq!(p.sample.len(), 1, "{:?}", p.sample);
    assert_eq!(p.sample[0].value, [6, 2 * 1000, 4 * 1000]);
    assert_eq!(p.sample[0].location_id, [1, 2]);
    assert_eq!((p.location.len(), p.mapping.len()), (2, 1));
}

#[test]
fn every_sample_has_pid_tid_cpu_and_mode_labels() {
    let dir = tempdir();
    let input = board().write(dir.path(), "sample_cpu_3_20150716_130220");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    for sample in &p.sample {
        let keys: BTreeSet<&str> = sample.label.iter().map(|l| s(&p, l.key)).collect();
        for key in ["pid", "tid", "cpu", "mode"] {
            assert!(keys.contains(key), "{key} missing from {keys:?}");
        }
        let cpu = sample.label.iter().find(|l| s(&p, l.key) == "cpu").unwrap();
        assert_eq!(cpu.num, 3);
    }
}

#[test]
fn file_name_without_a_cpu_gives_no_cpu_label() {
    let dir = tempdir();
    let input = board().write(dir.path(), "board.aps");
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    assert_eq!(pprof_samples(&p), board_expected(None));
}

#[test]
fn pid_info_names_threads_and_processes() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let pid_info = dir.path().join("threads.txt");
    std::fs::write(
        &pid_info,
        "  PID   TID TTY          TIME CMD\n100 100 ? 00:00:01 appmain\n100 101 ? 00:00:00 app worker\n200 201 pts/0 00:00:02 helper\n",
    )
    .unwrap();
    let out = convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--pid-info", pid_info.to_str().unwrap()],
    );
    let p = read_pprof(&out);
    let names: BTreeSet<String> = p
        .sample
        .iter()
        .map(|sample| {
            let mut l: Vec<String> = sample
                .label
                .iter()
                .filter(|l| matches!(s(&p, l.key), "pid" | "tid" | "thread_name" | "process_name"))
                .map(|l| label_text(&p, l))
                .collect();
            l.sort();
            l.join(" ")
        })
        .collect();
    let expected: BTreeSet<String> = [
        "pid=0 tid=0",
        "pid=100 process_name=appmain thread_name=appmain tid=100",
        "pid=100 process_name=appmain thread_name=app worker tid=101",
        // No pid_info line for tid 200: the process is named after its executable.
        "pid=200 process_name=other tid=200",
        "pid=200 process_name=other thread_name=helper tid=201",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(names, expected);
}

#[test]
fn drop_idle_leaves_pid_0_out() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--drop-idle"],
    ));
    let mut expected = board_expected(Some(1));
    expected.retain(|k, _| !k.contains("pid=0 "));
    assert_eq!(expected.len(), board_expected(Some(1)).len() - 1);
    assert_eq!(pprof_samples(&p), expected);
}

#[test]
fn time_range_is_begintime_to_endtime_and_ticks_are_kept_as_metadata() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(&[&input], &dir.path().join("out.pb"), &[]));
    assert_eq!(p.time_nanos, 1_437_051_740_250_000_000);
    assert_eq!(p.duration_nanos, 12_500_000_000);
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(&p, c)).collect();
    for expected in [
        "stBeginTime: 4294967297",
        "stEndTime: 8589934594",
        "cputype: 7",
        "reset_value: 1000",
        "cpu: 1",
    ] {
        assert!(
            comments.contains(&expected),
            "{expected:?} not in {comments:?}"
        );
    }
    let text = info(&[input.to_str().unwrap()]);
    assert!(
        text.contains("begintime:     1437051740.250000 s"),
        "{text}"
    );
    assert!(text.contains("duration:      12.500000 s"), "{text}");
}

// ---------------------------------------------------------------------------
// Several files, directories, outputs grouped by process and thread.

/// A capture directory: two CPUs' files and pid_info.
fn capture_dir(dir: &Path) -> PathBuf {
    let capture = dir.join("capture");
    std::fs::create_dir(&capture).unwrap();
    let mut cpu0 = board();
    cpu0.records = vec![user(100, 100, CPU_CYCLES, 0x8010, &[0x8200]); 5];
    cpu0.begin = (1000, 0);
    cpu0.end = (1010, 0);
    cpu0.write(&capture, "sample_cpu_0_20150716_130220");
    let mut cpu1 = board();
    cpu1.records = vec![user(100, 101, CPU_CYCLES, 0x8010, &[0x8200]); 7];
    cpu1.records.push(user(200, 200, CPU_CYCLES, 0x8010, &[]));
    cpu1.begin = (1001, 0);
    cpu1.end = (1012, 0);
    cpu1.reset = 10;
    cpu1.write(&capture, "sample_cpu_1_20150716_130220");
    std::fs::write(
        capture.join("pid_info"),
        "100 100 ? 00:00:01 app\n100 101 ? 00:00:01 worker\n",
    )
    .unwrap();
    std::fs::write(capture.join("notes.txt"), "not a sample file\n").unwrap();
    capture
}

#[test]
fn a_capture_directory_reads_every_cpu_file_and_its_pid_info() {
    let dir = tempdir();
    let capture = capture_dir(dir.path());
    let p = read_pprof(&convert(&[&capture], &dir.path().join("out.pb"), &[]));
    let expected: BTreeMap<String, Vec<i64>> = [
        (
            "cpu=0 mode=user pid=100 process_name=app thread_name=app tid=100 | app+0x10;app+0x200",
            vec![5, 5000],
        ),
        (
            "cpu=1 mode=user pid=100 process_name=app thread_name=worker tid=101 | app+0x10;app+0x200",
            vec![7, 70],
        ),
        ("cpu=1 mode=user pid=200 process_name=other tid=200 | other+0x10", vec![1, 10]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(pprof_samples(&p), expected);
    // The earliest begin to the latest end.
    assert_eq!(p.time_nanos, 1000 * 1_000_000_000);
    assert_eq!(p.duration_nanos, 12 * 1_000_000_000);
    // Both files' vmas of pid 100 are the same mapping.
    let app = p
        .mapping
        .iter()
        .filter(|m| s(&p, m.filename) == "/usr/bin/app")
        .count();
    assert_eq!(app, 1);
    let text = info(&[capture.to_str().unwrap()]);
    assert!(
        text.contains("sample_cpu_0_20150716_130220:")
            && text.contains("sample_cpu_1_20150716_130220:")
    );
    assert!(text.contains("(2 threads)"), "{text}");
}

#[test]
fn several_files_on_the_command_line_are_summed() {
    let dir = tempdir();
    let capture = capture_dir(dir.path());
    let a = capture.join("sample_cpu_0_20150716_130220");
    let b = capture.join("sample_cpu_1_20150716_130220");
    let p = read_pprof(&convert(&[&a, &b], &dir.path().join("out.pb"), &[]));
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 13);
    let cpus: BTreeSet<i64> = p
        .sample
        .iter()
        .flat_map(|s| {
            s.label
                .iter()
                .filter(|l| s_key(&p, l) == "cpu")
                .map(|l| l.num)
        })
        .collect();
    assert_eq!(cpus, BTreeSet::from([0, 1]));
}

fn s_key<'a>(p: &'a pb::Profile, l: &pb::Label) -> &'a str {
    s(p, l.key)
}

#[test]
fn folded_output_groups_by_process_and_thread_on_request() {
    let dir = tempdir();
    let capture = capture_dir(dir.path());
    // By default an unsymbolized address is its image's one frame.
    let plain = folded(&convert(&[&capture], &dir.path().join("plain.folded"), &[]));
    assert_eq!(
        plain,
        BTreeMap::from([("[app];[app]".to_owned(), 12), ("[other]".to_owned(), 1)])
    );
    let addresses = folded(&convert(
        &[&capture],
        &dir.path().join("addresses.folded"),
        &["--granularity", "addresses"],
    ));
    assert_eq!(
        addresses,
        BTreeMap::from([
            ("app+0x200;app+0x10".to_owned(), 12),
            ("other+0x10".to_owned(), 1)
        ])
    );
    let by_pid = folded(&convert(
        &[&capture],
        &dir.path().join("pid.folded"),
        &["--group-by", "pid", "--granularity", "addresses"],
    ));
    assert_eq!(
        by_pid,
        BTreeMap::from([
            ("app-100;app+0x200;app+0x10".to_owned(), 12),
            ("other-200;other+0x10".to_owned(), 1)
        ])
    );
    let by_thread = folded(&convert(
        &[&capture],
        &dir.path().join("tid.folded"),
        &["--group-by", "pid,tid", "--granularity", "addresses"],
    ));
    assert_eq!(
        by_thread,
        BTreeMap::from([
            ("app-100;app-100;app+0x200;app+0x10".to_owned(), 5),
            ("app-100;worker-101;app+0x200;app+0x10".to_owned(), 7),
            ("other-200;tid 200;other+0x10".to_owned(), 1),
        ])
    );
    let events = folded(&convert(
        &[&capture],
        &dir.path().join("ev.folded"),
        &[
            "--group-by",
            "cpu",
            "--sample-type",
            "CPU_CYCLES",
            "--granularity",
            "addresses",
        ],
    ));
    assert_eq!(
        events,
        BTreeMap::from([
            ("cpu 0;app+0x200;app+0x10".to_owned(), 5000),
            ("cpu 1;app+0x200;app+0x10".to_owned(), 70),
            ("cpu 1;other+0x10".to_owned(), 10),
        ])
    );
}

#[test]
fn speedscope_output_groups_by_process_and_thread_on_request() {
    let dir = tempdir();
    let capture = capture_dir(dir.path());
    let doc = speedscope(&convert(
        &[&capture],
        &dir.path().join("out.speedscope.json"),
        &["--group-by", "pid,tid", "--granularity", "addresses"],
    ));
    let samples = speedscope_stacks(&doc, "samples");
    assert_eq!(
        samples,
        BTreeMap::from([
            ("app-100;app-100;app+0x200;app+0x10".to_owned(), 5.0),
            ("app-100;worker-101;app+0x200;app+0x10".to_owned(), 7.0),
            ("other-200;tid 200;other+0x10".to_owned(), 1.0),
        ])
    );
    let cycles = speedscope_stacks(&doc, "CPU_CYCLES");
    assert_eq!(cycles.values().sum::<f64>(), 5080.0);
    assert_eq!(
        doc["metadata"]["sample_cpu_1_20150716_130220 reset_value"],
        "10"
    );
}

#[test]
fn board_converts_to_folded_speedscope_and_svg() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let f = folded(&convert(
        &[&input],
        &dir.path().join("out.folded"),
        &["--group-by", "pid", "--granularity", "addresses"],
    ));
    let expected = BTreeMap::from([
        ("app-100;app+0x200;libc.so.6+0x104;app+0x10".to_owned(), 3),
        ("app-100;libc.so.6+0x50".to_owned(), 1),
        ("app-100;ext4.ko+0x20;vmlinux+0x3f8010".to_owned(), 1),
        ("app-100;app+0x10".to_owned(), 2),
        ("other-200;other+0x300;other+0x10".to_owned(), 2),
        ("other-200;libc.so.6+0x50".to_owned(), 1),
        ("other-200;other+0x1000".to_owned(), 1),
        ("pid 0;vmlinux+0x0".to_owned(), 4),
    ]);
    assert_eq!(f, expected);
    // By default, functions: the board's images are not at hand, so each
    // address is its image's frame.
    let f = folded(&convert(
        &[&input],
        &dir.path().join("functions.folded"),
        &["--group-by", "pid"],
    ));
    let expected = BTreeMap::from([
        ("app-100;[app];[libc.so.6];[app]".to_owned(), 3),
        ("app-100;[libc.so.6]".to_owned(), 1),
        ("app-100;[ext4.ko];[vmlinux]".to_owned(), 1),
        ("app-100;[app]".to_owned(), 2),
        ("other-200;[other];[other]".to_owned(), 2),
        ("other-200;[libc.so.6]".to_owned(), 1),
        ("other-200;[other]".to_owned(), 1),
        ("pid 0;[vmlinux]".to_owned(), 4),
    ]);
    assert_eq!(f, expected);
    let doc = speedscope(&convert(
        &[&input],
        &dir.path().join("out.speedscope.json"),
        &["--granularity", "addresses"],
    ));
    let flat = speedscope_flat(&doc, "samples");
    assert_eq!(flat.get("app+0x10"), Some(&5.0));
    assert_eq!(flat.get("libc.so.6+0x50"), Some(&2.0));
    assert_eq!(flat.get("vmlinux+0x0"), Some(&4.0));
    let svg = convert(
        &[&input],
        &dir.path().join("out.svg"),
        &["--group-by", "pid", "--granularity", "addresses"],
    );
    check_svg(&svg, &["app-100", "other-200", "libc.so.6+0x104"]);
}

// ---------------------------------------------------------------------------
// Symbolization with an image root (§6, §10).

struct Elf {
    path: PathBuf,
    /// name → (address, size)
    symbols: BTreeMap<String, (u64, u64)>,
    /// (vaddr, offset, filesz) of the PT_LOAD segments.
    segments: Vec<(u64, u64, u64)>,
    /// Address of the `.text` section.
    text: u64,
}

impl Elf {
    fn file_offset(&self, vaddr: u64) -> u64 {
        let &(seg_vaddr, offset, _) = self
            .segments
            .iter()
            .find(|(v, _, size)| vaddr >= *v && vaddr < v + size)
            .expect("address in a segment");
        vaddr - seg_vaddr + offset
    }
    fn symbol(&self, name: &str) -> (u64, u64) {
        self.symbols[name]
    }
}

/// Builds a small non-PIE C program with debug information.
fn build_elf(dir: &Path) -> Option<Elf> {
    let source = dir.join("prog.c");
    std::fs::write(
        &source,
        r#"
__attribute__((noinline)) int leaf(int x) { volatile int s = 0; for (int i = 0; i < x; i++) s += i; return s; }
__attribute__((noinline)) int middle(int x) { return leaf(x) + 1; }
int main(int argc, char **argv) { (void)argv; return middle(argc) & 1; }
"#,
    )
    .unwrap();
    let path = dir.join("prog");
    let status = std::process::Command::new("cc")
        .args(["-O1", "-g", "-fno-pie", "-no-pie", "-o"])
        .arg(&path)
        .arg(&source)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "cc must build the test program in CI");
        crate::skip_note!("skipping: cc cannot build the test program");
        return None;
    }
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let symbols = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| Some((s.name().ok()?.to_owned(), (s.address(), s.size()))))
        .collect();
    let elf = object::elf::FileHeader64::<object::Endianness>::parse(&*data).unwrap();
    let endian = elf.endian().unwrap();
    let segments = elf
        .program_headers(endian, &*data)
        .unwrap()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| (ph.p_vaddr(endian), ph.p_offset(endian), ph.p_filesz(endian)))
        .collect();
    let text = file.section_by_name(".text").unwrap().address();
    Some(Elf {
        path,
        symbols,
        segments,
        text,
    })
}

#[test]
fn image_root_symbolizes_user_frames_through_the_program_headers() {
    let dir = tempdir();
    let Some(elf) = build_elf(dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::copy(&elf.path, root.join("usr/bin/prog")).unwrap();
    // The board mapped the file at 0x10000000: pc − vm_start is a file offset.
    let vm_start = 0x1000_0000u32;
    let at = |name: &str, delta: u64| vm_start + elf.file_offset(elf.symbol(name).0 + delta) as u32;
    let (middle, middle_size) = elf.symbol("middle");
    let mut a = board();
    a.vmas = vec![vma(7, vm_start, vm_start + 0xf_ffff, "/usr/bin/prog")];
    a.records = vec![
        user(
            7,
            7,
            CPU_CYCLES,
            at("leaf", 2),
            &[at("middle", 1), at("main", 1)],
        ),
        // A return address just past middle's end belongs to middle (looked up at addr − 1).
        user(
            7,
            8,
            CPU_CYCLES,
            at("leaf", 1),
            &[vm_start + elf.file_offset(middle + middle_size - 1) as u32 + 1],
        ),
    ];
    let input = a.write(dir.path(), "sym");
    let out = convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--image-root", root.to_str().unwrap()],
    );
    let p = read_pprof(&out);
    let stacks: BTreeSet<String> = pprof_samples(&p)
        .keys()
        .map(|k| k.split(" | ").nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(
        stacks,
        BTreeSet::from(["leaf;middle;main".to_owned(), "leaf;middle".to_owned()])
    );
    let m = p
        .mapping
        .iter()
        .find(|m| s(&p, m.filename) == "/usr/bin/prog")
        .unwrap();
    assert!(m.has_functions && m.has_line_numbers);
    // The source file and line come from DWARF.
    let leaf = p.function.iter().find(|f| s(&p, f.name) == "leaf").unwrap();
    assert!(s(&p, leaf.filename).ends_with("prog.c"));
    go_pprof(&["-top", out.to_str().unwrap()]);

    // Without the image root, frames read basename+offset.
    let p = read_pprof(&convert(&[&input], &dir.path().join("plain.pb"), &[]));
    let names: BTreeSet<String> = p.location.iter().map(|l| location_name(&p, l.id)).collect();
    assert!(
        names.contains(&format!(
            "prog+{:#x}",
            elf.file_offset(elf.symbol("leaf").0 + 2)
        )),
        "{names:?}"
    );
}

#[test]
fn vmlinux_is_symbolized_by_absolute_address() {
    let dir = tempdir();
    let Some(elf) = build_elf(dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("boot")).unwrap();
    std::fs::copy(&elf.path, root.join("boot/vmlinux")).unwrap();
    let abs = |name: &str, delta: u64| (elf.symbol(name).0 + delta) as u32;
    let (low, high) = (
        abs("leaf", 0).min(abs("main", 0)),
        abs("leaf", 0).max(abs("main", 0)),
    );
    let mut a = board();
    a.modules = vec![(low & !0xfff, high | 0xfff, "vmlinux".into())];
    a.records = vec![kernel(
        0,
        0,
        CPU_CYCLES,
        abs("leaf", 3),
        &[abs("middle", 1)],
    )];
    let input = a.write(dir.path(), "ksym");
    let p = read_pprof(&convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--image-root", root.to_str().unwrap()],
    ));
    let stacks: Vec<String> = pprof_samples(&p)
        .keys()
        .map(|k| k.split(" | ").nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(stacks, ["leaf;middle"]);
}

#[test]
fn sre_images_and_kernel_modules_are_symbolized_from_their_text_section() {
    let dir = tempdir();
    let Some(elf) = build_elf(dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("opt")).unwrap();
    std::fs::create_dir_all(root.join("lib/modules/3.10/kernel/fs")).unwrap();
    std::fs::copy(&elf.path, root.join("opt/sre_app")).unwrap();
    std::fs::copy(&elf.path, root.join("lib/modules/3.10/kernel/fs/my-fs.ko")).unwrap();
    // vm_start and the module start stand for the start of .text.
    let from_text =
        |base: u32, name: &str, delta: u64| base + (elf.symbol(name).0 + delta - elf.text) as u32;
    let (sre_start, module_start) = (0x2000_0000u32, 0xbf00_0000u32);
    let mut a = board();
    a.vmas = vec![Vma {
        sre: true,
        ..vma(9, sre_start, sre_start + 0xf_ffff, "/opt/sre_app")
    }];
    // Module names use '_' where the file name may have '-'.
    a.modules = vec![(module_start, module_start + 0xf_ffff, "my_fs".into())];
    a.records = vec![
        user(
            9,
            9,
            CPU_CYCLES,
            from_text(sre_start, "leaf", 2),
            &[from_text(sre_start, "middle", 1)],
        ),
        kernel(9, 9, CPU_CYCLES, from_text(module_start, "middle", 2), &[]),
    ];
    let input = a.write(dir.path(), "text");
    let p = read_pprof(&convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--image-root", root.to_str().unwrap()],
    ));
    let stacks: BTreeSet<String> = pprof_samples(&p)
        .keys()
        .map(|k| k.split(" | ").nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(
        stacks,
        BTreeSet::from(["leaf;middle".to_owned(), "middle".to_owned()])
    );
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(&p, c)).collect();
    assert!(
        comments.contains(&"APS: pid 9: /opt/sre_app is an SRE image"),
        "{comments:?}"
    );
}

#[test]
fn images_missing_from_the_root_leave_frames_unsymbolized_and_say_so() {
    let dir = tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let input = board().write(dir.path(), BOARD_FILE);
    let p = read_pprof(&convert(
        &[&input],
        &dir.path().join("out.pb"),
        &["--image-root", root.to_str().unwrap()],
    ));
    assert_eq!(pprof_samples(&p), board_expected(Some(1)));
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(&p, c)).collect();
    assert!(
        comments
            .iter()
            .any(|c| c.starts_with("warning: APS: no image for /usr/bin/app under")),
        "{comments:?}"
    );
}

// ---------------------------------------------------------------------------
// Detection.

#[test]
fn detection_needs_the_file_magic_in_either_byte_order() {
    let le = board().bytes();
    let be = board().all_big().bytes();
    assert_eq!(detected(&le), Some(Format::Aps));
    assert_eq!(detected(&be), Some(Format::Aps));
    let mut other = le.clone();
    other[0] ^= 1;
    assert_eq!(detected(&other), None);
    assert_eq!(
        detected(&le[..4]),
        None,
        "shorter than the head and the table heads"
    );
    let dir = tempdir();
    let capture = capture_dir(dir.path());
    assert_eq!(read::detect(&capture).unwrap(), Some(Format::Aps));
    assert_eq!(read::detect(dir.path()).unwrap(), None);
}

#[test]
fn gzip_compressed_files_are_read() {
    let dir = tempdir();
    let raw = board().bytes();
    let path = dir.path().join("sample_cpu_1_20150716_130220.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, &raw).unwrap();
    std::fs::write(&path, enc.finish().unwrap()).unwrap();
    let p = read_pprof(&convert(&[&path], &dir.path().join("out.pb"), &[]));
    assert_eq!(pprof_samples(&p), board_expected(Some(1)));
}

// ---------------------------------------------------------------------------
// Hostile input: clear errors naming the offset, no panic, no huge allocation.

fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn wrong_file_magic_is_an_error() {
    let dir = tempdir();
    let mut bytes = board().bytes();
    bytes[..4].copy_from_slice(&[1, 2, 3, 4]);
    let e = read_err(
        &write_bytes(dir.path(), "bad", &bytes),
        &ReadOptions::default(),
    );
    assert!(
        e.contains("at byte 0") && e.contains("APS file magic"),
        "{e}"
    );
}

#[test]
fn wrong_module_magic_is_an_error_not_a_silent_swap() {
    let dir = tempdir();
    let a = board();
    let mut bytes = a.bytes();
    let at = 56 + a.records.len() * 56;
    bytes[at..at + 4].copy_from_slice(&[0xcd, 0xab, 0x46, 0x88]);
    let e = read_err(
        &write_bytes(dir.path(), "bad", &bytes),
        &ReadOptions::default(),
    );
    assert!(
        e.contains(&format!("at byte {at}")) && e.contains("module table magic"),
        "{e}"
    );
    let out = profconv(&[
        dir.path().join("bad").to_str().unwrap(),
        "--from",
        "aps",
        "-o",
        "/dev/null",
        "--to",
        "pprof",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn wrong_vma_magic_is_an_error() {
    let dir = tempdir();
    let a = board();
    let mut bytes = a.bytes();
    let at = 56 + a.records.len() * 56 + 8 + a.modules.len() * 264;
    bytes[at..at + 4].copy_from_slice(b"VMA!");
    let options = ReadOptions {
        aps: ApsOptions {
            call_depth: Some(5),
            path_len: Some(256),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = read_err(&write_bytes(dir.path(), "bad", &bytes), &options);
    assert!(
        e.contains(&format!("at byte {at}")) && e.contains("vma table magic"),
        "{e}"
    );
    // Detecting, no path length fits either.
    let e = read_err(&dir.path().join("bad"), &ReadOptions::default());
    assert!(
        e.contains("vma table magic") && e.contains("call depth 5"),
        "{e}"
    );
}

#[test]
fn record_count_larger_than_the_file_is_an_error() {
    let dir = tempdir();
    let mut a = board();
    a.index_override = Some(u32::MAX);
    let e = read_err(&a.write(dir.path(), "big"), &ReadOptions::default());
    assert!(
        e.contains("at byte 4") && e.contains("4294967295 records"),
        "{e}"
    );
}

#[test]
fn module_and_vma_counts_larger_than_the_file_are_errors() {
    let dir = tempdir();
    for (m, v) in [
        (Some(u32::MAX), None),
        (None, Some(u32::MAX)),
        (Some(1000), None),
        (None, Some(5)),
    ] {
        let mut a = board();
        a.module_count_override = m;
        a.vma_count_override = v;
        let path = a.write(dir.path(), "counts");
        let e = read_err(&path, &ReadOptions::default());
        assert!(e.contains("at byte"), "{e}");
        let given = ReadOptions {
            aps: ApsOptions {
                call_depth: Some(5),
                path_len: Some(256),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = read_err(&path, &given);
        assert!(
            e.contains("at byte")
                && (e.contains("module") || e.contains("vma") || e.contains("truncated")),
            "{e}"
        );
    }
}

#[test]
fn truncated_records_are_an_error() {
    let dir = tempdir();
    let a = board();
    let bytes = a.bytes();
    let cut = 56 + 3 * 56 + 10;
    let e = read_err(
        &write_bytes(dir.path(), "cut", &bytes[..cut]),
        &ReadOptions::default(),
    );
    assert!(e.contains("records") && e.contains("do not fit"), "{e}");
}

#[test]
fn truncated_tables_are_an_error() {
    let dir = tempdir();
    let bytes = board().bytes();
    let e = read_err(
        &write_bytes(dir.path(), "cut", &bytes[..bytes.len() - 100]),
        &ReadOptions::default(),
    );
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn trailing_garbage_is_an_error() {
    let dir = tempdir();
    let mut bytes = board().bytes();
    bytes.extend(b"trailing garbage");
    let e = read_err(
        &write_bytes(dir.path(), "trail", &bytes),
        &ReadOptions::default(),
    );
    assert!(e.contains("16 bytes of trailing garbage"), "{e}");
    let given = ReadOptions {
        aps: ApsOptions {
            call_depth: Some(5),
            path_len: Some(256),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = read_err(&dir.path().join("trail"), &given);
    assert!(e.contains("16 bytes of trailing garbage"), "{e}");
}

#[test]
fn a_vma_ending_before_it_starts_is_an_error() {
    let dir = tempdir();
    let mut a = board();
    a.vmas.push(vma(5, 0x9000, 0x8000, "/bin/backwards"));
    let e = read_err(&a.write(dir.path(), "backwards"), &ReadOptions::default());
    assert!(e.contains("vma entry 4 (pid 5, /bin/backwards)"), "{e}");
}

#[test]
fn every_truncation_and_corruption_fails_cleanly() {
    let dir = tempdir();
    let mut a = board();
    a.path_len = 32;
    let bytes = a.bytes();
    let path = dir.path().join("fuzz");
    for len in 0..bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        assert!(
            read::read_inputs(&open(&path), &as_aps(&ReadOptions::default())).is_err(),
            "truncated to {len}"
        );
    }
    // Deterministic pseudo-random corruption: a read may succeed or fail, never panic.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..400 {
        let mut corrupt = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % corrupt.len() as u64) as usize;
            corrupt[at] = next() as u8;
        }
        std::fs::write(&path, &corrupt).unwrap();
        let aps = as_aps(&ReadOptions::default());
        let _ = read::read_inputs(&open(&path), &aps);
        let _ = read::info_inputs(&open(&path), &aps);
    }
}

#[test]
fn an_archive_folder_with_one_sample_file_still_converts_what_lies_beside_it() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    let runs = archive.join("runs");
    std::fs::create_dir_all(runs.join("older")).unwrap();
    board().write(&runs, BOARD_FILE);
    std::fs::copy(fixture("gprof/callgraph-nopie.gmon"), runs.join("gmon.out")).unwrap();
    std::fs::copy(
        fixture("mpatrol/linux-x86_64/mpatrol.out"),
        runs.join("older/mpatrol.out"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let report = dir.path().join("report.json");
    profconv_ok(&[
        "convert",
        archive.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--to",
        "folded",
        "--report",
        report.to_str().unwrap(),
    ]);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let status = |path: &str| {
        report["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .map(|r| r["status"].as_str().unwrap().to_owned())
    };
    assert_eq!(status("runs").as_deref(), Some("converted"), "{report:#}");
    assert_eq!(status("runs/gmon.out").as_deref(), Some("converted"));
    assert_eq!(
        status("runs/older/mpatrol.out").as_deref(),
        Some("converted")
    );
    assert_eq!(
        status(&format!("runs/{BOARD_FILE}")),
        None,
        "read with its capture"
    );
    assert!(out.join("runs.folded").is_file());
    assert!(out.join("runs/gmon.out.folded").is_file());
}

#[test]
fn a_pid_info_that_never_ends_is_refused() {
    let dir = tempdir();
    let input = board().write(dir.path(), BOARD_FILE);
    let out = profconv(&[
        input.to_str().unwrap(),
        "--pid-info",
        "/dev/zero",
        "-o",
        "/dev/null",
        "--to",
        "pprof",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pid_info") && err.contains("MiB"), "{err}");
}

#[test]
fn thousands_of_event_ids_are_refused_before_their_values_are_allocated() {
    let dir = tempdir();
    let mut a = board();
    a.records = (0..17_000u32)
        .map(|e| user(100, 100, 1000 + e, 0x8010, &[0x8200]))
        .collect();
    let input = a.write(dir.path(), BOARD_FILE);
    // 17 000 sample types over 17 000 stacks: 289 M values (2.3 GB) if
    // they were allocated; the limit refuses it in a few megabytes.
    let out = std::process::Command::new("prlimit")
        .arg("--as=1000000000")
        .arg("--")
        .arg(profconv_bin())
        .arg(&input)
        .args(["-o", "/dev/null", "--to", "pprof"])
        .output();
    let Ok(out) = out else {
        assert!(!in_ci(), "prlimit (util-linux) is needed");
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("17001 sample types") && err.contains("fewer events"),
        "{err}"
    );
}

/// The same records written with another call depth and byte order, and
/// with their `user` words set to other non-zero values where they are user
/// records.
fn many_chunks_file(dir: &Path, depth: usize, big: bool, records: &[Rec]) -> PathBuf {
    let mut a = board();
    a.depth = depth;
    a.big = big;
    a.module_big = big;
    a.vma_big = big;
    a.records = records.to_vec();
    let mut bytes = a.bytes();
    let size = 36 + 4 * depth;
    for (i, r) in records
        .iter()
        .enumerate()
        .filter(|(i, r)| r.user && i % 3 == 0)
    {
        let at = 56 + i * size;
        bytes[at..at + 4].copy_from_slice(&u32b(big, 7 + i as u32));
        assert!(r.user);
    }
    let name = format!("sample_cpu_0_d{depth}_{}", if big { "be" } else { "le" });
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn records_count_alike_at_every_call_depth_byte_order_and_chunk() {
    // Files of several 4 MiB chunks (counted in parallel), at a call depth
    // counted with fixed-size keys (5) and one counted record by record
    // (12), in both byte orders: the same records give the same samples.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(n)) as u32
    };
    let pool: Vec<Rec> = (0..400)
        .map(|_| {
            let pid = [0, 100, 200][next(3) as usize];
            let layer = next(6) as usize;
            let mut cs: Vec<u32> = (0..layer).map(|_| 0x8000 + 4 * next(0x4000)).collect();
            if layer > 2 && next(4) == 0 {
                cs[1] = 0; // the stack stops there
            }
            let pc = if next(8) == 0 {
                0
            } else {
                0x8000 + 2 * next(0x8000)
            };
            let mut r = if next(3) == 0 {
                kernel(pid, pid + next(2) as i32, CPU_CYCLES, pc, &cs)
            } else {
                user(
                    pid,
                    pid + next(2) as i32,
                    [CPU_CYCLES, 3][next(2) as usize],
                    pc,
                    &cs,
                )
            };
            r.cs_layer = layer as i32 - [0, 0, 0, 1, 4][next(5) as usize];
            r
        })
        .collect();
    let records: Vec<Rec> = (0..110_000)
        .map(|_| pool[next(400) as usize].clone())
        .collect();
    let dir = tempdir();
    let runs = [(5, false), (5, true), (12, false), (12, true)];
    for extra in [&["--group-by", "pid,tid"][..], &["--drop-idle"][..]] {
        let mut outputs = Vec::new();
        for (depth, big) in runs {
            let input = many_chunks_file(dir.path(), depth, big, &records);
            let out = dir.path().join(format!("d{depth}-{big}.folded"));
            let mut args = vec!["--aps-call-depth"];
            let depth_arg = depth.to_string();
            args.push(&depth_arg);
            args.extend(extra);
            outputs.push(folded(&convert(&[&input], &out, &args)));
        }
        let total: i64 = outputs[0].values().sum();
        let idle = records.iter().filter(|r| r.pid == 0).count();
        let expected = if extra[0] == "--drop-idle" {
            records.len() - idle
        } else {
            records.len()
        };
        assert_eq!(total, expected as i64, "{extra:?}");
        assert!(outputs[0].len() > 100, "{}", outputs[0].len());
        for (run, out) in runs.iter().zip(&outputs).skip(1) {
            assert_eq!(out, &outputs[0], "{run:?} {extra:?}");
        }
    }
}
