//! gmon.out layouts built by hand (docs/formats/gprof.md §1–§2), parsed:
//! big-endian, 32-bit, 4.4BSD, 4.3BSD, several histograms, basic blocks;
//! hostile input; every prefix of the real fixtures. The conversions are
//! tested in tests/gprof_formats.rs and tests/gprof_fixtures.rs.

use std::path::Path;

use super::data::Variant;
use super::parse;
use crate::read::{GprofOptions, ReadOptions};
use crate::testkit::gen::gprof::*;

fn sample_hist() -> Hist {
    // 8 bins of 4 bytes over [0x1000, 0x1020)
    Hist {
        low: 0x1000,
        high: 0x1020,
        rate: 100,
        bins: vec![0, 3, 0, 0, 7, 0, 1, 65535],
    }
}

fn opts() -> ReadOptions {
    ReadOptions::default()
}

#[test]
fn gnu_format_reads_in_both_byte_orders_and_both_pointer_sizes() {
    for big in [false, true] {
        for word in [4, 8] {
            let l = Layout { big, word };
            let data = gnu(
                l,
                &[sample_hist()],
                &[
                    (0x1010, 0x1004, 2),
                    (0x1010, 0x1004, 3),
                    (0x1018, 0x1000, 9),
                ],
                &[],
            );
            let d = parse(Path::new("t.gmon"), &data, &opts(), None)
                .unwrap_or_else(|e| panic!("big={big} word={word}: {e}"));
            assert_eq!(d.variant, Variant::Gnu);
            assert_eq!(d.pointer_size, word, "pointer size detected");
            assert_eq!(
                d.endian.name(),
                if big { "big-endian" } else { "little-endian" }
            );
            assert_eq!(d.histograms.len(), 1);
            assert_eq!(d.histograms[0].bins, vec![0, 3, 0, 0, 7, 0, 1, 65535]);
            assert_eq!(
                (d.histograms[0].low_pc, d.histograms[0].high_pc),
                (0x1000, 0x1020)
            );
            assert_eq!(d.saturated_bins, 1, "a bin at 65535 is flagged");
            // The same (from, self) pair twice is one arc with the counts added.
            assert_eq!(d.arcs.len(), 2);
            let a = d.arcs.iter().find(|a| a.from_pc == 0x1010).unwrap();
            assert_eq!((a.self_pc, a.count), (0x1004, 5));
        }
    }
}

#[test]
fn histograms_with_equal_range_are_summed_and_others_kept_apart() {
    let l = Layout {
        big: false,
        word: 8,
    };
    let h2 = Hist {
        low: 0x1000,
        high: 0x1020,
        rate: 100,
        bins: vec![1, 1, 1, 1, 1, 1, 1, 1],
    };
    let h3 = Hist {
        low: 0x2000,
        high: 0x2008,
        rate: 100,
        bins: vec![4, 5],
    };
    let data = gnu(l, &[sample_hist(), h2, h3], &[], &[]);
    let d = parse(Path::new("t"), &data, &opts(), None).unwrap();
    assert_eq!(d.histograms.len(), 2);
    assert_eq!(d.histograms[0].bins, vec![1, 4, 1, 1, 8, 1, 2, 65536]);
    assert_eq!(d.histograms[1].bins, vec![4, 5]);
}

#[test]
fn histograms_with_different_rates_cannot_be_combined() {
    let l = Layout {
        big: false,
        word: 8,
    };
    let mut other = sample_hist();
    other.rate = 1000;
    let data = gnu(l, &[sample_hist(), other], &[], &[]);
    let e = parse(Path::new("t"), &data, &opts(), Some(8))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be combined"), "{e}");
}

#[test]
fn basic_block_counts_are_read_with_word_sized_counts() {
    for word in [4, 8] {
        let l = Layout { big: true, word };
        let data = gnu(
            l,
            &[sample_hist()],
            &[],
            &[(0x1004, 10), (0x1008, 20), (0x1004, 1)],
        );
        let d = parse(Path::new("t"), &data, &opts(), Some(word)).unwrap();
        assert_eq!(d.basic_blocks.get(&0x1004), Some(&11));
        assert_eq!(d.basic_blocks.get(&0x1008), Some(&20));
    }
}

#[test]
fn empty_histogram_is_valid_and_gives_arcs_only() {
    let l = Layout {
        big: false,
        word: 8,
    };
    let data = gnu(l, &[], &[(0x1010, 0x1004, 2)], &[]);
    let d = parse(Path::new("t"), &data, &opts(), Some(8)).unwrap();
    assert!(d.histograms.is_empty());
    assert_eq!(d.arcs.len(), 1);
}

#[test]
fn bsd44_headers_are_detected_in_every_word_size_and_byte_order() {
    for big in [false, true] {
        for word in [4, 8] {
            let l = Layout { big, word };
            let data = bsd44(
                l,
                &sample_hist(),
                &[(0x1010, 0x1004, 6), (0x1018, 0x1000, 1)],
            );
            assert_eq!(
                crate::read::detect_bytes(&data, data.len() as u64),
                Some(crate::Format::Gprof)
            );
            let d = parse(Path::new("t"), &data, &opts(), None)
                .unwrap_or_else(|e| panic!("{big} {word}: {e}"));
            assert_eq!(d.variant, Variant::Bsd44);
            assert_eq!(d.pointer_size, word);
            assert_eq!(d.histograms[0].prof_rate, 100);
            assert_eq!(d.histograms[0].bins, vec![0, 3, 0, 0, 7, 0, 1, 65535]);
            assert_eq!(d.arcs.len(), 2);
            assert!(!d.rate_assumed);
        }
    }
}

#[test]
fn bsd43_headers_assume_the_given_rate_and_say_so() {
    let l = Layout {
        big: false,
        word: 4,
    };
    let data = bsd43(l, &sample_hist(), &[(0x1010, 0x1004, 6)]);
    let d = parse(Path::new("t"), &data, &opts(), None).unwrap();
    assert_eq!(d.variant, Variant::Bsd43);
    assert!(d.rate_assumed);
    assert_eq!(d.histograms[0].prof_rate, 100);
    let options = ReadOptions {
        gprof: GprofOptions {
            rate: Some(60),
            ..Default::default()
        },
        ..ReadOptions::default()
    };
    let d = parse(Path::new("t"), &data, &options, None).unwrap();
    assert_eq!(d.histograms[0].prof_rate, 60);
}

#[test]
fn pointer_size_can_be_forced() {
    let data = gnu(
        Layout {
            big: false,
            word: 4,
        },
        &[sample_hist()],
        &[],
        &[],
    );
    let forced = ReadOptions {
        gprof: GprofOptions {
            pointer_size: Some(8),
            ..Default::default()
        },
        ..ReadOptions::default()
    };
    assert!(
        parse(Path::new("t"), &data, &forced, None).is_err(),
        "4-byte file read as 8 fails"
    );
    let forced = ReadOptions {
        gprof: GprofOptions {
            pointer_size: Some(4),
            ..Default::default()
        },
        ..ReadOptions::default()
    };
    assert_eq!(
        parse(Path::new("t"), &data, &forced, None)
            .unwrap()
            .pointer_size,
        4
    );
}

#[test]
fn a_header_claiming_4g_bins_in_a_100_byte_file_fails_at_once() {
    let mut data = gnu(
        Layout {
            big: false,
            word: 8,
        },
        &[],
        &[],
        &[],
    );
    data.push(0);
    data.extend(0x1000u64.to_le_bytes());
    data.extend(0x2000u64.to_le_bytes());
    data.extend(u32::MAX.to_le_bytes());
    data.extend(100u32.to_le_bytes());
    data.extend([0u8; 16]);
    data.resize(100, 0);
    let e = parse(Path::new("big.gmon"), &data, &opts(), Some(8))
        .unwrap_err()
        .to_string();
    assert!(e.contains("big.gmon"), "{e}");
    assert!(e.contains("4294967295 bins"), "{e}");
    assert!(e.contains("at byte 37"), "names the hist_size field: {e}");
}

#[test]
fn every_prefix_and_flipped_byte_gives_an_error_or_a_parse_never_a_panic() {
    let files = [
        gnu(
            Layout {
                big: false,
                word: 8,
            },
            &[sample_hist()],
            &[(0x1010, 0x1004, 5)],
            &[(0x1004, 1)],
        ),
        gnu(
            Layout { big: true, word: 4 },
            &[sample_hist()],
            &[(0x1010, 0x1004, 5)],
            &[],
        ),
        bsd44(
            Layout {
                big: false,
                word: 8,
            },
            &sample_hist(),
            &[(0x1010, 0x1004, 6)],
        ),
        bsd43(
            Layout { big: true, word: 4 },
            &sample_hist(),
            &[(0x1010, 0x1004, 6)],
        ),
    ];
    for data in &files {
        for n in 0..data.len() {
            let _ = parse(Path::new("t"), &data[..n], &opts(), None);
        }
        for i in 0..data.len() {
            for bit in [0x01u8, 0x80, 0xff] {
                let mut bad = data.clone();
                bad[i] ^= bit;
                if let Ok(d) = parse(Path::new("t"), &bad, &opts(), None) {
                    // Whatever parsed must also convert without panicking.
                    let _ = super::profile::to_profile(&d, None, Default::default(), |_, _| None);
                }
            }
        }
    }
}

#[test]
fn truncated_gnu_file_names_the_offset_and_what_was_expected() {
    let data = gnu(
        Layout {
            big: false,
            word: 8,
        },
        &[sample_hist()],
        &[(0x1010, 0x1004, 5)],
        &[],
    );
    let cut = &data[..data.len() - 3];
    let e = parse(Path::new("cut.gmon"), cut, &opts(), Some(8))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cut.gmon: at byte"), "{e}");
    assert!(e.contains("arc count"), "{e}");
}

#[test]
fn unknown_record_tag_is_an_error() {
    let mut data = gnu(
        Layout {
            big: false,
            word: 8,
        },
        &[sample_hist()],
        &[],
        &[],
    );
    let at = data.len();
    data.push(7);
    let e = parse(Path::new("t"), &data, &opts(), Some(8))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("at byte {at}")), "{e}");
    assert!(e.contains("found 7"), "{e}");
}

#[test]
fn a_bsd44_header_with_rate_0_asks_for_the_rate_instead_of_reading_as_bsd43() {
    for word in [4, 8] {
        let l = Layout { big: false, word };
        let mut h = sample_hist();
        h.rate = 0;
        let data = bsd44(l, &h, &[(0x1010, 0x1004, 6)]);
        let e = parse(Path::new("t"), &data, &opts(), None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--gmon-rate"), "{text}");
        assert!(
            text.contains(&format!("at byte {}", 2 * word + 8)),
            "{text}"
        );
        let options = ReadOptions {
            gprof: GprofOptions {
                rate: Some(60),
                ..Default::default()
            },
            ..ReadOptions::default()
        };
        let d = parse(Path::new("t"), &data, &options, None).unwrap();
        assert_eq!(d.variant, Variant::Bsd44, "not reinterpreted as 4.3BSD");
        assert_eq!(d.histograms[0].prof_rate, 60);
        assert!(d.rate_assumed);
        assert_eq!(d.histograms[0].bins, vec![0, 3, 0, 0, 7, 0, 1, 65535]);
    }
}

#[test]
fn every_prefix_of_a_real_fixture_fails_cleanly_or_parses() {
    let options = ReadOptions::default();
    for name in ["callgraph-nopie.gmon", "callgraph-m32.gmon"] {
        let data = std::fs::read(crate::testkit::fixture(&format!("gprof/{name}"))).unwrap();
        let whole = parse(Path::new(name), &data, &options, None).unwrap();
        assert_eq!(whole.arcs.len(), 7);
        for n in 0..data.len() {
            match parse(Path::new(name), &data[..n], &options, None) {
                Ok(d) => assert!(d.arcs.len() <= 7),
                Err(e) => {
                    let text = e.to_string();
                    assert!(text.starts_with(name) && text.contains("at byte"), "{text}");
                }
            }
        }
    }
}

/// A 64-bit static program's and a 32-bit one's gmon.out, each with its
/// executable and with the other's: a profile, or the error that names the
/// pointer sizes.
#[test]
fn a_binary_of_the_other_word_size_is_named_as_such() {
    let corpus = |name: &str| crate::testkit::fixture(&format!("gprof-corpus/{name}"));
    for gmon in ["hashtab-static", "asm-i686"] {
        let path = corpus(&format!("{gmon}.gmon"));
        for binary in ["hashtab-static", "asm-i686"] {
            let options = ReadOptions {
                binary: Some(corpus(binary)),
                ..ReadOptions::default()
            };
            let read = || crate::read::read(std::slice::from_ref(&path), &options);
            let encoded = |r: crate::Result<crate::Profile>| match r {
                Ok(profile) => Ok(crate::write::pprof::encode(&profile)),
                Err(e) => Err(e.to_string()),
            };
            let after = encoded(read());
            match (gmon == binary, &after) {
                (true, Ok(bytes)) => assert!(bytes.len() > 1000, "{gmon}"),
                (false, Err(e)) => assert!(e.contains("-bit program"), "{gmon} with {binary}: {e}"),
                (_, other) => panic!("{gmon} with {binary}: {other:?}"),
            }
        }
    }
}
