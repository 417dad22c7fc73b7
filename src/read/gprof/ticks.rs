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

/// The sorted, distinct `addresses` of a profile as arc ends: each one's
/// index and function, the function found once per address.
pub(super) struct ArcEnds<'a> {
    index: AddressIndex<'a>,
    /// The function of each address ([`function_at`]), `u32::MAX` for none.
    func: Vec<u32>,
}

impl<'a> ArcEnds<'a> {
    /// `funcs` sorted by start, as [`gprof_functions`] gives them.
    pub(super) fn new(addresses: &'a [u64], funcs: &[Func<'_>]) -> Self {
        let mut func = Vec::with_capacity(addresses.len());
        // One merge walk: `next` is the first function starting above the
        // address, so `next - 1` is `function_at`'s candidate.
        let mut next = 0;
        for &address in addresses {
            while funcs.get(next).is_some_and(|f| f.start <= address) {
                next += 1;
            }
            let f = next
                .checked_sub(1)
                .filter(|&f| address < funcs[f].end)
                .map_or(u32::MAX, |f| f as u32);
            func.push(f);
        }
        ArcEnds {
            index: AddressIndex::new(addresses),
            func,
        }
    }

    /// The index of `address` among the addresses (where it would be if it
    /// is not one of them) and its function.
    pub(super) fn get(&self, address: u64, funcs: &[Func<'_>]) -> (u32, Option<usize>) {
        let (i, found) = self.index.position(address);
        if found {
            let f = self.func[i];
            (i as u32, (f != u32::MAX).then_some(f as usize))
        } else {
            (i as u32, function_at(funcs, address))
        }
    }
}

/// Sorted addresses and, for equal slices of their range (buckets of a
/// power of two bytes, about one per 8 addresses), where each slice's
/// addresses start: a lookup searches one bucket instead of all the
/// addresses, with no table per address (a hash map of 46 000 addresses
/// was ≈ 1 MB of fresh pages, more than the lookups cost).
struct AddressIndex<'a> {
    addresses: &'a [u64],
    /// The first address and the bucket width, log2.
    low: u64,
    shift: u32,
    /// `starts[b]`: the index of the first address in bucket `b` or above;
    /// one more entry than buckets.
    starts: Vec<u32>,
}

impl<'a> AddressIndex<'a> {
    /// `addresses` sorted and distinct.
    fn new(addresses: &'a [u64]) -> Self {
        let (Some(&low), Some(&high)) = (addresses.first(), addresses.last()) else {
            return AddressIndex {
                addresses,
                low: 0,
                shift: 0,
                starts: vec![0],
            };
        };
        let wanted = (addresses.len() / 8).max(1) as u64;
        // The narrowest buckets (a power of two bytes) that are no more
        // than `wanted` over the range.
        let span = high - low;
        let shift = (0..64u32).find(|&s| (span >> s) < wanted).unwrap_or(63);
        let buckets = (span >> shift) as usize + 1;
        let mut starts = Vec::with_capacity(buckets + 1);
        for (i, &a) in addresses.iter().enumerate() {
            let bucket = ((a - low) >> shift) as usize;
            while starts.len() <= bucket {
                starts.push(i as u32);
            }
        }
        starts.resize(buckets + 1, addresses.len() as u32);
        AddressIndex {
            addresses,
            low,
            shift,
            starts,
        }
    }

    /// Where `address` is among the addresses (`partition_point(< address)`)
    /// and whether it is there.
    fn position(&self, address: u64) -> (usize, bool) {
        let Some(offset) = address.checked_sub(self.low) else {
            return (0, false);
        };
        let bucket = offset >> self.shift;
        // Past the last bucket: above every address.
        if bucket >= (self.starts.len() - 1) as u64 {
            return (self.addresses.len(), false);
        }
        let b = bucket as usize;
        let (start, end) = (self.starts[b] as usize, self.starts[b + 1] as usize);
        let i = start + self.addresses[start..end].partition_point(|&a| a < address);
        (i, self.addresses.get(i) == Some(&address))
    }
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
///
/// A bin that covers many whole functions (never in files `gcc -pg` writes,
/// whose bins are a few bytes wide, but possible in a crafted file) hands
/// those functions their share through [`Spread`], so the work stays linear
/// in bins + functions instead of bins × functions.
pub(super) fn assign_ticks(data: &GmonData, funcs: &[Func<'_>], period_ns: f64) -> Vec<Tick> {
    let mut out = Vec::new();
    let mut spread = Spread::new(funcs.len());
    for h in &data.histograms {
        let scale = h.scale();
        for (i, count) in h.bins.nonzero() {
            // Saturating: a crafted histogram may end at the top of the
            // address space.
            let lo = h.low_pc.saturating_add((scale * i as f64) as u64);
            let hi = h
                .low_pc
                .saturating_add((scale * (i + 1) as f64) as u64)
                .max(lo.saturating_add(1));
            let pieces = bin_pieces(funcs, lo, hi);
            let weights: Vec<f64> = pieces.iter().map(|p| p.len() as f64).collect();
            // Whole ticks are apportioned; time is gprof's credit,
            // overlap × count / scale, which need not add up to the count
            // when the bin width is not a whole number of bytes.
            let samples = apportion(count as i64, &weights);
            for (k, piece) in pieces.iter().enumerate() {
                let nanos = (weights[k] * count as f64 / scale * period_ns).round() as i64;
                match *piece {
                    Piece::Span { func, start, .. } if samples[k] != 0 || nanos != 0 => {
                        out.push(Tick {
                            func,
                            address: start,
                            samples: samples[k],
                            nanos,
                        })
                    }
                    Piece::Span { .. } => {}
                    Piece::Whole { first, end, len } => spread.add(
                        first,
                        end,
                        samples[k],
                        weights[k] * count as f64 / scale / len as f64 * period_ns,
                        len,
                    ),
                }
            }
        }
    }
    out.extend(spread.ticks(funcs));
    out
}

/// A part of a histogram bin: a stretch of one function (or of no function:
/// a gap), or many whole functions `first..end` in one piece.
#[derive(Debug, Clone, Copy)]
enum Piece {
    Span {
        func: Option<usize>,
        start: u64,
        len: u64,
    },
    Whole {
        first: usize,
        end: usize,
        len: u64,
    },
}

impl Piece {
    fn len(&self) -> u64 {
        match *self {
            Piece::Span { len, .. } | Piece::Whole { len, .. } => len,
        }
    }
}

/// How many whole functions a bin may cover before they become one piece.
const WHOLE_FUNCTIONS_APART: usize = 16;

/// The pieces of the bin `[lo, hi)`.
fn bin_pieces(funcs: &[Func<'_>], lo: u64, hi: u64) -> Vec<Piece> {
    let mut pieces = Vec::new();
    // Functions starting inside the bin: a..b.
    let a = funcs.partition_point(|f| f.start <= lo);
    let b = funcs.partition_point(|f| f.start < hi);
    let mut end = b;
    while end > a && funcs[end - 1].end > hi {
        end -= 1;
    }
    // Functions run to the next symbol (gprof_functions), so a..end tile
    // funcs[a].start..funcs[end - 1].end.
    if end > a && end - a > WHOLE_FUNCTIONS_APART {
        let (s, e) = (funcs[a].start, funcs[end - 1].end);
        spans(funcs, lo, s, &mut pieces);
        pieces.push(Piece::Whole {
            first: a,
            end,
            len: e - s,
        });
        spans(funcs, e, hi, &mut pieces);
    } else {
        spans(funcs, lo, hi, &mut pieces);
    }
    pieces
}

/// The function (or gap) stretches of `[lo, hi)`, one by one.
fn spans(funcs: &[Func<'_>], lo: u64, hi: u64, pieces: &mut Vec<Piece>) {
    let mut at = lo;
    while at < hi {
        let (func, next) = match function_at(funcs, at) {
            Some(f) => (Some(f), funcs[f].end.min(hi)),
            None => {
                let next = funcs
                    .get(funcs.partition_point(|f| f.start <= at))
                    .map_or(hi, |f| f.start.min(hi));
                (None, next)
            }
        };
        pieces.push(Piece::Span {
            func,
            start: at,
            len: next - at,
        });
        at = next;
    }
}

/// Time spread evenly over runs of whole functions, kept as per-byte
/// densities in difference arrays over the function index and turned into
/// one tick per function at the end (at the function's start address).
struct Spread {
    /// Whole ticks given to all runs together: apportioned at the end.
    samples: i64,
    sample_density: Vec<f64>,
    nanos_density: Vec<f64>,
}

impl Spread {
    fn new(n: usize) -> Spread {
        Spread {
            samples: 0,
            sample_density: vec![0.0; n + 1],
            nanos_density: vec![0.0; n + 1],
        }
    }

    /// `samples` ticks and `nanos_per_byte` over the functions `first..end`,
    /// which are `len` bytes long together.
    fn add(&mut self, first: usize, end: usize, samples: i64, nanos_per_byte: f64, len: u64) {
        let per_byte = samples as f64 / len as f64;
        self.samples += samples;
        self.sample_density[first] += per_byte;
        self.sample_density[end] -= per_byte;
        self.nanos_density[first] += nanos_per_byte;
        self.nanos_density[end] -= nanos_per_byte;
    }

    fn ticks(&self, funcs: &[Func<'_>]) -> Vec<Tick> {
        if self.samples == 0 && self.nanos_density.iter().all(|&d| d == 0.0) {
            return Vec::new();
        }
        let (mut s, mut n) = (0.0, 0.0);
        let mut weights = Vec::with_capacity(funcs.len());
        let mut nanos = Vec::with_capacity(funcs.len());
        for (f, func) in funcs.iter().enumerate() {
            s += self.sample_density[f];
            n += self.nanos_density[f];
            let len = func.end.saturating_sub(func.start) as f64;
            weights.push((s * len).max(0.0));
            nanos.push((n * len).max(0.0).round() as i64);
        }
        let samples = apportion(self.samples, &weights);
        (0..funcs.len())
            .filter(|&f| samples[f] != 0 || nanos[f] != 0)
            .map(|f| Tick {
                func: Some(f),
                address: funcs[f].start,
                samples: samples[f],
                nanos: nanos[f],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::read::cursor::Endian;
    use crate::read::gprof::data::{Histogram, Variant};

    #[test]
    fn address_index_finds_what_a_binary_search_finds() {
        let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
        // Clustered text addresses, spread ones, the ends of the range.
        let shapes: [(usize, u64); 5] = [
            (0, 0),
            (1, 0),
            (50, 0x400),
            (5000, 0x20_0000),
            (3000, u64::MAX),
        ];
        for (n, mask) in shapes {
            let mut addresses: Vec<u64> = (0..n).map(|_| 0x40_0000 + (rng.next() & mask)).collect();
            if mask == u64::MAX {
                addresses.extend([0, 1, u64::MAX - 1, u64::MAX]);
            }
            addresses.sort_unstable();
            addresses.dedup();
            let index = AddressIndex::new(&addresses);
            let near = addresses
                .iter()
                .flat_map(|&a| [a.wrapping_sub(1), a, a.wrapping_add(1)]);
            let probes: Vec<u64> = near
                .chain([0, 1, 0x40_0000, u64::MAX])
                .chain((0..2000).map(|_| rng.next()))
                .collect();
            for probe in probes {
                let expected = addresses.partition_point(|&a| a < probe);
                let found = addresses.binary_search(&probe).is_ok();
                assert_eq!(
                    index.position(probe),
                    (expected, found),
                    "{probe:#x} among {n}"
                );
            }
        }
    }

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
    fn a_bin_over_many_whole_functions_shares_its_time_by_size_in_one_pass() {
        // 100 functions of 16 bytes from 0x1000 (and a 64-byte one after),
        // one bin over 0x1008..0x1648: half of the first, all of 2..99,
        // part of the last.
        let names: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
        let funcs: Vec<Func<'_>> = (0..101)
            .map(|i| Func {
                start: 0x1000 + 16 * i as u64,
                end: 0x1000 + 16 * i as u64 + if i == 100 { 64 } else { 16 },
                name: &names[i],
                system_name: &names[i],
            })
            .collect();
        let (lo, hi) = (0x1008, 0x1648);
        let pieces = bin_pieces(&funcs, lo, hi);
        assert!(pieces.len() <= 3, "{pieces:?}");
        let count = 3001;
        let data = data_with_bins(lo, hi, vec![count]);
        let ticks = assign_ticks(&data, &funcs, 1e7);
        let samples: i64 = ticks.iter().map(|t| t.samples).sum();
        assert_eq!(samples, count as i64, "every tick kept");
        let width = (hi - lo) as f64;
        for (f, func) in funcs.iter().enumerate() {
            let overlap = (func.end.min(hi)).saturating_sub(func.start.max(lo)) as f64;
            let want_ns = overlap * count as f64 / width * 1e7;
            let got: Vec<&Tick> = ticks.iter().filter(|t| t.func == Some(f)).collect();
            let ns: i64 = got.iter().map(|t| t.nanos).sum();
            let n: i64 = got.iter().map(|t| t.samples).sum();
            assert!(
                (ns as f64 - want_ns).abs() <= 1.0,
                "f{f}: {ns} ns, want {want_ns}"
            );
            assert!(
                (n as f64 - overlap * count as f64 / width).abs() < 1.0,
                "f{f}: {n} ticks"
            );
        }
    }
}
