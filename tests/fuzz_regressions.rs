//! Inputs the fuzzers found (tests/fixtures/fuzz/<target>/), replayed
//! through the same code as their target (fuzz/harness.rs, shared with the
//! fuzz crate).
//!
//! Each kept input runs in a child process (this test binary, re-run on that
//! one test) under an allocation cap and a time limit, the same bounds the
//! fuzzers ran with (`-rss_limit_mb=2048 -timeout=10`, the time tripled for
//! unoptimised builds): a panic, an abort, an allocation past the cap or a
//! hang fails the test with the child's message. Passing means the reader
//! gave `Ok` or a clean `Err`.
//!
//! A case whose bug is not fixed yet is `#[ignore = "fuzz crash: ..."]`;
//! run them with `cargo test --test fuzz_regressions -- --include-ignored`.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The most bytes a replayed input may have allocated at once (the fuzzers'
/// `-rss_limit_mb=2048`).
const MEMORY_CAP: usize = 2 << 30;

/// The fuzzers' `-timeout=10`, tripled for an unoptimised test build.
fn time_limit() -> Duration {
    let seconds = if cfg!(debug_assertions) { 30 } else { 10 };
    Duration::from_secs(seconds)
}

/// Set in the child process that replays one input.
const CHILD_VAR: &str = "PROFCONV_FUZZ_REPLAY";

/// Counts live bytes; past the cap (set only in a replaying child) an
/// allocation fails, which aborts the child with "memory allocation failed".
struct Capped;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size()
            > CAP.load(Ordering::Relaxed)
        {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Capped = Capped;

fn kept(target: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target)
        .join(file)
}

fn run_target(target: &str, data: &[u8]) -> profconv::Result<()> {
    let (_, run) = harness::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    run(data)
}

/// Replays `tests/fixtures/fuzz/<target>/<file>` in a child process (see
/// the module doc); `test` is the name of the calling test.
fn replay(test: &str, target: &str, file: &str) {
    let path = kept(target, file);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if std::env::var_os(CHILD_VAR).is_some() {
        CAP.store(LIVE.load(Ordering::Relaxed) + MEMORY_CAP, Ordering::Relaxed);
        let result = run_target(target, &data);
        CAP.store(usize::MAX, Ordering::Relaxed);
        eprintln!("{target} {file}: {:?}", result.map_err(|e| e.to_string()));
        return;
    }
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the replaying child starts");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break Some(status);
        }
        if start.elapsed() > time_limit() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    match status {
        None => panic!(
            "{target} {file}: still running after {:?} (a hang)\n{stderr}",
            time_limit()
        ),
        Some(s) if !s.success() => panic!("{target} {file}: the child failed ({s})\n{stderr}"),
        Some(_) => {}
    }
}

/// One test per kept input: `case!(test_name, "target", "file")`, with an
/// `#[ignore = ...]` before it while the bug is open.
macro_rules! case {
    ($(#[$attr:meta])* $name:ident, $target:literal, $file:literal) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            replay(stringify!($name), $target, $file);
        }
    };
}

/// Every kept input has a `case!` (its file name appears in this file).
#[test]
fn every_kept_input_is_replayed_by_a_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
    let this = include_str!("fuzz_regressions.rs");
    let Ok(targets) = std::fs::read_dir(&root) else {
        return;
    };
    for target in targets.flatten() {
        for file in std::fs::read_dir(target.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "README.md" {
                continue;
            }
            assert!(
                this.contains(&format!("\"{name}\"")),
                "{} has no case! in tests/fuzz_regressions.rs",
                file.path().display()
            );
        }
    }
}

/// The fixtures, as the pipeline target and each reader target (control
/// byte 0) take them, give `Ok` or a clean `Err`: the harness stays in step
/// with the library.
#[test]
fn every_fixture_goes_through_every_target_without_panicking() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    for format in ["gprof", "mpatrol", "dcpi"] {
        collect(&root.join(format), &mut files);
    }
    assert!(
        files.len() > 10,
        "fixtures not found under {}",
        root.display()
    );
    for path in files {
        let data = std::fs::read(&path).unwrap();
        let mut with_control = vec![0u8];
        with_control.extend_from_slice(&data);
        for (target, run) in harness::TARGETS {
            let input = if target == "pipeline" {
                &data
            } else {
                &with_control
            };
            let _ = run(input);
        }
    }
}

fn collect(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, into);
        } else if path
            .extension()
            .is_some_and(|e| e == "gmon" || e == "out" || e == "txt")
        {
            into.push(path);
        }
    }
}

// ---------------------------------------------------------------------------
// The kept inputs.

case!(
    names_ending_in_a_number_stay_names_in_the_flamegraph,
    "names",
    "name-ending-in-a-number"
);

case!(
    a_leaf_ending_in_a_number_and_a_space_stays_a_name_in_the_flamegraph,
    "names",
    "leaf-ending-in-a-number-and-a-space"
);

case!(
    gprof_bsd_total_of_tick_nanos_does_not_overflow,
    "gprof_bsd",
    "tick-nanos-sum-overflow"
);

case!(
    gprof_gnu_basic_block_counts_of_one_address_do_not_overflow,
    "gprof_gnu",
    "bb-count-sum-overflow"
);

case!(
    pipeline_gprof_info_total_calls_do_not_overflow,
    "pipeline",
    "gprof-info-arc-calls-overflow"
);

case!(
    gprof_bsd_arc_counts_of_one_pair_do_not_overflow,
    "gprof_bsd",
    "arc-count-sum-overflow"
);

case!(
    gprof_bsd_dropped_arc_total_does_not_overflow,
    "gprof_bsd",
    "dropped-arcs-overflow"
);

case!(
    gprof_bsd_huge_bin_count_is_apportioned_in_bounded_time,
    "gprof_bsd",
    "apportion-hang"
);

case!(
    gprof_gnu_histogram_at_the_top_of_the_address_space_does_not_overflow,
    "gprof_gnu",
    "bin-address-overflow"
);

case!(
    gprof_gnu_address_at_the_top_of_the_address_space_is_not_looked_up_in_dwarf,
    "gprof_gnu",
    "dwarf-lookup-at-the-last-address"
);

case!(
    gprof_gnu_input_that_timed_out_on_a_loaded_machine_finishes_in_time,
    "gprof_gnu",
    "slow-under-load"
);

/// The `names` target on a few hundred random sets of names, biased toward
/// what breaks syntaxes: C0 controls, DEL, `;`, spaces, XML's specials,
/// U+FFFE/U+FFFF, an encoded lone surrogate and invalid UTF-8.
#[test]
fn random_names_through_every_writer_give_outputs_that_parse() {
    const PIECES: [&[u8]; 14] = [
        b"\x01",
        b"\x1b[31m",
        b"\t",
        b"\n",
        b"\r",
        b"\x7f",
        b";",
        b" ",
        b"<&>\"'",
        b"\xef\xbf\xbe",
        b"\xef\xbf\xbf",
        b"\xed\xa0\x80",
        b"\xff\xfe",
        b"fn",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for _ in 0..300 {
        let mut data = Vec::new();
        for _ in 0..1 + next(12) {
            for _ in 0..next(6) {
                match next(3) {
                    0 => data.push(next(256) as u8),
                    _ => data.extend_from_slice(PIECES[next(PIECES.len())]),
                }
            }
            data.push(0);
        }
        if let Err(e) = harness::names(&data) {
            panic!("names {data:?}: {e}");
        }
    }
}

// An 888-byte APS file whose event values near 2^63 made the Firefox writer
// split them into a million samples per thread (72 MB of JSON, seconds).
case!(
    pipeline_aps_huge_values_firefox_samples,
    "pipeline",
    "aps-huge-values-firefox-samples"
);
