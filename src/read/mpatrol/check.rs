//! Checking the references between tables : every record's call
//! site, every call site's parent and name, with the offset of the culprit.

use super::file::MpatrolFile;
use crate::error::Result;
use crate::read::cursor::Cursor;

/// Checks every index and offset the file holds against what it holds, and
/// that the parent chains end (docs/formats/mpatrol.md §5), filling the index tables.
pub(super) fn check_references(c: &Cursor<'_>, file: &mut MpatrolFile) -> Result<()> {
    let record_count = file.records.len();
    let mut record_of_index = vec![usize::MAX; record_count];
    for (pos, r) in file.records.iter().enumerate() {
        let slot = r
            .index
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| record_of_index.get_mut(i));
        match slot {
            Some(s) if *s == usize::MAX => *s = pos,
            Some(_) => {
                return Err(c.error_at(
                    r.offset,
                    format!("profiling record index {} appears twice", r.index),
                ));
            }
            None => {
                return Err(c.error_at(
                    r.offset,
                    format!(
                        "profiling record index {} is not in 1..={record_count}",
                        r.index
                    ),
                ));
            }
        }
    }

    let site_count = file.call_sites.len();
    let mut site_of_index = vec![usize::MAX; site_count];
    let mut carrier_of_record = vec![usize::MAX; record_count];
    let strings_len = file.strings.len() as u64;
    let symbol_count = file.symbol_addresses.len() as u64;
    let w = file.word_size;
    for (pos, s) in file.call_sites.iter().enumerate() {
        let slot = s
            .index
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| site_of_index.get_mut(i));
        match slot {
            Some(slot) if *slot == usize::MAX => *slot = pos,
            Some(_) => {
                return Err(c.error_at(
                    s.offset,
                    format!("call site index {} appears twice", s.index),
                ))
            }
            None => {
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
        if s.name_offset != 0 {
            let terminated = usize::try_from(s.name_offset)
                .ok()
                .and_then(|o| file.strings.get(o..))
                .is_some_and(|tail| tail.contains(&0));
            if !terminated {
                return Err(c.error_at(
                    s.offset + 4 * w,
                    if s.name_offset >= strings_len {
                        format!(
                            "call site {} has its name at offset {}, past the {strings_len}-byte string table",
                            s.index, s.name_offset
                        )
                    } else {
                        format!(
                            "call site {} has its name at offset {} of the string table, which has no NUL after it",
                            s.index, s.name_offset
                        )
                    },
                ));
            }
        }
        if s.record != 0 {
            let slot = usize::try_from(s.record - 1)
                .ok()
                .and_then(|i| carrier_of_record.get_mut(i));
            match slot {
                Some(slot) if *slot == usize::MAX => *slot = pos,
                Some(_) => {
                    return Err(c.error_at(
                        s.offset + 5 * w,
                        format!("profiling record {} is carried by two call sites", s.record),
                    ))
                }
                None => {
                    return Err(c.error_at(
                        s.offset + 5 * w,
                        format!(
                            "call site {} carries profiling record {}, but there are only {record_count} records",
                            s.index, s.record
                        ),
                    ))
                }
            }
        }
    }
    if let Some(r) = carrier_of_record.iter().position(|&p| p == usize::MAX) {
        let record = file
            .records
            .get(record_of_index.get(r).copied().unwrap_or(0));
        return Err(c.error_at(
            record.map_or(0, |r| r.offset),
            format!("profiling record {} is carried by no call site", r + 1),
        ));
    }

    // Parent chains must end: colour each call site once (0 = unseen,
    // 1 = on the chain being walked, 2 = known to end), so the check is
    // linear whatever the file holds.
    // The depth of each stack is found on the way (1 + the parent's).
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
                        s.offset + w,
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
            // In range: checked above.
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
