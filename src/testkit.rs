//! What the unit tests share with the integration tests (`tests/common`):
//! the seeded generator and the byte-level builders of every format, and
//! where the fixtures are. Unit tests are the tests that need the crate's
//! internals (a reader's parse, the streaming writer's thresholds).
#![allow(dead_code)]

use std::path::PathBuf;

#[path = "../tests/common/gen/mod.rs"]
pub(crate) mod gen;
#[path = "../tests/common/gprof_program.rs"]
pub(crate) mod gprof_program;
#[path = "../tests/common/rng.rs"]
pub(crate) mod rng;

/// A file below `tests/fixtures`.
pub(crate) fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// A fresh temporary directory for one test's files.
pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

/// True when running under CI, where missing tools fail the test.
pub(crate) fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}
