//! Shell completions, the man page and the version: bash accepts the bash
//! script (`bash -n`), every shell's script names the subcommands, `man -l`
//! renders the page, and `--version` names the package's version.

mod common;

use std::process::Command;

use common::*;

#[test]
fn bash_completion_script_is_valid_bash() {
    let out = profconv_ok(&["completions", "bash"]);
    let dir = tempdir();
    let script = dir.path().join("profconv.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let checked = Command::new("bash").arg("-n").arg(&script).output();
    match checked {
        Ok(o) => assert!(
            o.status.success(),
            "bash -n rejects the completion script:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            assert!(!in_ci(), "bash cannot run: {e}");
            crate::skip_note!("skipping bash -n: {e}");
        }
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("complete ") && text.contains("profconv"));
    assert!(text.contains("callgrind"), "--to values are completed");
}

#[test]
fn every_shell_gets_a_script_naming_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = profconv_ok(&["completions", shell]);
        let text = String::from_utf8_lossy(&out.stdout);
        for word in ["info", "convert", "completions", "binary"] {
            assert!(text.contains(word), "{shell} script lacks {word}");
        }
    }
    let bad = profconv(&["completions", "tcsh"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn man_page_renders() {
    let out = profconv_ok(&["man"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.lines().any(|l| l.starts_with(".TH profconv 1")),
        "no .TH header:\n{text}"
    );
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH EXAMPLES"] {
        assert!(text.contains(section), "man page lacks {section}");
    }
    let dir = tempdir();
    let page = dir.path().join("profconv.1");
    std::fs::write(&page, &text).unwrap();
    let rendered = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output();
    match rendered {
        Ok(o) if o.status.success() => {
            let shown = String::from_utf8_lossy(&o.stdout);
            assert!(
                shown.contains("NAME") && shown.contains("--binary"),
                "{shown}"
            );
            assert!(
                shown.contains("profconv gmon.out --binary ./a.out -o out.pb.gz"),
                "examples are kept line by line:\n{shown}"
            );
            let warnings = String::from_utf8_lossy(&o.stderr);
            assert!(!warnings.contains("warning"), "man warns: {warnings}");
        }
        Ok(o) => panic!(
            "man -l failed on the page:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => crate::skip_note!("skipping man -l (the roff header was checked): {e}"),
    }
}

#[test]
fn version_prints_the_name_and_the_package_version() {
    let out = profconv_ok(&["--version"]);
    let expected = format!("profconv {}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    assert_eq!(profconv_ok(&["-V"]).stdout, out.stdout);
}
