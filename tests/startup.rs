//! What the command loads as it starts. Each shared library is ≈ 0.1 ms of
//! every run, before `main` (a gprof conversion of 3000 functions takes
//! ≈ 7 ms): build.rs links the unwinder and `pow` in, and ISA-L's library
//! is opened at run time, on a spare thread.

mod common;

use common::*;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_command_needs_only_the_c_library() {
    use object::read::elf::{Dyn, ElfFile64, FileHeader};
    use object::{elf, Endianness};
    let data = std::fs::read(profconv_bin()).unwrap();
    let file = ElfFile64::<Endianness>::parse(&*data).unwrap();
    let endian = file.endian();
    let sections = file.elf_section_table();
    let (dynamic, link) = sections
        .dynamic(endian, &*data)
        .unwrap()
        .expect("a dynamically linked executable");
    let strings = sections.strings(endian, &*data, link).unwrap();
    let needed: Vec<String> = dynamic
        .iter()
        .filter(|d| d.tag32(endian) == Some(elf::DT_NEEDED))
        .map(|d| {
            let name = d.string(endian, strings).unwrap();
            String::from_utf8_lossy(name).into_owned()
        })
        .collect();
    assert!(
        needed
            .iter()
            .all(|n| n.starts_with("libc.so") || n.starts_with("ld-linux")),
        "profconv loads more than the C library at every start: {needed:?}"
    );
    assert_eq!(
        file.elf_header().e_type(endian),
        elf::ET_EXEC,
        "a position-dependent executable (no relocations to apply at start)"
    );
}

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
