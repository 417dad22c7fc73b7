//! DCPI at scale (issues 12 and 13): a generated database of over a
//! million sampled addresses converts to pprof in heap memory well below
//! the database's size, with every count where its footer says; `info`
//! keeps no counts; the streamed pprof decodes to exactly the profile the
//! whole-profile writer makes; pathological databases stop with an error
//! rather than exhaust memory.
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
use profconv::profile::{PartSink, Profile};
use profconv::read::{self, Input, ReadOptions};
use profconv::write::pprof::{self, Stream};

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

fn spec(images: usize, insns: u32, per_mille: u32) -> DbSpec {
    DbSpec {
        images,
        insns,
        sampled_per_mille: per_mille,
        epochs: 1,
        events: vec![("cycles".into(), 63488)],
        one_event_each: false,
        seed: 42,
    }
}

fn open(db: &Path) -> Vec<Input> {
    read::open_all(&[db.to_path_buf()], &ReadOptions::default()).unwrap()
}

/// Converts the database to pprof through the streaming writer, into `out`.
fn stream_to(db: &Path, out: &Path, gzip: bool) -> profconv::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut stream = Stream::new(file, gzip);
    read::read_parts(&open(db), &ReadOptions::default(), &mut stream)?;
    stream.finish().map(drop)
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
    let truth = build_db(db, &spec(40, 256 * 1024, 100));
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
    let options = profconv::archive::ArchiveOptions {
        out_dir: dir.path().join("out"),
        formats: vec![profconv::OutputFormat::Pprof],
        read: ReadOptions::default(),
        binary_map: Vec::new(),
        write: Default::default(),
        jobs: 1,
        force: false,
        resume: false,
    };
    let (report, peak) =
        peak_heap(|| profconv::archive::run(&archive, &options, &|_, _| {}, &|_| {}).unwrap());
    let out = dir.path().join("out/host1/db.pb.gz");
    assert!(out.is_file(), "{report:?}");
    check_streamed(peak, &out, &truth);
}

#[test]
fn info_keeps_no_counts() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    let truth = build_db(&db, &spec(8, 256 * 1024, 500));
    let (text, peak) = peak_heap(|| read::info(std::slice::from_ref(&db), &ReadOptions::default()));
    let text = text.unwrap().to_string();
    let samples = truth.samples["cycles"];
    assert!(
        text.contains(&format!("cycles: period 63488, {samples} samples")),
        "{text}"
    );
    assert!(peak < 1 << 20, "info took {peak} bytes of heap");
}

/// A database with a label, two events at two periods, several epochs
/// and a dcpicat dump: every part of the streamed format.
fn varied_db(root: &Path) {
    let mut spec = spec(3, 3000, 300);
    spec.epochs = 2;
    spec.events = vec![("cycles".into(), 63488), ("imiss".into(), 4096)];
    build_db(root, &spec);
    let dump = "name /usr/bench/lib001.so\nimage 20261122000001abc001\nlabel run2\n\
                text_start 0x3ff01000000\nevent 10 cycles:63488:10000\n0x3ff01000010 4\n0x3ff01000020 6\n";
    std::fs::write(root.join("202601010000/host/lib001.dump"), dump).unwrap();
}

#[test]
fn streamed_pprof_decodes_to_the_whole_profile() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    varied_db(&db);
    let options = ReadOptions::default();
    let whole = read::read_inputs(&open(&db), &options).unwrap();
    let expected = pprof::to_proto(&whole);
    for gzip in [false, true] {
        let mut stream = Stream::with_spill(Vec::new(), gzip, 0);
        read::read_parts(&open(&db), &options, &mut stream).unwrap();
        let bytes = stream.finish().unwrap();
        let streamed = pprof::decode(&bytes).unwrap();
        assert_eq!(streamed, expected, "gzip {gzip}");
    }
    // Held (small) profiles are written exactly as the whole-profile writer does.
    let mut stream = Stream::new(Vec::new(), true);
    read::read_parts(&open(&db), &options, &mut stream).unwrap();
    let mut bytes = Vec::new();
    pprof::write(&whole, true, &mut bytes).unwrap();
    assert!(stream.finish().unwrap() == bytes, "same bytes");
}

#[test]
fn images_of_one_file_stream_from_their_columns_to_the_whole_profile() {
    // One file per image, so every image is read straight into a lean
    // part's rows; images of the second event have their values in other
    // columns of the whole profile.
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    let mut spec = spec(4, 5000, 300);
    spec.events = vec![("cycles".into(), 63488), ("imiss".into(), 4096)];
    spec.one_event_each = true;
    let truth = build_db(&db, &spec);
    let options = ReadOptions::default();
    let whole = read::read_inputs(&open(&db), &options).unwrap();
    let expected = pprof::to_proto(&whole);
    check_against_footers(&expected, &truth);
    // 10 000: the first image's part is held (as a copy of its columns),
    // then streamed with the second.
    for spill in [0, 3000, 10_000, pprof::SPILL_VALUES] {
        let mut stream = Stream::with_spill(Vec::new(), false, spill);
        read::read_parts(&open(&db), &options, &mut stream).unwrap();
        let streamed = pprof::decode(&stream.finish().unwrap()).unwrap();
        assert_eq!(streamed, expected, "spill at {spill}");
    }
}

#[test]
fn a_failed_streamed_conversion_leaves_no_output() {
    let dir = tempdir();
    let db = dir.path().join("db");
    build_db(&db, &spec(3, 100_000, 500));
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

/// A sink that drops every part, keeping only counts.
#[derive(Default)]
struct Discard {
    parts: usize,
}

impl PartSink for Discard {
    fn part(&mut self, _part: Profile) -> profconv::Result<()> {
        self.parts += 1;
        Ok(())
    }
}

#[test]
fn ten_thousand_one_event_files_stop_with_an_error_not_out_of_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let db = dir.path().join("db");
    // 10 000 images of one address, each with an event of its own (3 MB):
    // 20 000 sample types over 10 000 samples, past the stated bound.
    let mut spec = spec(10_000, 1, 1000);
    spec.events = (0..10_000).map(|e| (format!("event{e}"), 1)).collect();
    spec.one_event_each = true;
    let truth = build_db(&db, &spec);
    let mut sink = Discard::default();
    let (done, peak) =
        peak_heap(|| read::read_parts(&open(&db), &ReadOptions::default(), &mut sink));
    let error = done.unwrap_err().to_string();
    assert!(error.contains("20000 sample types"), "{error}");
    assert!(error.contains("convert fewer events at a time"), "{error}");
    // Refused by the density rule as soon as 20 000 types × the samples so
    // far pass profile::DENSE_VALUES_FREE values (almost all zero): the
    // head and the images before that one went to the sink.
    let images_before = (profconv::profile::DENSE_VALUES_FREE / 20_000) as usize;
    assert_eq!(
        sink.parts,
        1 + images_before,
        "refused when the bound is reached, not before"
    );
    // The index of files, images and events (about 2 KB a file, whatever
    // its size), and one image at a time.
    assert!(
        (peak as u64) < 16 * truth.bytes,
        "peak heap {peak} bytes for a {} byte database",
        truth.bytes
    );
}
