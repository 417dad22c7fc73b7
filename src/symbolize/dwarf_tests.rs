//! The DWARF reader ([`super::dwarf`]) survives its files: a debug file
//! truncated once opened still answers (nothing of it is mapped), one cut
//! or garbled is an error naming it or answers what it can, never a
//! panic; and it reads what addr2line's loader read before it: compressed
//! sections, split DWARF in `.dwo` files and in a `.dwp` package (built here
//! with gcc, objcopy and dwp when they are installed).

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection};

use super::lines_tests::text_addresses;
use super::{Binary, DwarfReader};
use crate::error::Error;
use crate::testkit;

/// A frame as the reader gives it: function, file, line.
type Frame = (String, String, u32);

/// The frames at each of `addresses`, inlined ones first.
fn all_frames(dwarf: &DwarfReader, addresses: &[u64]) -> Vec<Vec<Frame>> {
    addresses.iter().map(|&a| frames(dwarf, a)).collect()
}

fn frames(dwarf: &DwarfReader, address: u64) -> Vec<Frame> {
    let mut out = Vec::new();
    let Some(mut iter) = dwarf.find_frames(address) else {
        return out;
    };
    while let Ok(Some(frame)) = iter.next() {
        let name = frame.function.as_ref().map(|f| dwarf.text(&f.name));
        let location = frame.location.as_ref();
        out.push((
            name.unwrap_or_default().into_owned(),
            location.and_then(|l| l.file).unwrap_or("").to_owned(),
            location.and_then(|l| l.line).unwrap_or(0),
        ));
    }
    out
}

/// A copy of the fixture `name` in `dir`.
fn copy(name: &str, dir: &Path) -> PathBuf {
    let to = dir.join(Path::new(name).file_name().unwrap());
    std::fs::copy(testkit::fixture(name), &to).unwrap();
    to
}

/// The file range of section `name` of the object file at `path`.
fn section_range(path: &Path, name: &str) -> std::ops::Range<usize> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let (offset, size) = file.section_by_name(name).unwrap().file_range().unwrap();
    offset as usize..(offset + size) as usize
}

/// Where addr2line's loader mapped the file, truncating it under the reader
/// killed the process with SIGBUS at the next lookup: here the reader holds
/// the bytes, and every lookup after the truncation answers as an intact copy
/// does (lookups parse lazily, so all of them read after the cut). No map of
/// the file shows in the process's maps either.
#[test]
fn a_debug_file_truncated_after_opening_still_answers_every_address() {
    let dir = testkit::tempdir();
    let path = copy("gprof/inlined", dir.path());
    let addresses = text_addresses(&path);
    let intact = DwarfReader::open(&testkit::fixture("gprof/inlined")).unwrap();
    let dwarf = DwarfReader::open(&path).unwrap();
    #[cfg(target_os = "linux")]
    {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let name = path.to_str().unwrap();
        assert!(!maps.contains(name), "{name} is mapped:\n{maps}");
    }
    // Log rotation: the file cut to nothing, then rewritten with other bytes.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(0).unwrap();
    std::fs::write(&path, b"rotated").unwrap();
    let expected = all_frames(&intact, &addresses);
    assert!(
        expected.iter().any(|f| f.len() > 1),
        "the fixture has inlined frames"
    );
    assert_eq!(all_frames(&dwarf, &addresses), expected);
}

/// A copy cut in the middle of `.debug_info` (a copy restarted, a
/// transfer broken) does not open: an error naming the file.
#[test]
fn a_debug_file_cut_in_the_middle_of_its_dwarf_is_an_error_naming_it() {
    let dir = testkit::tempdir();
    let path = copy("gprof/inlined", dir.path());
    let info = section_range(&path, ".debug_info");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len((info.start + info.len() / 2) as u64).unwrap();
    let Err(e) = DwarfReader::open(&path) else {
        panic!("a cut file opens");
    };
    assert!(
        matches!(&e, Error::Unsupported { file, .. } | Error::Format { file, .. } if file == &path),
        "{e}"
    );
}

/// `.debug_info` overwritten in its second half: the units do not parse,
/// the reader does not open, and the binary's frames come from its symbol
/// table (each address in a function gets the function), as without DWARF.
#[test]
fn garbled_dwarf_falls_back_to_the_symbol_table() {
    let dir = testkit::tempdir();
    let path = copy("gprof/inlined", dir.path());
    let info = section_range(&path, ".debug_info");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[info.start + info.len() / 2..info.end].fill(0xff);
    bytes[info.start..info.start + 4].fill(0xff); // a 64-bit unit of no length
    std::fs::write(&path, &bytes).unwrap();
    let e = DwarfReader::open(&path)
        .err()
        .expect("garbled units do not parse");
    assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
    let binary = Binary::open(&path).unwrap();
    assert!(binary.dwarf_reader().is_none());
    let worker = binary
        .symbols()
        .iter()
        .find(|s| &*s.name == "worker_a")
        .unwrap()
        .clone();
    for address in worker.address..worker.address + worker.size {
        let frames = binary.frames(address);
        assert_eq!(frames.len(), 1, "{address:#x}");
        assert_eq!(frames[0].function, "worker_a");
        assert_eq!((frames[0].file.as_str(), frames[0].line), ("", 0));
    }
}

/// Bytes of the DWARF sections overwritten at random: the reader opens or
/// says why not, and every lookup answers (perhaps nothing), never panics.
#[test]
fn randomly_damaged_dwarf_never_panics() {
    let fixture = testkit::fixture("gprof/inlined");
    let data = std::fs::read(&fixture).unwrap();
    let sections: Vec<_> = [
        ".debug_info",
        ".debug_abbrev",
        ".debug_line",
        ".debug_str",
        ".debug_rnglists",
        ".debug_aranges",
    ]
    .iter()
    .map(|name| section_range(&fixture, name))
    .collect();
    let addresses = text_addresses(&fixture);
    let dir = testkit::tempdir();
    let mut rng = testkit::rng::Rng(0x2545_f491_4f6c_dd1d);
    let (mut opened, mut answered) = (0, 0);
    for round in 0..200 {
        let mut damaged = data.clone();
        let section = &sections[round % sections.len()];
        for _ in 0..1 + rng.below(6) {
            let at = section.start + rng.below(section.len() as u64) as usize;
            damaged[at] = rng.next() as u8;
        }
        let path = dir.path().join(format!("damaged-{round}"));
        std::fs::write(&path, &damaged).unwrap();
        let Ok(dwarf) = DwarfReader::open(&path) else {
            continue;
        };
        opened += 1;
        for &address in &addresses {
            answered += usize::from(!frames(&dwarf, address).is_empty());
            let _ = dwarf.find_location(address);
        }
    }
    assert!(
        opened > 0 && answered > 0,
        "{opened} opened, {answered} answered"
    );
}

/// Runs `program` with `args` in `dir`; false when it is missing or fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> bool {
    let output = Command::new(program).current_dir(dir).args(args).output();
    output.is_ok_and(|o| o.status.success())
}

/// Says a test was skipped for want of `tool` (a failure in CI).
fn skipped(tool: &str) {
    assert!(!testkit::in_ci(), "{tool} is needed for this test");
    eprintln!("skipped: {tool} not available");
}

/// `gprof/inlined` with its DWARF sections compressed both ways objcopy
/// knows (`SHF_COMPRESSED`, and GNU `.zdebug_*`): the same frames at every
/// address.
#[test]
fn compressed_debug_sections_give_the_same_frames() {
    let dir = testkit::tempdir();
    let plain = copy("gprof/inlined", dir.path());
    let addresses = text_addresses(&plain);
    let expected = all_frames(&DwarfReader::open(&plain).unwrap(), &addresses);
    for style in ["zlib", "zlib-gnu"] {
        let out = format!("inlined-{style}");
        let flag = format!("--compress-debug-sections={style}");
        if !run(dir.path(), "objcopy", &[&flag, "inlined", &out]) {
            return skipped("objcopy");
        }
        let path = dir.path().join(&out);
        let data = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let info = file.section_by_name(".debug_info").unwrap();
        assert!(
            info.compressed_file_range().unwrap().format != object::CompressionFormat::None,
            "{style}: not compressed"
        );
        let dwarf = DwarfReader::open(&path).unwrap();
        assert_eq!(all_frames(&dwarf, &addresses), expected, "{style}");
    }
}

/// Builds `gprof/inlined.c` in `dir` with `flags` as `name`; false when
/// gcc cannot.
fn build_inlined(dir: &Path, name: &str, flags: &[&str]) -> bool {
    std::fs::copy(testkit::fixture("gprof/inlined.c"), dir.join("inlined.c")).unwrap();
    let mut args = flags.to_vec();
    args.extend(["inlined.c", "-o", name]);
    run(dir, "gcc", &args)
}

/// Split DWARF as gcc writes it (DWARF 5 skeleton units, and DWARF 4's GNU
/// extension): the inlined frames are in the `.dwo` files, found from the
/// skeleton's name and directory, and every address has the frames of the
/// same program built without splitting. Without the `.dwo`, the inlined
/// frames are gone; with a `.dwp` package next to the binary (DWARF 4:
/// binutils' dwp), they are back.
#[test]
fn split_dwarf_is_read_from_dwo_files_and_dwp_packages() {
    let dir = testkit::tempdir();
    for (version, flags) in [("5", ["-O2", "-gdwarf-5"]), ("4", ["-O2", "-gdwarf-4"])] {
        let case = dir.path().join(format!("dwarf{version}"));
        std::fs::create_dir(&case).unwrap();
        let split_flags = [flags[0], flags[1], "-gsplit-dwarf"];
        if !build_inlined(&case, "whole", &flags) || !build_inlined(&case, "split", &split_flags) {
            return skipped("gcc");
        }
        let (whole, split) = (case.join("whole"), case.join("split"));
        let addresses = text_addresses(&split);
        assert_eq!(addresses, text_addresses(&whole), "the same code");
        let expected = all_frames(&DwarfReader::open(&whole).unwrap(), &addresses);
        assert!(expected.iter().any(|f| f.len() > 2), "two levels inlined");
        let dwarf = DwarfReader::open(&split).unwrap();
        assert_eq!(all_frames(&dwarf, &addresses), expected, "DWARF {version}");

        let dwo: Vec<PathBuf> = std::fs::read_dir(&case)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "dwo"))
            .collect();
        assert!(!dwo.is_empty(), "gcc wrote no .dwo");
        let package = version == "4" && run(&case, "dwp", &["-e", "split", "-o", "split.dwp"]);
        for file in &dwo {
            std::fs::remove_file(file).unwrap();
        }
        let dwarf = DwarfReader::open(&split).unwrap();
        let without = all_frames(&dwarf, &addresses);
        if package {
            assert_eq!(without, expected, "DWARF {version} from split.dwp");
        } else {
            assert!(without.iter().all(|f| f.len() <= 1), "no .dwo, no inlining");
        }
    }
}
