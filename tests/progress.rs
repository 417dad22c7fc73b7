//! The progress bar of single conversions: on a terminal (a pty made by
//! util-linux's `script`) once the delay has passed, never when stderr is
//! not a terminal or with `--quiet`.

mod common;

use std::process::Command;

use common::*;

/// An 8 MB APS file: long enough to convert that the bar is drawn.
fn big_input(dir: &std::path::Path) -> String {
    let path = dir.join("sample_cpu_0_20150716_130220");
    std::fs::write(&path, aps_file(150_000)).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs profconv under `script` (stdin, stdout and stderr on a pty), with
/// the bar's delay shortened to 0; returns what the terminal showed.
fn on_a_terminal(args: &str) -> Option<String> {
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{} {args}", profconv_bin().display()),
            "/dev/null",
        ])
        .env("PROFCONV_PROGRESS_AFTER_MS", "0")
        .output();
    match out {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            Some(String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Err(e) => {
            assert!(!in_ci(), "script (util-linux) cannot run: {e}");
            crate::skip_note!("skipping the terminal check: script cannot run: {e}");
            None
        }
    }
}

#[test]
fn a_terminal_shows_bytes_read_of_the_total() {
    let dir = tempdir();
    let input = big_input(dir.path());
    let out = dir.path().join("out.pb.gz");
    let Some(shown) = on_a_terminal(&format!("{input} -o {}", out.display())) else {
        return;
    };
    // However quick the conversion, the bar's last frame shows what was
    // read (more than 0 B) of the total.
    assert!(
        shown.contains(" MiB/8.01 MiB"),
        "no bar of the 8 MiB input:\n{shown:?}"
    );
    assert!(out.is_file());
}

#[test]
fn quiet_or_no_terminal_shows_nothing() {
    let dir = tempdir();
    let input = big_input(dir.path());
    let out = dir.path().join("out.pb.gz");
    if let Some(shown) = on_a_terminal(&format!("{input} -o {} --quiet", out.display())) {
        assert!(!shown.contains("MiB"), "a bar despite --quiet:\n{shown:?}");
    }
    let piped = Command::new(profconv_bin())
        .args([&input, "-o", out.to_str().unwrap()])
        .env("PROFCONV_PROGRESS_AFTER_MS", "0")
        .output()
        .unwrap();
    assert!(piped.status.success());
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(
        stderr.lines().all(|l| l.starts_with("wrote ")) && stderr.lines().count() == 1,
        "stderr is not a terminal, yet: {}",
        String::from_utf8_lossy(&piped.stderr)
    );
}
