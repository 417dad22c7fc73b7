//! Golden files: profconv's own outputs, committed under `tests/golden/`.
//!
//! `assert_golden` compares an output with its golden file; run the tests
//! with `PROFCONV_UPDATE_GOLDEN=1` to (re)write the golden files instead,
//! then review the difference with `git diff tests/golden/`.

use std::path::PathBuf;

/// The golden file called `name`.
pub fn golden_path(name: &str) -> PathBuf {
    super::manifest_dir().join("tests/golden").join(name)
}

/// True when the golden files are being rewritten.
pub fn updating_golden() -> bool {
    std::env::var_os("PROFCONV_UPDATE_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Asserts that `actual` equals the golden file `name`, or rewrites it
/// under `PROFCONV_UPDATE_GOLDEN=1`.
pub fn assert_golden(name: &str, actual: &[u8]) {
    let path = golden_path(name);
    if updating_golden() {
        std::fs::create_dir_all(path.parent().expect("tests/golden")).expect("golden folder");
        std::fs::write(&path, actual).expect("golden file written");
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with PROFCONV_UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let (e, a) = (
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual),
        );
        let first = e
            .lines()
            .zip(a.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(e.lines().count().min(a.lines().count()));
        panic!(
            "{} differs from the output at line {}:\n  golden: {:?}\n  output: {:?}\n(PROFCONV_UPDATE_GOLDEN=1 rewrites it if the change is intended)",
            path.display(),
            first + 1,
            e.lines().nth(first).unwrap_or("<end>"),
            a.lines().nth(first).unwrap_or("<end>")
        );
    }
}
