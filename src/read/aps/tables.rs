//! The module and vma tables (§3.3, §3.4, §5): kernel image ranges and the
//! executable mappings of each process. Read whole into memory (they are small).

use std::collections::BTreeMap;
use std::path::Path;

use super::layout::Layout;
use super::source::{rebase, Source};
use crate::error::{Error, Result};
use crate::read::cursor::Cursor;

/// A kernel image text range (`module_entry`), `end` inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleEntry {
    /// First address.
    pub start: u32,
    /// Last address (inclusive).
    pub end: u32,
    /// Bare module name (no `.ko`) or `vmlinux`.
    pub name: String,
}

/// An executable mapping of a process (`vma_entry`), `end` inclusive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmaEntry {
    /// The process.
    pub pid: i32,
    /// An SRE image (symbolized from `.text`).
    pub is_sre: bool,
    /// First address.
    pub start: u32,
    /// Last address (inclusive).
    pub end: u32,
    /// Path of the mapped file on the board.
    pub file: String,
}

/// A C string in a fixed buffer: up to the first NUL, decoded lossily.
pub(super) fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

pub(super) fn parse_tables(
    path: &Path,
    src: &mut Source<'_>,
    layout: &Layout,
) -> Result<(Vec<ModuleEntry>, Vec<VmaEntry>)> {
    let base = layout.module_offset;
    let tail_len = usize::try_from(src.len() - base).map_err(|_| {
        Error::format(
            path,
            base,
            "the module and vma tables are too large for this machine",
        )
    })?;
    let mut buf = Vec::new();
    let tail = src.window(base, tail_len, &mut buf)?;
    parse_tables_in(path, tail, layout).map_err(|e| rebase(e, base))
}

pub(super) fn parse_tables_in(
    path: &Path,
    tail: &[u8],
    layout: &Layout,
) -> Result<(Vec<ModuleEntry>, Vec<VmaEntry>)> {
    let p = layout.path_len;
    let mut c = Cursor::new(path, tail, layout.module_endian, 4);
    c.skip(4, "module table magic")?;
    let mnum = c.u32("module count")?;
    c.check_items(u64::from(mnum), 8 + p, "module entries")?;
    let mut modules = Vec::with_capacity(mnum as usize);
    for i in 0..mnum {
        let at = c.offset();
        let start = c.u32("module start")?;
        let end = c.u32("module end")?;
        let name = c_string(c.bytes(p, "module name")?);
        if end < start {
            return Err(c.error_at(
                at,
                format!("module entry {i} ({name}) ends at {end:#x}, before its start {start:#x}"),
            ));
        }
        modules.push(ModuleEntry { start, end, name });
    }
    c.endian = layout.vma_endian;
    c.skip(4, "vma table magic")?;
    let vnum = c.u32("vma count")?;
    c.check_items(u64::from(vnum), 16 + p, "vma entries")?;
    let mut vmas = Vec::with_capacity(vnum as usize);
    for i in 0..vnum {
        let at = c.offset();
        let pid = c.i32("vma pid")?;
        let is_sre = c.i32("vma is_sre")? != 0;
        let start = c.u32("vm_start")?;
        let end = c.u32("vm_end")?;
        let file = c_string(c.bytes(p, "vm_file")?);
        if end < start {
            return Err(c.error_at(
                at,
                format!("vma entry {i} (pid {pid}, {file}) ends at {end:#x}, before its start {start:#x}"),
            ));
        }
        vmas.push(VmaEntry {
            pid,
            is_sre,
            start,
            end,
            file,
        });
    }
    if !c.at_end() {
        return Err(c.error(format!("{} bytes after the vma table", c.remaining())));
    }
    Ok((modules, vmas))
}

/// Module entries merged by name into one `[min start, max end]` range each
/// (§5), sorted by start.
pub fn merged_modules(modules: &[ModuleEntry]) -> Vec<ModuleEntry> {
    let mut by_name: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for m in modules {
        let range = by_name.entry(&m.name).or_insert((m.start, m.end));
        range.0 = range.0.min(m.start);
        range.1 = range.1.max(m.end);
    }
    let mut out: Vec<ModuleEntry> = by_name
        .into_iter()
        .map(|(name, (start, end))| ModuleEntry {
            start,
            end,
            name: name.to_owned(),
        })
        .collect();
    out.sort_by(|a, b| (a.start, a.end, &a.name).cmp(&(b.start, b.end, &b.name)));
    out
}

/// The file name of a kernel image: `vmlinux`, or the module name + `.ko`.
pub(super) fn module_file_name(name: &str) -> String {
    if name == "vmlinux" || name.ends_with(".ko") {
        name.to_owned()
    } else {
        format!("{name}.ko")
    }
}

// Records (§3.2).
