//! The sorted line lookup ([`super::lines`]) against addr2line's
//! `Loader::find_location`, address by address: every byte of the text of
//! every fixture binary with DWARF, and of small programs gcc builds here in
//! several DWARF shapes (versions 4 and 5, 64-bit DWARF, 32-bit code,
//! sections the linker dropped, optimized code with inlining).
//!
//! `PROFCONV_LINES_BINARY=path` checks one more binary (every text byte).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::lines::{sorted_lines, Found, SortedLines};
use crate::testkit;
use object::{Object, ObjectSection, SectionFlags, SectionKind};

/// Every address of the executable sections of `path` (also those a
/// separate debug file keeps without their bytes), sorted.
fn text_addresses(path: &Path) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let executable = |s: &object::Section<'_, '_>| match s.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0,
        _ => s.kind() == SectionKind::Text,
    };
    let mut out: Vec<u64> = file
        .sections()
        .filter(executable)
        .flat_map(|s| s.address()..s.address() + s.size())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Compares the sorted lookup of every text address with addr2line's, and
/// returns how many addresses the sorted pass answered itself.
fn compare(path: &Path) -> usize {
    let addresses = text_addresses(path);
    assert!(!addresses.is_empty(), "{}: no text", path.display());
    let loader = addr2line::Loader::new(path).unwrap();
    let sorted = sorted_lines(path, &addresses).expect("the units parse");
    compare_with(&loader, &sorted, &addresses, path)
}

/// Every address the sorted pass answers has addr2line's answer.
fn compare_with(
    loader: &addr2line::Loader,
    sorted: &SortedLines,
    addresses: &[u64],
    path: &Path,
) -> usize {
    assert_eq!(sorted.found.len(), addresses.len());
    let mut answered = 0;
    for (i, &address) in addresses.iter().enumerate() {
        let Some(ours) = sorted.location(i) else {
            assert_eq!(sorted.found[i], Found::Ask);
            continue;
        };
        answered += 1;
        let theirs = loader.find_location(address);
        let theirs = theirs.as_ref().map(|found| {
            found.as_ref().map_or(("", 0), |l| {
                (l.file.unwrap_or(""), l.line.unwrap_or(0) as i64)
            })
        });
        assert_eq!(
            Ok(ours),
            theirs.map_err(|e| e.to_string()),
            "{} at {address:#x}",
            path.display()
        );
    }
    answered
}

/// Damaged line tables: bytes of `.debug_line` (and of `.debug_info`)
/// overwritten at random. The pass must not panic, must answer only what
/// addr2line answers the same way, and must find nothing where addr2line's
/// reader does not open (gprof then opens that reader only when asked).
#[test]
fn sorted_lookup_on_damaged_dwarf_answers_like_addr2line_or_asks() {
    let fixture = testkit::fixture("gprof/callgraph-nopie");
    let data = std::fs::read(&fixture).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let range = |name: &str| {
        let (offset, size) = file.section_by_name(name).unwrap().file_range().unwrap();
        offset as usize..(offset + size) as usize
    };
    let (line, info) = (range(".debug_line"), range(".debug_info"));
    let addresses = text_addresses(&fixture);
    let dir = testkit::tempdir();
    let mut rng = testkit::rng::Rng(0x9e37_79b9_7f4a_7c15);
    let mut answered = 0;
    for round in 0..300 {
        let mut damaged = data.clone();
        let section = if round % 4 == 3 { &info } else { &line };
        for _ in 0..1 + rng.below(4) {
            let at = section.start + rng.below(section.len() as u64) as usize;
            damaged[at] = rng.next() as u8;
        }
        let path = dir.path().join(format!("damaged-{round}"));
        std::fs::write(&path, &damaged).unwrap();
        let sorted = sorted_lines(&path, &addresses);
        match addr2line::Loader::new(&path) {
            Ok(loader) => {
                if let Some(sorted) = sorted {
                    answered += compare_with(&loader, &sorted, &addresses, &path);
                }
            }
            Err(_) => assert!(
                sorted.is_none_or(|s| s.found.iter().all(|f| *f == Found::Ask)),
                "round {round}: addr2line's reader does not open, the sorted pass answers"
            ),
        }
    }
    assert!(answered > 0, "every damaged file was asked of addr2line");
}

#[test]
fn sorted_lookup_matches_addr2line_on_fixture_binaries() {
    let dir = testkit::fixture("gprof");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        let Ok(file) = object::File::parse(&*data) else {
            continue;
        };
        if file.section_by_name(".debug_line").is_none() {
            continue;
        }
        let answered = compare(&path);
        let total = text_addresses(&path).len();
        // The fixtures are plain gcc output: the sorted pass answers them all.
        assert_eq!(answered, total, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} fixture binaries with DWARF");
    if let Some(path) = std::env::var_os("PROFCONV_LINES_BINARY") {
        let answered = compare(Path::new(&path));
        eprintln!(
            "{}: {answered} addresses answered",
            Path::new(&path).display()
        );
    }
}

const SOURCE_A: &str = r#"
#include "lines_b.h"
static int helper(int x) { int y = x * 3; if (y > 7) y -= 2; return y + 1; }
__attribute__((noinline)) int twice(int x) { return helper(x) + helper(x + 1); }
__attribute__((section(".text.other"))) int elsewhere(int x) { return x ^ 5; }
int unused_function(int x) { return x * 11; }
int main(int argc, char **argv) {
    int t = 0;
    for (int i = 0; i < argc * 100; i++) t += twice(i) + from_b(i) + elsewhere(i);
    (void)argv;
    return t & 1;
}
"#;

const HEADER_B: &str = r#"
int from_b(int x);
static inline int in_header(int x) {
    return x * 7 + 1;
}
"#;

const SOURCE_B: &str = r#"
#include "lines_b.h"
int from_b(int x) {
    int s = 0;
    for (int i = 0; i < x % 5; i++)
        s += in_header(i);
    return s;
}
"#;

/// Builds the two-file program with `flags`; `None` when gcc cannot.
fn build(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lines_a.c"), SOURCE_A).unwrap();
    std::fs::write(src.join("lines_b.c"), SOURCE_B).unwrap();
    std::fs::write(src.join("lines_b.h"), HEADER_B).unwrap();
    let out = dir.join(name);
    let status = Command::new("gcc")
        .current_dir(dir)
        .args(flags)
        .args(["src/lines_a.c", "src/lines_b.c", "-o"])
        .arg(&out)
        .output()
        .ok()?;
    status.status.success().then_some(out)
}

#[test]
fn sorted_lookup_matches_addr2line_on_programs_built_here() {
    let dir = testkit::tempdir();
    let shapes: [(&str, &[&str]); 7] = [
        ("dwarf5", &["-g", "-O0"]),
        ("dwarf4", &["-gdwarf-4", "-O1"]),
        ("dwarf64", &["-gdwarf-5", "-gdwarf64", "-O1"]),
        ("inlined", &["-g", "-O2"]),
        (
            "gc-sections",
            &["-g", "-O1", "-ffunction-sections", "-Wl,--gc-sections"],
        ),
        ("m32", &["-m32", "-g", "-O1"]),
        ("no-aranges", &["-g", "-O1", "-gno-as-locview-support"]),
    ];
    let mut built = 0;
    for (name, flags) in shapes {
        let Some(path) = build(dir.path(), name, flags) else {
            eprintln!("gcc could not build {name} ({flags:?}): skipped");
            continue;
        };
        let answered = compare(&path);
        let total = text_addresses(&path).len();
        assert_eq!(answered, total, "{name}: some addresses asked of addr2line");
        built += 1;
    }
    if built == 0 {
        assert!(
            !testkit::in_ci(),
            "gcc is needed to build the test programs"
        );
        eprintln!("no gcc: nothing built");
    }
}
