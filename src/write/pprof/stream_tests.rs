//! The streaming pprof writer ([`Stream`]) on DCPI databases built by
//! tests/common/gen/dcpi.rs: whatever the point where it starts streaming,
//! the output decodes to exactly the profile the whole-profile writer makes;
//! and a database of too many events is refused once the bound is reached,
//! not before.

use std::path::Path;

use super::stream::SPILL_VALUES;
use super::{decode, to_proto, write, Stream};
use crate::profile::{PartSink, Profile};
use crate::read::{self, Input, ReadOptions};
use crate::testkit::gen::dcpi::{build_db, DbSpec};
use crate::testkit::tempdir;

fn open(db: &Path) -> Vec<Input> {
    read::open_all(&[db.to_path_buf()], &ReadOptions::default()).unwrap()
}

/// A database with a label, two events at two periods, several epochs
/// and a dcpicat dump: every part of the streamed format.
fn varied_db(root: &Path) {
    let mut spec = DbSpec::sparse(3, 3000, 300);
    spec.epochs = 2;
    spec.events = vec![("cycles".into(), 63488), ("imiss".into(), 4096)];
    build_db(root, &spec);
    let dump = "name /usr/bench/lib001.so\nimage 20261122000001abc001\nlabel run2\n\
                text_start 0x3ff01000000\nevent 10 cycles:63488:10000\n0x3ff01000010 4\n0x3ff01000020 6\n";
    std::fs::write(root.join("202601010000/host/lib001.dump"), dump).unwrap();
}

#[test]
fn streamed_pprof_decodes_to_the_whole_profile() {
    let dir = tempdir();
    let db = dir.path().join("db");
    varied_db(&db);
    let options = ReadOptions::default();
    let whole = read::read_inputs(&open(&db), &options).unwrap();
    let expected = to_proto(&whole);
    for gzip in [false, true] {
        let mut stream = Stream::with_spill(Vec::new(), gzip, 0);
        read::read_parts(&open(&db), &options, &mut stream).unwrap();
        let bytes = stream.finish().unwrap();
        let streamed = decode(&bytes).unwrap();
        assert_eq!(streamed, expected, "gzip {gzip}");
    }
    // Held (small) profiles are written exactly as the whole-profile writer does.
    let mut stream = Stream::new(Vec::new(), true);
    read::read_parts(&open(&db), &options, &mut stream).unwrap();
    let mut bytes = Vec::new();
    write(&whole, true, &mut bytes).unwrap();
    assert!(stream.finish().unwrap() == bytes, "same bytes");
}

#[test]
fn images_of_one_file_stream_from_their_columns_to_the_whole_profile() {
    // One file per image, so every image is read straight into a lean
    // part's rows; images of the second event have their values in other
    // columns of the whole profile.
    let dir = tempdir();
    let db = dir.path().join("db");
    let mut spec = DbSpec::sparse(4, 5000, 300);
    spec.events = vec![("cycles".into(), 63488), ("imiss".into(), 4096)];
    spec.one_event_each = true;
    let truth = build_db(&db, &spec);
    let options = ReadOptions::default();
    let whole = read::read_inputs(&open(&db), &options).unwrap();
    let expected = to_proto(&whole);
    let addresses = truth.addresses as usize;
    assert_eq!(
        expected.location.len(),
        addresses,
        "a location per sampled address"
    );
    assert_eq!(
        expected.sample.len(),
        addresses,
        "a sample per sampled address"
    );
    // 10 000: the first image's part is held (as a copy of its columns),
    // then streamed with the second.
    for spill in [0, 3000, 10_000, SPILL_VALUES] {
        let mut stream = Stream::with_spill(Vec::new(), false, spill);
        read::read_parts(&open(&db), &options, &mut stream).unwrap();
        let streamed = decode(&stream.finish().unwrap()).unwrap();
        assert_eq!(streamed, expected, "spill at {spill}");
    }
}

/// A sink that drops every part, keeping only counts.
#[derive(Default)]
struct Discard {
    parts: usize,
}

impl PartSink for Discard {
    fn part(&mut self, _part: Profile) -> crate::Result<()> {
        self.parts += 1;
        Ok(())
    }
}

#[test]
fn ten_thousand_one_event_files_are_refused_once_the_bound_is_reached() {
    let dir = tempdir();
    let db = dir.path().join("db");
    // 10 000 images of one address, each with an event of its own (3 MB):
    // 20 000 sample types over 10 000 samples, past the stated bound.
    let mut spec = DbSpec::sparse(10_000, 1, 1000);
    spec.events = (0..10_000).map(|e| (format!("event{e}"), 1)).collect();
    spec.one_event_each = true;
    build_db(&db, &spec);
    let mut sink = Discard::default();
    let error = read::read_parts(&open(&db), &ReadOptions::default(), &mut sink)
        .unwrap_err()
        .to_string();
    assert!(error.contains("20000 sample types"), "{error}");
    // Refused by the density rule as soon as 20 000 types × the samples so
    // far pass profile::DENSE_VALUES_FREE values (almost all zero): the
    // head and the images before that one went to the sink.
    let images_before = (crate::profile::DENSE_VALUES_FREE / 20_000) as usize;
    assert_eq!(
        sink.parts,
        1 + images_before,
        "refused when the bound is reached, not before"
    );
}
