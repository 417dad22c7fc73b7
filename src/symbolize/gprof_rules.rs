//! Which symbols GNU gprof takes as functions (docs/formats/gprof.md §3.1):
//! binutils `gprof/corefile.c` (`core_sym_class`, `core_create_function_syms`)
//! and `gprof/symtab.c` (`symtab_finalize`), reproduced over `object`'s view
//! of ELF and PE/COFF symbol tables, so that a converted gmon.out credits
//! every tick and call to the function gprof names.
//!
//! In short: global text symbols and every weak symbol but weak objects are
//! functions, typed or not (assembly labels count); a local text symbol is
//! one unless its name holds `$` or a `.` suffix other than digits,
//! `.clone.N` or `.constprop.N` (so `foo.part.0`, `foo.cold`, `foo.isra.0`,
//! `main._omp_fn.0` are not: their addresses fall to the function before
//! them); GNU indirect functions, section, file and absolute symbols never
//! are. Of the symbols at one address one is kept, by gprof's preference.
//! Each function runs to the next one; the last to the end of `.text`.

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolKind};

use super::{FunctionSymbol, SymbolNames};

/// The profiling runtime's own functions, which gprof leaves out of its
/// reports (`default_excluded_list` in binutils `gprof/gprof.c`): their
/// ticks are credited to no function it prints. They keep their place
/// here, named so a reader sees what they are and that gprof omits them.
const EXCLUDED: &[&str] = &[
    "_gprof_mcount",
    "mcount",
    "_mcount",
    "__mcount",
    "__mcount_internal",
    "__mcleanup",
];

/// A symbol gprof keeps, before one per address is chosen.
#[derive(Debug, Clone, Copy)]
struct Candidate<'d> {
    address: u64,
    /// gprof's class `t` (local) rather than `T`.
    is_static: bool,
    /// Typed as a function (`BSF_FUNCTION`).
    is_func: bool,
    name: &'d str,
}

/// gprof's functions of `file`, sorted by address, one per address, each
/// sized to reach the next (the last to the end of `.text`).
pub(super) fn gprof_symbols(file: &object::File<'_>) -> Vec<FunctionSymbol> {
    let candidates = match file {
        object::File::Elf32(elf) => elf_candidates(elf, file),
        object::File::Elf64(elf) => elf_candidates(elf, file),
        _ => other_candidates(file),
    };
    let text_end = file
        .section_by_name(".text")
        .map(|s| s.address().saturating_add(s.size()));
    finalize(candidates, text_end, leading_char(file))
}

/// The character the target's C compiler puts before every name (BFD's
/// `bfd_get_symbol_leading_char`): `_` on i386 PE/COFF, none elsewhere.
fn leading_char(file: &object::File<'_>) -> Option<char> {
    match file {
        object::File::Pe32(_) | object::File::Coff(_) => {
            (file.architecture() == object::Architecture::I386).then_some('_')
        }
        _ => None,
    }
}

/// The symbol named `raw` as gprof prints it: without the target's leading
/// character (as `bfd_demangle` takes it off), demangled; the profiling
/// runtime's functions in brackets ([`EXCLUDED`]).
fn function_symbol<'d>(
    c: &Candidate<'d>,
    size: u64,
    leading: Option<char>,
    names: &mut SymbolNames<'d>,
) -> FunctionSymbol {
    let raw = c.name;
    let bare = leading.and_then(|c| raw.strip_prefix(c)).unwrap_or(raw);
    let mut symbol = names.symbol(c.address, size, bare);
    symbol.typed = c.is_func;
    if EXCLUDED.contains(&bare) {
        symbol.name = format!("[{bare}: profiling runtime, left out by gprof]").into();
    }
    if bare.len() != raw.len() {
        symbol.system_name = raw.into();
    }
    symbol
}

/// The symbols of an ELF file that gprof's `core_sym_class` accepts, in
/// the symbol table's order.
fn elf_candidates<'d, Elf>(
    elf: &object::read::elf::ElfFile<'d, Elf, &'d [u8]>,
    file: &object::File<'d>,
) -> Vec<Candidate<'d>>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
{
    use object::elf;
    use object::read::elf::Sym;
    let endian = elf.endian();
    let table = elf.elf_symbol_table();
    let strings = table.strings();
    let code = super::text_sections(file);
    // ARM's Thumb functions carry their mode in bit 0 of the value, which
    // BFD clears (elf32-arm.c) and `object` keeps.
    let thumb_bit = elf.elf_header().e_machine(endian) == elf::EM_ARM;
    // Room for every symbol: the list is not copied as it grows.
    let mut out = Vec::with_capacity(table.len());
    for sym in table.symbols() {
        let (st_type, bind) = (sym.st_type(), sym.st_bind());
        let shndx = sym.st_shndx(endian);
        let defined = shndx != elf::SHN_UNDEF && shndx != elf::SHN_COMMON;
        let debugging = st_type == elf::STT_SECTION || st_type == elf::STT_FILE;
        if !defined || debugging || st_type == elf::STT_GNU_IFUNC || shndx == elf::SHN_ABS {
            continue;
        }
        let Ok(raw) = sym.name(endian, strings) else {
            continue;
        };
        let Ok(name) = std::str::from_utf8(raw) else {
            continue;
        };
        let in_code = code.get(usize::from(shndx)).copied().unwrap_or(false);
        let is_static = match bind {
            // `W`: every weak symbol but an object, whatever its section.
            elf::STB_WEAK if st_type != elf::STT_OBJECT => false,
            elf::STB_GLOBAL if in_code => false,
            elf::STB_LOCAL if in_code => {
                let mut at = u64::from(sym.st_name(endian)) + raw.len() as u64 + 1;
                let following = std::iter::from_fn(|| {
                    let next = strings.get(u32::try_from(at).ok()?).ok()?;
                    at += next.len() as u64 + 1;
                    Some(next)
                });
                if !local_name_is_function(name, following) {
                    continue;
                }
                true
            }
            _ => continue,
        };
        let is_func = st_type == elf::STT_FUNC;
        let mut address: u64 = sym.st_value(endian).into();
        if thumb_bit && is_func {
            address &= !1;
        }
        out.push(Candidate {
            address,
            is_static,
            is_func,
            name,
        });
    }
    out
}

/// The symbols of a PE/COFF (or other) file that gprof accepts. On targets
/// whose C names take a leading `_` (i386 PE), a local name without it is
/// an assembler label of the C library to gprof, not a function.
fn other_candidates<'d>(file: &object::File<'d>) -> Vec<Candidate<'d>> {
    let code = super::text_sections(file);
    let leading = leading_char(file);
    let Some(table) = file.symbol_table() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for sym in table.symbols() {
        if sym.is_undefined()
            || sym.is_common()
            || matches!(sym.kind(), SymbolKind::Section | SymbolKind::File)
        {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let in_code = sym
            .section_index()
            .is_some_and(|i| code.get(i.0).copied().unwrap_or(false));
        let is_static = if sym.is_weak() {
            if sym.kind() == SymbolKind::Data && !in_code {
                continue;
            }
            false
        } else if sym.is_global() && in_code {
            false
        } else if sym.is_local() && in_code {
            let prefixed = leading.is_none_or(|c| name.starts_with(c));
            if !prefixed || !local_name_is_function(name, std::iter::empty()) {
                continue;
            }
            true
        } else {
            continue;
        };
        // BFD marks only external COFF symbols as functions (`BSF_FUNCTION`).
        out.push(Candidate {
            address: sym.address(),
            is_static,
            is_func: !is_static && sym.kind() == SymbolKind::Text,
            name,
        });
    }
    out
}

/// The address of every symbol defined in a code section (functions,
/// clones and labels alike, ARM's Thumb bit cleared), sorted and distinct:
/// the entries an arc's callee address lies just after (`mcount`).
pub(super) fn code_entries(file: &object::File<'_>) -> Vec<u64> {
    let code = super::text_sections(file);
    let thumb_bit = file.architecture() == object::Architecture::Arm;
    let mut out: Vec<u64> = file
        .symbols()
        .filter(|s| !matches!(s.kind(), SymbolKind::Section | SymbolKind::File))
        .filter(|s| {
            s.section_index()
                .is_some_and(|i| code.get(i.0).copied().unwrap_or(false))
        })
        .map(|s| {
            let odd = thumb_bit && s.kind() == SymbolKind::Text;
            s.address() & if odd { !1 } else { !0 }
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// gprof's test of a local text symbol's name (`core_sym_class`): no `$`,
/// no `__gnu_compiled` marker, and every `.` followed by digits (after an
/// optional `clone.` or `constprop.`), up to the next `.`.
///
/// `following` are the strings after the name in its string table: when
/// the name ends inside a `.` suffix (`foo.constprop.0`), gprof's loop
/// steps past the NUL and judges the next string as if it went on from
/// there, and the one after it while they too end so (a quirk this keeps,
/// so that the set of functions is the one gprof prints).
pub(crate) fn local_name_is_function<'a>(
    name: &str,
    mut following: impl Iterator<Item = &'a [u8]>,
) -> bool {
    if name.is_empty() || name.starts_with("__gnu_compiled") {
        return false;
    }
    let mut current = name.as_bytes();
    loop {
        match scan(current) {
            Scan::Rejected => return false,
            Scan::Accepted => return true,
            Scan::PastTheEnd => match following.next() {
                Some(next) => current = next,
                None => return true,
            },
        }
    }
}

/// How [`scan`] ended.
enum Scan {
    Rejected,
    Accepted,
    /// Accepted, with the scan left past the end of the name.
    PastTheEnd,
}

/// One pass of gprof's character loop over `name`.
fn scan(name: &[u8]) -> Scan {
    const CLONE: &[u8] = b".clone.";
    const CONSTPROP: &[u8] = b".constprop.";
    let mut i = 0;
    while i < name.len() {
        if name[i] == b'$' {
            return Scan::Rejected;
        }
        while name.get(i) == Some(&b'.') {
            let rest = &name[i..];
            if rest.len() > CLONE.len() && rest.starts_with(CLONE) {
                i += CLONE.len() - 1;
            } else if rest.len() > CONSTPROP.len() && rest.starts_with(CONSTPROP) {
                i += CONSTPROP.len() - 1;
            }
            let mut digit_seen = false;
            i += 1;
            while let Some(&c) = name.get(i) {
                if digit_seen && c == b'.' {
                    break;
                } else if c.is_ascii_digit() {
                    digit_seen = true;
                } else {
                    return Scan::Rejected;
                }
                i += 1;
            }
            if i >= name.len() {
                return Scan::PastTheEnd;
            }
        }
        i += 1;
    }
    Scan::Accepted
}

/// gprof's `symtab_finalize`: sorted by address (a function before a
/// label, a global before a local, otherwise in table order), then one per
/// address, a later one replacing the kept one when it is global and the
/// kept one local, or of the same class and a function where the kept one
/// is a label, or else of the same kind and without the leading underscores
/// the kept one has.
fn finalize<'d>(
    mut all: Vec<Candidate<'d>>,
    text_end: Option<u64>,
    leading: Option<char>,
) -> Vec<FunctionSymbol> {
    // By address, then each address's few aliases by kind, both stable.
    all.sort_by_key(|c| c.address);
    for aliases in all.chunk_by_mut(|a, b| a.address == b.address) {
        aliases.sort_by_key(|c| (!c.is_func, c.is_static));
    }
    // One per address, in place: a later alias replaces the kept one
    // when preferred.
    all.dedup_by(|c, kept| {
        let same = c.address == kept.address;
        if same && preferred(c, kept) {
            *kept = *c;
        }
        same
    });
    let kept = all;
    let mut out = Vec::with_capacity(kept.len());
    let mut names = SymbolNames::with_capacity(kept.len());
    for (i, c) in kept.iter().enumerate() {
        let end = match kept.get(i + 1) {
            Some(next) => next.address,
            None => text_end.unwrap_or(0).max(c.address.saturating_add(1)),
        };
        out.push(function_symbol(c, end - c.address, leading, &mut names));
    }
    out
}

/// Whether `src` replaces `kept` at one address (`symtab_finalize`).
fn preferred(src: &Candidate<'_>, kept: &Candidate<'_>) -> bool {
    let (s, k) = (src.name.as_bytes(), kept.name.as_bytes());
    let underscores = (s.first() != Some(&b'_') && k.first() == Some(&b'_'))
        || (!s.is_empty() && s.get(1) != Some(&b'_') && k.get(1) == Some(&b'_'));
    (!src.is_static && kept.is_static)
        || (src.is_static == kept.is_static
            && ((src.is_func && !kept.is_func) || (src.is_func == kept.is_func && underscores)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings of a string table after a name, as `following`.
    fn table<'a>(strings: &'a [&'a str]) -> impl Iterator<Item = &'a [u8]> {
        strings.iter().map(|s| s.as_bytes())
    }

    #[test]
    fn local_names_are_functions_by_gprofs_rule() {
        for name in ["foo", "foo.1234", "foo.clone.3", "foo.constprop.0", "a.1.2"] {
            assert!(local_name_is_function(name, table(&["bar"])), "{name}");
        }
        for name in [
            "foo.part.0",
            "foo.isra.0",
            "foo.cold",
            "foo.lto_priv.0",
            "main._omp_fn.1",
            "foo.constprop.0.isra.0",
            "x$y",
            "__gnu_compiled_c",
            "",
        ] {
            assert!(!local_name_is_function(name, table(&["bar"])), "{name}");
        }
    }

    #[test]
    fn a_name_ending_in_a_suffix_is_judged_with_the_strings_after_it_as_gprof_reads_them() {
        assert!(local_name_is_function(
            "foo.constprop.0",
            table(&["plain", "x$"])
        ));
        assert!(!local_name_is_function(
            "foo.constprop.0",
            table(&["bar.part.0"])
        ));
        assert!(!local_name_is_function("foo.1", table(&["x$y"])));
        assert!(
            local_name_is_function("foo", table(&["x$y"])),
            "no suffix: no overrun"
        );
        // A chain of names that end in suffixes, ended by a rejected one.
        let chain = ["b.constprop.0", "c.constprop.1", "d.cold", "e"];
        assert!(!local_name_is_function("a.constprop.0", table(&chain)));
        assert!(local_name_is_function("a.constprop.0", table(&chain[..2])));
        assert!(
            local_name_is_function("a.constprop.0", table(&[])),
            "end of table"
        );
    }

    fn cand(address: u64, is_static: bool, is_func: bool, name: &str) -> Candidate<'_> {
        Candidate {
            address,
            is_static,
            is_func,
            name,
        }
    }

    #[test]
    fn one_symbol_per_address_by_gprofs_preference() {
        let all = vec![
            cand(0x10, true, true, "local_first"),
            cand(0x10, false, true, "__libc_thing"),
            cand(0x10, false, true, "thing"),
            cand(0x20, false, false, "label"),
            cand(0x20, false, true, "func"),
            cand(0x30, true, true, "a"),
        ];
        let got = finalize(all, Some(0x40), None);
        let names: Vec<(u64, u64, &str)> =
            got.iter().map(|s| (s.address, s.size, &*s.name)).collect();
        assert_eq!(
            names,
            [
                (0x10, 0x10, "thing"),
                (0x20, 0x10, "func"),
                (0x30, 0x10, "a")
            ]
        );
    }
}
