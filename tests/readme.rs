//! The README's pictures are what profconv makes now: the flamegraph in
//! docs/img/ is rebuilt from its fixture and compared byte for byte.
//! `PROFCONV_BLESS=1 cargo test --test readme` rewrites it.

mod common;

use common::*;

#[test]
fn readme_flamegraph_is_what_profconv_makes_of_the_fixture() {
    let dir = tempdir();
    let out = dir.path().join("callgraph-nopie.svg");
    // Run from the fixture directory so the title names the file as the
    // README's command does.
    let status = std::process::Command::new(profconv_bin())
        .current_dir(fixture("gprof"))
        .args(["callgraph-nopie.gmon", "--binary", "callgraph-nopie", "-o"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let made = std::fs::read(&out).unwrap();
    let committed = manifest_dir().join("docs/img/callgraph-nopie.svg");
    if std::env::var_os("PROFCONV_BLESS").is_some() {
        std::fs::write(&committed, &made).unwrap();
    }
    let shown = std::fs::read(&committed).expect("docs/img/callgraph-nopie.svg");
    assert!(
        shown == made,
        "docs/img/callgraph-nopie.svg differs from profconv's output: PROFCONV_BLESS=1 cargo test --test readme"
    );
}
