//! Sample counts of one image and one event, summed over many files, and
//! [`Tally`], which only adds them up (for `info`).
//!
//! Counts of one image fall in its text section, so a dense array indexed by
//! instruction is both the fastest and the smallest store; runs that would
//! stretch the array far beyond the data seen (a hostile offset, a
//! misaligned address) go to a sparse map instead, so memory stays
//! proportional to the input.

use std::collections::HashMap;

use crate::profile::{AddressPart, MAX_VALUES};

/// How many slots the dense array may hold beyond twice the counts stored:
/// small, so that many tiny files with far-apart chunks cannot make memory
/// grow much faster than the input (a sparse entry costs as much as ~4
/// dense slots anyway).
const DENSE_SLACK: u64 = 256;

/// Per-address sample counts.
#[derive(Debug, Clone)]
pub struct Counts {
    /// Instruction size: the dense array's unit.
    insn: u64,
    /// Instruction index (address / insn) of `dense[0]`.
    base: u64,
    dense: Vec<u64>,
    sparse: HashMap<u64, u64>,
    /// Counts added so far (the bound on the dense array's size).
    stored: u64,
}

/// What one run of counts held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunTotals {
    pub sum: u64,
    pub nonzero: u64,
}

/// Where the counts of a binary profile's chunks go.
pub trait CountSink {
    /// Takes a run of little-endian `u32` counts (`raw`, 4 bytes each) for
    /// consecutive instructions from `address`; returns what they held.
    fn add_run_le(&mut self, address: u64, raw: &[u8]) -> RunTotals;
}

/// A [`CountSink`] that keeps nothing per address: it only sums.
#[derive(Debug, Default)]
pub struct Tally;

impl CountSink for Tally {
    fn add_run_le(&mut self, _address: u64, raw: &[u8]) -> RunTotals {
        let mut totals = RunTotals::default();
        for b in raw.chunks_exact(4) {
            let count = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            totals.sum += count;
            totals.nonzero += u64::from(count != 0);
        }
        totals
    }
}

/// A [`CountSink`] that appends every non-zero count straight to a lean
/// part's rows ([`AddressPart`]), in the order the runs come: for an image
/// read from one binary file, whose chunks come in address order (§2.3:
/// offsets strictly increase and chunks do not overlap), so that no count
/// array is needed. Past the bound on values ([`MAX_VALUES`]) it keeps
/// counting but stores no more rows; the caller then reports the error
/// ([`crate::profile::too_many_values`]).
pub struct RowSink<'p> {
    addresses: &'p mut Vec<u64>,
    values: &'p mut Vec<i64>,
    /// Values per row, and where this column's two (samples, events) go.
    width: usize,
    slot: usize,
    period: u64,
    insn: u64,
    /// Sample types of the whole profile, and the samples and non-zero
    /// values of the parts before this one (for the bound on values).
    types: usize,
    before: (u64, u64),
    /// Rows met so far (stored or not).
    rows: u64,
    full: bool,
}

impl<'p> RowSink<'p> {
    /// Rows of `width` values into `part`, this column's samples at `slot`
    /// and its events (samples × `period`) at `slot + 1`.
    pub fn new(part: &'p mut AddressPart, slot: usize, period: u64, insn: u32) -> Self {
        let width = part.width().max(slot + 2);
        RowSink {
            addresses: &mut part.addresses,
            values: &mut part.values,
            width,
            slot,
            period,
            insn: u64::from(insn.max(1)),
            types: width,
            before: (0, 0),
            rows: 0,
            full: false,
        }
    }

    /// Bounds the rows by [`MAX_VALUES`] over `types` sample types,
    /// after parts that held `before` (samples, non-zero values).
    pub fn bound(mut self, types: usize, before: (u64, u64)) -> Self {
        self.types = types;
        self.before = before;
        self
    }

    /// Rows met (stored, or past the bound), and whether the bound was passed.
    pub fn rows(&self) -> (u64, bool) {
        (self.rows, self.full)
    }

    /// Takes the count `b` (4 bytes, little-endian) of `address`.
    #[inline]
    fn count(&mut self, totals: &mut RunTotals, address: u64, b: &[u8]) {
        let count = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if count != 0 {
            self.take(totals, address, count);
        }
    }

    /// Takes the non-zero `count` of `address`.
    #[inline]
    fn take(&mut self, totals: &mut RunTotals, address: u64, count: u32) {
        totals.sum += u64::from(count);
        totals.nonzero += 1;
        if !self.full {
            self.push(address, count);
        }
    }

    #[inline]
    fn push(&mut self, address: u64, count: u32) {
        let samples = i64::from(count);
        let events = u64::from(count)
            .checked_mul(self.period)
            .and_then(|e| i64::try_from(e).ok())
            .unwrap_or(i64::MAX);
        self.addresses.push(address);
        if self.width == 2 {
            self.values.extend_from_slice(&[samples, events]);
        } else {
            let at = self.values.len() + self.slot;
            self.values.resize(self.values.len() + self.width, 0);
            if let Some(v) = self.values.get_mut(at..at + 2) {
                v.copy_from_slice(&[samples, events]);
            }
        }
    }
}

impl CountSink for RowSink<'_> {
    fn add_run_le(&mut self, address: u64, raw: &[u8]) -> RunTotals {
        let mut totals = RunTotals::default();
        let mut at = address;
        // Eight counts at a time, as a mask of the non-zero ones (a loop the
        // compiler makes a vector compare): in a sparse profile most counts
        // are zero, and only the set bits are visited.
        let blocks = raw.chunks_exact(4 * BLOCK);
        let rest = blocks.remainder();
        for block in blocks.filter_map(|b| <&[u8; 4 * BLOCK]>::try_from(b).ok()) {
            let mut mask = nonzero_mask(block);
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                let count = count_at(block, i);
                self.take(&mut totals, at.wrapping_add(i as u64 * self.insn), count);
            }
            at = at.wrapping_add(BLOCK as u64 * self.insn);
        }
        for b in rest.chunks_exact(4) {
            self.count(&mut totals, at, b);
            at = at.wrapping_add(self.insn);
        }
        self.rows += totals.nonzero;
        // Only the bound that can only be passed for good, as rows come
        // (the caller checks every rule once the rows are counted).
        let samples = self.before.0.saturating_add(self.rows);
        self.full |= (self.types as u64).saturating_mul(samples) > MAX_VALUES;
        totals
    }
}

/// Counts [`RowSink`] looks at together.
const BLOCK: usize = 8;

/// Bit `i` set when count `i` of `block` is not zero. Computed from the
/// block's words in registers: an array of the counts on the stack, read
/// back unaligned, had stalled on store forwarding.
#[inline]
fn nonzero_mask(block: &[u8; 4 * BLOCK]) -> u32 {
    (0..BLOCK).fold(0, |mask, i| {
        let word = [
            block[4 * i],
            block[4 * i + 1],
            block[4 * i + 2],
            block[4 * i + 3],
        ];
        mask | (u32::from(u32::from_ne_bytes(word) != 0) << i)
    })
}

/// Count `i` of `block` (`i` < [`BLOCK`]), little-endian.
#[inline]
fn count_at(block: &[u8; 4 * BLOCK], i: usize) -> u32 {
    let at = 4 * (i % BLOCK);
    u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]])
}

impl CountSink for Counts {
    fn add_run_le(&mut self, address: u64, raw: &[u8]) -> RunTotals {
        Counts::add_run_le(self, address, raw)
    }
}

impl Counts {
    pub fn new(insn: u32) -> Self {
        Counts {
            insn: u64::from(insn.max(1)),
            base: 0,
            dense: Vec::new(),
            sparse: HashMap::new(),
            stored: 0,
        }
    }

    /// Makes room for `insns` instructions in the dense array, so that it
    /// does not grow by copies as runs come. The caller bounds `insns` by
    /// the input (a few times the counts a file can hold).
    pub fn reserve(&mut self, insns: u64) {
        let more = usize::try_from(insns).map_or(0, |n| n.saturating_sub(self.dense.len()));
        self.dense.reserve(more);
    }

    /// The dense slots for `n` instructions from `address`, growing the array
    /// when that stays within the bound; `None` sends the run to the map.
    fn dense_slots(&mut self, address: u64, n: u64) -> Option<&mut [u64]> {
        if n == 0 || address % self.insn != 0 {
            return None;
        }
        let start = address / self.insn;
        let end = start.checked_add(n)?;
        let budget = DENSE_SLACK.saturating_add(self.stored.saturating_add(n).saturating_mul(2));
        if self.dense.is_empty() {
            if n > budget {
                return None;
            }
            self.base = start;
            // Keeps the capacity `reserve` made.
            self.dense.resize(usize::try_from(n).ok()?, 0);
        } else {
            let old_end = self.base + self.dense.len() as u64;
            let lo = self.base.min(start);
            let hi = old_end.max(end);
            if hi - lo > budget {
                return None;
            }
            if lo < self.base {
                let mut grown = vec![0; usize::try_from(hi - lo).ok()?];
                let at = usize::try_from(self.base - lo).ok()?;
                grown
                    .get_mut(at..at + self.dense.len())?
                    .copy_from_slice(&self.dense);
                self.dense = grown;
                self.base = lo;
            } else if hi > old_end {
                self.dense.resize(usize::try_from(hi - lo).ok()?, 0);
            }
        }
        let from = usize::try_from(start - self.base).ok()?;
        let to = usize::try_from(end - self.base).ok()?;
        self.dense.get_mut(from..to)
    }

    /// Adds a run of little-endian `u32` counts (`raw`, 4 bytes each) for
    /// consecutive instructions starting at `address`.
    pub fn add_run_le(&mut self, address: u64, raw: &[u8]) -> RunTotals {
        let n = (raw.len() / 4) as u64;
        let mut totals = RunTotals::default();
        let words = raw
            .chunks_exact(4)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        if let Some(slots) = self.dense_slots(address, n) {
            for (slot, count) in slots.iter_mut().zip(words) {
                *slot = slot.saturating_add(count);
                totals.sum += count;
                totals.nonzero += u64::from(count != 0);
            }
        } else {
            let mut at = address;
            for count in words {
                if count != 0 {
                    let slot = self.sparse.entry(at).or_insert(0);
                    *slot = slot.saturating_add(count);
                    totals.sum += count;
                    totals.nonzero += 1;
                }
                at = at.wrapping_add(self.insn);
            }
        }
        self.stored = self.stored.saturating_add(n);
        totals
    }

    /// Adds `count` samples at `address`.
    pub fn add(&mut self, address: u64, count: u64) {
        if count == 0 {
            return;
        }
        if let Some(slot) = self.dense_slots(address, 1).and_then(|s| s.first_mut()) {
            *slot = slot.saturating_add(count);
        } else {
            let slot = self.sparse.entry(address).or_insert(0);
            *slot = slot.saturating_add(count);
        }
        self.stored = self.stored.saturating_add(1);
    }

    /// Calls `f(address, count)` for every address with a non-zero count,
    /// in address order.
    pub fn for_each_sorted(&self, mut f: impl FnMut(u64, u64)) {
        let mut sparse: Vec<(u64, u64)> = self.sparse.iter().map(|(&a, &c)| (a, c)).collect();
        sparse.sort_unstable();
        let mut sparse = sparse.into_iter().peekable();
        for (i, &count) in self.dense.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let address = (self.base + i as u64) * self.insn;
            while let Some((a, c)) = sparse.next_if(|&(a, _)| a < address) {
                f(a, c);
            }
            f(address, count);
        }
        sparse.for_each(|(a, c)| f(a, c));
    }

    /// How many addresses have a non-zero count.
    pub fn nonzero(&self) -> usize {
        self.dense.iter().filter(|&&c| c != 0).count() + self.sparse.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(counts: &[u32]) -> Vec<u8> {
        counts.iter().flat_map(|c| c.to_le_bytes()).collect()
    }

    fn all(c: &Counts) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        c.for_each_sorted(|a, n| out.push((a, n)));
        assert!(out.is_sorted(), "for_each_sorted is in address order");
        assert_eq!(c.nonzero(), out.len());
        out
    }

    #[test]
    fn runs_sum_per_address() {
        let mut c = Counts::new(4);
        assert_eq!(
            c.add_run_le(0x1000, &le(&[1, 0, 2])),
            RunTotals { sum: 3, nonzero: 2 }
        );
        c.add_run_le(0x0ff8, &le(&[5, 0, 7]));
        c.add(0x1008, 10);
        assert_eq!(all(&c), vec![(0xff8, 5), (0x1000, 8), (0x1008, 12)]);
    }

    #[test]
    fn far_apart_runs_do_not_allocate_the_gap() {
        let mut c = Counts::new(4);
        c.add_run_le(0, &le(&[1]));
        c.add_run_le(0xffff_fff0 * 4, &le(&[2, 3]));
        c.add_run_le(2, &le(&[4]));
        assert!(c.dense.len() < 16);
        assert_eq!(
            all(&c),
            vec![
                (0, 1),
                (2, 4),
                (0xffff_fff0 * 4, 2),
                (0xffff_fff0 * 4 + 4, 3)
            ]
        );
    }
}
