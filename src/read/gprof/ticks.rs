//! Histogram ticks to functions (§3): each bin's ticks go to the function
//! whose symbol range holds the bin, split where a bin straddles two.

use super::data::GmonData;
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
        })
        .collect()
}

pub(super) fn function_at(funcs: &[Func<'_>], addr: u64) -> Option<usize> {
    let i = funcs.partition_point(|f| f.start <= addr).checked_sub(1)?;
    (addr < funcs[i].end).then_some(i)
}

/// One piece of histogram time: ticks credited to a function at an address.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tick {
    pub(super) func: Option<usize>,
    pub(super) address: u64,
    pub(super) samples: i64,
    pub(super) nanos: i64,
}

/// Splits every non-empty bin over the functions it overlaps, in proportion
/// to the overlap, as gprof's `hist_assign_samples` does (§3). The integer
/// parts are apportioned so that every bin's total is kept exactly.
pub(super) fn assign_ticks(data: &GmonData, funcs: &[Func<'_>], period_ns: f64) -> Vec<Tick> {
    let mut out = Vec::new();
    for h in &data.histograms {
        let scale = h.scale();
        for (i, &count) in h.bins.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let lo = h.low_pc + (scale * i as f64) as u64;
            let hi = (h.low_pc + (scale * (i + 1) as f64) as u64).max(lo + 1);
            // (function or None for a gap, start, overlap)
            let mut pieces: Vec<(Option<usize>, u64, u64)> = Vec::new();
            let mut at = lo;
            while at < hi {
                match function_at(funcs, at) {
                    Some(f) => {
                        let end = funcs[f].end.min(hi);
                        pieces.push((Some(f), at, end - at));
                        at = end;
                    }
                    None => {
                        let next = funcs
                            .get(funcs.partition_point(|f| f.start <= at))
                            .map_or(hi, |f| f.start.min(hi));
                        pieces.push((None, at, next - at));
                        at = next;
                    }
                }
            }
            let weights: Vec<f64> = pieces.iter().map(|p| p.2 as f64).collect();
            // Whole ticks are apportioned; time is gprof's credit,
            // overlap × count / scale, which need not add up to the count
            // when the bin width is not a whole number of bytes.
            let samples = apportion(count as i64, &weights);
            let nanos: Vec<i64> = weights
                .iter()
                .map(|w| (w * count as f64 / scale * period_ns).round() as i64)
                .collect();
            for (k, (func, start, _)) in pieces.into_iter().enumerate() {
                if samples[k] == 0 && nanos[k] == 0 {
                    continue;
                }
                out.push(Tick {
                    func,
                    address: start,
                    samples: samples[k],
                    nanos: nanos[k],
                });
            }
        }
    }
    out
}
