//! What a gmon.out holds once parsed, whatever its layout (§1): histograms,
//! call arcs and basic-block counts, and how several files are summed
//! (like `gprof -s`).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::read::cursor::Endian;

/// Which layout a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// GNU tagged records.
    Gnu,
    /// 4.4BSD header.
    Bsd44,
    /// 4.3BSD header (no rate).
    Bsd43,
}

impl Variant {
    /// How `info` names the variant.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Gnu => "GNU gmon.out (tagged records)",
            Variant::Bsd44 => "4.4BSD gmon.out",
            Variant::Bsd43 => "4.2/4.3BSD gmon.out",
        }
    }

    /// True when the file states its byte order (the GNU version word);
    /// the BSD layouts' is inferred from their sizes.
    pub fn records_byte_order(self) -> bool {
        self == Variant::Gnu
    }
}

/// A PC histogram: `bins[i]` counts ticks in `[low_pc + i·w, low_pc + (i+1)·w)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// First address covered by the bins.
    pub low_pc: u64,
    /// One past the last address covered.
    pub high_pc: u64,
    /// Clock ticks per second.
    pub prof_rate: u32,
    /// The dimension's name (`seconds`).
    pub dimension: String,
    /// Its abbreviation (`s`).
    pub dimension_abbrev: char,
    /// Counts (summed over records and files, so wider than the file's u16).
    pub bins: Bins,
}

impl Histogram {
    /// Sum of all bins.
    pub fn total(&self) -> u64 {
        self.bins
            .nonzero()
            .fold(0u64, |t, (_, b)| t.saturating_add(b))
    }

    /// Bytes of text per bin.
    pub fn scale(&self) -> f64 {
        (self.high_pc - self.low_pc) as f64 / self.bins.len().max(1) as f64
    }

    /// gprof's bin width, in its 2-byte units (`UNIT`, binutils
    /// `gprof/hist.c` `read_histogram_header`): the byte span halved first
    /// (an integer division), then divided by the bin count (§1.2).
    pub fn units_per_bin(&self) -> f64 {
        ((self.high_pc - self.low_pc) / 2) as f64 / self.bins.len().max(1) as f64
    }
}

/// A histogram's counts, the non-zero ones by index: a program's histogram
/// covers its whole text, and few bins are ever hit (153 of the 417 124 of
/// the 20 000-function benchmark's), so the zeros are only counted. Equal to
/// a `Vec<u64>` of the same counts, zeros included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bins {
    len: usize,
    /// (index, count) of every non-zero bin, by index.
    nonzero: Vec<(usize, u64)>,
}

impl Bins {
    /// How many bins, zeros included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The non-zero bins, (index, count), by index.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.nonzero.iter().copied()
    }

    /// Every count, zeros included.
    pub fn to_vec(&self) -> Vec<u64> {
        let mut out = vec![0; self.len];
        for &(i, count) in &self.nonzero {
            out[i] = count;
        }
        out
    }

    /// Adds `other`'s counts bin by bin, saturating (the bins of the
    /// longer of the two).
    pub fn add(&mut self, other: &Bins) {
        self.len = self.len.max(other.len);
        let (a, b) = (&self.nonzero, &other.nonzero);
        let mut sum = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
            sum.push(match x.0.cmp(&y.0) {
                Ordering::Less => {
                    i += 1;
                    x
                }
                Ordering::Greater => {
                    j += 1;
                    y
                }
                Ordering::Equal => {
                    (i, j) = (i + 1, j + 1);
                    (x.0, x.1.saturating_add(y.1))
                }
            });
        }
        sum.extend_from_slice(&a[i..]);
        sum.extend_from_slice(&b[j..]);
        self.nonzero = sum;
    }

    /// `len` bins, the non-zero ones `nonzero` (by index, each below `len`).
    pub(super) fn from_nonzero(len: usize, nonzero: Vec<(usize, u64)>) -> Self {
        debug_assert!(nonzero.iter().all(|&(i, c)| i < len && c != 0));
        debug_assert!(nonzero.windows(2).all(|w| w[0].0 < w[1].0));
        Bins { len, nonzero }
    }
}

impl FromIterator<u64> for Bins {
    /// The bins of these counts, in order.
    fn from_iter<I: IntoIterator<Item = u64>>(counts: I) -> Self {
        let mut bins = Bins::default();
        for count in counts {
            if count != 0 {
                bins.nonzero.push((bins.len, count));
            }
            bins.len += 1;
        }
        bins
    }
}

impl PartialEq<Vec<u64>> for Bins {
    fn eq(&self, counts: &Vec<u64>) -> bool {
        self.len == counts.len() && self.to_vec() == *counts
    }
}

/// A call-graph arc: `from_pc` is an address in the caller, `self_pc` an
/// address in the callee. The spec calls `from_pc` a return address, but
/// glibc writes the start of the 16-byte hash bucket the return address fell
/// in (and `gprof -s` writes the caller's first byte), so it is looked up
/// as is, like gprof does, not at `from_pc − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallArc {
    /// Caller site (a return address, or the caller's start in gmon.sum).
    pub from_pc: u64,
    /// Callee address.
    pub self_pc: u64,
    /// Calls along the arc.
    pub count: u64,
}

/// What one or more gmon.out files hold.
#[derive(Debug, Clone, PartialEq)]
pub struct GmonData {
    /// Which layout the file had.
    pub variant: Variant,
    /// Its byte order.
    pub endian: Endian,
    /// Its address size in bytes.
    pub pointer_size: usize,
    /// Histograms, summed per address range.
    pub histograms: Vec<Histogram>,
    /// Summed per (from_pc, self_pc), sorted.
    pub arcs: Vec<CallArc>,
    /// Basic-block execution counts per address, summed.
    pub basic_blocks: BTreeMap<u64, u64>,
    /// Bins at 65535, the u16 ceiling: the counts there are lower bounds.
    pub saturated_bins: usize,
    /// True when the clock rate was not in the file (4.3BSD).
    pub rate_assumed: bool,
    /// Histogram and arc records read (before summing).
    pub histogram_records: usize,
    /// Arc records read.
    pub arc_records: usize,
    /// Basic-block records read.
    pub bb_records: usize,
}

/// Sums the data of several files of one program (like `gprof -s`).
/// `earlier` names the files `a` came from, for the errors.
pub fn sum(file: &Path, earlier: &str, mut a: GmonData, b: GmonData) -> Result<GmonData> {
    let mut ranges = Ranges::new();
    let earlier = format!("in {earlier}");
    for h in b.histograms {
        add_histogram(file, (0, &earlier), &mut a.histograms, &mut ranges, h)?;
    }
    a.arcs.extend(b.arcs);
    a.arcs = merge_arcs(std::mem::take(&mut a.arcs));
    for (addr, n) in b.basic_blocks {
        add_count(a.basic_blocks.entry(addr).or_insert(0), n);
    }
    a.saturated_bins += b.saturated_bins;
    a.rate_assumed |= b.rate_assumed;
    a.histogram_records += b.histogram_records;
    a.arc_records += b.arc_records;
    a.bb_records += b.bb_records;
    Ok(a)
}

/// Arcs summed per (from_pc, self_pc), sorted: the records in any order,
/// as read. A sort and one pass instead of a hash map grown record by
/// record (a gmon.out of 20 000 functions has 33 000 arcs, each once).
pub(super) fn merge_arcs(mut arcs: Vec<CallArc>) -> Vec<CallArc> {
    // By call site, then each site's few callees. glibc writes the arcs by
    // call site already: the stable sort finds them in order (runs, for
    // several files) and only looks.
    arcs.sort_by_key(|a| a.from_pc);
    for site in arcs.chunk_by_mut(|a, b| a.from_pc == b.from_pc) {
        site.sort_unstable_by_key(|a| a.self_pc);
    }
    arcs.dedup_by(|next, kept| {
        let same = (next.from_pc, next.self_pc) == (kept.from_pc, kept.self_pc);
        if same {
            add_count(&mut kept.count, next.count);
        }
        same
    });
    arcs
}

/// Adds a count from the file to a running total: counts are the file's to
/// choose, so the sum saturates instead of overflowing.
pub(super) fn add_count(total: &mut u64, count: u64) {
    *total = total.saturating_add(count);
}

/// The histograms kept so far by range: `(low_pc, high_pc, bins)` → the
/// index in the list. Ranges are equal or disjoint (any other overlap is
/// refused), so ordered by `low_pc` they are ordered by `high_pc` too.
pub(super) type Ranges = std::collections::BTreeMap<(u64, u64, usize), usize>;

/// Adds a histogram record: equal ranges are summed bin by bin, others kept
/// apart (§1). `index` finds a range among `hists` (filled from them when
/// empty).
///
/// Histograms that gprof would not put together are refused, as gprof
/// does: another clock rate or dimension, another bin width ("different
/// scales in histogram records"), or a range that overlaps an earlier one
/// without being the same ("overlapping histogram records"): most often
/// the gmon.out files of two different programs. `earlier` says where the
/// histograms already in `hists` came from.
pub(super) fn add_histogram(
    file: &Path,
    (offset, earlier): (usize, &str),
    hists: &mut Vec<Histogram>,
    index: &mut Ranges,
    h: Histogram,
) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::format(
            file,
            offset as u64,
            format!(
                "{why}; gprof refuses to combine them too (are these profiles of one program?)"
            ),
        ))
    };
    if let Some(first) = hists.first() {
        if first.prof_rate != h.prof_rate || first.dimension != h.dimension {
            return refuse(format!(
                "this histogram at {} Hz ({}) cannot be combined with the one {earlier} at {} Hz ({})",
                h.prof_rate, h.dimension, first.prof_rate, first.dimension
            ));
        }
        let (a, b) = (first.units_per_bin(), h.units_per_bin());
        if (a - b).abs() > 1e-6 {
            return refuse(format!(
                "this histogram's bins cover {:.4} bytes each ({} bins over {:#x}..{:#x}), the one {earlier} {:.4} bytes ({} bins over {:#x}..{:#x})",
                2.0 * b, h.bins.len(), h.low_pc, h.high_pc,
                2.0 * a, first.bins.len(), first.low_pc, first.high_pc
            ));
        }
    }
    if index.is_empty() && !hists.is_empty() {
        index.extend(
            hists
                .iter()
                .enumerate()
                .map(|(i, o)| ((o.low_pc, o.high_pc, o.bins.len()), i)),
        );
    }
    // The last range starting below this one's end has the highest end of
    // those: if it does not reach past this one's start, none does.
    let last_below = index.range(..(h.high_pc, 0, 0)).next_back();
    if let Some((&(low, high, _), _)) = last_below {
        if high > h.low_pc && (low, high) != (h.low_pc, h.high_pc) {
            return refuse(format!(
                "this histogram's range {:#x}..{:#x} overlaps the one {earlier} ({low:#x}..{high:#x}) without being the same",
                h.low_pc, h.high_pc
            ));
        }
    }
    let key = (h.low_pc, h.high_pc, h.bins.len());
    if let Some(same) = index.get(&key).and_then(|&i| hists.get_mut(i)) {
        same.bins.add(&h.bins);
    } else {
        index.insert(key, hists.len());
        hists.push(h);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{add_histogram, merge_arcs, Bins, CallArc, Histogram, Ranges};

    #[test]
    fn bins_add_as_dense_counts_do() {
        let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
        for len in [0, 1, 5, 300] {
            for _ in 0..20 {
                // Mostly zeros; some counts at the top, so that sums saturate.
                let mut dense = || -> Vec<u64> {
                    (0..len)
                        .map(|_| match rng.below(10) {
                            0 => u64::MAX - rng.below(2),
                            1..=3 => 1 + rng.below(70_000),
                            _ => 0,
                        })
                        .collect()
                };
                let (a, b) = (dense(), dense());
                let mut sum: Bins = a.iter().copied().collect();
                assert_eq!(sum, a);
                assert_eq!(sum.len(), len);
                sum.add(&b.iter().copied().collect());
                let expected: Vec<u64> = a
                    .iter()
                    .zip(&b)
                    .map(|(x, y)| x.saturating_add(*y))
                    .collect();
                assert_eq!(sum.to_vec(), expected);
                assert!(sum.nonzero().all(|(_, c)| c != 0));
            }
        }
    }

    #[test]
    fn merged_arcs_are_the_sums_per_pair_in_pair_order() {
        let mut rng = crate::test_rng::XorShift(0x2545_f491_4f6c_dd1d);
        for len in [0, 1, 7, 5000] {
            // Few distinct pairs, so that most records repeat one; some
            // counts near the top, so that sums saturate.
            let arcs: Vec<CallArc> = (0..len)
                .map(|_| CallArc {
                    from_pc: 0x1000 + rng.below(40),
                    self_pc: 0x2000 + rng.below(40),
                    count: match rng.below(50) {
                        0 => u64::MAX - rng.below(3),
                        _ => rng.below(1000),
                    },
                })
                .collect();
            let mut sums: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            for a in &arcs {
                let sum = sums.entry((a.from_pc, a.self_pc)).or_insert(0);
                *sum = sum.saturating_add(a.count);
            }
            let expected: Vec<CallArc> = sums
                .into_iter()
                .map(|((from_pc, self_pc), count)| CallArc {
                    from_pc,
                    self_pc,
                    count,
                })
                .collect();
            assert_eq!(merge_arcs(arcs), expected, "{len} records");
        }
    }

    fn hist(low_pc: u64, high_pc: u64) -> Histogram {
        Histogram {
            low_pc,
            high_pc,
            prof_rate: 100,
            dimension: "seconds".into(),
            dimension_abbrev: 's',
            bins: vec![1; ((high_pc - low_pc) / 4) as usize]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn equal_ranges_are_summed_disjoint_kept_and_overlapping_refused() {
        let file = std::path::Path::new("x");
        let (mut hists, mut index) = (Vec::new(), Ranges::new());
        // Many disjoint records, given out of order.
        for k in (0..2000u64).rev() {
            let at = 0x1000 + 0x100 * k;
            add_histogram(
                file,
                (0, "before"),
                &mut hists,
                &mut index,
                hist(at, at + 0x80),
            )
            .unwrap();
        }
        add_histogram(
            file,
            (0, "before"),
            &mut hists,
            &mut index,
            hist(0x1000, 0x1080),
        )
        .unwrap();
        assert_eq!(hists.len(), 2000, "the equal range is summed");
        let summed = hists.iter().find(|h| h.low_pc == 0x1000).unwrap();
        assert!(summed.bins.nonzero().all(|(_, c)| c == 2));
        for (low, high) in [(0x1040, 0x10c0), (0x0f80, 0x1010), (0x1100, 0x1180 + 0x10)] {
            let e = add_histogram(file, (0, "before"), &mut hists, &mut index, hist(low, high));
            let message = e.unwrap_err().to_string();
            assert!(
                message.contains("overlaps the one before"),
                "{low:#x}..{high:#x}: {message}"
            );
        }
        // Touching ranges do not overlap.
        add_histogram(
            file,
            (0, "before"),
            &mut hists,
            &mut index,
            hist(0x1080, 0x1100),
        )
        .unwrap();
        assert_eq!(hists.len(), 2001);
    }
}
