//! Checking the references between tables : every record's call
//! site, every call site's parent and name, with the offset of the culprit.

use super::file::{CallSite, MpatrolFile};
use crate::error::Result;
use crate::read::cursor::Cursor;

/// Slot marker: no record or call site has claimed this index yet.
const FREE: usize = usize::MAX;

/// Why an index could not claim its slot.
enum Claim {
    /// The index is 0 or past the table.
    OutOfRange,
    /// Another entry already holds the slot.
    Taken,
}

/// Puts `pos` in `slots[index - 1]` (indices count from 1).
fn claim(slots: &mut [usize], index: u64, pos: usize) -> std::result::Result<(), Claim> {
    let slot = index
        .checked_sub(1)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| slots.get_mut(i));
    match slot {
        Some(s) if *s == FREE => {
            *s = pos;
            Ok(())
        }
        Some(_) => Err(Claim::Taken),
        None => Err(Claim::OutOfRange),
    }
}

/// Checks every index and offset the file holds against what it holds, and
/// that the parent chains end (docs/formats/mpatrol.md §5), filling the index tables.
pub(super) fn check_references(c: &Cursor<'_>, file: &mut MpatrolFile) -> Result<()> {
    let record_of_index = index_records(c, file)?;
    let mut site_of_index = vec![FREE; file.call_sites.len()];
    let mut carrier_of_record = vec![FREE; file.records.len()];
    for (pos, s) in file.call_sites.iter().enumerate() {
        check_site(c, file, s, pos, &mut site_of_index)?;
        if s.record != 0 {
            claim_record(c, file, s, pos, &mut carrier_of_record)?;
        }
    }
    if let Some(r) = carrier_of_record.iter().position(|&p| p == FREE) {
        let record = file
            .records
            .get(record_of_index.get(r).copied().unwrap_or(0));
        return Err(c.error_at(
            record.map_or(0, |r| r.offset),
            format!("profiling record {} is carried by no call site", r + 1),
        ));
    }
    let depth = stack_depths(c, file, &site_of_index)?;
    file.stack_frames = file
        .call_sites
        .iter()
        .zip(&depth)
        .filter(|(s, _)| s.record != 0)
        .map(|(_, d)| d)
        .sum();
    file.call_site_of_index = site_of_index;
    file.record_of_index = record_of_index;
    Ok(())
}

/// Where each record index (1-based) sits in `file.records`; indices must be
/// distinct and in `1..=records`.
fn index_records(c: &Cursor<'_>, file: &MpatrolFile) -> Result<Vec<usize>> {
    let record_count = file.records.len();
    let mut record_of_index = vec![FREE; record_count];
    for (pos, r) in file.records.iter().enumerate() {
        let what = match claim(&mut record_of_index, r.index, pos) {
            Ok(()) => continue,
            Err(Claim::Taken) => format!("profiling record index {} appears twice", r.index),
            Err(Claim::OutOfRange) => format!(
                "profiling record index {} is not in 1..={record_count}",
                r.index
            ),
        };
        return Err(c.error_at(r.offset, what));
    }
    Ok(record_of_index)
}

/// Checks one call site's index, parent, symbol and name, and records where
/// its index sits.
fn check_site(
    c: &Cursor<'_>,
    file: &MpatrolFile,
    s: &CallSite,
    pos: usize,
    site_of_index: &mut [usize],
) -> Result<()> {
    let site_count = file.call_sites.len();
    let symbol_count = file.symbol_addresses.len() as u64;
    let w = file.word_size;
    match claim(site_of_index, s.index, pos) {
        Ok(()) => {}
        Err(Claim::Taken) => {
            return Err(c.error_at(
                s.offset,
                format!("call site index {} appears twice", s.index),
            ))
        }
        Err(Claim::OutOfRange) => {
            return Err(c.error_at(
                s.offset,
                format!("call site index {} is not in 1..={site_count}", s.index),
            ))
        }
    }
    if s.parent > site_count as u64 {
        return Err(c.error_at(
            s.offset + w,
            format!(
                "call site {} has parent {}, but there are only {site_count} call sites",
                s.index, s.parent
            ),
        ));
    }
    if s.symbol > symbol_count {
        return Err(c.error_at(
            s.offset + 3 * w,
            format!(
                "call site {} has symbol index {}, but there are only {symbol_count} symbols",
                s.index, s.symbol
            ),
        ));
    }
    check_name(c, file, s)
}

/// A call site's name offset, when set, must start a NUL-terminated string
/// inside the string table.
fn check_name(c: &Cursor<'_>, file: &MpatrolFile, s: &CallSite) -> Result<()> {
    if s.name_offset == 0 {
        return Ok(());
    }
    let terminated = usize::try_from(s.name_offset)
        .ok()
        .and_then(|o| file.strings.get(o..))
        .is_some_and(|tail| tail.contains(&0));
    if terminated {
        return Ok(());
    }
    let strings_len = file.strings.len() as u64;
    let what = if s.name_offset >= strings_len {
        format!(
            "call site {} has its name at offset {}, past the {strings_len}-byte string table",
            s.index, s.name_offset
        )
    } else {
        format!(
            "call site {} has its name at offset {} of the string table, which has no NUL after it",
            s.index, s.name_offset
        )
    };
    Err(c.error_at(s.offset + 4 * file.word_size, what))
}

/// Each profiling record is carried by exactly one call site.
fn claim_record(
    c: &Cursor<'_>,
    file: &MpatrolFile,
    s: &CallSite,
    pos: usize,
    carrier_of_record: &mut [usize],
) -> Result<()> {
    let what = match claim(carrier_of_record, s.record, pos) {
        Ok(()) => return Ok(()),
        Err(Claim::Taken) => format!("profiling record {} is carried by two call sites", s.record),
        Err(Claim::OutOfRange) => format!(
            "call site {} carries profiling record {}, but there are only {} records",
            s.index,
            s.record,
            file.records.len()
        ),
    };
    Err(c.error_at(s.offset + 5 * file.word_size, what))
}

/// The depth of every call site's stack (1 + its parent's), refusing parent
/// loops. Each call site is coloured once (0 = unseen, 1 = on the chain being
/// walked, 2 = known to end), so the check is linear whatever the file holds.
fn stack_depths(c: &Cursor<'_>, file: &MpatrolFile, site_of_index: &[usize]) -> Result<Vec<u64>> {
    let site_count = file.call_sites.len();
    let mut state = vec![0u8; site_count];
    let mut depth = vec![0u64; site_count];
    let mut chain = Vec::new();
    for start in 0..site_count {
        chain.clear();
        let mut pos = start;
        let mut base = 0u64;
        loop {
            match state.get(pos).copied() {
                Some(0) => {}
                Some(1) => {
                    let s = &file.call_sites[pos];
                    return Err(c.error_at(
                        s.offset + file.word_size,
                        format!("the parents of call site {} form a loop", s.index),
                    ));
                }
                _ => {
                    base = depth.get(pos).copied().unwrap_or(0);
                    break;
                }
            }
            state[pos] = 1;
            chain.push(pos);
            let parent = file.call_sites[pos].parent;
            if parent == 0 {
                break;
            }
            // In range: checked by check_site.
            match site_of_index.get((parent - 1) as usize) {
                Some(&p) => pos = p,
                None => break,
            }
        }
        for &p in chain.iter().rev() {
            base += 1;
            depth[p] = base;
            state[p] = 2;
        }
    }
    Ok(depth)
}
