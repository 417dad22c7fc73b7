//! What compresses large pprof outputs: ISA-L's library, opened at run
//! time where the build has it, or zlib-rs.

mod common;

use common::*;
use std::process::Command;

#[test]
fn version_names_what_compresses_here() {
    let out = profconv(&["--version"]);
    assert!(out.status.success());
    let expected = format!(
        "profconv {} (large pprof outputs gzip-compressed with {})\n",
        env!("CARGO_PKG_VERSION"),
        profconv::write::pprof::compressor()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    assert_eq!(profconv(&["-V"]).stdout, out.stdout);
}

/// A DCPI database in `dir` of 400 000 sampled addresses: its pprof output
/// is streamed, in members of 1 MiB (three).
fn streamed_db(dir: &std::path::Path) -> std::path::PathBuf {
    use common::gen::dcpi::{build_db, DbSpec};
    let db = dir.join("db");
    build_db(
        &db,
        &DbSpec {
            images: 2,
            insns: 200_000,
            sampled_per_mille: 1000,
            epochs: 1,
            events: vec![("cycles".into(), 63488)],
            one_event_each: false,
            seed: 7,
        },
    );
    db
}

/// The bytes [`gzip_members`]' members decode to, joined: the message.
fn decoded(members: &[(u8, Vec<u8>)]) -> Vec<u8> {
    members
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect()
}

/// `PROFCONV_ISAL=0` makes a run compress with zlib-rs; the profile is
/// the one ISA-L's members decode to, and either way each run writes the
/// same bytes.
#[test]
fn profconv_isal_0_compresses_with_zlib_rs_and_every_run_writes_the_same_bytes() {
    let off = Command::new(profconv_bin())
        .arg("--version")
        .env("PROFCONV_ISAL", "0")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&off.stdout);
    assert!(version.contains("with zlib-rs ("), "{version}");
    let on = Command::new(profconv_bin())
        .arg("--version")
        .env_remove("PROFCONV_ISAL")
        .output()
        .unwrap();
    let igzip = String::from_utf8_lossy(&on.stdout).contains("ISA-L");
    let dir = tempdir();
    let db = streamed_db(dir.path());
    let convert = |name: &str, isal_off: bool| {
        let out = dir.path().join(name);
        let mut command = Command::new(profconv_bin());
        command.args([
            db.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--quiet".as_ref(),
        ]);
        if isal_off {
            command.env("PROFCONV_ISAL", "0");
        } else {
            command.env_remove("PROFCONV_ISAL");
        }
        assert!(command.status().unwrap().success());
        std::fs::read(out).unwrap()
    };
    let (first, second) = (convert("a.pb.gz", true), convert("b.pb.gz", true));
    let zlib = gzip_members(&first);
    assert!(zlib.len() > 2, "{} members", zlib.len());
    assert!(zlib.iter().all(|(xfl, _)| *xfl == 4), "zlib-rs's headers");
    assert!(first == second, "the same bytes on each run");
    let isal = convert("c.pb.gz", false);
    assert!(
        convert("d.pb.gz", false) == isal,
        "the same bytes on each run"
    );
    let default = gzip_members(&isal);
    assert!(
        default
            .iter()
            .all(|(xfl, _)| *xfl == if igzip { 0 } else { 4 }),
        "ISA-L's members where it is there ({igzip})"
    );
    assert!(decoded(&default) == decoded(&zlib), "the same profile");
}

/// Where ISA-L's streams cannot lie at their place (here another mapping
/// holds it, made by a preloaded library as the program starts), they fall
/// back to each thread's stack: the conversion still works and decodes to
/// the same profile, and `--version` says the bytes may vary.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_taken_place_for_the_streams_falls_back_to_the_stack_and_says_so() {
    let plain = String::from_utf8_lossy(&profconv(&["--version"]).stdout).into_owned();
    if !plain.contains("ISA-L") {
        return; // zlib-rs compresses here: no streams to place
    }
    let dir = tempdir();
    let source = dir.path().join("take.c");
    std::fs::write(
        &source,
        "#define _GNU_SOURCE\n#include <sys/mman.h>\n\
         __attribute__((constructor)) static void take(void) {\n\
         mmap((void *)0x2a5100000000ULL, 1 << 20, PROT_READ, \
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);\n}\n",
    )
    .unwrap();
    let take = dir.path().join("take.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&take)
        .arg(&source)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "cc must build the preloaded library in CI");
        return;
    }
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(profconv_bin())
            .args(args)
            .env("LD_PRELOAD", &take)
            .env_remove("PROFCONV_ISAL")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        out
    };
    let version = run(&["--version".as_ref()]);
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.contains("could not be placed"), "{version}");
    let db = streamed_db(dir.path());
    let (taken, placed) = (
        dir.path().join("taken.pb.gz"),
        dir.path().join("placed.pb.gz"),
    );
    run(&[db.as_os_str(), "-o".as_ref(), taken.as_os_str()]);
    profconv_ok(&[db.to_str().unwrap(), "-o", placed.to_str().unwrap()]);
    let (taken, placed) = (
        std::fs::read(taken).unwrap(),
        std::fs::read(placed).unwrap(),
    );
    let members = gzip_members(&taken);
    assert!(members.len() > 2, "{} members", members.len());
    assert!(members.iter().all(|(xfl, _)| *xfl == 0), "igzip's members");
    assert!(
        decoded(&members) == decoded(&gzip_members(&placed)),
        "the same profile"
    );
}
