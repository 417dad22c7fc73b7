//! Symbolization: addresses → functions, files and lines, from an ELF
//! executable's symbol table and DWARF (through `object` and `addr2line`,
//! over bytes read into memory: `symbolize/dwarf.rs`).
//!
//! Separate debug files are found by build id (`/usr/lib/debug/.build-id/..`)
//! and by `.gnu_debuglink` (next to the binary, in `.debug/`, and under
//! `/usr/lib/debug`), as gdb does.

mod demangle;
mod dwarf;
#[cfg(test)]
mod dwarf_tests;
pub(crate) mod gmon_text;
mod gprof_rules;
pub(crate) mod images;
// Part of its API serves only its differential test (`lines_tests.rs`).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod lines;
#[cfg(test)]
mod lines_tests;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use smallvec::SmallVec;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};

pub use demangle::{demangle_cpp, demangle_cpp_verbose};
pub(crate) use dwarf::DwarfReader;

use crate::error::{Error, Result};
use crate::profile::{Line, LocationId, MappingId, Profile, SymbolFlags};

/// A function symbol of the executable's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionSymbol {
    /// Link-time address.
    pub address: u64,
    /// Size from the symbol table (0 when unknown).
    pub size: u64,
    /// Demangled name.
    pub name: Arc<str>,
    /// Name as in the symbol table: the same string as `name` when nothing
    /// is demangled (C), one allocation for both.
    pub system_name: Arc<str>,
    /// Typed as a function in the symbol table (ELF `STT_FUNC`, a global
    /// COFF function): false for an assembler label, which
    /// [`SymbolRules::Gprof`] counts as a function of its own for time but
    /// not as a callee (gprof's `is_func`).
    pub typed: bool,
}

impl FunctionSymbol {
    /// The symbol at `address` of `size` bytes named `raw` in the symbol
    /// table (its name demangled).
    pub fn new(address: u64, size: u64, raw: &str) -> Self {
        let system_name: Arc<str> = Arc::from(raw);
        let name = if is_mangled(raw) {
            Arc::from(demangle(raw))
        } else {
            system_name.clone()
        };
        FunctionSymbol::named(address, size, name, system_name)
    }

    /// A typed function symbol with these (shared) names.
    fn named(address: u64, size: u64, name: Arc<str>, system_name: Arc<str>) -> Self {
        FunctionSymbol {
            address,
            size,
            name,
            system_name,
            typed: true,
        }
    }
}

/// Each distinct symbol name demangled once and kept once: the symbols of
/// a table that share a name (static functions of many files, aliases)
/// share its two strings, so that a name demangling to a megabyte costs
/// one megabyte and one demangling, not one per symbol.
#[derive(Debug, Default)]
pub(crate) struct SymbolNames<'d> {
    by_raw: rustc_hash::FxHashMap<&'d str, (Arc<str>, Arc<str>)>,
}

impl<'d> SymbolNames<'d> {
    /// Room for `names` distinct names, so that the table is not rebuilt
    /// as it grows.
    pub fn with_capacity(names: usize) -> Self {
        let mut by_raw = rustc_hash::FxHashMap::default();
        by_raw.reserve(names);
        SymbolNames { by_raw }
    }

    /// [`FunctionSymbol::new`], with the strings of a name seen before.
    pub fn symbol(&mut self, address: u64, size: u64, raw: &'d str) -> FunctionSymbol {
        let (name, system_name) = self
            .by_raw
            .entry(raw)
            .or_insert_with(|| {
                let symbol = FunctionSymbol::new(address, size, raw);
                (symbol.name, symbol.system_name)
            })
            .clone();
        FunctionSymbol::named(address, size, name, system_name)
    }
}

/// One frame at an address, innermost first when inlined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceFrame {
    /// Readable (demangled) function name.
    pub function: String,
    /// Name as in the symbol table or DWARF.
    pub system_name: String,
    /// Source file (`""` when unknown).
    pub file: String,
    /// Line (0 when unknown).
    pub line: i64,
}

/// A loadable segment of the executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadSegment {
    /// Link-time address of the segment.
    pub vaddr: u64,
    /// Its size in memory.
    pub memsz: u64,
    /// Its offset in the file.
    pub offset: u64,
    /// Its size in the file.
    pub filesz: u64,
    /// True for an executable segment.
    pub executable: bool,
}

/// Reads an executable or debug file whole ([`crate::file`]), after checking
/// that it is a regular file whose first bytes are an object file's magic:
/// `--binary /dev/zero` or a multi-gigabyte non-ELF file is refused before
/// the rest is read, and a file that shrinks while read is an error, not a
/// crash.
pub(crate) fn read_object(path: &Path) -> Result<Vec<u8>> {
    open_object(path)?.read_all(path)
}

/// [`read_object`] into a buffer that can be shared (an executable's bytes,
/// which the reader of its own DWARF keeps too).
pub(crate) fn read_object_shared(path: &Path) -> Result<Rc<[u8]>> {
    open_object(path)?.read_all_shared(path)
}

/// The file at `path`, opened for [`read_object`] once its first bytes
/// are an object file's magic.
fn open_object(path: &Path) -> Result<crate::file::RegularFile> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::unsupported(
            path,
            "not a regular file: --binary needs the program's executable (ELF or PE)",
        ));
    }
    let file = crate::file::RegularFile::new(file, &meta);
    // A PE file's kind is in its NT headers, past the DOS stub.
    let mut head = vec![0u8; file.len().min(4096) as usize];
    file.read_at(path, 0, &mut head)?;
    if object::FileKind::parse(&*head).is_err() {
        let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(Error::unsupported(
            path,
            format!(
                "not an executable profconv can read: it starts with {}, not an object file's magic (ELF: 7f 45 4c 46; PE: 4d 5a)",
                shown.join(" ")
            ),
        ));
    }
    Ok(file)
}

/// Which of an executable's symbols are its functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SymbolRules {
    /// Symbols typed as functions in code sections, one per address (a
    /// global name first, then the shortest), each as long as its size
    /// says: what the linker and a debugger call functions.
    #[default]
    Linker,
    /// GNU gprof's functions (docs/formats/gprof.md §3.1): untyped labels
    /// count, local `.part`/`.cold`/`.isra` clones do not, one per address
    /// by gprof's preference, each running to the next.
    Gprof,
}

impl SymbolRules {
    /// The functions of `file` by these rules, sorted by address.
    fn symbols(self, file: &object::File<'_>) -> Vec<FunctionSymbol> {
        let mut symbols = match self {
            SymbolRules::Linker => text_symbols(file),
            SymbolRules::Gprof => gprof_rules::gprof_symbols(file),
        };
        keep_names_apart(&mut symbols);
        symbols
    }
}

/// Two symbols are never one function: where symbols of different names
/// in the table demangle to one name (a constructor's or destructor's
/// variants, `C1`/`C2`, `D0`/`D1`/`D2`), each keeps the name gprof prints
/// for it with a short distinction after it: the variant in words
/// (`A::~A() [base object]`), or else its address (`f() [0x4011a0]`).
fn keep_names_apart(symbols: &mut [FunctionSymbol]) {
    // Symbols that share a name share its strings ([`SymbolNames`]): each
    // distinct one is looked at once, found by its address, so that a name
    // of a megabyte named by a thousand symbols is hashed once. A name not
    // demangled is its system name's string: where none was (C), there is
    // nothing to look at.
    if symbols.iter().all(|s| Arc::ptr_eq(&s.name, &s.system_name)) {
        return;
    }
    let mut distinct: rustc_hash::FxHashMap<*const u8, (&str, &str)> = Default::default();
    distinct.reserve(symbols.len());
    for s in symbols.iter() {
        distinct
            .entry(s.system_name.as_ptr())
            .or_insert((&s.name, &s.system_name));
    }
    // Only a demangled name can be shared by two different symbols: where
    // no name was demangled (C), there is nothing to look at.
    let demangled: rustc_hash::FxHashSet<&str> = distinct
        .values()
        .filter(|(name, system_name)| name != system_name)
        .map(|&(name, _)| name)
        .collect();
    if demangled.is_empty() {
        return;
    }
    let mut by_name: rustc_hash::FxHashMap<&str, (&str, bool)> = Default::default();
    for &(name, system_name) in distinct.values().filter(|(n, _)| demangled.contains(n)) {
        let entry = by_name.entry(name).or_insert((system_name, false));
        entry.1 |= entry.0 != system_name;
    }
    let clashing: rustc_hash::FxHashSet<*const u8> = distinct
        .iter()
        .filter(|(_, (name, system_name))| {
            name != system_name && by_name.get(name).is_some_and(|e| e.1)
        })
        .map(|(&at, _)| at)
        .collect();
    if clashing.is_empty() {
        return;
    }
    let clashes = |s: &FunctionSymbol| clashing.contains(&s.system_name.as_ptr());
    // Variants in words where each of a name's symbols has its own variant.
    let mut variants: rustc_hash::FxHashMap<Arc<str>, Vec<Option<&str>>> = Default::default();
    for s in symbols.iter().filter(|s| clashes(s)) {
        let variant = demangle::structor_variant(&s.system_name);
        variants.entry(s.name.clone()).or_default().push(variant);
    }
    let in_words: rustc_hash::FxHashSet<Arc<str>> = variants
        .into_iter()
        .filter(|(_, v)| {
            let mut seen: Vec<&str> = v.iter().flatten().copied().collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len() == v.len()
        })
        .map(|(name, _)| name)
        .collect();
    for s in symbols.iter_mut().filter(|s| clashes(s)) {
        let distinction = match demangle::structor_variant(&s.system_name) {
            Some(variant) if in_words.contains(&s.name) => variant.to_owned(),
            _ => format!("{:#x}", s.address),
        };
        s.name = Arc::from(format!("{} [{distinction}]", s.name));
    }
}

/// An executable opened for symbolization.
pub(crate) struct Binary {
    /// The executable's path.
    pub path: PathBuf,
    /// Hex build id from `.note.gnu.build-id`, empty when there is none.
    pub build_id: String,
    /// Address size in bytes.
    pub pointer_size: usize,
    /// True for a big-endian executable.
    pub big_endian: bool,
    /// Loadable segments (`PT_LOAD`).
    pub segments: Vec<LoadSegment>,
    /// The instruction set.
    pub(crate) architecture: object::Architecture,
    /// The file DWARF was read from, when any was found.
    pub debug_file: Option<PathBuf>,
    /// Link-time address of each named section, in file order.
    sections: Vec<(String, u64)>,
    symbols: Vec<FunctionSymbol>,
    /// Which symbols [`Binary::symbols`] holds.
    rules: SymbolRules,
    /// With [`SymbolRules::Gprof`], [`Binary::entries`].
    entries: Vec<u64>,
    /// With [`SymbolRules::Gprof`], what its gmon.out must repeat
    /// (from the separate debug file when the executable is stripped).
    pub(crate) gmon_text: gmon_text::GmonText,
    /// The DWARF reader of `debug_file`, once opened ([`Binary::dwarf_reader`]):
    /// `None` inside when it does not open (symbols alone name frames then).
    dwarf: std::cell::OnceCell<Option<DwarfReader>>,
    /// Each address has one frame: its function and the line table's file
    /// and line ([`single_frames`]), because the DWARF declares no inlined
    /// subroutine or because inlined frames were not asked for.
    single_frames: bool,
    /// Whether inlined frames were asked for ([`Binary::open_with`]).
    inline_frames: bool,
    /// The executable's bytes: [`Binary::sorted_lines`] and the DWARF
    /// reader read its DWARF there instead of reading the file again.
    image: Option<Rc<[u8]>>,
}

impl std::fmt::Debug for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binary")
            .field("path", &self.path)
            .field("build_id", &self.build_id)
            .field("symbols", &self.symbols.len())
            .field("debug_file", &self.debug_file)
            .finish()
    }
}

fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// True when every address of the object's DWARF can be given one frame,
/// its function with the line table's file and line: the `.debug_abbrev`
/// declares no skeleton unit and no `dwo` name (split DWARF, whose line
/// tables are elsewhere), and either no `DW_TAG_inlined_subroutine` or
/// `inline_frames` is false (the function the code was inlined into takes
/// it, as gprof credits it, and the line table's row is the line gprof's
/// `-l` shows). Any doubt (a malformed section) answers false, keeping the
/// full lookup.
fn single_frames(file: &object::File<'_>, inline_frames: bool) -> bool {
    let Some(section) = file.section_by_name(".debug_abbrev") else {
        return false;
    };
    let Some(shape) = section
        .uncompressed_data()
        .ok()
        .and_then(|bytes| abbrevs_shape(&bytes))
    else {
        return false;
    };
    !(shape.split || shape.inlined && inline_frames)
}

/// What a `.debug_abbrev` section declares that decides how frames are
/// found ([`single_frames`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct AbbrevShape {
    /// Some `DW_TAG_inlined_subroutine`.
    inlined: bool,
    /// Some skeleton unit or `dwo` name: split DWARF.
    split: bool,
}

/// Scans every abbreviation table of a `.debug_abbrev` section (DWARF 5
/// §7.5.3) for the tags and attributes of [`AbbrevShape`]; `None` when the
/// bytes do not parse.
fn abbrevs_shape(mut bytes: &[u8]) -> Option<AbbrevShape> {
    const DW_TAG_INLINED_SUBROUTINE: u64 = 0x1d;
    const DW_TAG_SKELETON_UNIT: u64 = 0x4a;
    const DW_AT_DWO_NAME: u64 = 0x76;
    const DW_AT_GNU_DWO_NAME: u64 = 0x2130;
    const DW_FORM_IMPLICIT_CONST: u64 = 0x21;
    let mut shape = AbbrevShape::default();
    while !bytes.is_empty() {
        let code = uleb128(&mut bytes)?;
        if code == 0 {
            continue; // the end of one table
        }
        let tag = uleb128(&mut bytes)?;
        shape.inlined |= tag == DW_TAG_INLINED_SUBROUTINE;
        shape.split |= tag == DW_TAG_SKELETON_UNIT;
        bytes = bytes.get(1..)?; // DW_CHILDREN_yes/no
        loop {
            let (name, form) = (uleb128(&mut bytes)?, uleb128(&mut bytes)?);
            if name == 0 && form == 0 {
                break;
            }
            shape.split |= name == DW_AT_DWO_NAME || name == DW_AT_GNU_DWO_NAME;
            if form == DW_FORM_IMPLICIT_CONST {
                uleb128(&mut bytes)?; // an SLEB128: same length rule
            }
        }
    }
    Some(shape)
}

/// Reads one (U|S)LEB128 number from the front of `bytes`.
fn uleb128(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        if i < 10 {
            value |= u64::from(b & 0x7f) << (7 * i);
        }
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Some(value);
        }
    }
    None
}

fn text_symbols(file: &object::File<'_>) -> Vec<FunctionSymbol> {
    /// A text symbol as the table has it: address, size, name (borrowed),
    /// not global (or weak); in the table's order.
    type Entry<'d> = (u64, u64, &'d str, bool);
    let mut symbols: Vec<Entry<'_>> = Vec::new();
    let sources = if file.symbols().next().is_some() {
        file.symbols()
    } else {
        file.dynamic_symbols()
    };
    let text = text_sections(file);
    for sym in sources {
        if sym.kind() != SymbolKind::Text
            || sym.is_undefined()
            || sym.address() == 0 && sym.size() == 0
        {
            continue;
        }
        let in_text = sym
            .section_index()
            .is_some_and(|i| text.get(i.0).copied().unwrap_or(false));
        if !in_text {
            continue;
        }
        let Ok(raw) = sym.name() else { continue };
        if raw.is_empty() || raw.starts_with('$') {
            continue;
        }
        let local = !sym.is_global() || sym.is_weak();
        symbols.push((sym.address(), sym.size(), raw, local));
    }
    // One symbol per address: prefer a global, non-weak name, then the
    // shortest (aliases such as `__libc_foo`/`foo`), then the first by name,
    // then the first in the file. Sorted by address alone (a stable sort,
    // keeping the table's order), the rule then picks among each address's
    // aliases: a comparison sort of the whole rule took 40 % of the time of
    // opening a binary of 3000 functions. The names are copied (and
    // demangled) for the symbols kept only.
    symbols.sort_by_key(|s| s.0);
    let rule = |a: &&Entry<'_>, b: &&Entry<'_>| (a.3, a.2.len(), a.2).cmp(&(b.3, b.2.len(), b.2));
    let mut names = SymbolNames::with_capacity(symbols.len());
    symbols
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(|aliases| aliases.iter().min_by(rule))
        .map(|&(address, size, raw, _)| names.symbol(address, size, raw))
        .collect()
}

/// Whether the section of each index holds code (indexes with no section
/// are false): one look at each section instead of one per symbol.
fn text_sections(file: &object::File<'_>) -> Vec<bool> {
    let mut text = Vec::new();
    for section in file.sections() {
        let i = section.index().0;
        if text.len() <= i {
            text.resize(i + 1, false);
        }
        text[i] = section.kind() == SectionKind::Text;
    }
    text
}

/// True for Itanium C++ (`_Z`, Mach-O `__Z`, GCC's `_GLOBAL__I_`) and Rust
/// v0 (`_R`) names.
fn is_mangled(raw: &str) -> bool {
    raw.starts_with("_Z")
        || raw.starts_with("__Z")
        || raw.starts_with("_R")
        || raw.starts_with("_GLOBAL_")
}

/// The readable name of a symbol: Rust (legacy and v0) and C++ (Itanium)
/// names are demangled; anything else (C names, including short ones such as
/// `a` that a C++ demangler would read as a type) is kept as is.
pub fn demangle(raw: &str) -> String {
    if !is_mangled(raw) {
        return raw.to_owned();
    }
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    // Mach-O style names carry one more leading underscore.
    let itanium = raw
        .strip_prefix('_')
        .filter(|r| r.starts_with("_Z"))
        .unwrap_or(raw);
    demangle_cpp(itanium).unwrap_or_else(|| raw.to_owned())
}

/// The GNU build id, in hex, of the object file `bytes`; `None` when it is
/// no object file or has none.
pub(crate) fn build_id_of(bytes: &[u8]) -> Option<String> {
    let file = object::File::parse(bytes).ok()?;
    Some(build_id_hex(&file)).filter(|id| !id.is_empty())
}

fn build_id_hex(file: &object::File<'_>) -> String {
    match file.build_id() {
        Ok(Some(id)) => id.iter().map(|b| format!("{b:02x}")).collect(),
        _ => String::new(),
    }
}

/// The file and line of each of the sorted `addresses` in the line tables
/// of `debug_file`, the debug file of the binary at `path` (its bytes
/// `image`): read from the binary's own bytes when it is its own debug
/// file, else from the file.
fn lines_of(
    path: &Path,
    image: Option<&[u8]>,
    debug_file: &Path,
    addresses: &[u64],
) -> Option<lines::SortedLines> {
    match image {
        Some(image) if debug_file == path => lines::sorted_lines_in(image, addresses),
        _ => lines::sorted_lines(debug_file, addresses),
    }
}

/// Candidate separate debug files for a binary, in gdb's search order.
fn debug_file_candidates(path: &Path, build_id: &str, debuglink: Option<&str>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = path.parent().unwrap_or(Path::new("."));
    if build_id.len() > 2 {
        let rel = format!(".build-id/{}/{}.debug", &build_id[..2], &build_id[2..]);
        out.push(dir.join(&rel));
        out.push(Path::new("/usr/lib/debug").join(&rel));
    }
    if let Some(link) = debuglink {
        out.push(dir.join(link));
        out.push(dir.join(".debug").join(link));
        if let Ok(abs) = dir.canonicalize() {
            out.push(
                Path::new("/usr/lib/debug")
                    .join(abs.strip_prefix("/").unwrap_or(&abs))
                    .join(link),
            );
        }
    }
    out
}

/// The file holding the DWARF of `file` (itself, or a separate debug file
/// whose build id matches) and whether its addresses have single frames
/// ([`single_frames`], with or without `inline_frames`).
fn find_debug_file(
    path: &Path,
    file: &object::File<'_>,
    build_id: &str,
    inline_frames: bool,
) -> Option<(PathBuf, bool)> {
    if has_dwarf(file) {
        return Some((path.to_path_buf(), single_frames(file, inline_frames)));
    }
    let link = file
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
    debug_file_candidates(path, build_id, link.as_deref())
        .into_iter()
        .find_map(|candidate| {
            let bytes = read_object(&candidate).ok()?;
            let dbg = object::File::parse(&*bytes).ok()?;
            let matches = build_id.is_empty() || build_id_hex(&dbg) == build_id;
            let single = single_frames(&dbg, inline_frames);
            (matches && has_dwarf(&dbg)).then(|| (candidate.clone(), single))
        })
}

/// The text symbols of a separate debug file (for an executable whose own
/// symbol table is stripped); none when the DWARF is in the executable.
fn debug_file_symbols(
    path: &Path,
    debug_file: Option<&Path>,
    rules: SymbolRules,
) -> Vec<FunctionSymbol> {
    let Some(debug_file) = debug_file.filter(|&f| f != path) else {
        return Vec::new();
    };
    let Ok(bytes) = read_object(debug_file) else {
        return Vec::new();
    };
    object::File::parse(&*bytes).map_or_else(|_| Vec::new(), |dbg| rules.symbols(&dbg))
}

/// What `file`'s gmon.out must repeat ([`gmon_text::gmon_text`]): from its
/// separate debug file when its own symbol table is stripped.
fn gmon_text_of(
    path: &Path,
    file: &object::File<'_>,
    debug_file: Option<&Path>,
) -> gmon_text::GmonText {
    let first_segment = load_segments(file).first().map(|s| s.vaddr);
    let own = gmon_text::gmon_text(file, first_segment);
    let debug = debug_file.filter(|&f| !own.has_symbols && f != path);
    let Some(bytes) = debug.and_then(|f| read_object(f).ok()) else {
        return own;
    };
    object::File::parse(&*bytes).map_or(own, |dbg| gmon_text::gmon_text(&dbg, first_segment))
}

/// The loadable segments: ELF program headers, or the object's segments for
/// other formats (taken as executable).
fn load_segments(file: &object::File<'_>) -> Vec<LoadSegment> {
    match file {
        object::File::Elf64(elf) => elf_segments::<object::elf::FileHeader64<object::Endianness>>(
            elf.elf_program_headers(),
            elf.endian(),
        ),
        object::File::Elf32(elf) => elf_segments::<object::elf::FileHeader32<object::Endianness>>(
            elf.elf_program_headers(),
            elf.endian(),
        ),
        _ => file
            .segments()
            .map(|seg| {
                let (offset, filesz) = seg.file_range();
                LoadSegment {
                    vaddr: seg.address(),
                    memsz: seg.size(),
                    offset,
                    filesz,
                    executable: true,
                }
            })
            .collect(),
    }
}

/// How many opened binaries each thread keeps for [`Binary::open_cached`].
const CACHED_BINARIES: usize = 8;

/// An opened binary with the path, modification time and size it was opened at.
type CachedBinary = (PathBuf, Option<std::time::SystemTime>, u64, Rc<Binary>);

thread_local! {
    static OPENED: std::cell::RefCell<Vec<CachedBinary>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Binary {
    /// Like [`Binary::open`], but a binary this thread opened before (same
    /// path, size and modification time) is reused: an archive run converts
    /// many profiles of one program, and opening it (symbols, DWARF index) is
    /// most of the cost of a small conversion.
    ///
    /// For callers that look addresses up with [`Binary::sorted_lines`]
    /// (gprof): when addresses have single frames, the DWARF reader is
    /// opened only when an address needs it ([`Binary::open_with`]).
    pub fn open_cached(path: &Path, rules: SymbolRules, inline_frames: bool) -> Result<Rc<Binary>> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let (mtime, len) = (meta.modified().ok(), meta.len());
        let hit = OPENED.with(|c| {
            c.borrow()
                .iter()
                .find(|(p, t, l, b)| {
                    p == path
                        && *t == mtime
                        && *l == len
                        && b.rules == rules
                        && b.inline_frames == inline_frames
                })
                .map(|e| e.3.clone())
        });
        if let Some(b) = hit {
            return Ok(b);
        }
        let binary = Rc::new(Binary::open_with(path, true, rules, inline_frames)?);
        OPENED.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() >= CACHED_BINARIES {
                c.remove(0);
            }
            c.push((path.to_path_buf(), mtime, len, binary.clone()));
        });
        Ok(binary)
    }

    /// Opens an executable, its symbol table, and its DWARF (in the file or a
    /// separate debug file).
    /// Addresses get their inlined frames, innermost first.
    pub fn open(path: &Path) -> Result<Binary> {
        Binary::open_with(path, false, SymbolRules::Linker, true)
    }

    /// [`Binary::open`]; with `lazy_single`, the DWARF reader
    /// ([`DwarfReader`]) of DWARF whose addresses have single frames is
    /// left unopened until [`Binary::dwarf_reader`] needs it (the file and
    /// line of such frames come from [`Binary::sorted_lines`], which does
    /// not use it). Without
    /// `inline_frames`, an address's one frame is the function that holds
    /// it (the symbol's, as gprof credits it), with the line table's file
    /// and line (as `gprof -l` shows them), wherever its code was inlined
    /// from.
    pub fn open_with(
        path: &Path,
        lazy_single: bool,
        rules: SymbolRules,
        inline_frames: bool,
    ) -> Result<Binary> {
        let data = read_object_shared(path)?;
        let mut binary = Binary::parse(path, &data, rules, inline_frames)?;
        binary.image = Some(data);
        if !(lazy_single && binary.single_frames) {
            let _ = binary.dwarf.set(binary.open_dwarf());
        }
        Ok(binary)
    }

    /// [`Binary::open_with`] of the executable's bytes (`image` and the
    /// DWARF reader left for the caller to set).
    fn parse(path: &Path, data: &[u8], rules: SymbolRules, inline_frames: bool) -> Result<Binary> {
        let file = object::File::parse(data).map_err(|e| {
            Error::unsupported(path, format!("not an executable profconv can read: {e}"))
        })?;
        let build_id = build_id_hex(&file);
        let (debug_file, single_frames) =
            match find_debug_file(path, &file, &build_id, inline_frames) {
                Some((f, single)) => (Some(f), single),
                None => (None, false),
            };
        let mut symbols = rules.symbols(&file);
        if symbols.is_empty() {
            symbols = debug_file_symbols(path, debug_file.as_deref(), rules);
        }
        if symbols.is_empty() && rules == SymbolRules::Gprof {
            // No symbol table (gprof gives up): the dynamic symbols.
            symbols = text_symbols(&file);
        }
        let gmon_text = match rules {
            SymbolRules::Gprof => gmon_text_of(path, &file, debug_file.as_deref()),
            SymbolRules::Linker => gmon_text::GmonText::default(),
        };
        Ok(Binary {
            path: path.to_path_buf(),
            build_id,
            pointer_size: if file.is_64() { 8 } else { 4 },
            big_endian: !file.is_little_endian(),
            segments: load_segments(&file),
            architecture: file.architecture(),
            debug_file,
            sections: file
                .sections()
                .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
                .collect(),
            symbols,
            rules,
            entries: match rules {
                SymbolRules::Gprof => gprof_rules::code_entries(&file),
                SymbolRules::Linker => Vec::new(),
            },
            gmon_text,
            // Opened by the caller, which holds the bytes it may share.
            dwarf: std::cell::OnceCell::new(),
            single_frames,
            inline_frames,
            image: None,
        })
    }

    /// Text symbols sorted by address, one per address.
    pub fn symbols(&self) -> &[FunctionSymbol] {
        &self.symbols
    }

    /// The address of every symbol of a code section, functions or not,
    /// sorted and distinct (opened with [`SymbolRules::Gprof`]; empty
    /// otherwise): where `mcount` calls come from.
    pub fn entries(&self) -> &[u64] {
        &self.entries
    }

    /// The symbol table and how frames are made from it, shareable between
    /// threads (the DWARF reader is not): see [`SymbolView::frames_at`].
    pub fn symbol_view(&self) -> SymbolView<'_> {
        SymbolView {
            symbols: &self.symbols,
            single_frames: self.single_frames,
        }
    }

    /// The file and line of each of the sorted `addresses`, found in one
    /// pass over the line tables ([`lines::sorted_lines`]): what
    /// [`SymbolView::single_frame_at`] would find, for the addresses
    /// [`SymbolView::single_frame_index_with`] takes. `None` when the DWARF has
    /// inlined frames or was not loaded.
    pub fn sorted_lines(&self, addresses: &[u64]) -> Option<lines::SortedLines> {
        // Where the DWARF reader would not open (unit headers, unit
        // entries or .debug_aranges that do not parse), this pass gives up
        // too: same file, same sections, read with the same gimli (lines.rs).
        let debug_file = self.line_tables_file()?;
        lines_of(&self.path, self.image.as_deref(), debug_file, addresses)
    }

    /// The file whose line tables [`Binary::sorted_lines`] reads: the
    /// debug file, when its DWARF has no inlined frames (`None`: it reads
    /// none and answers nothing).
    pub fn line_tables_file(&self) -> Option<&Path> {
        self.debug_file.as_deref().filter(|_| self.single_frames)
    }

    /// The reader of the binary's DWARF, when it loads (opened here if
    /// [`Binary::open_with`] left it).
    pub fn dwarf_reader(&self) -> Option<&DwarfReader> {
        self.dwarf.get_or_init(|| self.open_dwarf()).as_ref()
    }

    /// The reader of the DWARF of `debug_file` (from the executable's bytes
    /// when it is its own debug file); `None` when there is none or it does
    /// not open: a file that changed while it was read, DWARF that does not
    /// parse. Frames then come from the symbol table alone, as without
    /// DWARF.
    fn open_dwarf(&self) -> Option<DwarfReader> {
        let debug_file = self.debug_file.as_deref()?;
        let opened = match &self.image {
            Some(image) if debug_file == self.path => {
                DwarfReader::from_bytes(debug_file, image.clone())
            }
            _ => DwarfReader::open(debug_file),
        };
        opened.ok()
    }

    /// The link-time address of the first section called `name` (`.text`).
    pub fn section_address(&self, name: &str) -> Option<u64> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, address)| address)
    }

    /// The `len` bytes the executable's file holds at link-time `address`
    /// (none where a segment's file bytes do not cover them all).
    pub fn bytes_at(&self, address: u64, len: usize) -> Option<&[u8]> {
        let image = self.image.as_deref()?;
        let end = address.checked_add(len as u64)?;
        let seg = self
            .segments
            .iter()
            .find(|s| address >= s.vaddr && end <= s.vaddr.saturating_add(s.filesz))?;
        let start = usize::try_from(seg.offset + (address - seg.vaddr)).ok()?;
        image.get(start..start.checked_add(len)?)
    }

    /// The address range of the executable segments, `[start, limit)`.
    pub fn text_range(&self) -> Option<(u64, u64)> {
        let exec = self.segments.iter().filter(|s| s.executable);
        let start = exec.clone().map(|s| s.vaddr).min()?;
        let limit = exec.map(|s| s.vaddr + s.memsz).max()?;
        Some((start, limit))
    }

    /// The first executable segment (the text a mapping usually stands for).
    pub fn text_segment(&self) -> Option<LoadSegment> {
        self.segments.iter().copied().find(|s| s.executable)
    }

    /// The link-time address of a file offset, through the program headers.
    pub fn file_offset_to_svma(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.offset && offset < s.offset + s.filesz)
            .map(|s| s.vaddr + (offset - s.offset))
    }

    /// The frames at link-time address `svma`, innermost first: from DWARF
    /// (with inlined frames, files and lines) when present, else the symbol
    /// table's function. Empty when nothing names the address.
    pub fn frames(&self, svma: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        self.for_each_frame(svma, |f| {
            out.push(SourceFrame {
                function: f.function.to_owned(),
                system_name: f.system_name.to_owned(),
                file: f.file.to_owned(),
                line: f.line,
            })
        });
        out
    }

    /// Calls `visit` for each frame at `svma`, innermost first, without
    /// allocating for names the debug information already holds.
    pub fn for_each_frame(&self, svma: u64, mut visit: impl FnMut(FrameRef<'_>)) {
        for (name, raw, file, line) in &self.frames_at(svma) {
            visit(FrameRef {
                function: name,
                system_name: raw,
                file,
                line: *line,
            });
        }
    }

    /// The frames at `svma`, innermost first, borrowed from the binary
    /// (names demangled from DWARF are owned): what
    /// [`Binary::for_each_frame`] visits.
    pub fn frames_at(&self, svma: u64) -> SmallVec<[RawFrame<'_>; 4]> {
        self.symbol_view().frames_at(self.dwarf_reader(), svma)
    }
}

/// A binary's symbols, as [`Binary::symbol_view`] lends them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SymbolView<'a> {
    symbols: &'a [FunctionSymbol],
    single_frames: bool,
}

impl<'a> SymbolView<'a> {
    /// The symbol whose range holds `address`: `[its value, its value + size)`,
    /// or up to the next symbol when its size is 0.
    pub fn symbol_at(self, address: u64) -> Option<&'a FunctionSymbol> {
        let symbols = self.symbols;
        let i = symbols
            .partition_point(|s| s.address <= address)
            .checked_sub(1)?;
        self.holding(i, address)
    }

    /// The `i`-th symbol if its range holds `address` (at or above its
    /// value): `[its value, its value + size)`, or up to the next symbol when
    /// its size is 0.
    fn holding(self, i: usize, address: u64) -> Option<&'a FunctionSymbol> {
        let symbols = self.symbols;
        let sym = symbols.get(i)?;
        let end = if sym.size > 0 {
            sym.address + sym.size
        } else {
            symbols.get(i + 1).map_or(u64::MAX, |n| n.address)
        };
        (address < end).then_some(sym)
    }

    /// When the DWARF has no inlined frames, the one frame at `svma`: its
    /// symbol, and the line table's file (borrowed from `dwarf`) and line
    /// (`""` and 0 when unknown). `None` when the full lookup of
    /// [`SymbolView::frames_at`] is needed.
    pub fn single_frame_at<'d>(
        self,
        dwarf: &'d DwarfReader,
        svma: u64,
    ) -> Option<(&'a FunctionSymbol, &'d str, i64)> {
        // No unit's [low, high) range holds the last address, and addr2line
        // computes `probe + 1` (an overflow) before it knows.
        if !self.single_frames || svma == u64::MAX {
            return None;
        }
        let sym = self.symbol_at(svma)?;
        let location = dwarf.find_location(svma).ok()?;
        let (file, line) = location.map_or(("", 0), |l| {
            (l.file.unwrap_or(""), l.line.unwrap_or(0) as i64)
        });
        Some((sym, file, line))
    }

    /// The symbol of [`SymbolView::single_frame_at`]'s frame (an index into
    /// the symbols), the file and line being already found
    /// ([`Binary::sorted_lines`]), for addresses asked in ascending order:
    /// `cursor` (0 at first) counts the symbols at or below the last address
    /// asked, so that all the lookups walk the symbols once.
    pub fn single_frame_index_with(self, svma: u64, cursor: &mut usize) -> Option<usize> {
        if !self.single_frames || svma == u64::MAX {
            return None;
        }
        self.symbol_index_at_sorted(svma, cursor)
    }

    /// The index of [`SymbolView::symbol_at`]'s symbol, for addresses asked
    /// in ascending order (`cursor` as [`SymbolView::single_frame_index_with`]
    /// keeps it).
    fn symbol_index_at_sorted(self, address: u64, cursor: &mut usize) -> Option<usize> {
        let symbols = self.symbols;
        // What `partition_point` finds, from where it was last time.
        while symbols.get(*cursor).is_some_and(|s| s.address <= address) {
            *cursor += 1;
        }
        let i = cursor.checked_sub(1)?;
        self.holding(i, address).map(|_| i)
    }

    /// The frames at `svma`, innermost first, names from the symbols (the
    /// outermost) or `dwarf`: see [`Binary::frames_at`].
    pub fn frames_at<'d>(
        self,
        dwarf: Option<&'d DwarfReader>,
        svma: u64,
    ) -> SmallVec<[RawFrame<'d>; 4]>
    where
        'a: 'd,
    {
        let mut frames: SmallVec<[RawFrame<'d>; 4]> = SmallVec::new();
        if let Some((sym, file, line)) = dwarf.and_then(|d| self.single_frame_at(d, svma)) {
            // One frame: the symbol's name (as below) with the line table's
            // file and line, without parsing the unit's functions.
            let (name, raw) = (&*sym.name, &*sym.system_name);
            frames.push((Cow::Borrowed(name), Cow::Borrowed(raw), file, line));
            return frames;
        }
        let symbol = self.symbol_at(svma);
        if let Some(dwarf) = dwarf.filter(|_| svma != u64::MAX) {
            dwarf_frames(dwarf, svma, &mut frames);
        }
        // The outermost frame is the symbol's function: name it as the symbol
        // table does, which is what the linker and gprof know it as (DWARF
        // names functions of internal linkage without their scope, e.g.
        // `helper` for `(anonymous namespace)::helper(long)`).
        if let (Some(last), Some(sym)) = (frames.last_mut(), symbol) {
            last.0 = Cow::Borrowed(&*sym.name);
            last.1 = Cow::Borrowed(&*sym.system_name);
        }
        frames.retain(|f| !f.0.is_empty());
        if let (true, Some(sym)) = (frames.is_empty(), symbol) {
            let (name, raw) = (&*sym.name, &*sym.system_name);
            frames.push((Cow::Borrowed(name), Cow::Borrowed(raw), "", 0));
        }
        frames
    }
}

/// The DWARF frames at `svma` (inlined ones first), names demangled.
fn dwarf_frames<'a>(dwarf: &'a DwarfReader, svma: u64, frames: &mut SmallVec<[RawFrame<'a>; 4]>) {
    let Some(mut iter) = dwarf.find_frames(svma) else {
        return;
    };
    while let Ok(Some(frame)) = iter.next() {
        let raw = frame
            .function
            .as_ref()
            .map(|f| dwarf.text(&f.name))
            .unwrap_or_default();
        let name = if is_mangled(&raw) {
            Cow::Owned(demangle(&raw))
        } else {
            raw.clone()
        };
        let (file, line) = frame.location.as_ref().map_or(("", 0), |l| {
            (l.file.unwrap_or(""), l.line.unwrap_or(0) as i64)
        });
        frames.push((name, raw, file, line));
    }
}

/// A frame as (readable name, system name, file, line); the file is `""`
/// and the line 0 when unknown.
pub(crate) type RawFrame<'a> = (Cow<'a, str>, Cow<'a, str>, &'a str, i64);

/// A frame borrowed from the binary's symbol table or debug information.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameRef<'a> {
    /// Readable function name.
    pub function: &'a str,
    /// Name as the system knows it.
    pub system_name: &'a str,
    /// Source file (`""` when unknown).
    pub file: &'a str,
    /// Line (0 when unknown).
    pub line: i64,
}

fn elf_segments<Elf: object::read::elf::FileHeader>(
    headers: &[Elf::ProgramHeader],
    endian: Elf::Endian,
) -> Vec<LoadSegment> {
    use object::read::elf::ProgramHeader;
    headers
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| LoadSegment {
            vaddr: ph.p_vaddr(endian).into(),
            memsz: ph.p_memsz(endian).into(),
            offset: ph.p_offset(endian).into(),
            filesz: ph.p_filesz(endian).into(),
            executable: ph.p_flags(endian) & object::elf::PF_X != 0,
        })
        .collect()
}

/// What a symbolization pass found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SymbolizeStats {
    /// Unsymbolized locations of the mapping looked at.
    pub locations: usize,
    /// How many of them got frames.
    pub symbolized: usize,
}

/// How an image was loaded: turns a profiled address into the binary's
/// link-time address (SVMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relocation {
    /// The profile's addresses are the link-time addresses (gprof, a kernel).
    Identity,
    /// The image was loaded `bias` bytes above its link-time addresses
    /// (`svma = address − bias`, wrapping as the loader's arithmetic does).
    Bias(u64),
    /// A process mapping that starts at file offset 0 at `start`: the file
    /// offset `address − start` is found in the program headers.
    FileOffset {
        /// The mapping's first address.
        start: u64,
    },
    /// A section whose link-time address is `section` was loaded at `start`
    /// (`svma = section + address − start`): SRE images, kernel modules, DCPI
    /// images relocated away from their text.
    Section {
        /// Where the section was loaded.
        start: u64,
        /// The section's link-time address ([`Binary::section_address`]).
        section: u64,
    },
}

impl Relocation {
    /// The link-time address of `address` in `binary`, if it has one.
    pub fn svma(self, binary: &Binary, address: u64) -> Option<u64> {
        match self {
            Relocation::Identity => Some(address),
            Relocation::Bias(bias) => Some(address.wrapping_sub(bias)),
            Relocation::FileOffset { start } => address
                .checked_sub(start)
                .and_then(|offset| binary.file_offset_to_svma(offset)),
            Relocation::Section { start, section } => address
                .checked_sub(start)
                .and_then(|offset| section.checked_add(offset)),
        }
    }
}

/// Symbolizes every unsymbolized location of `mapping` with `binary`, the
/// image loaded as `relocation` says. Return addresses are looked up one
/// byte earlier. Sets the mapping's `has_*` flags from what was really found
/// and, when the binary has one, its build id.
pub(crate) fn symbolize_mapping(
    profile: &mut Profile,
    mapping: MappingId,
    binary: &Binary,
    relocation: Relocation,
) -> SymbolizeStats {
    let mut stats = SymbolizeStats::default();
    let mut found = SymbolFlags::default();
    for id in 0..profile.locations().len() {
        let location = &profile.locations()[id];
        if location.mapping != Some(mapping) || !location.lines.is_empty() {
            continue;
        }
        stats.locations += 1;
        let lookup = if location.is_return_address {
            location.address.saturating_sub(1)
        } else {
            location.address
        };
        let Some(svma) = relocation.svma(binary, lookup) else {
            continue;
        };
        let frames = binary.frames(svma);
        if frames.is_empty() {
            continue;
        }
        stats.symbolized += 1;
        let lines = intern_frames(profile, &frames, &mut found);
        profile.set_location_lines(LocationId::from_index(id), lines);
    }
    profile.add_mapping_flags(mapping, found);
    stats
}

/// The IR lines of `frames`, noting in `found` what they carry.
fn intern_frames(
    profile: &mut Profile,
    frames: &[SourceFrame],
    found: &mut SymbolFlags,
) -> Vec<Line> {
    found.functions = true;
    found.inline_frames |= frames.len() > 1;
    let mut lines = Vec::with_capacity(frames.len());
    for f in frames {
        found.filenames |= !f.file.is_empty();
        found.line_numbers |= f.line > 0;
        let function = profile.add_function(&f.function, &f.system_name, &f.file, 0);
        lines.push(Line {
            function,
            line: f.line,
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

    use super::{demangle, text_symbols, FunctionSymbol, SymbolView};

    /// One symbol per address as the rule says, the plain way: of the text
    /// symbols at an address, the global non-weak one, then the shortest
    /// name, then the first by name, then the first in the table.
    fn one_per_address(file: &object::File<'_>) -> Vec<FunctionSymbol> {
        let table: Vec<_> = if file.symbols().next().is_some() {
            file.symbols().collect()
        } else {
            file.dynamic_symbols().collect()
        };
        let mut best: std::collections::BTreeMap<u64, (bool, usize, &str, usize, u64)> =
            Default::default();
        for (i, sym) in table.iter().enumerate() {
            let in_text = sym
                .section_index()
                .and_then(|s| file.section_by_index(s).ok())
                .is_some_and(|s| s.kind() == SectionKind::Text);
            let Ok(name) = sym.name() else { continue };
            if sym.kind() != SymbolKind::Text
                || sym.is_undefined()
                || sym.address() == 0 && sym.size() == 0
                || !in_text
                || name.is_empty()
                || name.starts_with('$')
            {
                continue;
            }
            let local = !sym.is_global() || sym.is_weak();
            let key = (local, name.len(), name, i, sym.size());
            let kept = best.entry(sym.address()).or_insert(key);
            if key < *kept {
                *kept = key;
            }
        }
        best.into_iter()
            .map(|(address, (_, _, name, _, size))| FunctionSymbol::new(address, size, name))
            .collect()
    }

    #[test]
    fn text_symbols_keep_one_symbol_per_address_by_the_rule() {
        // The C library's dynamic symbols hold many aliases of one address
        // (weak and global, `__libc_` prefixes); the fixtures' tables local
        // and global symbols.
        let mut files = vec![std::path::PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6")];
        for name in ["callgraph-nopie", "callgraph-m32"] {
            files.push(std::path::Path::new("tests/fixtures/gprof").join(name));
        }
        let mut checked = 0;
        for path in files.iter().filter(|p| p.exists()) {
            let bytes = std::fs::read(path).unwrap();
            let file = object::File::parse(&*bytes).unwrap();
            let got = text_symbols(&file);
            assert!(!got.is_empty(), "{}", path.display());
            assert_eq!(got, one_per_address(&file), "{}", path.display());
            checked += 1;
        }
        assert!(checked >= 2, "the fixtures are there");
    }

    #[test]
    fn symbol_index_at_sorted_finds_what_symbol_at_finds() {
        let mut rng = crate::test_rng::XorShift(0x2545_f491_4f6c_dd1d);
        let mut next = move || rng.next();
        // Sizes 0 (up to the next symbol), short (padding after) and long
        // (overlapping the next symbols).
        let mut address = 0x1000;
        let symbols: Vec<FunctionSymbol> = (0..300)
            .map(|i| {
                address += 1 + next() % 64;
                let size = [0, next() % 16, next() % 200][(next() % 3) as usize];
                FunctionSymbol::new(address, size, &format!("f{i}"))
            })
            .collect();
        let view = SymbolView {
            symbols: &symbols,
            single_frames: true,
        };
        let mut probes: Vec<u64> = (0..3000)
            .map(|_| 0xff0 + next() % (address - 0xf00))
            .collect();
        probes.extend([0, 0x1000, address, address + 1, u64::MAX]);
        probes.sort_unstable();
        let mut cursor = 0;
        for probe in probes {
            let sorted = view
                .symbol_index_at_sorted(probe, &mut cursor)
                .map(|i| &symbols[i]);
            assert_eq!(sorted, view.symbol_at(probe), "at {probe:#x}");
        }
    }

    #[test]
    fn symbols_that_demangle_alike_keep_their_name_with_a_distinction() {
        let mut symbols = vec![
            FunctionSymbol::new(0x10, 4, "helper"),
            FunctionSymbol::new(0x20, 4, "helper"),
            FunctionSymbol::new(0x30, 4, "_Z1fv"),
            FunctionSymbol::new(0x40, 4, "_Z1gv"),
            FunctionSymbol::new(0x50, 4, "_ZN1AD2Ev"),
            FunctionSymbol::new(0x60, 4, "_ZN1AD1Ev"),
            FunctionSymbol::new(0x70, 4, "_ZN1AD0Ev"),
        ];
        // As if a demangler had lost what tells two instantiations apart.
        symbols[3].name = symbols[2].name.clone();
        super::keep_names_apart(&mut symbols);
        let names: Vec<&str> = symbols.iter().map(|s| &*s.name).collect();
        assert_eq!(
            names,
            [
                "helper",
                "helper",
                "f() [0x30]",
                "f() [0x40]",
                "A::~A() [base object]",
                "A::~A() [complete object]",
                "A::~A() [deleting]",
            ]
        );
    }

    #[test]
    fn rust_and_cpp_names_are_demangled_and_c_names_kept() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("_ZN4geom5Shape4areaEi"), "geom::Shape::area(int)");
        assert_eq!(demangle("a"), "a", "a C name is not a C++ type code");
        assert_eq!(demangle("main"), "main");
    }
}
