//! The mpatrol reader's parse, value by value: files written from a
//! description (tests/common/gen/mpatrol.rs) in every byte order and word
//! size, and damaged ones. The conversions are tested in tests/mpatrol.rs.

use std::path::Path;

use super::{parse, to_profile};
use crate::testkit::gen::mpatrol::*;

#[test]
fn every_byte_order_and_word_size_is_detected_and_parsed() {
    let prog = example();
    for (word, big) in COMBINATIONS {
        let raw = prog.raw(word);
        let file = parse(Path::new("x"), &encode(&raw, word, big)).unwrap();
        assert_eq!(file.word_size, word);
        assert_eq!(
            file.endian.name(),
            if big { "big-endian" } else { "little-endian" }
        );
        assert_eq!(file.version, 10408);
        assert_eq!(file.bounds, [32, 256, 2048]);
        let bins = file.bins.as_ref().unwrap();
        assert_eq!(bins.alloc_counts, raw.bins.as_ref().unwrap().0);
        assert_eq!(bins.free_large_bytes, raw.bins.as_ref().unwrap().3);
        assert_eq!(file.records.len(), raw.records.len());
        for (r, want) in file.records.iter().zip(&raw.records) {
            assert_eq!(r.index, want[0]);
            assert_eq!(r.alloc_count[..], want[1..5]);
            assert_eq!(r.alloc_bytes[..], want[5..9]);
            assert_eq!(r.free_count[..], want[9..13]);
            assert_eq!(r.free_bytes[..], want[13..17]);
        }
        for (site, want) in file.call_sites.iter().zip(&raw.sites) {
            let got = [
                site.index,
                site.parent,
                site.address,
                site.symbol,
                site.name_offset,
                site.record,
            ];
            assert_eq!(&got, want);
        }
        assert_eq!(file.symbol_addresses, raw.symbols);
        assert_eq!(file.strings, raw.strings);
    }
}

#[test]
fn call_sites_are_written_by_address_not_by_index() {
    // The generator writes them as mpatrol does; make sure the example
    // really exercises an out-of-order table.
    let raw = example().raw(8);
    let indexes: Vec<u64> = raw.sites.iter().map(|s| s[0]).collect();
    let mut sorted = indexes.clone();
    sorted.sort();
    assert_ne!(indexes, sorted);
    let file = parse(Path::new("x"), &encode(&raw, 8, false)).unwrap();
    let leaf = file.call_sites.iter().find(|s| s.record == 2).unwrap();
    let names: Vec<String> = file
        .stack(leaf)
        .iter()
        .map(|s| file.name(s).unwrap())
        .collect();
    assert_eq!(names, ["new_pair", "main", "_start"]);
}

#[test]
fn a_file_without_bins_is_read() {
    let mut prog = example();
    prog.bin_count = 0;
    let raw = prog.raw(8);
    let file = parse(Path::new("x"), &encode(&raw, 8, true)).unwrap();
    assert!(file.bins.is_none());
    assert_eq!(file.records.len(), 5);
}

#[test]
fn random_damage_never_panics() {
    // Flip bytes all over a valid file: every result is Ok or an Err, never a panic.
    let bytes = encode(&example().raw(8), 8, false);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        let mut bad = bytes.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state as usize) % bad.len();
            bad[i] = (state >> 32) as u8;
        }
        if let Ok(file) = parse(Path::new("x"), &bad) {
            let data = bad.clone();
            let _ = to_profile(Path::new("x"), &data, &file, &Default::default());
        }
    }
}

#[test]
fn stack_depths_are_counted_for_the_frame_limit() {
    let raw = example().raw(8);
    let file = parse(Path::new("x"), &encode(&raw, 8, false)).unwrap();
    let frames: usize = example().allocs.iter().map(|a| a.frames.len()).sum();
    assert_eq!(file.stack_frames, frames as u64);
}
