//! Solving the layout (§10): the call depth D and the path length P are
//! compile-time constants of the board's collector that the file does not
//! record, so they are found from where the module and vma magics sit and
//! where the file ends.

use std::path::Path;

use super::head::{
    FileHead, DEFAULT_CALL_DEPTH, DEFAULT_PATH_LEN, FILE_HEAD_SIZE, MODULE_HEAD_MAGIC,
    RECORD_FIXED_SIZE, TABLE_HEAD_SIZE, VMA_HEAD_MAGIC,
};
use super::source::Source;
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::options::ReadOptions;

/// Call depths tried when detecting D (§10: 1..64; 0 = no call stacks).
pub(super) const SEARCHED_CALL_DEPTHS: std::ops::RangeInclusive<usize> = 0..=64;
/// Largest path length tried when detecting P (Linux `PATH_MAX`).
pub(super) const MAX_SEARCHED_PATH_LEN: usize = 4096;
/// Largest values accepted from `--aps-call-depth` / `--aps-path-len`.
pub(super) const MAX_GIVEN_CALL_DEPTH: usize = 1 << 16;
pub(super) const MAX_GIVEN_PATH_LEN: usize = 1 << 20;
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
    pub(super) fn describe(self) -> &'static str {
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
    /// Call depth D: caller addresses per record.
    pub call_depth: usize,
    /// Where D came from.
    pub call_depth_origin: Origin,
    /// Path length P of module and vma entries.
    pub path_len: usize,
    /// Where P came from.
    pub path_len_origin: Origin,
    /// Byte offset of the module table head.
    pub module_offset: u64,
    /// Byte order of the module table.
    pub module_endian: Endian,
    /// Module entries.
    pub module_count: u32,
    /// Byte offset of the vma table head.
    pub vma_offset: u64,
    /// Byte order of the vma table.
    pub vma_endian: Endian,
    /// Vma entries.
    pub vma_count: u32,
}

impl Layout {
    /// Bytes of one record: `36 + 4·D`.
    pub fn record_size(&self) -> u64 {
        RECORD_FIXED_SIZE + 4 * self.call_depth as u64
    }
}

/// `36 + 4·D`, `None` on overflow.
pub(super) fn record_size(depth: usize) -> Option<u64> {
    (depth as u64)
        .checked_mul(4)?
        .checked_add(RECORD_FIXED_SIZE)
}

/// What the layout search found for one call depth.
pub(super) enum Candidate {
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
pub(super) fn solve_layout(
    path: &Path,
    src: &mut Source<'_>,
    head: &FileHead,
    options: &ReadOptions,
) -> Result<Layout> {
    check_given(options)?;
    check_records_fit(path, src.len(), head, options)?;
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
    if let Some(layout) = the_exact_fit(path, &candidates)? {
        return Ok(layout);
    }
    Err(no_fit_error(path, src, head, &candidates)?)
}

/// Refuses call depths and path lengths beyond what profconv reads.
fn check_given(options: &ReadOptions) -> Result<()> {
    if let Some(d) = options.aps.call_depth.filter(|d| *d > MAX_GIVEN_CALL_DEPTH) {
        return Err(Error::Usage(format!(
            "--aps-call-depth {d} is beyond {MAX_GIVEN_CALL_DEPTH}"
        )));
    }
    let bad_path_len = |p: &usize| *p == 0 || *p > MAX_GIVEN_PATH_LEN;
    if let Some(p) = options.aps.path_len.filter(bad_path_len) {
        return Err(Error::Usage(format!(
            "--aps-path-len {p} is not in 1..={MAX_GIVEN_PATH_LEN}"
        )));
    }
    Ok(())
}

/// Even the shortest records must fit before the two table heads.
fn check_records_fit(path: &Path, len: u64, head: &FileHead, options: &ReadOptions) -> Result<()> {
    let min_record = options
        .aps
        .call_depth
        .and_then(record_size)
        .unwrap_or(RECORD_FIXED_SIZE);
    let needed = u64::from(head.index)
        .checked_mul(min_record)
        .and_then(|b| b.checked_add(FILE_HEAD_SIZE + 2 * TABLE_HEAD_SIZE));
    if needed.is_some_and(|n| n <= len) {
        return Ok(());
    }
    Err(Error::format(
        path,
        4,
        format!(
            "the head announces {} records of at least {min_record} bytes, which do not fit in the {len} bytes of the file",
            head.index
        ),
    ))
}

/// The one layout that fits exactly, if any; several are an error.
fn the_exact_fit(path: &Path, candidates: &[Candidate]) -> Result<Option<Layout>> {
    let exact: Vec<&Layout> = candidates
        .iter()
        .filter_map(|c| match c {
            Candidate::Exact(l) => Some(l),
            Candidate::WrongEnd { .. } | Candidate::NoVmaTable { .. } => None,
        })
        .collect();
    match exact.as_slice() {
        [one] => Ok(Some((*one).clone())),
        [] => Ok(None),
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
            Err(Error::format(
                path,
                0,
                format!(
                    "the layout is ambiguous: {} all fit this file; choose one with --aps-call-depth and --aps-path-len",
                    list.join(", ")
                ),
            ))
        }
    }
}

/// No exact fit: explains the closest thing found.
fn no_fit_error(
    path: &Path,
    src: &mut Source<'_>,
    head: &FileHead,
    candidates: &[Candidate],
) -> Result<Error> {
    if let Some(&Candidate::WrongEnd {
        depth,
        path_len,
        end,
    }) = candidates
        .iter()
        .find(|c| matches!(c, Candidate::WrongEnd { .. }))
    {
        return Ok(wrong_end_error(path, src.len(), depth, path_len, end));
    }
    if let Some(Candidate::NoVmaTable {
        depth,
        module_offset,
        module_count,
    }) = candidates.first()
    {
        return Ok(Error::format(
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
    magic_error(
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
    )
}

/// The tables are in place for `depth` and `path_len`, but the file does
/// not end where the vma table does.
fn wrong_end_error(path: &Path, len: u64, depth: usize, path_len: usize, end: u64) -> Error {
    let what = if end < len {
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
    Error::format(
        path,
        end.min(len),
        format!(
            "with call depth {depth} and path length {path_len} the module and vma magics are in place and the file should end at byte {end}, but it has {len} bytes: {what}"
        ),
    )
}

/// The error for a table magic that is not where the layout puts it, with
/// the word found there.
pub(super) fn magic_error(
    path: &Path,
    src: &mut Source<'_>,
    offset: u64,
    table: &str,
    magic: u32,
    after: &str,
    note: &str,
) -> Result<Error> {
    let found = match src.u32_at(offset, Endian::Big)? {
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
pub(super) fn try_depth(
    path: &Path,
    src: &mut Source<'_>,
    head: &FileHead,
    depth: usize,
    depth_origin: Origin,
    options: &ReadOptions,
) -> Result<Option<Candidate>> {
    let Some(module_offset) = record_size(depth)
        .and_then(|r| r.checked_mul(u64::from(head.index)))
        .and_then(|b| b.checked_add(FILE_HEAD_SIZE))
    else {
        return Ok(None);
    };
    let Some((module_endian, module_count)) = src.table_head(module_offset, MODULE_HEAD_MAGIC)?
    else {
        if options.aps.call_depth.is_some() {
            let after = format!(
                "{} records of {} bytes (call depth {depth})",
                head.index,
                record_size(depth).unwrap_or(0)
            );
            let e = magic_error(
                path,
                src,
                module_offset,
                "module table",
                MODULE_HEAD_MAGIC,
                &after,
                "",
            );
            return Err(e?);
        }
        return Ok(None);
    };
    let probe = Probe {
        path,
        len: src.len(),
        depth,
        depth_origin,
        module_offset,
        module_endian,
        module_count,
    };
    if let Some(p) = options.aps.path_len {
        return probe.given_path_len(src, p).map(Some);
    }
    if module_count == 0 {
        return probe.without_modules(src).map(Some);
    }
    probe.search_path_len(src).map(Some)
}

/// The vma table head found for one path length, and where the file would end.
struct VmaHead {
    offset: u64,
    endian: Endian,
    count: u32,
    end: u64,
}

/// What is known once the module magic is found after the records of one
/// call depth: the search for P (§10).
struct Probe<'a> {
    path: &'a Path,
    len: u64,
    depth: usize,
    depth_origin: Origin,
    module_offset: u64,
    module_endian: Endian,
    module_count: u32,
}

impl Probe<'_> {
    /// Where the vma head is for path length `p` (saturating).
    fn vma_offset(&self, p: usize) -> u64 {
        u64::from(self.module_count)
            .saturating_mul(8 + p as u64)
            .saturating_add(self.module_offset + TABLE_HEAD_SIZE)
    }

    /// The vma head for path length `p`, if its magic is there.
    fn vma_at(&self, src: &mut Source<'_>, p: usize) -> Result<Option<VmaHead>> {
        // A saturated offset lies past the end, where no head fits.
        let offset = self.vma_offset(p);
        let Some((endian, count)) = src.table_head(offset, VMA_HEAD_MAGIC)? else {
            return Ok(None);
        };
        let end = u64::from(count)
            .checked_mul(16 + p as u64)
            .and_then(|b| b.checked_add(offset + TABLE_HEAD_SIZE))
            .unwrap_or(u64::MAX);
        Ok(Some(VmaHead {
            offset,
            endian,
            count,
            end,
        }))
    }

    fn layout(&self, p: usize, p_origin: Origin, vma: &VmaHead) -> Layout {
        Layout {
            call_depth: self.depth,
            call_depth_origin: self.depth_origin,
            path_len: p,
            path_len_origin: p_origin,
            module_offset: self.module_offset,
            module_endian: self.module_endian,
            module_count: self.module_count,
            vma_offset: vma.offset,
            vma_endian: vma.endian,
            vma_count: vma.count,
        }
    }

    /// Exact when the vma table ends the file, else how far off it ends.
    fn candidate(&self, p: usize, p_origin: Origin, vma: &VmaHead) -> Candidate {
        if vma.end == self.len {
            Candidate::Exact(self.layout(p, p_origin, vma))
        } else {
            self.wrong_end(p, vma.end)
        }
    }

    fn wrong_end(&self, path_len: usize, end: u64) -> Candidate {
        Candidate::WrongEnd {
            depth: self.depth,
            path_len,
            end,
        }
    }

    fn no_vma_table(&self) -> Candidate {
        Candidate::NoVmaTable {
            depth: self.depth,
            module_offset: self.module_offset,
            module_count: self.module_count,
        }
    }

    /// P from the command line: the vma magic must be where it puts it.
    fn given_path_len(&self, src: &mut Source<'_>, p: usize) -> Result<Candidate> {
        if let Some(vma) = self.vma_at(src, p)? {
            return Ok(self.candidate(p, Origin::Given, &vma));
        }
        let after = format!(
            "{} module entries of {} bytes (path length {p})",
            self.module_count,
            8 + p
        );
        let offset = self.vma_offset(p);
        let e = magic_error(
            self.path,
            src,
            offset,
            "vma table",
            VMA_HEAD_MAGIC,
            &after,
            "",
        );
        Err(e?)
    }

    /// No modules: the vma head is at a fixed place and P follows from the
    /// file size.
    fn without_modules(&self, src: &mut Source<'_>) -> Result<Candidate> {
        let Some(vma) = self.vma_at(src, DEFAULT_PATH_LEN)? else {
            return Ok(self.no_vma_table());
        };
        let body_start = vma.offset + TABLE_HEAD_SIZE;
        if vma.count == 0 {
            let empty = VmaHead {
                end: body_start,
                ..vma
            };
            return Ok(self.candidate(DEFAULT_PATH_LEN, Origin::Default, &empty));
        }
        let body = self.len - body_start;
        let entry = body / u64::from(vma.count);
        let whole = body % u64::from(vma.count) == 0;
        if whole && entry > 16 && entry - 16 <= MAX_GIVEN_PATH_LEN as u64 {
            let p = (entry - 16) as usize;
            return Ok(Candidate::Exact(self.layout(p, Origin::Detected, &vma)));
        }
        let end = u64::from(vma.count)
            .saturating_mul(16 + DEFAULT_PATH_LEN as u64)
            .saturating_add(body_start);
        Ok(self.wrong_end(DEFAULT_PATH_LEN, end))
    }

    /// Tries every P, the reporter's first, and keeps the exact fits.
    fn search_path_len(&self, src: &mut Source<'_>) -> Result<Candidate> {
        let mut exact = Vec::new();
        let mut near = None;
        let others = (1..=MAX_SEARCHED_PATH_LEN).filter(|p| *p != DEFAULT_PATH_LEN);
        for p in std::iter::once(DEFAULT_PATH_LEN).chain(others) {
            if self.vma_offset(p) > self.len {
                if p > DEFAULT_PATH_LEN {
                    break;
                }
                continue;
            }
            if let Some(vma) = self.vma_at(src, p)? {
                if vma.end == self.len {
                    exact.push(self.layout(p, Origin::Detected, &vma));
                } else if near.is_none() {
                    near = Some(self.wrong_end(p, vma.end));
                }
            }
        }
        match exact.len() {
            0 => Ok(near.unwrap_or_else(|| self.no_vma_table())),
            1 => Ok(Candidate::Exact(exact.remove(0))),
            _ => {
                let list: Vec<String> = exact.iter().map(|l| l.path_len.to_string()).collect();
                Err(Error::format(
                    self.path,
                    self.module_offset,
                    format!(
                        "with call depth {} the path length is ambiguous: {} all fit; choose one with --aps-path-len",
                        self.depth,
                        list.join(", ")
                    ),
                ))
            }
        }
    }
}

// The module and vma tables (§3.3, §3.4, §5).
