//! APS sample files (spec `aps.md`): the per-CPU sample files of Huawei's
//! "Advanced Performance Solution" board profiler.
//!
//! A file is a 56-byte head, `index` fixed-size records (`36 + 4·D` bytes,
//! D = call depth), a module table and a vma table (entries carrying a
//! `P`-byte path), with no padding (§3). D and P are compile-time constants of
//! the board's collector, so they are found from the file itself: the unique
//! (D, P) that puts the module and vma magics where they must be and ends the
//! file exactly (§10).
//!
//! Records are streamed: they are counted per distinct (mode, pid, tid,
//! event, pc, call stack) while reading, so memory grows with the number of
//! distinct stacks, not with the number of records.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::cursor::{Cursor, Endian};
use super::input::Input;
use super::options::ReadOptions;
use super::Detection;
use crate::error::{Error, Result};
use crate::profile::{basename, Label, Mapping, MappingId, Profile};
use crate::symbolize::{self, Binary};

/// `FILE_HEAD_MAGIC` (§2).
pub const FILE_HEAD_MAGIC: u32 = 0x1234_4321;
/// `MODULE_HEAD_MAGIC` (§2).
pub const MODULE_HEAD_MAGIC: u32 = 0x8746_abcd;
/// `VMA_HEAD_MAGIC` (§2).
pub const VMA_HEAD_MAGIC: u32 = 0xbcdf_9283;
/// `MAX_CALL_DEPTH` of the published reporter.
pub const DEFAULT_CALL_DEPTH: usize = 5;
/// `MAX_PATH_LENGTH` of the published reporter.
pub const DEFAULT_PATH_LEN: usize = 256;
/// Size of `file_head` (§3.1).
pub const FILE_HEAD_SIZE: u64 = 56;
/// Size of a record without its call stack (§3.2).
pub const RECORD_FIXED_SIZE: u64 = 36;
/// Size of `module_head` and `vma_head` (§3.3, §3.4).
const TABLE_HEAD_SIZE: u64 = 8;
/// Call depths tried when detecting D (§10: 1..64; 0 = no call stacks).
const SEARCHED_CALL_DEPTHS: std::ops::RangeInclusive<usize> = 0..=64;
/// Largest path length tried when detecting P (Linux `PATH_MAX`).
const MAX_SEARCHED_PATH_LEN: usize = 4096;
/// Largest values accepted from `--aps-call-depth` / `--aps-path-len`.
const MAX_GIVEN_CALL_DEPTH: usize = 1 << 16;
const MAX_GIVEN_PATH_LEN: usize = 1 << 20;
/// Bytes of records read at a time while streaming.
const CHUNK_BYTES: u64 = 4 << 20;

/// The ARMv7 PMU common event numbers the last reporter names (§5).
pub fn event_name(id: u32) -> String {
    match id {
        0x03 => "L1D_CACHE_REFILL".to_owned(),
        0x05 => "L1D_TLB_REFILL".to_owned(),
        0x11 => "CPU_CYCLES".to_owned(),
        other => format!("event@{other}"),
    }
}

/// The byte order in which `bytes` hold `magic`, if either.
fn magic_order(bytes: &[u8], magic: u32) -> Option<Endian> {
    let word: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    if u32::from_le_bytes(word) == magic {
        Some(Endian::Little)
    } else if u32::from_be_bytes(word) == magic {
        Some(Endian::Big)
    } else {
        None
    }
}

/// An APS sample file starts with the file-head magic in either byte order
/// and holds at least the head and the two table heads.
pub fn detect(head: &[u8], file_len: u64) -> bool {
    magic_order(head, FILE_HEAD_MAGIC).is_some() && file_len >= FILE_HEAD_SIZE + 2 * TABLE_HEAD_SIZE
}

/// The file-head magic in either byte order, and room for the heads.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Magic
    } else {
        Detection::No
    }
}

/// A directory holding `sample_cpu_<N>_…` files (§7).
pub fn detect_dir(path: &Path) -> bool {
    sample_files_in(path).is_ok_and(|files| !files.is_empty())
}

/// True for a `sample_cpu_<N>_…` file name (§7).
pub fn is_sample_file_name(path: &Path) -> bool {
    cpu_from_file_name(path).is_some()
}

/// The CPU number in a `sample_cpu_<N>_<date>_<time>` file name (§7).
pub fn cpu_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("sample_cpu_")?;
    let digits = rest.split('_').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The `sample_cpu_*` files of a capture directory whose content starts with
/// the APS magic, by CPU number then name.
fn sample_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if cpu_from_file_name(&path).is_none() || !path.is_file() {
            continue;
        }
        let mut magic = [0u8; 4];
        let starts_with_magic = File::open(&path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok_and(|()| magic_order(&magic, FILE_HEAD_MAGIC).is_some());
        if starts_with_magic || magic.starts_with(&[0x1f, 0x8b]) {
            files.push(path);
        }
    }
    files.sort_by_key(|p| (cpu_from_file_name(p), p.clone()));
    Ok(files)
}

// ---------------------------------------------------------------------------
// Reading bytes: plain files are mapped and their records streamed (the
// pages read are released chunk by chunk), gzip-compressed ones were
// decompressed into memory when the input was opened.

/// The bytes of one input, with the reads the layout search needs.
struct Source<'a> {
    input: &'a Input,
}

impl<'a> Source<'a> {
    fn new(input: &'a Input) -> Source<'a> {
        Source { input }
    }

    fn len(&self) -> u64 {
        self.input.len()
    }

    /// `len` bytes from `offset`; the caller has checked that they are in the file.
    fn slice(&self, path: &Path, offset: u64, len: usize) -> Result<&'a [u8]> {
        let short = || {
            Error::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the file got shorter while it was read",
                ),
            )
        };
        let start = usize::try_from(offset).map_err(|_| short())?;
        start
            .checked_add(len)
            .and_then(|end| self.input.bytes().get(start..end))
            .ok_or_else(short)
    }

    /// Fills `buf` from `offset`; the caller has checked that it is in the file.
    fn read_at(&mut self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
        buf.copy_from_slice(self.slice(path, offset, buf.len())?);
        Ok(())
    }

    /// The u32 at `offset` in `endian`, or `None` past the end.
    fn u32_at(&mut self, path: &Path, offset: u64, endian: Endian) -> Result<Option<u32>> {
        if offset.checked_add(4).is_none_or(|end| end > self.len()) {
            return Ok(None);
        }
        let mut b = [0u8; 4];
        self.read_at(path, offset, &mut b)?;
        Ok(Some(endian.u32(&b)))
    }

    /// The table head (magic order, count) at `offset`, or `None` when the
    /// head does not fit or its magic matches neither byte order.
    fn table_head(
        &mut self,
        path: &Path,
        offset: u64,
        magic: u32,
    ) -> Result<Option<(Endian, u32)>> {
        if offset
            .checked_add(TABLE_HEAD_SIZE)
            .is_none_or(|end| end > self.len())
        {
            return Ok(None);
        }
        let mut b = [0u8; 8];
        self.read_at(path, offset, &mut b)?;
        Ok(magic_order(&b, magic).map(|endian| (endian, endian.u32(&b[4..]))))
    }
}

/// Moves the offset of a format error found in a buffer read from `base`.
fn rebase(error: Error, base: u64) -> Error {
    match error {
        Error::Format { file, offset, what } => Error::Format {
            file,
            offset: offset + base,
            what,
        },
        other => other,
    }
}

// ---------------------------------------------------------------------------
// The file head and the layout (§3, §10).

/// `file_head` (§3.1), in the byte order of its magic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHead {
    pub endian: Endian,
    /// Number of records.
    pub index: u32,
    pub begin_sec: i32,
    pub begin_usec: i32,
    pub end_sec: i32,
    pub end_usec: i32,
    /// "start time: tick", unit unknown (§5).
    pub st_begin_time: u64,
    pub st_end_time: u64,
    /// Events between two samples.
    pub reset_value: u64,
    pub cputype: u32,
}

impl FileHead {
    fn parse(path: &Path, bytes: &[u8]) -> Result<FileHead> {
        let Some(endian) = magic_order(bytes, FILE_HEAD_MAGIC) else {
            let found = bytes
                .get(..4)
                .map(|b| format!("{b:02x?}"))
                .unwrap_or_default();
            return Err(Error::format(
                path,
                0,
                format!("expected the APS file magic {FILE_HEAD_MAGIC:#010x} in either byte order, found {found}"),
            ));
        };
        let mut c = Cursor::new(path, bytes, endian, 4);
        c.skip(4, "file magic")?;
        Ok(FileHead {
            endian,
            index: c.u32("record count (index)")?,
            begin_sec: c.i32("begintime.tv_sec")?,
            begin_usec: c.i32("begintime.tv_usec")?,
            end_sec: c.i32("endtime.tv_sec")?,
            end_usec: c.i32("endtime.tv_usec")?,
            st_begin_time: c.u64("stBeginTime")?,
            st_end_time: c.u64("stEndTime")?,
            reset_value: c.u64("reset_value")?,
            cputype: c.u32("cputype")?,
        })
    }

    /// begintime in nanoseconds since the Unix epoch.
    pub fn begin_nanos(&self) -> i64 {
        i64::from(self.begin_sec) * 1_000_000_000 + i64::from(self.begin_usec) * 1000
    }

    pub fn end_nanos(&self) -> i64 {
        i64::from(self.end_sec) * 1_000_000_000 + i64::from(self.end_usec) * 1000
    }
}

/// Where a layout parameter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Solved from the section magics and the file size.
    Detected,
    /// Given on the command line.
    Given,
    /// Nothing in the file tells it (no records, or empty tables): the reporter's value.
    Default,
}

impl Origin {
    fn describe(self) -> &'static str {
        match self {
            Origin::Detected => "detected",
            Origin::Given => "given",
            Origin::Default => "default: the file does not tell",
        }
    }
}

/// The section offsets of one file, with D and P.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub call_depth: usize,
    pub call_depth_origin: Origin,
    pub path_len: usize,
    pub path_len_origin: Origin,
    pub module_offset: u64,
    pub module_endian: Endian,
    pub module_count: u32,
    pub vma_offset: u64,
    pub vma_endian: Endian,
    pub vma_count: u32,
}

impl Layout {
    pub fn record_size(&self) -> u64 {
        RECORD_FIXED_SIZE + 4 * self.call_depth as u64
    }
}

/// `36 + 4·D`, `None` on overflow.
fn record_size(depth: usize) -> Option<u64> {
    (depth as u64)
        .checked_mul(4)?
        .checked_add(RECORD_FIXED_SIZE)
}

/// What the layout search found for one call depth.
enum Candidate {
    /// Both magics in place and the file ends where the vma table does.
    Exact(Layout),
    /// Both magics in place, but the file is longer or shorter than the tables.
    WrongEnd {
        depth: usize,
        path_len: usize,
        end: u64,
    },
    /// The module magic follows the records, but no path length puts the
    /// vma magic after the module entries.
    NoVmaTable {
        depth: usize,
        module_offset: u64,
        module_count: u32,
    },
}

/// Finds D and P (§10): the module magic must sit right after `index`
/// records, the vma magic right after the module entries, and the vma
/// entries must end the file.
fn solve_layout(
    path: &Path,
    src: &mut Source<'_>,
    head: &FileHead,
    options: &ReadOptions,
) -> Result<Layout> {
    let len = src.len();
    if let Some(d) = options.aps.call_depth.filter(|d| *d > MAX_GIVEN_CALL_DEPTH) {
        return Err(Error::Usage(format!(
            "--aps-call-depth {d} is beyond {MAX_GIVEN_CALL_DEPTH}"
        )));
    }
    if let Some(p) = options
        .aps
        .path_len
        .filter(|p| *p == 0 || *p > MAX_GIVEN_PATH_LEN)
    {
        return Err(Error::Usage(format!(
            "--aps-path-len {p} is not in 1..={MAX_GIVEN_PATH_LEN}"
        )));
    }
    // Even the shortest records must fit before the two table heads.
    let min_record = options
        .aps
        .call_depth
        .and_then(record_size)
        .unwrap_or(RECORD_FIXED_SIZE);
    let needed = u64::from(head.index)
        .checked_mul(min_record)
        .and_then(|b| b.checked_add(FILE_HEAD_SIZE + 2 * TABLE_HEAD_SIZE));
    if needed.is_none_or(|n| n > len) {
        return Err(Error::format(
            path,
            4,
            format!(
                "the head announces {} records of at least {min_record} bytes, which do not fit in the {len} bytes of the file",
                head.index
            ),
        ));
    }

    let (depths, depth_origin): (Vec<usize>, Origin) = match options.aps.call_depth {
        Some(d) => (vec![d], Origin::Given),
        // Without records the module head sits at 56 whatever D is.
        None if head.index == 0 => (vec![DEFAULT_CALL_DEPTH], Origin::Default),
        None => (SEARCHED_CALL_DEPTHS.collect(), Origin::Detected),
    };
    let mut candidates = Vec::new();
    for &depth in &depths {
        if let Some(c) = try_depth(path, src, head, depth, depth_origin, options)? {
            candidates.push(c);
        }
    }
    let exact: Vec<&Layout> = candidates
        .iter()
        .filter_map(|c| match c {
            Candidate::Exact(l) => Some(l),
            Candidate::WrongEnd { .. } | Candidate::NoVmaTable { .. } => None,
        })
        .collect();
    match exact.as_slice() {
        [one] => return Ok((*one).clone()),
        [] => {}
        many => {
            let list: Vec<String> = many
                .iter()
                .map(|l| {
                    format!(
                        "call depth {} with path length {}",
                        l.call_depth, l.path_len
                    )
                })
                .collect();
            return Err(Error::format(
                path,
                0,
                format!(
                    "the layout is ambiguous: {} all fit this file; choose one with --aps-call-depth and --aps-path-len",
                    list.join(", ")
                ),
            ));
        }
    }
    // No exact fit: explain the closest thing found.
    let wrong_end = candidates
        .iter()
        .find(|c| matches!(c, Candidate::WrongEnd { .. }));
    if let Some(Candidate::WrongEnd {
        depth,
        path_len,
        end,
    }) = wrong_end
    {
        let what = if *end < len {
            format!(
                "{} bytes of trailing garbage after the vma table",
                len - end
            )
        } else {
            format!(
                "the file is truncated: {} bytes are missing from the vma table",
                end - len
            )
        };
        return Err(Error::format(
            path,
            (*end).min(len),
            format!(
                "with call depth {depth} and path length {path_len} the module and vma magics are in place and the file should end at byte {end}, but it has {len} bytes: {what}"
            ),
        ));
    }
    if let Some(Candidate::NoVmaTable {
        depth,
        module_offset,
        module_count,
    }) = candidates.first()
    {
        return Err(Error::format(
            path,
            *module_offset,
            format!(
                "the module table magic follows the records with call depth {depth}, but no path length in 1..={MAX_SEARCHED_PATH_LEN} puts the vma table magic {VMA_HEAD_MAGIC:#010x} after its {module_count} entries (give --aps-path-len to see where it was expected)"
            ),
        ));
    }
    // No module magic after the records for any D: report what sits where the
    // reporter's D would put it.
    let depth = DEFAULT_CALL_DEPTH;
    let offset = record_size(depth)
        .and_then(|r| r.checked_mul(u64::from(head.index)))
        .and_then(|b| b.checked_add(FILE_HEAD_SIZE))
        .unwrap_or(u64::MAX);
    Err(magic_error(
        path,
        src,
        offset,
        "module table",
        MODULE_HEAD_MAGIC,
        &format!("{} records of {} bytes (call depth {depth})", head.index, record_size(depth).unwrap_or(0)),
        &format!(
            "; no call depth in {}..={} puts it after the records either (give --aps-call-depth if the collector used another)",
            SEARCHED_CALL_DEPTHS.start(),
            SEARCHED_CALL_DEPTHS.end()
        ),
    )?)
}

/// The error for a table magic that is not where the layout puts it, with
/// the word found there.
fn magic_error(
    path: &Path,
    src: &mut Source<'_>,
    offset: u64,
    table: &str,
    magic: u32,
    after: &str,
    note: &str,
) -> Result<Error> {
    let found = match src.u32_at(path, offset, Endian::Big)? {
        Some(v) => format!("found {v:#010x} (read big-endian)"),
        None => "found the end of the file".to_owned(),
    };
    Ok(Error::format(
        path,
        offset,
        format!("expected the {table} magic {magic:#010x} in either byte order after {after}, {found}{note}"),
    ))
}

/// The layout for call depth `depth`, if the module magic follows its records.
fn try_depth(
    path: &Path,
    src: &mut Source<'_>,
    head: &FileHead,
    depth: usize,
    depth_origin: Origin,
    options: &ReadOptions,
) -> Result<Option<Candidate>> {
    let len = src.len();
    let Some(module_offset) = record_size(depth)
        .and_then(|r| r.checked_mul(u64::from(head.index)))
        .and_then(|b| b.checked_add(FILE_HEAD_SIZE))
    else {
        return Ok(None);
    };
    let Some((module_endian, module_count)) =
        src.table_head(path, module_offset, MODULE_HEAD_MAGIC)?
    else {
        if options.aps.call_depth.is_some() {
            let after = format!(
                "{} records of {} bytes (call depth {depth})",
                head.index,
                record_size(depth).unwrap_or(0)
            );
            return Err(magic_error(
                path,
                src,
                module_offset,
                "module table",
                MODULE_HEAD_MAGIC,
                &after,
                "",
            )?);
        }
        return Ok(None);
    };
    let mnum = u64::from(module_count);
    let tables_start = module_offset + TABLE_HEAD_SIZE;
    // The vma head for path length p, and where the file would end.
    let at = |src: &mut Source<'_>, p: usize| -> Result<Option<(u64, Endian, u32, u64)>> {
        let p = p as u64;
        let Some(vma_offset) = mnum
            .checked_mul(8 + p)
            .and_then(|b| b.checked_add(tables_start))
        else {
            return Ok(None);
        };
        let Some((vma_endian, vma_count)) = src.table_head(path, vma_offset, VMA_HEAD_MAGIC)?
        else {
            return Ok(None);
        };
        let end = u64::from(vma_count)
            .checked_mul(16 + p)
            .and_then(|b| b.checked_add(vma_offset + TABLE_HEAD_SIZE))
            .unwrap_or(u64::MAX);
        Ok(Some((vma_offset, vma_endian, vma_count, end)))
    };
    let layout =
        |p: usize, p_origin: Origin, vma_offset: u64, vma_endian: Endian, vma_count: u32| Layout {
            call_depth: depth,
            call_depth_origin: depth_origin,
            path_len: p,
            path_len_origin: p_origin,
            module_offset,
            module_endian,
            module_count,
            vma_offset,
            vma_endian,
            vma_count,
        };

    if let Some(p) = options.aps.path_len {
        let Some((vma_offset, vma_endian, vma_count, end)) = at(src, p)? else {
            let vma_offset = mnum
                .saturating_mul(8 + p as u64)
                .saturating_add(tables_start);
            let after = format!(
                "{module_count} module entries of {} bytes (path length {p})",
                8 + p
            );
            return Err(magic_error(
                path,
                src,
                vma_offset,
                "vma table",
                VMA_HEAD_MAGIC,
                &after,
                "",
            )?);
        };
        return Ok(Some(if end == len {
            Candidate::Exact(layout(p, Origin::Given, vma_offset, vma_endian, vma_count))
        } else {
            Candidate::WrongEnd {
                depth,
                path_len: p,
                end,
            }
        }));
    }

    if mnum == 0 {
        // The vma head is at a fixed place; P follows from the file size.
        let Some((vma_offset, vma_endian, vma_count, _)) = at(src, DEFAULT_PATH_LEN)? else {
            return Ok(Some(Candidate::NoVmaTable {
                depth,
                module_offset,
                module_count,
            }));
        };
        if vma_count == 0 {
            let end = vma_offset + TABLE_HEAD_SIZE;
            return Ok(Some(if end == len {
                Candidate::Exact(layout(
                    DEFAULT_PATH_LEN,
                    Origin::Default,
                    vma_offset,
                    vma_endian,
                    0,
                ))
            } else {
                Candidate::WrongEnd {
                    depth,
                    path_len: DEFAULT_PATH_LEN,
                    end,
                }
            }));
        }
        let body = len - (vma_offset + TABLE_HEAD_SIZE);
        let entry = body / u64::from(vma_count);
        if body % u64::from(vma_count) == 0 && entry > 16 && entry - 16 <= MAX_GIVEN_PATH_LEN as u64
        {
            let p = (entry - 16) as usize;
            return Ok(Some(Candidate::Exact(layout(
                p,
                Origin::Detected,
                vma_offset,
                vma_endian,
                vma_count,
            ))));
        }
        let end = u64::from(vma_count)
            .saturating_mul(16 + DEFAULT_PATH_LEN as u64)
            .saturating_add(vma_offset + TABLE_HEAD_SIZE);
        return Ok(Some(Candidate::WrongEnd {
            depth,
            path_len: DEFAULT_PATH_LEN,
            end,
        }));
    }

    // Try every P, the reporter's first, and keep the exact fits.
    let mut exact = Vec::new();
    let mut near = None;
    for p in std::iter::once(DEFAULT_PATH_LEN)
        .chain((1..=MAX_SEARCHED_PATH_LEN).filter(|p| *p != DEFAULT_PATH_LEN))
    {
        if mnum
            .saturating_mul(8 + p as u64)
            .saturating_add(tables_start)
            > len
        {
            if p > DEFAULT_PATH_LEN {
                break;
            }
            continue;
        }
        if let Some((vma_offset, vma_endian, vma_count, end)) = at(src, p)? {
            if end == len {
                exact.push(layout(
                    p,
                    Origin::Detected,
                    vma_offset,
                    vma_endian,
                    vma_count,
                ));
            } else if near.is_none() {
                near = Some(Candidate::WrongEnd {
                    depth,
                    path_len: p,
                    end,
                });
            }
        }
    }
    match exact.len() {
        0 => Ok(Some(near.unwrap_or(Candidate::NoVmaTable {
            depth,
            module_offset,
            module_count,
        }))),
        1 => Ok(exact.pop().map(Candidate::Exact)),
        _ => {
            let list: Vec<String> = exact.iter().map(|l| l.path_len.to_string()).collect();
            Err(Error::format(
                path,
                module_offset,
                format!(
                    "with call depth {depth} the path length is ambiguous: {} all fit; choose one with --aps-path-len",
                    list.join(", ")
                ),
            ))
        }
    }
}

// ---------------------------------------------------------------------------
// The module and vma tables (§3.3, §3.4, §5).

/// A kernel image text range (`module_entry`), `end` inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleEntry {
    pub start: u32,
    pub end: u32,
    /// Bare module name (no `.ko`) or `vmlinux`.
    pub name: String,
}

/// An executable mapping of a process (`vma_entry`), `end` inclusive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmaEntry {
    pub pid: i32,
    pub is_sre: bool,
    pub start: u32,
    pub end: u32,
    pub file: String,
}

/// A C string in a fixed buffer: up to the first NUL, decoded lossily.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn parse_tables(
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
    let tail = src.slice(path, base, tail_len)?;
    parse_tables_in(path, tail, layout).map_err(|e| rebase(e, base))
}

fn parse_tables_in(
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
fn module_file_name(name: &str) -> String {
    if name == "vmlinux" || name.ends_with(".ko") {
        name.to_owned()
    } else {
        format!("{name}.ko")
    }
}

// ---------------------------------------------------------------------------
// Records (§3.2).

/// One record, in the byte order of the file head.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    bytes: &'a [u8],
    endian: Endian,
}

impl Record<'_> {
    fn field(&self, offset: usize) -> u32 {
        self.bytes
            .get(offset..offset + 4)
            .map_or(0, |b| self.endian.u32(b))
    }
    pub fn user(&self) -> bool {
        self.field(0) != 0
    }
    pub fn pid(&self) -> i32 {
        self.field(4) as i32
    }
    pub fn tid(&self) -> i32 {
        self.field(8) as i32
    }
    pub fn time_diff(&self) -> i32 {
        self.field(12) as i32
    }
    pub fn cs_layer(&self) -> i32 {
        self.field(20) as i32
    }
    pub fn event(&self) -> u32 {
        self.field(24)
    }
    pub fn pc(&self) -> u32 {
        self.field(32)
    }
    /// D of this record's layout.
    pub fn call_depth(&self) -> usize {
        (self.bytes.len().saturating_sub(RECORD_FIXED_SIZE as usize)) / 4
    }
    /// `cs_layer` clamped to [0, D] (§10; the reporter did not clamp).
    pub fn valid_layers(&self) -> usize {
        usize::try_from(self.cs_layer().max(0))
            .unwrap_or(0)
            .min(self.call_depth())
    }
    /// Appends the stack, leaf first: pc, then cs[0..cs_layer] up to the
    /// first 0 entry (§10).
    pub fn push_stack(&self, out: &mut Vec<u32>) {
        out.push(self.pc());
        for i in 0..self.valid_layers() {
            let address = self.field(RECORD_FIXED_SIZE as usize + 4 * i);
            if address == 0 {
                break;
            }
            out.push(address);
        }
    }
}

/// One sample file: its head, layout and tables.
pub struct ApsFile {
    pub path: PathBuf,
    pub cpu: Option<u32>,
    pub len: u64,
    pub head: FileHead,
    pub layout: Layout,
    pub modules: Vec<ModuleEntry>,
    pub vmas: Vec<VmaEntry>,
}

impl ApsFile {
    fn open<'a>(input: &'a Input, options: &ReadOptions) -> Result<(ApsFile, Source<'a>)> {
        let path = input.name();
        let mut src = Source::new(input);
        let len = src.len();
        if len < FILE_HEAD_SIZE {
            return Err(Error::format(
                path,
                len,
                format!(
                    "the file has {len} bytes, fewer than the {FILE_HEAD_SIZE}-byte APS file head"
                ),
            ));
        }
        let mut head_bytes = [0u8; FILE_HEAD_SIZE as usize];
        src.read_at(path, 0, &mut head_bytes)?;
        let head = FileHead::parse(path, &head_bytes)?;
        let layout = solve_layout(path, &mut src, &head, options)?;
        let (modules, vmas) = parse_tables(path, &mut src, &layout)?;
        let file = ApsFile {
            path: path.to_path_buf(),
            cpu: cpu_from_file_name(path),
            len,
            head,
            layout,
            modules,
            vmas,
        };
        Ok((file, src))
    }

    /// Calls `visit` on every record, reading a few megabytes at a time.
    fn for_each_record(
        &self,
        src: &mut Source<'_>,
        mut visit: impl FnMut(Record<'_>),
    ) -> Result<()> {
        let size = self.layout.record_size();
        let total = u64::from(self.head.index);
        let per_chunk = (CHUNK_BYTES / size).clamp(1, total.max(1));
        // At most the records' bytes, which the layout put inside the file.
        let mut buf = vec![0u8; (per_chunk * size) as usize];
        let mut done = 0u64;
        while done < total {
            let n = per_chunk.min(total - done);
            let bytes = &mut buf[..(n * size) as usize];
            src.read_at(&self.path, FILE_HEAD_SIZE + done * size, bytes)?;
            for record in bytes.chunks_exact(size as usize) {
                visit(Record {
                    bytes: record,
                    endian: self.head.endian,
                });
            }
            done += n;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// pid_info (§7).

/// Thread and process names from `pid_info` (`pid tid tty time name` lines).
#[derive(Debug, Default, Clone)]
pub struct PidInfo {
    threads: HashMap<(i64, i64), String>,
    by_tid: HashMap<i64, String>,
}

impl PidInfo {
    pub fn parse(text: &str) -> PidInfo {
        let mut info = PidInfo::default();
        for line in text.lines() {
            let columns: Vec<&str> = line.split_whitespace().collect();
            // Header lines (`PID TID TTY TIME CMD`) and short lines carry no thread.
            let (Some(pid), Some(tid)) = (
                columns.first().and_then(|c| c.parse::<i64>().ok()),
                columns.get(1).and_then(|c| c.parse::<i64>().ok()),
            ) else {
                continue;
            };
            let Some(name) = columns
                .get(4..)
                .filter(|n| !n.is_empty())
                .map(|n| n.join(" "))
            else {
                continue;
            };
            info.threads
                .entry((pid, tid))
                .or_insert_with(|| name.clone());
            info.by_tid.entry(tid).or_insert(name);
        }
        info
    }

    pub fn load(path: &Path) -> Result<PidInfo> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Ok(PidInfo::parse(&String::from_utf8_lossy(&bytes)))
    }

    pub fn thread_name(&self, pid: i64, tid: i64) -> Option<&str> {
        self.threads
            .get(&(pid, tid))
            .or_else(|| self.by_tid.get(&tid))
            .map(String::as_str)
    }

    /// The name of the process: its main thread's (tid = pid).
    pub fn process_name(&self, pid: i64) -> Option<&str> {
        self.threads.get(&(pid, pid)).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
}

// ---------------------------------------------------------------------------
// Inputs: files, capture directories, pid_info.

/// A sample file to read: one given as an input, or one found in a
/// capture directory (opened when its turn comes, so that one decompressed
/// file at a time is in memory).
enum SampleFile<'a> {
    Given(&'a Input),
    Found(PathBuf),
}

struct Inputs<'a> {
    files: Vec<SampleFile<'a>>,
    pid_info: Option<PathBuf>,
}

impl SampleFile<'_> {
    /// Runs `f` on the opened file.
    fn with<T>(&self, options: &ReadOptions, f: impl FnOnce(&Input) -> Result<T>) -> Result<T> {
        match self {
            SampleFile::Given(input) => f(input),
            SampleFile::Found(path) => f(&Input::open(path, options.max_input_size)?),
        }
    }
}

/// Expands capture directories into their `sample_cpu_*` files and finds the
/// `pid_info` file: the option's, else the one in the capture directory (or
/// next to the sample files), as the reporter reads it from its data dir.
fn expand_inputs<'a>(inputs: &'a [Input], options: &ReadOptions) -> Result<Inputs<'a>> {
    let mut files = Vec::new();
    let mut dirs = BTreeSet::new();
    for input in inputs {
        let path = input.name();
        if input.is_dir() {
            let found = sample_files_in(path)?;
            if found.is_empty() {
                return Err(Error::unsupported(
                    path,
                    "the directory holds no APS sample files (sample_cpu_<N>_<date>_<time>)",
                ));
            }
            files.extend(found.into_iter().map(SampleFile::Found));
            dirs.insert(path.to_path_buf());
        } else {
            files.push(SampleFile::Given(input));
            dirs.insert(path.parent().map(Path::to_path_buf).unwrap_or_default());
        }
    }
    let pid_info = match &options.aps.pid_info {
        Some(p) => Some(p.clone()),
        None if dirs.len() == 1 => dirs
            .iter()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".").join("pid_info")
                } else {
                    d.join("pid_info")
                }
            })
            .find(|p| p.is_file()),
        None => None,
    };
    Ok(Inputs { files, pid_info })
}

// ---------------------------------------------------------------------------
// Counting records and building the profile.

/// Records of one file counted per distinct `[user, pid, tid, event,
/// stack…]` key, sorted by key.
struct FileCounts {
    entries: Vec<(Box<[u32]>, u64)>,
    dropped_idle: u64,
}

fn count_records(file: &ApsFile, src: &mut Source<'_>, drop_idle: bool) -> Result<FileCounts> {
    // FxHash, as the IR's tables: about twice as fast as SipHash on these keys.
    let mut counts: FxHashMap<Box<[u32]>, u64> = FxHashMap::default();
    let mut key: Vec<u32> = Vec::with_capacity(4 + 1 + file.layout.call_depth);
    let mut dropped_idle = 0u64;
    file.for_each_record(src, |r| {
        if drop_idle && r.pid() == 0 {
            dropped_idle += 1;
            return;
        }
        key.clear();
        key.extend([
            u32::from(r.user()),
            r.pid() as u32,
            r.tid() as u32,
            r.event(),
        ]);
        r.push_stack(&mut key);
        match counts.get_mut(key.as_slice()) {
            Some(n) => *n += 1,
            None => {
                counts.insert(key.as_slice().into(), 1);
            }
        }
    })?;
    let mut entries: Vec<(Box<[u32]>, u64)> = counts.into_iter().collect();
    // Sorted, so that outputs do not depend on hash order.
    entries.sort_unstable();
    Ok(FileCounts {
        entries,
        dropped_idle,
    })
}

/// What a mapping stands for, to find and symbolize its image.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Image {
    /// A merged kernel module range (or vmlinux).
    Kernel { name: String, start: u32 },
    /// A process vma.
    User {
        file: String,
        start: u32,
        is_sre: bool,
    },
}

/// A mapping key: one per merged module range, one per (pid, vma).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum MappingKey {
    Kernel { name: String, start: u32, end: u32 },
    User { pid: i32, vma: VmaEntry },
}

/// Address ranges (inclusive ends) sorted by start, with the running maximum
/// of the ends, so that a lookup only walks back over ranges that overlap.
/// Each range carries an index; where ranges overlap the lowest index wins
/// (the reporter keeps the first inserted entry).
#[derive(Default)]
struct RangeIndex {
    ranges: Vec<(u32, u32, usize)>,
    max_end: Vec<u32>,
}

impl RangeIndex {
    fn new(mut ranges: Vec<(u32, u32, usize)>) -> RangeIndex {
        ranges.sort_unstable();
        let mut max_end = Vec::with_capacity(ranges.len());
        let mut m = 0;
        for r in &ranges {
            m = m.max(r.1);
            max_end.push(m);
        }
        RangeIndex { ranges, max_end }
    }

    fn find(&self, address: u32) -> Option<usize> {
        let mut i = self.ranges.partition_point(|r| r.0 <= address);
        let mut best: Option<usize> = None;
        while i > 0 {
            i -= 1;
            if self.max_end.get(i).is_none_or(|&m| m < address) {
                break;
            }
            if let Some(&(_, end, index)) = self.ranges.get(i) {
                if end >= address && best.is_none_or(|b| index < b) {
                    best = Some(index);
                }
            }
        }
        best
    }
}

/// Builds mappings and locations across files.
struct Mapper {
    ids: HashMap<MappingKey, MappingId>,
    images: Vec<Image>,
}

impl Mapper {
    fn mapping(&mut self, profile: &mut Profile, key: MappingKey) -> MappingId {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let (start, end, filename, image) = match &key {
            MappingKey::Kernel { name, start, end } => (
                *start,
                *end,
                module_file_name(name),
                Image::Kernel {
                    name: name.clone(),
                    start: *start,
                },
            ),
            MappingKey::User { vma, .. } => (
                vma.start,
                vma.end,
                vma.file.clone(),
                Image::User {
                    file: vma.file.clone(),
                    start: vma.start,
                    is_sre: vma.is_sre,
                },
            ),
        };
        // Distinct, not shared: equal ranges of two processes stay two
        // mappings (pprof mappings are global, processes overlap, §10).
        let filename = profile.intern(&filename);
        let id = profile.add_distinct_mapping(Mapping::new(
            u64::from(start),
            u64::from(end) + 1,
            0,
            filename,
            0,
        ));
        self.ids.insert(key, id);
        self.images.push(image);
        id
    }
}

/// The mapping lookups of one file. Mappings are made when a frame first
/// falls in them, so processes and modules without samples add nothing.
struct FileMaps {
    keys: Vec<MappingKey>,
    ids: Vec<Option<MappingId>>,
    kernel: RangeIndex,
    user: HashMap<i32, RangeIndex>,
}

impl FileMaps {
    fn new(file: &ApsFile) -> FileMaps {
        let mut keys = Vec::new();
        let mut kernel = Vec::new();
        for m in merged_modules(&file.modules) {
            kernel.push((m.start, m.end, keys.len()));
            keys.push(MappingKey::Kernel {
                start: m.start,
                end: m.end,
                name: m.name,
            });
        }
        let mut user: HashMap<i32, Vec<(u32, u32, usize)>> = HashMap::new();
        for vma in &file.vmas {
            user.entry(vma.pid)
                .or_default()
                .push((vma.start, vma.end, keys.len()));
            keys.push(MappingKey::User {
                pid: vma.pid,
                vma: vma.clone(),
            });
        }
        FileMaps {
            ids: vec![None; keys.len()],
            keys,
            kernel: RangeIndex::new(kernel),
            user: user
                .into_iter()
                .map(|(pid, r)| (pid, RangeIndex::new(r)))
                .collect(),
        }
    }

    /// The mapping of a frame: by (pid, address) for user frames, by address
    /// among the kernel's module ranges for kernel frames.
    fn find(
        &mut self,
        profile: &mut Profile,
        mapper: &mut Mapper,
        user: bool,
        pid: i32,
        address: u32,
    ) -> Option<MappingId> {
        let index = if user {
            self.user.get(&pid)?.find(address)?
        } else {
            self.kernel.find(address)?
        };
        let slot = self.ids.get_mut(index)?;
        if slot.is_none() {
            let key = self.keys.get(index)?.clone();
            *slot = Some(mapper.mapping(profile, key));
        }
        *slot
    }
}

/// The process name of a pid from its vmas: the basename of its
/// lowest-addressed one, the reporter's main executable (§5).
fn main_executables(files: &[ApsFile]) -> HashMap<i32, String> {
    let mut lowest: HashMap<i32, (u32, &str)> = HashMap::new();
    for vma in files.iter().flat_map(|f| &f.vmas) {
        let slot = lowest.entry(vma.pid).or_insert((vma.start, &vma.file));
        if vma.start < slot.0 {
            *slot = (vma.start, &vma.file);
        }
    }
    lowest
        .into_iter()
        .filter(|(_, (_, file))| !file.is_empty())
        .map(|(pid, (_, file))| (pid, basename(file).to_owned()))
        .collect()
}

/// Reads APS sample files (and capture directories) into one profile.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let inputs = expand_inputs(inputs, options)?;
    let pid_info = inputs.pid_info.as_deref().map(PidInfo::load).transpose()?;
    let mut files = Vec::with_capacity(inputs.files.len());
    let mut counts = Vec::with_capacity(inputs.files.len());
    for sample_file in &inputs.files {
        sample_file.with(options, |input| {
            let (file, mut src) = ApsFile::open(input, options)?;
            counts.push(count_records(&file, &mut src, options.aps.drop_idle)?);
            files.push(file);
            Ok(())
        })?;
    }
    let (mut profile, images) = build_profile(
        &files,
        counts,
        pid_info.as_ref(),
        inputs.pid_info.as_deref(),
    );
    if let Some(root) = &options.aps.image_root {
        symbolize_images(&mut profile, root, &images);
    }
    Ok(profile)
}

/// The profile of the counted records, and the image of each mapping.
fn build_profile(
    files: &[ApsFile],
    counts: Vec<FileCounts>,
    pid_info: Option<&PidInfo>,
    pid_info_path: Option<&Path>,
) -> (Profile, Vec<Image>) {
    let mut profile = Profile::new(&[("samples", "count")]);
    // Samples per event id, to name the sample types and the period.
    let mut events: BTreeMap<u32, u64> = BTreeMap::new();
    for (key, n) in counts.iter().flat_map(|c| &c.entries) {
        if let Some(&event) = key.get(3) {
            let slot = events.entry(event).or_insert(0);
            *slot = slot.saturating_add(*n);
        }
    }
    let mut event_type = HashMap::new();
    for &event in events.keys() {
        event_type.insert(event, profile.add_sample_type(&event_name(event), "events"));
    }
    // pprof has one period: reset_value, in the most sampled event.
    let main_event = events
        .iter()
        .max_by_key(|&(id, n)| (*n, std::cmp::Reverse(*id)))
        .map(|(&id, _)| event_name(id));
    if let (Some(name), Some(file)) = (main_event, files.first()) {
        profile.set_period(
            &name,
            "events",
            i64::try_from(file.head.reset_value).unwrap_or(i64::MAX),
        );
    }

    // Time range: the earliest begin to the latest end.
    if let Some(begin) = files.iter().map(|f| f.head.begin_nanos()).min() {
        let end = files
            .iter()
            .map(|f| f.head.end_nanos())
            .max()
            .unwrap_or(begin);
        profile.time_nanos = begin;
        profile.duration_nanos = end.saturating_sub(begin).max(0);
    }
    let several = files.len() > 1;
    profile.add_metadata("format", "APS sample file");
    for file in files {
        let prefix = if several {
            format!(
                "{} ",
                file.path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            )
        } else {
            String::new()
        };
        let h = &file.head;
        let l = &file.layout;
        if let Some(cpu) = file.cpu {
            profile.add_metadata(format!("{prefix}cpu"), cpu.to_string());
        }
        profile.add_metadata(format!("{prefix}byte order"), h.endian.name());
        profile.add_metadata(
            format!("{prefix}call depth"),
            format!("{} ({})", l.call_depth, l.call_depth_origin.describe()),
        );
        profile.add_metadata(
            format!("{prefix}path length"),
            format!("{} ({})", l.path_len, l.path_len_origin.describe()),
        );
        profile.add_metadata(format!("{prefix}reset_value"), h.reset_value.to_string());
        profile.add_metadata(format!("{prefix}stBeginTime"), h.st_begin_time.to_string());
        profile.add_metadata(format!("{prefix}stEndTime"), h.st_end_time.to_string());
        profile.add_metadata(format!("{prefix}cputype"), h.cputype.to_string());
    }
    if let Some(p) = pid_info_path {
        profile.add_metadata("pid_info", p.display().to_string());
    }
    profile.comments.push(
        "APS: stacks are pc then cs[0..cs_layer], leaf first; events = samples x reset_value"
            .to_owned(),
    );
    let dropped: u64 = counts.iter().map(|c| c.dropped_idle).sum();
    if dropped > 0 {
        profile
            .comments
            .push(format!("APS: {dropped} samples of pid 0 (idle) left out"));
    }
    let sre: BTreeSet<(i32, &str)> = files
        .iter()
        .flat_map(|f| &f.vmas)
        .filter(|v| v.is_sre)
        .map(|v| (v.pid, v.file.as_str()))
        .collect();
    for (pid, file) in sre {
        profile
            .comments
            .push(format!("APS: pid {pid}: {file} is an SRE image"));
    }

    let executables = main_executables(files);
    let mut mapper = Mapper {
        ids: HashMap::new(),
        images: Vec::new(),
    };
    let ntypes = profile.sample_types.len();
    let mut stack = Vec::new();
    let mut labels: Vec<Label> = Vec::new();
    for (file, file_counts) in files.iter().zip(counts) {
        let mut maps = FileMaps::new(file);
        for (key, count) in file_counts.entries {
            let [user, pid, tid, event, frames @ ..] = &*key else {
                continue;
            };
            let (user, pid, tid) = (*user != 0, *pid as i32, *tid as i32);
            stack.clear();
            for (i, &address) in frames.iter().enumerate() {
                let mapping = maps.find(&mut profile, &mut mapper, user, pid, address);
                stack.push(profile.address_location(mapping, u64::from(address), i > 0));
            }
            labels.clear();
            labels.push(profile.label_num("pid", i64::from(pid), ""));
            labels.push(profile.label_num("tid", i64::from(tid), ""));
            if let Some(cpu) = file.cpu {
                labels.push(profile.label_num("cpu", i64::from(cpu), ""));
            }
            labels.push(profile.label_str("mode", if user { "user" } else { "kernel" }));
            let process = pid_info
                .and_then(|p| p.process_name(i64::from(pid)))
                .or_else(|| executables.get(&pid).map(String::as_str));
            if let Some(name) = process {
                labels.push(profile.label_str("process_name", name));
            }
            if let Some(name) = pid_info.and_then(|p| p.thread_name(i64::from(pid), i64::from(tid)))
            {
                labels.push(profile.label_str("thread_name", name));
            }
            let mut values = vec![0i64; ntypes];
            let samples = i64::try_from(count).unwrap_or(i64::MAX);
            values[0] = samples;
            if let Some(&t) = event_type.get(event) {
                let reset = i64::try_from(file.head.reset_value).unwrap_or(i64::MAX);
                values[t] = samples.saturating_mul(reset);
            }
            profile.add_sample(&stack, &values, &labels);
        }
    }
    (profile, mapper.images)
}

/// Where a process image is in the copy of the board's file system: its path
/// under the root, with ':' replaced by '_' as the reporter does (§6).
fn user_image_path(root: &Path, file: &str) -> PathBuf {
    let relative = file.trim_start_matches('/').replace(':', "_");
    root.join(relative)
}

/// Kernel image files under the root by normalized name (`vmlinux`, or a
/// module name with '-' read as '_'), found by walking the tree once.
fn kernel_images(root: &Path) -> HashMap<String, PathBuf> {
    let mut found = HashMap::new();
    for known in ["vmlinux", "boot/vmlinux"] {
        let path = root.join(known);
        if path.is_file() {
            found.insert("vmlinux".to_owned(), path);
            break;
        }
    }
    let mut pending = vec![(root.to_path_buf(), 0usize)];
    let mut visited = 0usize;
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > 1_000_000 {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < 16 {
                pending.push((path, depth + 1));
            } else if kind.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let key = if name == "vmlinux" {
                    name
                } else if let Some(module) = name.strip_suffix(".ko") {
                    module.replace('-', "_")
                } else {
                    continue;
                };
                found.entry(key).or_insert(path);
            }
        }
    }
    found
}

/// The address of the `.text` section of an ELF file.
fn text_section_address(path: &Path) -> Option<u64> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    file.section_by_name(".text").map(|s| s.address())
}

/// Symbolizes every mapping that has locations with the ELF files found
/// under `root` (§10): process images through their program headers (file
/// offset `pc − vm_start`), SRE images and modules from `.text`, vmlinux
/// by absolute address. Caller frames are looked up at `address − 1`.
fn symbolize_images(profile: &mut Profile, root: &Path, images: &[Image]) {
    let used: BTreeSet<MappingId> = profile.locations.iter().filter_map(|l| l.mapping).collect();
    let mut binaries: HashMap<PathBuf, Option<Binary>> = HashMap::new();
    let mut kernel: Option<HashMap<String, PathBuf>> = None;
    let mut missing = BTreeSet::new();
    let mut unreadable = BTreeSet::new();
    for id in used {
        let Some(image) = images.get(id as usize) else {
            continue;
        };
        let path = match image {
            Image::User { file, .. } => Some(user_image_path(root, file)).filter(|p| p.is_file()),
            Image::Kernel { name, .. } => kernel
                .get_or_insert_with(|| kernel_images(root))
                .get(&name.replace('-', "_"))
                .cloned(),
        };
        let Some(path) = path else {
            missing.insert(match image {
                Image::User { file, .. } => file.clone(),
                Image::Kernel { name, .. } => module_file_name(name),
            });
            continue;
        };
        let binary = binaries
            .entry(path.clone())
            .or_insert_with(|| Binary::open(&path).ok());
        let Some(binary) = binary.as_ref() else {
            unreadable.insert(path.display().to_string());
            continue;
        };
        let to_svma: Box<dyn Fn(u64) -> Option<u64>> = match image {
            Image::User {
                start,
                is_sre: false,
                ..
            } => {
                let start = u64::from(*start);
                Box::new(move |a: u64| {
                    a.checked_sub(start)
                        .and_then(|off| binary.file_offset_to_svma(off))
                })
            }
            Image::Kernel { name, .. } if name == "vmlinux" => Box::new(Some),
            Image::User { start, .. } | Image::Kernel { start, .. } => {
                let Some(text) = text_section_address(&path) else {
                    unreadable.insert(format!("{} (no .text section)", path.display()));
                    continue;
                };
                let start = u64::from(*start);
                Box::new(move |a: u64| a.checked_sub(start).map(|off| text + off))
            }
        };
        symbolize::symbolize_mapping(profile, id, binary, &*to_svma);
        if !binary.build_id.is_empty() {
            let build_id = profile.intern(&binary.build_id);
            if let Some(m) = profile.mappings.get_mut(id as usize) {
                m.build_id = build_id;
            }
        }
    }
    for file in missing {
        profile
            .comments
            .push(format!("APS: no image for {file} under {}", root.display()));
    }
    for file in unreadable {
        profile
            .comments
            .push(format!("APS: cannot symbolize with {file}"));
    }
}

/// Describes the inputs: layout, head fields, tables and record counts.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<String> {
    let inputs = expand_inputs(inputs, options)?;
    let mut out = String::new();
    for sample_file in &inputs.files {
        sample_file.with(options, |input| describe_file(&mut out, input, options))?;
    }
    if let Some(p) = &inputs.pid_info {
        let info = PidInfo::load(p)?;
        let _ = writeln!(
            out,
            "pid_info:        {} ({} threads)",
            p.display(),
            info.len()
        );
    }
    Ok(out)
}

/// The `info` text of one sample file.
fn describe_file(out: &mut String, input: &Input, options: &ReadOptions) -> Result<()> {
    let path = input.name();
    {
        let (file, mut src) = ApsFile::open(input, options)?;
        let h = &file.head;
        let l = &file.layout;
        let _ = writeln!(out, "{}:", path.display());
        let _ = writeln!(out, "  format:        APS sample file");
        match file.cpu {
            Some(cpu) => {
                let _ = writeln!(out, "  cpu:           {cpu} (from the file name)");
            }
            None => {
                let _ = writeln!(
                    out,
                    "  cpu:           unknown (the file name is not sample_cpu_<N>_...)"
                );
            }
        }
        let _ = writeln!(
            out,
            "  byte order:    head and records {}, module table {}, vma table {}",
            h.endian.name(),
            l.module_endian.name(),
            l.vma_endian.name()
        );
        let _ = writeln!(
            out,
            "  call depth:    {} ({})",
            l.call_depth,
            l.call_depth_origin.describe()
        );
        let _ = writeln!(
            out,
            "  path length:   {} ({})",
            l.path_len,
            l.path_len_origin.describe()
        );
        let _ = writeln!(out, "  record size:   {} bytes", l.record_size());
        let _ = writeln!(out, "  records:       {}", h.index);
        let _ = writeln!(
            out,
            "  begintime:     {}.{:06} s (Unix time)",
            h.begin_sec, h.begin_usec
        );
        let _ = writeln!(
            out,
            "  endtime:       {}.{:06} s (Unix time)",
            h.end_sec, h.end_usec
        );
        let _ = writeln!(
            out,
            "  duration:      {:.6} s",
            (h.end_nanos() - h.begin_nanos()) as f64 / 1e9
        );
        let _ = writeln!(out, "  stBeginTime:   {} ticks", h.st_begin_time);
        let _ = writeln!(out, "  stEndTime:     {} ticks", h.st_end_time);
        let _ = writeln!(out, "  reset_value:   {} events per sample", h.reset_value);
        let _ = writeln!(out, "  cputype:       {}", h.cputype);
        let merged = merged_modules(&file.modules);
        let _ = writeln!(
            out,
            "  modules:       {} entries at byte {}, {} merged ranges",
            file.modules.len(),
            l.module_offset,
            merged.len()
        );
        for m in &merged {
            let _ = writeln!(
                out,
                "    {:#010x}..={:#010x} {}",
                m.start,
                m.end,
                module_file_name(&m.name)
            );
        }
        let pids: BTreeSet<i32> = file.vmas.iter().map(|v| v.pid).collect();
        let _ = writeln!(
            out,
            "  vmas:          {} entries at byte {} for {} processes",
            file.vmas.len(),
            l.vma_offset,
            pids.len()
        );
        let mut user = 0u64;
        let mut clamped = 0u64;
        let mut idle = 0u64;
        let mut per_event: BTreeMap<u32, u64> = BTreeMap::new();
        let depth = l.call_depth;
        file.for_each_record(&mut src, |r| {
            user += u64::from(r.user());
            idle += u64::from(r.pid() == 0);
            clamped += u64::from(r.cs_layer() < 0 || r.cs_layer() as u64 > depth as u64);
            *per_event.entry(r.event()).or_insert(0) += 1;
        })?;
        let total = u64::from(h.index);
        let _ = writeln!(
            out,
            "  samples:       {} user, {} kernel, {} of pid 0 (idle)",
            user,
            total - user,
            idle
        );
        for (event, n) in &per_event {
            let _ = writeln!(
                out,
                "    {} (event {event}): {n} samples",
                event_name(*event)
            );
        }
        if clamped > 0 {
            let _ = writeln!(
                out,
                "  warning:       {clamped} records have cs_layer outside 0..={depth} (clamped)"
            );
        }
    }
    Ok(())
}
