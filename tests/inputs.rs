//! Inputs that are not plain files: standard input (`-`), FIFOs and
//! `/dev/fd` pipes, gzip-compressed streams, and the bound on decompression.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// Runs profconv with `stdin` as its standard input; asserts success.
fn profconv_with_stdin(args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut child = Command::new(profconv_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("profconv runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin).expect("stdin is written");
    drop(pipe);
    let out = child.wait_with_output().expect("profconv ends");
    assert!(
        out.status.success(),
        "profconv {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_gmon_out_on_standard_input_converts_like_the_file() {
    let dir = tempdir();
    let gmon = fixture("gprof/callgraph-nopie.gmon");
    let binary = fixture("gprof/callgraph-nopie");
    let binary = binary.to_str().unwrap();
    let bytes = read(&gmon);
    let from_file = dir.path().join("file.folded");
    profconv_ok(&[
        gmon.to_str().unwrap(),
        "--binary",
        binary,
        "-o",
        from_file.to_str().unwrap(),
    ]);
    for (name, stdin) in [("plain", bytes.clone()), ("gzip", gzip(&bytes))] {
        let pb = dir.path().join(format!("{name}.pb.gz"));
        let folded = dir.path().join(format!("{name}.folded"));
        profconv_with_stdin(
            &[
                "-",
                "--binary",
                binary,
                "-o",
                pb.to_str().unwrap(),
                "-o",
                folded.to_str().unwrap(),
            ],
            &stdin,
        );
        // A pipe has no modification time, so the pprof differs from the
        // file's in its time only; the stacks are the same.
        assert_eq!(read(&folded), read(&from_file), "{name}");
        let p = decode_pprof(&pb);
        check_pprof_invariants(&p);
        assert!(!p.sample.is_empty(), "{name}");
    }
    assert_eq!(
        read(&dir.path().join("plain.pb.gz")),
        read(&dir.path().join("gzip.pb.gz")),
        "gzip on standard input is decompressed"
    );
}

#[test]
fn an_mpatrol_file_through_a_pipe_is_byte_identical_to_the_file() {
    let dir = tempdir();
    let input = fixture("mpatrol/linux-x86_64/mpatrol.out");
    let from_file = dir.path().join("file.pb.gz");
    profconv_ok(&[input.to_str().unwrap(), "-o", from_file.to_str().unwrap()]);
    let from_stdin = dir.path().join("stdin.pb.gz");
    profconv_with_stdin(&["-", "-o", from_stdin.to_str().unwrap()], &read(&input));
    assert_eq!(read(&from_stdin), read(&from_file));
}

#[cfg(unix)]
#[test]
fn a_fifo_and_a_dev_fd_pipe_convert_byte_identically_to_the_file() {
    let dir = tempdir();
    let input = fixture("mpatrol/linux-x86_64/mpatrol.out");
    let from_file = dir.path().join("file.pb.gz");
    profconv_ok(&[input.to_str().unwrap(), "-o", from_file.to_str().unwrap()]);

    // A named pipe, written by another process while profconv reads it.
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "mkfifo is needed");
        return;
    }
    let writer = {
        let (fifo, input) = (fifo.clone(), input.clone());
        std::thread::spawn(move || std::fs::write(&fifo, read(&input)).unwrap())
    };
    let from_fifo = dir.path().join("fifo.pb.gz");
    profconv_ok(&[fifo.to_str().unwrap(), "-o", from_fifo.to_str().unwrap()]);
    writer.join().unwrap();
    assert_eq!(read(&from_fifo), read(&from_file), "FIFO");

    // bash's process substitution: `/dev/fd/N` of a pipe.
    let from_devfd = dir.path().join("devfd.pb.gz");
    let script = format!(
        "exec {:?} <(cat {:?}) -o {:?}",
        profconv_bin(),
        input,
        from_devfd
    );
    let status = Command::new("bash").arg("-c").arg(&script).status();
    assert!(status.is_ok_and(|s| s.success()), "{script}");
    assert_eq!(read(&from_devfd), read(&from_file), "/dev/fd pipe");
}

#[test]
fn info_reads_standard_input() {
    let input = fixture("gprof/callgraph-nopie.gmon");
    let out = profconv_with_stdin(&["info", "-"], &read(&input));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("-:") && text.contains("gprof"), "{text}");
}

#[test]
fn a_gzip_input_past_the_decompression_bound_fails_naming_the_limit() {
    let dir = tempdir();
    let gz = dir.path().join("big.gmon.gz");
    std::fs::write(&gz, gzip(&read(&fixture("gprof/callgraph-nopie.gmon")))).unwrap();
    let out = profconv(&[
        gz.to_str().unwrap(),
        "--max-input-size",
        "100",
        "-o",
        dir.path().join("o.folded").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("more than 100 bytes") && err.contains("--max-input-size"),
        "{err}"
    );
    profconv_ok(&[
        gz.to_str().unwrap(),
        "-o",
        dir.path().join("o.folded").to_str().unwrap(),
    ]);
}

#[test]
fn standard_input_given_twice_is_a_usage_error() {
    let out = profconv(&["-", "-", "-o", "/dev/null", "--to", "folded"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_library_reads_bytes_without_a_file() {
    let bytes = read(&fixture("mpatrol/linux-x86_64/mpatrol.out"));
    let input = profconv::read::Input::from_bytes("in-memory", bytes);
    let profile = profconv::read::read_inputs(&[input], &profconv::ReadOptions::default()).unwrap();
    assert!(!profile.samples().is_empty());
}

/// Runs profconv expecting exit 1; its standard error.
fn refused(args: &[&str]) -> String {
    let out = profconv(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} should be refused: {err}"
    );
    err
}

/// An archive of every kind: two DCPI databases, a DCPI file outside any
/// database, a gmon.out, an mpatrol file and an APS capture.
fn mixed_archive(root: &Path) {
    use common::gen::{dcpi, gprof, mpatrol};
    dcpi::make_db(&root.join("db1"));
    dcpi::make_db(&root.join("db2"));
    let f = &dcpi::db_files()[0];
    let dump = dcpi::BinaryProfile::new(
        dcpi::header(&f.image, f.epoch, f.event, f.period),
        f.chunks.clone(),
    );
    dcpi::write(&root.join("dumps/app.prof"), &dump.bytes());
    let hist = gprof::Hist {
        low: 0x1000,
        high: 0x1100,
        rate: 100,
        bins: vec![1; 64],
    };
    let layout = gprof::Layout {
        big: false,
        word: 8,
    };
    dcpi::write(
        &root.join("runs/gmon.out"),
        &gprof::gnu(layout, &[hist], &[(0x1010, 0x1040, 3)], &[]),
    );
    let program = mpatrol::example();
    dcpi::write(
        &root.join("mp/mpatrol.out"),
        &mpatrol::encode(&program.raw(8), 8, false),
    );
    dcpi::write(
        &root.join("capture/sample_cpu_0_20240101_000000"),
        &small_aps_file(),
    );
}

#[test]
fn a_directory_is_one_profile_only_by_a_database_or_capture_layout() {
    let dir = tempdir();
    let archive = dir.path().join("archive");
    mixed_archive(&archive);
    let out = dir.path().join("all.pb.gz");
    let out_s = out.to_str().unwrap();
    // The whole archive: refused, with what it holds and where to go.
    let err = refused(&[archive.to_str().unwrap(), "-o", out_s]);
    for found in [
        "11 dcpi files",
        "db1/199805191724/walnut/",
        "dumps/app.prof",
        "1 gprof file (runs/gmon.out)",
        "1 mpatrol file (mp/mpatrol.out)",
        "1 aps file (capture/sample_cpu_0_20240101_000000)",
        "profconv convert",
    ] {
        assert!(err.contains(found), "{found}: {err}");
    }
    assert!(!out.exists());
    // Forcing the format does not make it one database.
    let err = refused(&[archive.to_str().unwrap(), "--from", "dcpi", "-o", out_s]);
    assert!(err.contains("not one profile"), "{err}");
    // DCPI files outside a database's layout are no database either.
    let err = refused(&[archive.join("dumps").to_str().unwrap(), "-o", out_s]);
    assert!(err.contains("1 dcpi file (app.prof)"), "{err}");
    // A database, one of its epochs, one of its hosts, a capture: each one.
    for one in [
        "db1",
        "db1/199805191724",
        "db1/199805191724/walnut",
        "capture",
    ] {
        let path = archive.join(one);
        profconv_ok(&[path.to_str().unwrap(), "-o", out_s]);
        assert!(!decode_pprof(&out).sample.is_empty(), "{one}");
        std::fs::remove_file(&out).unwrap();
    }
    // A database with another kind of profile beside its epochs: a mix.
    std::fs::copy(archive.join("runs/gmon.out"), archive.join("db1/gmon.out")).unwrap();
    let err = refused(&[archive.join("db1").to_str().unwrap(), "-o", out_s]);
    assert!(
        err.contains("1 gprof file (gmon.out)") && err.contains("5 dcpi files"),
        "{err}"
    );
}
