//! The sorted line lookup ([`super::lines`]) against addr2line's
//! `Context::find_location` ([`DwarfReader::find_location`]), address by address: every byte of the text of
//! every ELF fixture (tests/fixtures/gprof and gprof-corpus: x86-64, i686,
//! ARM, PowerPC, MIPS; with DWARF, stripped, separate debug files), of a
//! generated program of 20 000 functions, and of small programs gcc builds
//! here in several DWARF shapes (versions 4 and 5, 64-bit DWARF, 32-bit
//! code, sections the linker dropped, optimized code with inlining).
//!
//! `PROFCONV_LINES_BINARY=path` checks one more binary (every text byte).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::lines::{sorted_lines, Found, SortedLines};
use super::DwarfReader;
use crate::testkit::{
    self,
    gprof_program::{self, Shape},
};
use object::{Object, ObjectSection, ObjectSymbol, SectionFlags, SectionKind};

/// Every address of the executable sections of `path` (also those a
/// separate debug file keeps without their bytes), sorted.
pub(super) fn text_addresses(path: &Path) -> Vec<u64> {
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
/// returns how many addresses the sorted pass answered itself and how many
/// there are.
fn compare(path: &Path) -> (usize, usize) {
    let addresses = text_addresses(path);
    assert!(!addresses.is_empty(), "{}: no text", path.display());
    let dwarf = DwarfReader::open(path).unwrap();
    let sorted = sorted_lines(path, &addresses).expect("the units parse");
    let answered = compare_with(&dwarf, &sorted, &addresses, path);
    (answered, addresses.len())
}

/// Every address the sorted pass answers has addr2line's answer.
fn compare_with(
    dwarf: &DwarfReader,
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
        let theirs = dwarf.find_location(address);
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
        match DwarfReader::open(&path) {
            Ok(dwarf) => {
                if let Some(sorted) = sorted {
                    answered += compare_with(&dwarf, &sorted, &addresses, &path);
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

/// The ELF files of a fixture directory (executables and debug files).
fn elf_files(dir: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(testkit::fixture(dir))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let Ok(data) = std::fs::read(path) else {
                return false;
            };
            matches!(
                object::File::parse(&*data),
                Ok(object::File::Elf32(_) | object::File::Elf64(_))
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sorted_lookup_matches_addr2line_on_every_fixture_binary() {
    let mut files = elf_files("gprof");
    files.extend(elf_files("gprof-corpus"));
    let mut addresses = 0;
    for path in &files {
        let (answered, total) = compare(path);
        // Plain compiler output, static glibc included: the sorted pass
        // answers every address itself.
        assert_eq!(answered, total, "{}", path.display());
        addresses += total;
    }
    eprintln!("{} ELF fixtures, {addresses} addresses", files.len());
    assert!(files.len() >= 20, "only {} ELF fixtures", files.len());
    let machines: Vec<object::Architecture> = files
        .iter()
        .map(|path| {
            object::File::parse(&*std::fs::read(path).unwrap())
                .unwrap()
                .architecture()
        })
        .collect();
    for machine in [
        object::Architecture::X86_64,
        object::Architecture::I386,
        object::Architecture::Arm,
        object::Architecture::PowerPc,
        object::Architecture::Mips,
    ] {
        assert!(machines.contains(&machine), "no {machine:?} fixture");
    }
    if let Some(path) = std::env::var_os("PROFCONV_LINES_BINARY") {
        let (answered, total) = compare(Path::new(&path));
        eprintln!(
            "{}: {answered} of {total} addresses answered",
            Path::new(&path).display()
        );
    }
}

/// The generated program of 20 000 functions (tests/common/gprof_program.rs,
/// built as the gprof tests build it, not run): every byte of its text, and
/// every function has lines of its own source file.
#[test]
fn sorted_lookup_matches_addr2line_on_a_program_of_20000_functions() {
    let dir = testkit::tempdir();
    let shape = Shape::new(20_000);
    let Some((_, exe)) = gprof_program::build(&shape, dir.path()) else {
        return;
    };
    let (answered, total) = compare(&exe);
    assert_eq!(answered, total, "some addresses asked of addr2line");
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut entries: Vec<(u64, String)> = file
        .symbols()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with("fn_")))
        .map(|s| (s.address(), s.name().unwrap().to_owned()))
        .collect();
    entries.sort();
    assert_eq!(entries.len(), 20_000, "functions in the symbol table");
    let addresses: Vec<u64> = entries.iter().map(|e| e.0).collect();
    let sorted = sorted_lines(&exe, &addresses).unwrap();
    for (i, (_, name)) in entries.iter().enumerate() {
        let Some((file, line)) = sorted.location(i) else {
            panic!("{name}: asked of addr2line");
        };
        assert!(file.contains("/gen_") && line > 0, "{name}: {file}:{line}");
    }
    eprintln!("{total} addresses of 20 000 functions");
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
        let (answered, total) = compare(&path);
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
