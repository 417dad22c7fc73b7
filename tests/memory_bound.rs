//! Memory stays bounded by the input (issue 13): the whole pipeline —
//! detection, `info`, the reader, every writer — on every fixture and on
//! generated worst cases (the largest header counts each format allows,
//! deepest stacks, longest names, most distinct stacks), with a counting
//! global allocator that records the peak of live heap bytes.
//!
//! The bound asserted is `peak ≤ PER_BYTE × input bytes + BASE`. Inputs are
//! mapped, not copied, so they do not count; what counts is what profconv
//! builds from them. The constants are stated below with the worst ratio
//! measured when they were set; a reader that grows faster than its input
//! (a per-record object graph, stacks copied per frame, values per event ×
//! stack) fails here long before it exhausts a machine.
//!
//! One `#[test]` runs every case in turn, so no other test's allocations
//! mix into a measurement.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::gen::{aps, dcpi, gprof, mpatrol};
use common::*;
use profconv::read::{self, ReadOptions};
use profconv::write::{self, OutputFormat, WriteOptions};

/// Heap bytes per input byte a conversion may hold at its peak, per format.
/// gprof: a 2-byte histogram bin can be a distinct address, which becomes a
/// location, a sample and a line in every output (worst measured: 2¹⁷
/// distinct bins, see the table the test prints).
const GPROF: u64 = 512;
/// mpatrol: a call chain makes stacks quadratic in the file; the writers
/// walk them by frame id, so memory stays linear.
const MPATROL: u64 = 128;
/// APS: a 56-byte record can be a distinct stack.
const APS: u64 = 64;
/// DCPI: a 4-byte count can be a distinct address.
const DCPI: u64 = 256;
/// Heap bytes any conversion may hold whatever its input (tables, the
/// executable's symbols and line tables, buffers).
const BASE: u64 = 16 << 20;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One run of the pipeline.
struct Case {
    name: String,
    inputs: Vec<PathBuf>,
    options: ReadOptions,
    /// Whether the reader must accept the input (a hostile header must be
    /// refused instead).
    valid: bool,
    /// The format's bound: heap bytes per input byte.
    per_byte: u64,
}

fn case(per_byte: u64, name: &str, inputs: Vec<PathBuf>, valid: bool) -> Case {
    Case {
        name: name.to_owned(),
        inputs,
        options: ReadOptions::default(),
        valid,
        per_byte,
    }
}

fn with_binary(mut c: Case, binary: PathBuf) -> Case {
    c.options.binary = Some(binary);
    c
}

/// Bytes of a file, or of every file below a directory.
fn size_of(path: &Path) -> u64 {
    if path.is_dir() {
        let entries = std::fs::read_dir(path).unwrap();
        entries.map(|e| size_of(&e.unwrap().path())).sum()
    } else {
        std::fs::metadata(path).unwrap().len()
    }
}

/// Runs `info`, the reader and every writer (into a sink); the peak of live
/// heap bytes above what was live before, and whether reading succeeded.
fn measure(c: &Case) -> (u64, bool) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let _ = read::info(&c.inputs, &c.options);
    let read = read::read(&c.inputs, &c.options);
    let ok = read.is_ok();
    if let Ok(profile) = read {
        let options = WriteOptions::default();
        for format in [
            OutputFormat::Pprof,
            OutputFormat::Folded,
            OutputFormat::Svg,
            OutputFormat::Speedscope,
            OutputFormat::Callgrind,
            OutputFormat::Firefox,
        ] {
            write::write(&profile, format, &options, &mut std::io::sink())
                .unwrap_or_else(|e| panic!("{}: {format:?}: {e}", c.name));
        }
    }
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    (peak as u64, ok)
}

/// Every gmon.out fixture with its executable, every other fixture alone.
fn fixture_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let gprof_dir = fixture("gprof");
    for entry in std::fs::read_dir(&gprof_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gmon") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let program = stem.split('-').take(2).collect::<Vec<_>>().join("-");
            let name = format!("fixture gprof/{stem}");
            let c = case(GPROF, &name, vec![path.clone()], true);
            cases.push(match [&stem, &program].map(|s| gprof_dir.join(s)) {
                [exe, _] if exe.is_file() => with_binary(c, exe),
                [_, exe] if exe.is_file() => with_binary(c, exe),
                _ => c,
            });
        }
    }
    for (per_byte, rel) in [
        (MPATROL, "mpatrol/linux-x86_64/mpatrol.out"),
        (DCPI, "dcpi/dcpicat-manpage.txt"),
    ] {
        let name = format!("fixture {rel}");
        cases.push(case(per_byte, &name, vec![fixture(rel)], true));
    }
    cases
}

fn written(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// gmon.out: a histogram and a basic-block table whose counts claim far
/// more than the file holds; a histogram of 2¹⁷ non-zero bins (every bin a
/// distinct address); 2¹⁵ distinct arcs.
fn gprof_cases(dir: &Path) -> Vec<Case> {
    let l = gprof::Layout {
        big: false,
        word: 8,
    };
    let hist = |bins: Vec<u16>| gprof::Hist {
        low: 0x1000,
        high: 0x1000 + 4 * bins.len() as u64,
        rate: 100,
        bins,
    };
    let mut huge = gprof::gnu(l, &[hist(vec![1; 16])], &[], &[]);
    // The histogram's bin count, 4 + 1 + 8 + 8 bytes in: 2³¹ - 1 bins.
    huge[20 + 1 + 16..20 + 1 + 16 + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let mut bbs = gprof::gnu(l, &[], &[], &[(0x1000, 1)]);
    bbs[21..25].copy_from_slice(&u32::MAX.to_le_bytes());
    let wide = gprof::gnu(
        l,
        &[hist((1..=1u32 << 17).map(|i| i as u16 | 1).collect())],
        &[],
        &[],
    );
    let arcs: Vec<(u64, u64, u32)> = (0..1u64 << 15)
        .map(|i| {
            (
                0x1000 + 8 * (i % 5000),
                0x40_0000 + 16 * i,
                1 + i as u32 % 7,
            )
        })
        .collect();
    let arcs = gprof::gnu(l, &[hist(vec![1; 64])], &arcs, &[]);
    vec![
        case(
            GPROF,
            "gprof: 2³¹ bins declared",
            vec![written(dir, "huge.gmon", &huge)],
            false,
        ),
        case(
            GPROF,
            "gprof: 2³² basic blocks declared",
            vec![written(dir, "bbs.gmon", &bbs)],
            false,
        ),
        case(
            GPROF,
            "gprof: 2¹⁷ distinct bins",
            vec![written(dir, "wide.gmon", &wide)],
            true,
        ),
        case(
            GPROF,
            "gprof: 2¹⁵ distinct arcs",
            vec![written(dir, "arcs.gmon", &arcs)],
            true,
        ),
    ]
}

/// The three mpatrol programs of [`mpatrol_cases`]: a chain 1 000 deep, a
/// 1 MiB name, 20 000 distinct stacks.
fn mpatrol_programs(
    func: impl Fn(usize, &'static str) -> mpatrol::Func,
    alloc: impl Fn(Vec<(usize, u64)>) -> mpatrol::Alloc,
    program: impl Fn(Vec<mpatrol::Func>, Vec<mpatrol::Alloc>) -> mpatrol::Program,
) -> [mpatrol::Program; 3] {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let depth = 1000;
    let deep = program(
        (0..depth)
            .map(|i| func(i, leak(format!("level_{i}"))))
            .collect(),
        (0..depth)
            .map(|i| alloc((0..=i).rev().map(|f| (f, 0x10)).collect()))
            .collect(),
    );
    let long = program(
        vec![func(0, leak("n".repeat(1 << 20))), func(1, "main")],
        vec![alloc(vec![(0, 0x10), (1, 0x10)])],
    );
    let wide = program(
        (0..500).map(|i| func(i, leak(format!("f{i}")))).collect(),
        (0..20_000)
            .map(|i| {
                alloc(vec![
                    (i % 500, 0x10),
                    ((i / 500) % 500, 0x20),
                    (i % 7, 0x30),
                ])
            })
            .collect(),
    );
    [deep, long, wide]
}

/// mpatrol: record and call-site counts of 2⁶⁰; a call chain 1 000 deep
/// with an allocation at every depth (stacks quadratic in the file); a
/// 1 MiB function name; 20 000 distinct stacks.
fn mpatrol_cases(dir: &Path) -> Vec<Case> {
    let func = |i: usize, name: &'static str| mpatrol::Func {
        name: Some(name),
        start: 0x100 * (i as u64 + 1),
    };
    let alloc = |frames: Vec<(usize, u64)>| mpatrol::Alloc {
        frames,
        classes: [[1, 16, 0, 0], [0; 4], [0; 4], [0; 4]],
    };
    let program = |funcs, allocs| mpatrol::Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 0,
    };
    let [deep, long, wide] = mpatrol_programs(func, alloc, program);
    let mut huge = mpatrol::encode(&program(vec![], vec![]).raw(8), 8, false);
    // The record count, after magic, marker, version, three bounds and the
    // bin count: 4 + 6 × 8 bytes in.
    huge[52..60].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let mut sites = mpatrol::encode(&program(vec![], vec![]).raw(8), 8, false);
    sites[60..68].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let file = |name: &str, p: &mpatrol::Program| {
        written(dir, name, &mpatrol::encode(&p.raw(8), 8, false))
    };
    vec![
        case(
            MPATROL,
            "mpatrol: 2⁶⁰ records declared",
            vec![written(dir, "huge.mpatrol", &huge)],
            false,
        ),
        case(
            MPATROL,
            "mpatrol: 2⁶⁰ call sites declared",
            vec![written(dir, "sites.mpatrol", &sites)],
            false,
        ),
        case(
            MPATROL,
            "mpatrol: a chain 1 000 deep",
            vec![file("deep.mpatrol", &deep)],
            true,
        ),
        case(
            MPATROL,
            "mpatrol: a 1 MiB name",
            vec![file("long.mpatrol", &long)],
            true,
        ),
        case(
            MPATROL,
            "mpatrol: 20 000 distinct stacks",
            vec![file("wide.mpatrol", &wide)],
            true,
        ),
    ]
}

/// APS: record, module and vma counts of 2³²-1; 20 000 distinct event ids
/// (one sample type each, refused past the values limit); 50 000 records of
/// all-distinct stacks; 4 KiB path buffers.
fn aps_cases(dir: &Path) -> Vec<Case> {
    let board = |records: Vec<aps::Rec>| aps::Aps {
        records,
        modules: vec![(0xc000_8000, 0xc03f_ffff, "vmlinux".into())],
        vmas: vec![aps::vma(100, 0x8000, 0x17fff, "/usr/bin/app")],
        ..aps::Aps::default()
    };
    let one = || vec![aps::user(100, 100, 17, 0x8010, &[0x8200])];
    let mut records = board(one());
    records.index_override = Some(u32::MAX);
    let mut modules = board(one());
    modules.module_count_override = Some(u32::MAX);
    let mut vmas = board(one());
    vmas.vma_count_override = Some(u32::MAX);
    let events = board(
        (0..20_000u32)
            .map(|e| aps::user(100, 100, e, 0x8000 + 4 * e, &[0x8200]))
            .collect(),
    );
    let distinct = board(
        (0..50_000u32)
            .map(|i| {
                aps::user(
                    100,
                    100,
                    17,
                    0x8000 + 4 * (i % 1000),
                    &[0x9000 + 4 * i, 0x8200],
                )
            })
            .collect(),
    );
    let mut paths = board(one());
    paths.path_len = 4096;
    let file = |name: &str, a: &aps::Aps| a.write(dir, name);
    vec![
        case(
            APS,
            "APS: 2³²-1 records declared",
            vec![file("sample_cpu_0_r", &records)],
            false,
        ),
        case(
            APS,
            "APS: 2³²-1 modules declared",
            vec![file("sample_cpu_0_m", &modules)],
            false,
        ),
        case(
            APS,
            "APS: 2³²-1 vmas declared",
            vec![file("sample_cpu_0_v", &vmas)],
            false,
        ),
        // 20 001 sample types over 20 000 stacks, 40 000 values non-zero:
        // refused by the density rule (profile::DENSE_VALUES_FREE).
        case(
            APS,
            "APS: 20 000 event ids",
            vec![file("sample_cpu_0_e", &events)],
            false,
        ),
        case(
            APS,
            "APS: 50 000 distinct stacks",
            vec![file("sample_cpu_0_d", &distinct)],
            true,
        ),
        case(
            APS,
            "APS: 4 KiB path buffers",
            vec![file("sample_cpu_0_p", &paths)],
            true,
        ),
    ]
}

/// DCPI: a chunk declaring 2³² - 1 counts; a profile of 2¹⁷ sampled
/// addresses; a database of 2 000 one-event files (refused: values would be
/// events × addresses, nearly all zero).
fn dcpi_cases(dir: &Path) -> Vec<Case> {
    let header = |event: &str| dcpi::header(&dcpi::APP, "199805191724", event, 63488);
    let mut huge = dcpi::BinaryProfile::new(header("cycles"), vec![(0, vec![1, 2, 3])]).bytes();
    let start = dcpi::BinaryProfile::new(header("cycles"), vec![]).binary_start();
    huge[start + 4..start + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let counts: Vec<u32> = (0..1u32 << 17).map(|i| 1 + i % 13).collect();
    let dense = dcpi::BinaryProfile::new(header("cycles"), vec![(0, counts)]).bytes();
    let db = dir.join("db");
    for i in 0..2000 {
        let bytes =
            dcpi::BinaryProfile::new(header(&format!("ev{i}")), vec![(4 * i, vec![i + 1])]).bytes();
        dcpi::write(
            &db.join("199805191724/walnut").join(format!("p{i}")),
            &bytes,
        );
    }
    vec![
        case(
            DCPI,
            "DCPI: 2³²-1 counts declared",
            vec![written(dir, "huge.prof", &huge)],
            false,
        ),
        case(
            DCPI,
            "DCPI: 2¹⁷ sampled addresses",
            vec![written(dir, "dense.prof", &dense)],
            true,
        ),
        // 4 000 sample types over 2 000 addresses, 4 000 values non-zero:
        // refused by the density rule (profile::DENSE_VALUES_FREE).
        case(DCPI, "DCPI: 2 000 one-event files", vec![db], false),
    ]
}

#[test]
fn every_fixture_and_worst_case_converts_in_memory_bounded_by_its_input() {
    let dir = tempdir();
    let mut cases = fixture_cases();
    cases.extend(gprof_cases(dir.path()));
    cases.extend(mpatrol_cases(dir.path()));
    cases.extend(aps_cases(dir.path()));
    cases.extend(dcpi_cases(dir.path()));
    let mut failures = Vec::new();
    for c in &cases {
        let input: u64 = c.inputs.iter().map(|p| size_of(p)).sum();
        let started = std::time::Instant::now();
        let (peak, ok) = measure(c);
        let bound = c.per_byte * input + BASE;
        eprintln!(
            "{:<40} input {:>10} B  peak heap {:>11} B  {:>7.1}× input  {:<7}  {:.1} s",
            c.name,
            input,
            peak,
            peak as f64 / input.max(1) as f64,
            if ok { "read" } else { "refused" },
            started.elapsed().as_secs_f64()
        );
        if ok != c.valid {
            failures.push(format!("{}: read ok = {ok}, expected {}", c.name, c.valid));
        }
        if peak > bound {
            failures.push(format!(
                "{}: peak heap {peak} B > {} × {input} + {BASE}",
                c.name, c.per_byte
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
