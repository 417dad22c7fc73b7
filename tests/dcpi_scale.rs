//! DCPI at scale (issues 12 and 13): a generated database of over a
//! million sampled addresses converts to pprof in heap memory well below
//! the database's size, with every count where its footer says; `info`
//! keeps no counts; pathological databases stop with an error rather than
//! exhaust memory. (That the streamed pprof decodes to exactly the profile
//! the whole-profile writer makes is tested in src/write/pprof/stream_tests.rs.)
//!
//! Memory is measured by a counting global allocator (this test binary's
//! own): the peak of live heap bytes while the library converts. Mapped
//! input files are not heap, so the measure is what profconv adds.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::gen::dcpi::{build_db, DbSpec, DbTotals};
use common::*;
use profconv::read::{self, ReadOptions};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Tests measure memory one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `f` and returns its result and the peak heap bytes it added.
fn peak_heap<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Converts the database to pprof with [`profconv::convert`] (which
/// streams pprof outputs), into `out`.
fn stream_to(db: &Path, out: &Path, gzip: bool) -> profconv::Result<()> {
    let format = match gzip {
        true => profconv::OutputFormat::Pprof,
        false => profconv::OutputFormat::PprofRaw,
    };
    let output = profconv::Output {
        path: out.to_path_buf(),
        format,
    };
    profconv::convert(&[db], &[output], &profconv::Options::default()).map(drop)
}

fn total(p: &pb::Profile, type_name: &str) -> i64 {
    let i = p
        .sample_type
        .iter()
        .position(|t| s(p, t.r#type) == type_name)
        .unwrap_or_else(|| panic!("no sample type {type_name}"));
    p.sample.iter().map(|s| s.value[i]).sum()
}

/// Every count is where the footers say, once per sampled address.
fn check_against_footers(p: &pb::Profile, truth: &DbTotals) {
    assert_eq!(p.string_table[0], "");
    assert!(p
        .sample
        .iter()
        .all(|s| s.value.len() == p.sample_type.len()));
    for (event, &samples) in &truth.samples {
        assert_eq!(
            total(p, &format!("{event}_samples")),
            samples as i64,
            "{event}"
        );
    }
    assert_eq!(
        p.location.len() as u64,
        truth.addresses,
        "one location per sampled address"
    );
    assert_eq!(
        p.sample.len() as u64,
        truth.addresses,
        "one sample per sampled address"
    );
    let mut seen: Vec<(u64, u64)> = p
        .location
        .iter()
        .map(|l| (l.mapping_id, l.address))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), p.location.len(), "locations are distinct");
    let ids: std::collections::HashSet<u64> = p.location.iter().map(|l| l.id).collect();
    assert_eq!(ids.len(), p.location.len(), "location ids are distinct");
    assert!(p
        .sample
        .iter()
        .all(|s| s.location_id.len() == 1 && ids.contains(&s.location_id[0])));
}

/// A database of ≈ 1.05 M sampled addresses (40 images × 256 Ki
/// instructions, 10 % sampled: 40 MiB) at `db`; what its footers say.
fn million_address_db(db: &Path) -> DbTotals {
    let truth = build_db(db, &DbSpec::sparse(40, 256 * 1024, 100));
    assert!(truth.addresses >= 1_000_000, "{truth:?}");
    truth
}

/// Streamed conversions stay under the database's size in heap (reading the
/// whole profile took ≈ 560 bytes per address, 560 MiB here), and `out`
/// holds every count.
fn check_streamed(peak: usize, out: &Path, truth: &DbTotals) {
    assert!(
        (peak as u64) < truth.bytes,
        "peak heap {peak} bytes for a {} byte database",
        truth.bytes
    );
    check_against_footers(&decode_pprof(out), truth);
}

#[test]
fn a_million_addresses_convert_in_a_fraction_of_the_database_size() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    let truth = million_address_db(&db);
    let out = dir.path().join("out.pb");
    let (done, peak) = peak_heap(|| stream_to(&db, &out, false));
    done.unwrap();
    check_streamed(peak, &out, &truth);
}

#[test]
fn an_archive_migration_streams_the_database_too() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let archive = dir.path().join("archive");
    let truth = million_address_db(&archive.join("host1/db"));
    let options = profconv::archive::ArchiveOptions::new(
        dir.path().join("out"),
        vec![profconv::OutputFormat::Pprof],
    );
    let (report, peak) =
        peak_heap(|| profconv::archive::run(&archive, &options, &|_| {}, &|_| {}).unwrap());
    let out = dir.path().join("out/host1/db.pb.gz");
    assert!(out.is_file(), "{report:?}");
    check_streamed(peak, &out, &truth);
}

#[test]
fn info_keeps_no_counts() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    let truth = build_db(&db, &DbSpec::sparse(8, 256 * 1024, 500));
    let (text, peak) = peak_heap(|| read::info(std::slice::from_ref(&db), &ReadOptions::default()));
    let text = text.unwrap().to_string();
    let samples = truth.samples["cycles"];
    assert!(
        text.contains(&format!("cycles: period 63488, {samples} samples")),
        "{text}"
    );
    // A file is read whole while its counts are summed, one per core at a
    // time: what info holds beyond that is no count, whatever the size of
    // the database.
    let largest = walk_files(&db)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len() as usize)
        .max()
        .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bound = cores * largest + (1 << 20);
    assert!(
        peak < bound,
        "info took {peak} bytes of heap ({cores} files of {largest} bytes read at once: {bound})"
    );
}

/// Every file below `dir`.
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_failed_streamed_conversion_leaves_no_output() {
    let dir = tempdir();
    let db = dir.path().join("db");
    build_db(&db, &DbSpec::sparse(3, 100_000, 500));
    // The last image's file is cut short: found after the first parts are written.
    let last = db.join("202601010000/host/lib002.so.cycles");
    let bytes = std::fs::read(&last).unwrap();
    std::fs::write(&last, &bytes[..bytes.len() - 100]).unwrap();
    let out = dir.path().join("out.pb.gz");
    let run = profconv(&[db.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("lib002.so.cycles"));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("db")],
        "nothing written"
    );
}

#[test]
fn ten_thousand_one_event_files_stop_with_an_error_not_out_of_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    // 10 000 images of one address, each with an event of its own (3 MB):
    // 20 000 sample types over 10 000 samples, past the stated bound.
    let mut spec = DbSpec::sparse(10_000, 1, 1000);
    spec.events = (0..10_000).map(|e| (format!("event{e}"), 1)).collect();
    spec.one_event_each = true;
    let truth = build_db(&db, &spec);
    let out = dir.path().join("out.pb.gz");
    let (done, peak) = peak_heap(|| stream_to(&db, &out, true));
    let error = done.unwrap_err().to_string();
    assert!(error.contains("20000 sample types"), "{error}");
    assert!(error.contains("convert fewer events at a time"), "{error}");
    assert!(!out.exists(), "no output is left");
    // The index of files, images and events (about 2 KB a file, whatever
    // its size), and one image at a time.
    assert!(
        (peak as u64) < 16 * truth.bytes,
        "peak heap {peak} bytes for a {} byte database",
        truth.bytes
    );
}
