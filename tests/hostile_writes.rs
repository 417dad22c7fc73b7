//! Where profconv must not write (issue 41): a file that is an input by any
//! spelling (a member of an input folder, a file under `--image-dir`,
//! standard input's file, a standard output appended to an input, the
//! files an archive run reads as its `--report`), temporary-looking files
//! that are not its own, and the rules for sets of outputs (all placed or
//! none, permissions kept) and for archive output names (decided before
//! converting, the same every run). Each refusal leaves the file as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn gmon() -> PathBuf {
    manifest_dir().join("examples/gprof/gmon.out")
}

fn prog() -> PathBuf {
    manifest_dir().join("examples/gprof/prog")
}

fn st(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a usage refusal (exit 2) whose message contains `says`.
fn assert_refused(out: &std::process::Output, says: &str) {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(says), "expected {says:?} in: {err}");
}

/// Copies a folder tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn an_output_inside_a_dcpi_database_input_is_refused() {
    let dir = tempdir();
    let db = dir.path().join("db");
    copy_tree(&manifest_dir().join("examples/dcpi/db"), &db);
    let member = db.join("202601010000/benchhost/lib000.so.cycles");
    let before = std::fs::read(&member).unwrap();
    for out in [member.clone(), db.join("202601010000/new.folded")] {
        let run = profconv(&[st(&db), "-o", st(&out), "--to", "folded"]);
        assert_refused(&run, "inside the input folder");
    }
    assert_eq!(std::fs::read(&member).unwrap(), before);
    assert!(!db.join("202601010000/new.folded").exists());
}

#[test]
fn an_output_that_is_a_hard_link_to_a_database_member_leaves_the_member_whole() {
    let dir = tempdir();
    let db = dir.path().join("db");
    copy_tree(&manifest_dir().join("examples/dcpi/db"), &db);
    let member = db.join("202601010000/benchhost/lib000.so.cycles");
    let before = std::fs::read(&member).unwrap();
    let link = dir.path().join("out.folded");
    std::fs::hard_link(&member, &link).unwrap();
    let run = profconv(&[st(&db), "-o", st(&link), "--to", "folded"]);
    assert!(run.status.success(), "{}", stderr_of(&run));
    // The rename put a new file at the link's name; the member is untouched.
    assert_eq!(std::fs::read(&member).unwrap(), before);
    assert_ne!(std::fs::read(&link).unwrap(), before);
}

#[test]
fn an_output_inside_the_image_dir_is_refused() {
    let dir = tempdir();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let image = images.join("lib000.so");
    std::fs::write(&image, b"an image").unwrap();
    let db = manifest_dir().join("examples/dcpi/db");
    let run = profconv(&[
        st(&db),
        "--image-dir",
        st(&images),
        "-o",
        st(&image),
        "--to",
        "folded",
    ]);
    assert_refused(&run, "inside the input folder");
    assert_eq!(std::fs::read(&image).unwrap(), b"an image");
}

/// A copy of the example gmon.out, `in.gmon` in a folder of its own.
fn gmon_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempdir();
    let input = dir.path().join("in.gmon");
    std::fs::copy(gmon(), &input).unwrap();
    (dir, input)
}

#[test]
fn standard_input_whose_file_is_the_output_is_refused() {
    let (_dir, input) = gmon_copy();
    let before = std::fs::read(&input).unwrap();
    let run = Command::new(profconv_bin())
        .args([
            "-",
            "--binary",
            st(&prog()),
            "-o",
            st(&input),
            "--to",
            "folded",
        ])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert_refused(&run, "standard input");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

#[test]
fn standard_output_appending_to_an_input_is_refused() {
    let (_dir, input) = gmon_copy();
    let before = std::fs::read(&input).unwrap();
    let append = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    let run = Command::new(profconv_bin())
        .args([
            st(&input),
            "--binary",
            st(&prog()),
            "-o",
            "-",
            "--to",
            "folded",
        ])
        .stdout(append)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_refused(&run, "standard output is the input");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

/// An archive of one gmon.out and its executable, with a binary map and a
/// list of known failures beside it.
struct Archive {
    _dir: tempfile::TempDir,
    root: PathBuf,
    arch: PathBuf,
    out: PathBuf,
    map: PathBuf,
    known: PathBuf,
}

fn archive() -> Archive {
    let dir = tempdir();
    let root = dir.path().to_path_buf();
    let arch = root.join("arch");
    std::fs::create_dir(&arch).unwrap();
    std::fs::copy(gmon(), arch.join("gmon.out")).unwrap();
    let map = root.join("map.txt");
    std::fs::write(&map, format!("** {}\n", st(&prog()))).unwrap();
    let known = root.join("known.txt");
    std::fs::write(&known, "# none\n").unwrap();
    Archive {
        out: root.join("out"),
        _dir: dir,
        root,
        arch,
        map,
        known,
    }
}

impl Archive {
    fn convert(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["convert", st(&self.arch), "-o", st(&self.out), "--quiet"];
        args.extend(["--binary-map", st(&self.map)]);
        args.extend(["--known-failures", st(&self.known)]);
        args.extend(extra);
        profconv(&args)
    }
}

#[test]
fn a_report_that_is_a_file_the_run_reads_is_refused_before_converting() {
    let a = archive();
    let binary = a.root.join("prog");
    std::fs::copy(prog(), &binary).unwrap();
    std::fs::write(&a.map, format!("** {}\n", st(&binary))).unwrap();
    let input = a.arch.join("gmon.out");
    for report in [&binary, &a.map, &a.known, &input] {
        let before = std::fs::read(report).unwrap();
        let run = a.convert(&["--to", "folded", "--report", st(report)]);
        assert_refused(&run, "refusing");
        assert_eq!(&std::fs::read(report).unwrap(), &before, "{report:?}");
        assert!(!a.out.exists(), "nothing converted, no output folder made");
    }
}

#[test]
fn a_report_in_a_missing_folder_is_refused_before_converting() {
    let a = archive();
    let report = a.root.join("missing/report.json");
    let run = a.convert(&["--to", "folded", "--report", st(&report)]);
    assert_refused(&run, "does not exist");
    assert!(!a.out.exists());
}

#[test]
fn an_output_folder_that_is_a_file_is_refused_plainly() {
    let a = archive();
    std::fs::write(&a.out, b"a file").unwrap();
    let run = a.convert(&["--to", "folded"]);
    assert_refused(&run, "is a file");
    assert!(!stderr_of(&run).contains("os error"), "{}", stderr_of(&run));
    assert_eq!(std::fs::read(&a.out).unwrap(), b"a file");
}

#[test]
fn a_run_that_converts_nothing_removes_the_output_folder_it_made() {
    let a = archive();
    let sub = a.arch.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::rename(a.arch.join("gmon.out"), sub.join("gmon.out")).unwrap();
    let bytes = std::fs::read(gmon()).unwrap();
    std::fs::write(sub.join("gmon.out"), &bytes[..bytes.len() / 2]).unwrap();
    let run = a.convert(&["--to", "folded"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    assert!(stderr_of(&run).contains("1 failed"), "{}", stderr_of(&run));
    assert!(!a.out.exists(), "the output folder it made is gone");
    // A shard keeps it: the other shards write there at the same time.
    let run = a.convert(&["--to", "folded", "--shard", "0/1"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    assert!(a.out.is_dir(), "a shard removed the shared output folder");
}

#[test]
fn convert_removes_only_its_own_stale_temporaries() {
    let a = archive();
    let keep = [
        ".plan.backup.tmp",
        "notes/.thesis.draft1.tmp",
        ".gmon.out.folded.abcdef.tmp",
        // Another shard's live temporary: an output this run does not write.
        ".other.out.folded.profconv-abc123.tmp",
    ];
    let stale = ".gmon.out.folded.profconv-zz9Z00.tmp";
    for name in keep.iter().chain([&stale]) {
        let path = a.out.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"mine").unwrap();
    }
    let run = a.convert(&["--to", "folded"]);
    assert!(run.status.success(), "{}", stderr_of(&run));
    for name in keep {
        assert_eq!(std::fs::read(a.out.join(name)).unwrap(), b"mine", "{name}");
    }
    assert!(!a.out.join(stale).exists(), "its own stale temporary goes");
    assert!(a.out.join("gmon.out.folded").is_file());
}

/// The records of a report as `path: status: error`.
fn records(report: &Path) -> Vec<String> {
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    json["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}: {}: {}", r["path"], r["status"], r["error"]))
        .collect()
}

#[test]
fn outputs_that_collide_fail_both_inputs_the_same_every_run() {
    let a = archive();
    std::fs::rename(a.arch.join("gmon.out"), a.arch.join("x")).unwrap();
    std::fs::create_dir(a.arch.join("x.folded")).unwrap();
    std::fs::copy(gmon(), a.arch.join("x.folded/y")).unwrap();
    let report = a.root.join("report.json");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let run = a.convert(&["--to", "folded", "--report", st(&report)]);
        assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
        let got = records(&report);
        assert_eq!(got.len(), 2, "{got:?}");
        for r in &got {
            assert!(r.contains("\"failed\""), "{r}");
            assert!(
                r.contains("outputs collide") && r.contains("x.folded"),
                "{r}"
            );
        }
        seen.push(got);
        assert!(!a.out.join("x.folded").is_file());
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn a_folder_where_an_output_belongs_is_a_failure_not_unchanged() {
    let a = archive();
    std::fs::create_dir_all(a.out.join("gmon.out.folded/inside")).unwrap();
    let report = a.root.join("report.json");
    let run = a.convert(&["--to", "folded", "--report", st(&report)]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    let got = records(&report);
    assert!(
        got[0].contains("\"failed\"") && got[0].contains("not a regular file"),
        "{got:?}"
    );
}

#[test]
fn a_private_output_stays_private_when_rewritten() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let out = dir.path().join("private.folded");
    let (input, binary) = (gmon(), prog());
    let args = [st(&input), "--binary", st(&binary), "-o", st(&out), "-q"];
    profconv_ok(&args);
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&out, b"old").unwrap();
    profconv_ok(&args);
    assert_ne!(std::fs::read(&out).unwrap(), b"old");
    let mode = std::fs::metadata(&out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Clears the immutable flag of a file when dropped, so that the test's
/// folder can be removed whatever happened.
struct Immutable(PathBuf);

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn several_outputs_are_all_placed_or_none_when_a_rename_fails() {
    let dir = tempdir();
    let (first, second) = (dir.path().join("a.folded"), dir.path().join("b.svg"));
    std::fs::write(&first, b"old a").unwrap();
    std::fs::write(&second, b"old b").unwrap();
    // An immutable file: creating the temporary beside it works, the
    // rename over it fails (EPERM) once the first output is in place.
    let chattr = Command::new("chattr").arg("+i").arg(&second).output();
    if !chattr.as_ref().is_ok_and(|o| o.status.success()) {
        assert!(!in_ci(), "chattr +i is needed (root, ext4): {chattr:?}");
        skip_note!("chattr +i does not work here (not root, or tmpfs)");
        return;
    }
    let _guard = Immutable(second.clone());
    let run = profconv(&[
        st(&gmon()),
        "--binary",
        st(&prog()),
        "-o",
        st(&first),
        "-o",
        st(&second),
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    assert!(stderr_of(&run).contains("b.svg"), "{}", stderr_of(&run));
    assert_eq!(
        std::fs::read(&first).unwrap(),
        b"old a",
        "the first is put back"
    );
    assert_eq!(std::fs::read(&second).unwrap(), b"old b");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 2, "no temporary or backup left");
}
