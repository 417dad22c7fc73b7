//! A binary's DWARF for addr2line, read into memory: inlined frames, and
//! the files and lines of addresses the sorted pass ([`super::lines`])
//! leaves to addr2line.
//!
//! The debug file is read whole with the checked reads of [`crate::file`]
//! (the executable's own bytes are shared when it is its own debug file);
//! its sections are windows of those bytes, or decompressed copies of
//! compressed ones (`SHF_COMPRESSED`, `.zdebug_*`). Nothing is mapped: a
//! file truncated while a map of it is read raises SIGBUS, which kills the
//! process, while a file that changes while it is read here is an error
//! naming it, and symbolization goes on without its DWARF.
//!
//! Split DWARF (DWARF 5 §7.3.2, and the GNU extension of DWARF 4) is
//! found as addr2line's own loader finds it: a unit's `.dwo` file at its
//! `DW_AT_dwo_name` below its `DW_AT_comp_dir`, read when an address of
//! the unit is first asked, unless the package next to the debug file
//! (`prog.dwp` for `prog`, DWARF 5 §7.3.5) holds the unit. Supplementary
//! object files (`.gnu_debugaltlink`, DWARF 5 §7.3.6) are not read:
//! addr2line's loader does not look for them either. Nor are a Mach-O
//! executable's dSYM bundle or the object files of its debug map, which
//! that loader looked for: the DWARF read is the debug file's own.
//!
//! Kept in memory: the debug file, the `.dwp` package and the `.dwo` files
//! asked for, whole, with what addr2line parses of them as it is asked.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use addr2line::{gimli, LookupContinuation, LookupResult, SplitDwarfLoad};
use object::{Object, ObjectSection};

use crate::error::{Error, Result};

/// The gimli reader of [`DwarfReader`]: windows of bytes held in memory.
pub(crate) type Reader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// addr2line's reader of a binary's DWARF, over the bytes of its debug
/// file. Opening it parses the unit headers; it parses the line tables
/// and functions of the units it is asked about.
pub(crate) struct DwarfReader {
    context: addr2line::Context<Reader>,
    /// The debug file's bytes, which most of the readers of `context` are
    /// windows of ([`DwarfReader::text`] lends them).
    bytes: Rc<[u8]>,
    /// The DWARF package next to the debug file, when there is one that
    /// parses.
    package: Option<gimli::DwarfPackage<Reader>>,
}

impl DwarfReader {
    /// Reads the debug file at `path` (the binary or its separate debug
    /// file) and its DWARF. An error names the file: it is no object file,
    /// it changed while it was read, a section does not decompress, or its
    /// units do not parse.
    pub fn open(path: &Path) -> Result<DwarfReader> {
        DwarfReader::from_bytes(path, super::read_object_shared(path)?)
    }

    /// [`DwarfReader::open`] of the debug file's bytes, already read.
    pub fn from_bytes(path: &Path, bytes: Rc<[u8]>) -> Result<DwarfReader> {
        let file = SectionSource::parse(&bytes).map_err(|e| {
            Error::unsupported(path, format!("not an object file profconv can read: {e}"))
        })?;
        let mut dwarf = gimli::Dwarf::load(|id| file.section(path, Some(id.name())))?;
        // What addr2line's loader does: one parse of an abbreviation table
        // that several units share.
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let context = addr2line::Context::from_dwarf(dwarf).map_err(|e| {
            let at = file.file_offset(".debug_info").unwrap_or(0);
            Error::format(
                path,
                at,
                format!("the DWARF units of .debug_info do not parse ({e}): frames come from the symbol table"),
            )
        })?;
        Ok(DwarfReader {
            context,
            bytes,
            package: package(&package_path(path)),
        })
    }

    /// The file and line of `probe`, as addr2line's `Context::find_location`
    /// finds them (`Ok(None)`: no line table holds it; `Err`: the DWARF
    /// there does not parse).
    pub fn find_location(
        &self,
        probe: u64,
    ) -> std::result::Result<Option<addr2line::Location<'_>>, gimli::Error> {
        self.context.find_location(probe)
    }

    /// The frames at `probe`, inlined ones first, as addr2line's
    /// `Context::find_frames` gives them, with the split units they need
    /// read ([`DwarfReader::split_unit`]). `None` when the DWARF there does
    /// not parse.
    pub fn find_frames(&self, probe: u64) -> Option<addr2line::FrameIter<'_, Reader>> {
        let mut lookup = self.context.find_frames(probe);
        loop {
            match lookup {
                LookupResult::Output(frames) => return frames.ok(),
                LookupResult::Load { load, continuation } => {
                    lookup = continuation.resume(self.split_unit(&load).ok()?);
                }
            }
        }
    }

    /// The text of `reader` (a name of a frame [`DwarfReader::find_frames`]
    /// gave), invalid UTF-8 replaced: borrowed from the debug file's bytes
    /// when it is a window of them (`.debug_str`, `.debug_info`), which live
    /// as long as `self`; copied from a decompressed section or a split
    /// unit.
    pub fn text(&self, reader: &Reader) -> Cow<'_, str> {
        let window = within(&self.bytes, reader.bytes()).and_then(|r| self.bytes.get(r));
        match window {
            Some(window) => String::from_utf8_lossy(window),
            None => Cow::Owned(String::from_utf8_lossy(reader.bytes()).into_owned()),
        }
    }

    /// The split unit `load` asks for: from the package when it holds the
    /// unit, else from the `.dwo` file its skeleton names (`Ok(None)` when
    /// that does not read, parse, or hold a unit of the skeleton's id).
    /// `Err` only when the package's index does not parse.
    // addr2line takes split units in an `Arc`, whatever the reader; ours
    // (`Rc`) keeps them on the thread that opened the binary, as `Binary` is.
    #[allow(clippy::arc_with_non_send_sync)]
    fn split_unit(
        &self,
        load: &SplitDwarfLoad<Reader>,
    ) -> std::result::Result<Option<Arc<gimli::Dwarf<Reader>>>, gimli::Error> {
        if let Some(package) = &self.package {
            if let Some(unit) = package.find_cu(load.dwo_id, &load.parent)? {
                return Ok(Some(Arc::new(unit)));
            }
        }
        let mut path = PathBuf::new();
        if let Some(dir) = &load.comp_dir {
            let Some(dir) = os_path(dir.bytes()) else {
                return Ok(None);
            };
            path.push(dir);
        }
        let Some(name) = load.path.as_ref().and_then(|name| os_path(name.bytes())) else {
            return Ok(None);
        };
        path.push(name);
        Ok(dwo_unit(&path, load).map(Arc::new))
    }
}

/// The split unit of a `.dwo` file, when the file reads and parses and its
/// first unit has the skeleton's id.
fn dwo_unit(path: &Path, load: &SplitDwarfLoad<Reader>) -> Option<gimli::Dwarf<Reader>> {
    let bytes = super::read_object_shared(path).ok()?;
    let file = SectionSource::parse(&bytes).ok()?;
    let mut dwarf = gimli::Dwarf::load(|id| file.section(path, id.dwo_name())).ok()?;
    let header = dwarf.units().next().ok()??;
    let unit = dwarf.unit(header).ok()?;
    if unit.dwo_id != Some(load.dwo_id) {
        return None;
    }
    dwarf.make_dwo(&load.parent);
    Some(dwarf)
}

/// Where addr2line's loader looks for the DWARF package of the debug file
/// at `path`: `.dwp` added to its extension (`prog.dwp`, `libm.so.dwp`).
fn package_path(path: &Path) -> PathBuf {
    let extension = match path.extension() {
        Some(extension) => {
            let mut extension = extension.to_os_string();
            extension.push(".dwp");
            extension
        }
        None => "dwp".into(),
    };
    path.with_extension(extension)
}

/// The DWARF package at `path`, when it reads and parses.
fn package(path: &Path) -> Option<gimli::DwarfPackage<Reader>> {
    let bytes = super::read_object_shared(path).ok()?;
    let file = SectionSource::parse(&bytes).ok()?;
    let empty = Reader::new(bytes.clone(), file.endian).range(0..0);
    // A section that does not read leaves the package out, as any error does.
    let section =
        |id: gimli::SectionId| (file.section(path, id.dwo_name())).or(Err(gimli::Error::Io));
    gimli::DwarfPackage::load(section, empty).ok()
}

/// A path from DWARF's bytes (`None` where the system's paths cannot
/// hold them: bytes that are not UTF-8 off Unix).
#[cfg(unix)]
fn os_path(bytes: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

#[cfg(not(unix))]
fn os_path(bytes: &[u8]) -> Option<PathBuf> {
    std::str::from_utf8(bytes).ok().map(PathBuf::from)
}

/// An object file's bytes and its parse, from which its sections become
/// [`Reader`]s.
struct SectionSource<'b> {
    bytes: &'b Rc<[u8]>,
    object: object::File<'b>,
    endian: gimli::RunTimeEndian,
}

impl<'b> SectionSource<'b> {
    fn parse(bytes: &'b Rc<[u8]>) -> object::Result<SectionSource<'b>> {
        let object = object::File::parse(&**bytes)?;
        let endian = if object.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        Ok(SectionSource {
            bytes,
            object,
            endian,
        })
    }

    /// The section called `name` (`.debug_info`, which finds `.zdebug_info`
    /// too), uncompressed; empty when there is none (or no name: a section
    /// split DWARF does not have). An error names the file (`path`) and
    /// where the section is when it does not decompress or lies outside
    /// the file.
    fn section(&self, path: &Path, name: Option<&str>) -> Result<Reader> {
        let Some(section) = name.and_then(|name| self.object.section_by_name(name)) else {
            return Ok(Reader::new(self.bytes.clone(), self.endian).range(0..0));
        };
        let data = section.uncompressed_data().map_err(|e| {
            let at = section.file_range().map_or(0, |(offset, _)| offset);
            let name = name.unwrap_or_default();
            Error::format(
                path,
                at,
                format!("section {name} does not read ({e}): frames come from the symbol table"),
            )
        })?;
        Ok(match data {
            // A window of the bytes already held: no copy.
            Cow::Borrowed(window) => match within(self.bytes, window) {
                Some(range) => Reader::new(self.bytes.clone(), self.endian).range(range),
                None => Reader::new(Rc::from(window), self.endian),
            },
            Cow::Owned(decompressed) => Reader::new(Rc::from(decompressed), self.endian),
        })
    }

    /// Where the section called `name` starts in the file.
    fn file_offset(&self, name: &str) -> Option<u64> {
        let section = self.object.section_by_name(name)?;
        Some(section.file_range()?.0)
    }
}

/// Where `part`, a slice of `whole`, lies in it (`None` when it is not one).
fn within(whole: &[u8], part: &[u8]) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}
