//! Histogram ticks to functions (§3): each bin's ticks go to the function
//! whose symbol range holds the bin, split where a bin straddles two.

use super::data::{GmonData, Histogram};
use crate::profile::apportion;
use crate::symbolize::Binary;

/// A function of the executable as gprof sees it: `[start, end)` runs to the
/// next symbol (§3).
#[derive(Debug, Clone)]
pub(super) struct Func<'b> {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) name: &'b str,
    pub(super) system_name: &'b str,
    /// Typed as a function: only such a function is an arc's callee.
    pub(super) typed: bool,
}

pub(super) fn gprof_functions(binary: &Binary) -> Vec<Func<'_>> {
    let syms = binary.symbols();
    syms.iter()
        .enumerate()
        .map(|(i, s)| Func {
            start: s.address,
            end: syms.get(i + 1).map_or(
                if s.size > 0 {
                    s.address + s.size
                } else {
                    u64::MAX
                },
                |n| n.address,
            ),
            name: &s.name,
            system_name: &s.system_name,
            typed: s.typed,
        })
        .collect()
}

/// The function gprof counts a call at `self_pc` for (`cg_tally`): the one
/// holding the address, or, when that is an untyped label, the nearest
/// typed function before it. `starts` are the functions' starts: tens of
/// thousands of arcs search them, 8 bytes a function, rather than the
/// functions themselves.
pub(super) fn callee_at(funcs: &[Func<'_>], starts: &[u64], self_pc: u64) -> Option<usize> {
    let i = starts.partition_point(|&s| s <= self_pc).checked_sub(1)?;
    typed_from(funcs, i).filter(|_| self_pc < funcs[i].end)
}

/// The `holding` function if typed, else the nearest typed one before it.
pub(super) fn typed_from(funcs: &[Func<'_>], holding: usize) -> Option<usize> {
    (0..=holding).rev().find(|&f| funcs[f].typed)
}

pub(super) fn function_at(funcs: &[Func<'_>], addr: u64) -> Option<usize> {
    let i = funcs.partition_point(|f| f.start <= addr).checked_sub(1)?;
    (addr < funcs[i].end).then_some(i)
}

/// The sorted, distinct `addresses` of a profile as the ends of the arcs,
/// which come sorted by `from_pc` ([`super::data::merge_arcs`]): a call
/// site's index and function are found by walking forward from the last
/// one, and each function's entry index is known from one merge walk.
pub(super) struct ArcEnds<'a> {
    addresses: &'a [u64],
    /// The function of each address ([`function_at`]), `u32::MAX` for none.
    func: Vec<u32>,
    /// The index of each function's entry among the addresses, `u32::MAX`
    /// where it is not one of them.
    entry: Vec<u32>,
    /// Where the last call site was found.
    at: usize,
}

impl<'a> ArcEnds<'a> {
    /// `funcs` sorted by start, as [`gprof_functions`] gives them.
    pub(super) fn new(addresses: &'a [u64], funcs: &[Func<'_>]) -> Self {
        let mut func = Vec::with_capacity(addresses.len());
        let mut entry = vec![u32::MAX; funcs.len()];
        // One merge walk: `next` is the first function starting above the
        // address, so `next - 1` is `function_at`'s candidate.
        let mut next = 0;
        for (i, &address) in addresses.iter().enumerate() {
            while let Some(f) = funcs.get(next).filter(|f| f.start <= address) {
                if f.start == address {
                    entry[next] = i as u32;
                }
                next += 1;
            }
            let f = next
                .checked_sub(1)
                .filter(|&f| address < funcs[f].end)
                .map_or(u32::MAX, |f| f as u32);
            func.push(f);
        }
        ArcEnds {
            addresses,
            func,
            entry,
            at: 0,
        }
    }

    /// The index of call site `from_pc` among the addresses (where it would
    /// be if it is not one of them) and its function. Quickest when asked
    /// in increasing order.
    pub(super) fn site(&mut self, from_pc: u64, funcs: &[Func<'_>]) -> (u32, Option<usize>) {
        let back = self.at > 0 && self.addresses[self.at - 1] >= from_pc;
        if back {
            self.at = index_of(self.addresses, from_pc) as usize;
        } else {
            while self.addresses.get(self.at).is_some_and(|&a| a < from_pc) {
                self.at += 1;
            }
        }
        let i = self.at;
        if self.addresses.get(i) == Some(&from_pc) {
            let f = self.func[i];
            (i as u32, (f != u32::MAX).then_some(f as usize))
        } else {
            (i as u32, function_at(funcs, from_pc))
        }
    }

    /// The index of function `f`'s entry among the addresses.
    pub(super) fn entry(&self, f: usize, funcs: &[Func<'_>]) -> u32 {
        match self.entry[f] {
            u32::MAX => index_of(self.addresses, funcs[f].start),
            i => i,
        }
    }
}

/// The index of `address` in the sorted `addresses` (where it is).
pub(super) fn index_of(addresses: &[u64], address: u64) -> u32 {
    addresses.partition_point(|&a| a < address) as u32
}

/// One piece of histogram time: ticks credited to a function at an address.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tick {
    pub(super) func: Option<usize>,
    pub(super) address: u64,
    pub(super) samples: i64,
    pub(super) nanos: i64,
}

/// The address of the ticks gprof's arithmetic credits to no function
/// (§3.2): a location of its own, `[uncredited by gprof]`, so that the
/// profile's total still equals the file's. No bin starts there (a bin
/// starts below its histogram's `high_pc`).
pub(super) const UNCREDITED: u64 = u64::MAX;

/// The name of the [`UNCREDITED`] location's frame.
pub(super) const UNCREDITED_NAME: &str = "[uncredited by gprof]";

/// Splits every non-empty bin over the functions it overlaps exactly as
/// gprof's `hist_assign_samples_1` does (§3.2): in 2-byte units, bin `i`
/// covering `[low/2 + ⌊s·i⌋, low/2 + ⌊s·(i+1)⌋)` and each function
/// `[start/2, next start/2)`, a function getting `overlap × count / s`
/// ticks of time. That credit is what gprof prints; it need not add up to
/// the bin's count (bins of a fractional width), so what a bin's credits
/// leave over (or take beyond it) goes to [`UNCREDITED`]. Whole ticks
/// (`samples`) are the bin's count apportioned by the credits, so each
/// bin keeps its count exactly. A bin that overlaps no function keeps its
/// count at its own address (gprof reports it nowhere). Without functions
/// (no `--binary`) every bin is one tick at its start.
///
/// Linear in bins + functions: functions are sorted and bins ascend, so
/// one sweep finds each bin's functions.
pub(super) fn assign_ticks(data: &GmonData, funcs: &[Func<'_>], period_ns: f64) -> Vec<Tick> {
    let mut out = Vec::new();
    // gprof takes the first record's scale for every record (they agree,
    // or `sum` refused them).
    let Some(scale) = data.histograms.first().map(Histogram::units_per_bin) else {
        return out;
    };
    let mut uncredited = Uncredited::default();
    for h in &data.histograms {
        let byte_scale = h.scale();
        let low = h.low_pc / 2;
        let mut first = 0; // the first function that may overlap a bin
        let mut credits = Vec::new();
        for (i, count) in h.bins.nonzero() {
            let bin_start = h.low_pc.saturating_add((byte_scale * i as f64) as u64);
            let lo = low.saturating_add((scale * i as f64) as u64);
            let hi = low.saturating_add((scale * (i + 1) as f64) as u64);
            while first < funcs.len() && funcs[first].end / 2 <= lo {
                first += 1;
            }
            credits.clear();
            let mut j = first;
            while j < funcs.len() && funcs[j].start / 2 <= hi {
                let (f_lo, f_hi) = (funcs[j].start / 2, funcs[j].end / 2);
                let overlap = hi.min(f_hi).saturating_sub(lo.max(f_lo));
                if overlap > 0 {
                    let address = (lo * 2).max(funcs[j].start);
                    credits.push((j, address, overlap as f64 * count as f64 / scale));
                }
                j += 1;
            }
            if credits.is_empty() {
                out.push(Tick {
                    func: None,
                    address: bin_start,
                    samples: count as i64,
                    nanos: (count as f64 * period_ns).round() as i64,
                });
                continue;
            }
            split_bin(count, &credits, period_ns, &mut uncredited, &mut out);
        }
    }
    out.extend(uncredited.tick(period_ns));
    out
}

/// One bin's ticks over its functions' `credits` (function, address,
/// credit in ticks): time as credited, whole ticks apportioned by credit,
/// the rest to `uncredited`.
fn split_bin(
    count: u64,
    credits: &[(usize, u64, f64)],
    period_ns: f64,
    uncredited: &mut Uncredited,
    out: &mut Vec<Tick>,
) {
    let credited: f64 = credits.iter().map(|c| c.2).sum();
    let rest = count as f64 - credited;
    let mut weights: Vec<f64> = credits.iter().map(|c| c.2).collect();
    weights.push(rest.max(0.0));
    let samples = apportion(count as i64, &weights);
    for (k, &(func, address, credit)) in credits.iter().enumerate() {
        out.push(Tick {
            func: Some(func),
            address,
            samples: samples[k],
            nanos: (credit * period_ns).round() as i64,
        });
    }
    uncredited.ticks += rest;
    uncredited.samples += samples[credits.len()];
}

/// What gprof's arithmetic leaves out, over all bins.
#[derive(Debug, Default)]
struct Uncredited {
    /// Ticks of time: a bin's count less its credits (negative where the
    /// credits exceed it).
    ticks: f64,
    /// Whole ticks apportioned to it.
    samples: i64,
}

impl Uncredited {
    /// The [`UNCREDITED`] tick, if any time or tick is left over in all.
    fn tick(&self, period_ns: f64) -> Option<Tick> {
        let nanos = (self.ticks * period_ns).round() as i64;
        (nanos > 0 || self.samples > 0).then_some(Tick {
            func: None,
            address: UNCREDITED,
            samples: self.samples,
            nanos: nanos.max(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::read::cursor::Endian;
    use crate::read::gprof::data::Variant;

    fn data_with_bins(low_pc: u64, high_pc: u64, bins: Vec<u64>) -> GmonData {
        GmonData {
            variant: Variant::Gnu,
            endian: Endian::Little,
            pointer_size: 8,
            histograms: vec![Histogram {
                low_pc,
                high_pc,
                prof_rate: 100,
                dimension: "seconds".into(),
                dimension_abbrev: 's',
                bins: bins.into_iter().collect(),
            }],
            arcs: Vec::new(),
            basic_blocks: BTreeMap::new(),
            saturated_bins: 0,
            rate_assumed: false,
            histogram_records: 1,
            arc_records: 0,
            bb_records: 0,
        }
    }

    #[test]
    fn ticks_are_credited_in_gprofs_two_byte_units() {
        // Bins of 3.94 bytes (1.97 units): 188 bins over 740 bytes, as in
        // a real file; a function at an odd address in the middle.
        let names = ["f1", "f2"];
        let funcs = vec![
            Func {
                start: 0x1000,
                end: 0x1171,
                name: names[0],
                system_name: names[0],
                typed: true,
            },
            Func {
                start: 0x1171,
                end: 0x12e4,
                name: names[1],
                system_name: names[1],
                typed: true,
            },
        ];
        let mut bins = vec![0; 188];
        for (i, b) in bins.iter_mut().enumerate() {
            *b = 1 + (i as u64 % 7);
        }
        let data = data_with_bins(0x1000, 0x1000 + 740, bins.clone());
        let ticks = assign_ticks(&data, &funcs, 1e7);
        // gprof's arithmetic, written out plainly.
        let scale = (740 / 2) as f64 / 188.0;
        let mut want = [0.0f64; 2];
        for (i, &count) in bins.iter().enumerate() {
            let lo = 0x800 + (scale * i as f64) as u64;
            let hi = 0x800 + (scale * (i + 1) as f64) as u64;
            for (f, func) in funcs.iter().enumerate() {
                let (a, b) = (func.start / 2, func.end / 2);
                let overlap = hi.min(b).saturating_sub(lo.max(a));
                want[f] += overlap as f64 * count as f64 / scale;
            }
        }
        for (f, want) in want.iter().enumerate() {
            let ns: i64 = ticks
                .iter()
                .filter(|t| t.func == Some(f))
                .map(|t| t.nanos)
                .sum();
            assert!(
                (ns as f64 - want * 1e7).abs() < 100.0,
                "f{f}: {ns} vs {want}"
            );
        }
        let total: u64 = bins.iter().sum();
        let samples: i64 = ticks.iter().map(|t| t.samples).sum();
        assert_eq!(samples, total as i64, "every tick of the file kept");
        let ns: i64 = ticks.iter().map(|t| t.nanos).sum();
        let credited = want[0] + want[1];
        assert!(
            credited < total as f64,
            "this layout loses ticks, as gprof does"
        );
        assert!(
            (ns as f64 - total as f64 * 1e7).abs() < 100.0,
            "the remainder keeps the total"
        );
        assert!(ticks.iter().any(|t| t.address == UNCREDITED));
    }
}
