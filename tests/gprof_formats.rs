//! gmon.out layouts built by hand (spec gprof.md §1–§2): big-endian, 32-bit,
//! 4.4BSD, 4.3BSD, several histograms, basic blocks; and hostile input.

mod common;

use common::gen::gprof::*;
use common::*;

fn sample_hist() -> Hist {
    // 8 bins of 4 bytes over [0x1000, 0x1020)
    Hist {
        low: 0x1000,
        high: 0x1020,
        rate: 100,
        bins: vec![0, 3, 0, 0, 7, 0, 1, 65535],
    }
}

/// Converts bytes with the CLI (no binary) and returns the decoded pprof.
fn convert(data: &[u8], extra: &[&str]) -> (pb::Profile, tempfile::TempDir) {
    let dir = tempdir();
    let input = dir.path().join("gmon.out");
    std::fs::write(&input, data).unwrap();
    let out = dir.path().join("out.pb.gz");
    let mut args = vec![input.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    profconv_ok(&args);
    let p = decode_pprof(&out);
    check_pprof_invariants(&p);
    (p, dir)
}

/// Sample type index by name.
fn st(p: &pb::Profile, name: &str) -> usize {
    p.sample_type
        .iter()
        .position(|t| s(p, t.r#type) == name)
        .unwrap()
}

#[test]
fn unsymbolized_conversion_keeps_every_bin_at_its_address() {
    for (big, word) in [(false, 8), (true, 4)] {
        let data = gnu(
            Layout { big, word },
            &[sample_hist()],
            &[(0x1010, 0x1004, 5)],
            &[],
        );
        let (p, _dir) = convert(&data, &[]);
        let (samples, cpu, calls) = (st(&p, "samples"), st(&p, "cpu"), st(&p, "calls"));
        assert_eq!(s(&p, p.sample_type[cpu].unit), "nanoseconds");
        assert_eq!(p.period, 10_000_000);
        let mut by_addr = std::collections::BTreeMap::new();
        let mut call_total = 0;
        for sample in &p.sample {
            let leaf = p
                .location
                .iter()
                .find(|l| l.id == sample.location_id[0])
                .unwrap();
            if sample.value[samples] > 0 {
                assert_eq!(sample.location_id.len(), 1, "flat stacks without a binary");
                *by_addr.entry(leaf.address).or_insert((0, 0)) =
                    (sample.value[samples], sample.value[cpu]);
            }
            if sample.value[calls] > 0 {
                call_total += sample.value[calls];
                let caller = p
                    .location
                    .iter()
                    .find(|l| l.id == sample.location_id[1])
                    .unwrap();
                assert_eq!((leaf.address, caller.address), (0x1004, 0x1010));
            }
        }
        assert_eq!(call_total, 5);
        let expected: std::collections::BTreeMap<u64, (i64, i64)> = [
            (0x1004, (3, 30_000_000)),
            (0x1010, (7, 70_000_000)),
            (0x1018, (1, 10_000_000)),
            (0x101c, (65535, 655_350_000_000)),
        ]
        .into_iter()
        .collect();
        assert_eq!(by_addr, expected);
        assert!(
            p.comment.iter().any(|&c| s(&p, c).contains("65535")),
            "saturation warning kept"
        );
        // go tool pprof accepts it.
        let _ = go_pprof(&["-raw", _dir.path().join("out.pb.gz").to_str().unwrap()]);
    }
}

#[test]
fn info_prints_variant_byte_order_pointer_size_and_totals() {
    let dir = tempdir();
    let path = dir.path().join("g.out");
    std::fs::write(
        &path,
        gnu(
            Layout { big: true, word: 4 },
            &[sample_hist()],
            &[(1, 2, 3)],
            &[],
        ),
    )
    .unwrap();
    let out = profconv_ok(&["info", path.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("GNU gmon.out"), "{text}");
    assert!(text.contains("big-endian"), "{text}");
    assert!(text.contains("pointer size:  4 bytes"), "{text}");
    assert!(text.contains("65546 ticks"), "{text}");
    assert!(text.contains("1 distinct, 3 calls"), "{text}");
}

#[test]
fn bad_input_exits_1_and_writes_nothing() {
    let dir = tempdir();
    let input = dir.path().join("gmon.out");
    let mut data = gnu(
        Layout {
            big: false,
            word: 8,
        },
        &[sample_hist()],
        &[],
        &[],
    );
    data.truncate(30);
    std::fs::write(&input, &data).unwrap();
    let out = dir.path().join("out.pb.gz");
    let r = profconv(&[input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("gmon.out: at byte"), "{err}");
    assert!(!out.exists(), "no output on failure");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left behind");
}

#[test]
fn usage_errors_exit_2() {
    let r = profconv(&["--no-such-flag"]);
    assert_eq!(r.status.code(), Some(2));
    let dir = tempdir();
    let input = dir.path().join("gmon.out");
    std::fs::write(
        &input,
        gnu(
            Layout {
                big: false,
                word: 8,
            },
            &[sample_hist()],
            &[],
            &[],
        ),
    )
    .unwrap();
    let r = profconv(&[
        input.to_str().unwrap(),
        "-o",
        dir.path().join("x.unknown").to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    let r = profconv(&[
        input.to_str().unwrap(),
        "-o",
        dir.path().join("x.folded").to_str().unwrap(),
        "--sample-type",
        "nope",
    ]);
    assert_eq!(r.status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn outputs_are_ordinary_files_not_private_temporaries() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let input = dir.path().join("gmon.out");
    std::fs::write(
        &input,
        gnu(
            Layout {
                big: false,
                word: 8,
            },
            &[sample_hist()],
            &[],
            &[],
        ),
    )
    .unwrap();
    let out = dir.path().join("out.pb.gz");
    profconv_ok(&[input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_ne!(
        mode & 0o044,
        0,
        "group/other can read the output (mode {mode:o})"
    );
}

#[test]
fn a_rate_of_0_is_a_usage_error() {
    let out = profconv(&[
        fixture("gprof/recursion.gmon").to_str().unwrap(),
        "--gmon-rate",
        "0",
        "-o",
        "/dev/null",
        "--to",
        "pprof",
    ]);
    assert_eq!(out.status.code(), Some(2), "--gmon-rate 0 is a usage error");
}
