//! What an mpatrol profiling file holds (docs/formats/mpatrol.md §2): the
//! size bins, the allocation records and the call sites, as parsed.

use crate::read::cursor::Endian;

/// The magic at the start and at the end of every profiling file.
pub const MAGIC: &[u8; 4] = b"MPTL";

/// The first library version (1.3.0) that wrote its version number after the
/// endianness marker; mprof refuses anything older.
pub const FIRST_VERSIONED: u64 = 10300;

/// Versions are `major * 10000 + minor * 100 + patch`: anything at or past
/// this is not a version (docs/formats/mpatrol.md §2).
pub(super) const VERSION_LIMIT: u64 = 1_000_000;

/// Words in one profiling record: index, then four arrays of four.
pub(super) const RECORD_WORDS: usize = 17;
/// Words in one call site.
pub(super) const CALL_SITE_WORDS: usize = 6;

/// The four size classes of a profiling record (docs/formats/mpatrol.md §2).
pub const SIZE_CLASSES: [&str; 4] = ["small", "medium", "large", "xlarge"];

/// At most this many frames in all the samples' stacks together: a small
/// hostile file can chain its call sites so that the stacks grow with the
/// square of its size, and the profile holds every frame.
pub const MAX_STACK_FRAMES: u64 = 1 << 24;

/// The whole-program size histogram (docs/formats/mpatrol.md §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeBins {
    /// `alloc_counts[k]`: allocations of exactly `k + 1` bytes, except the
    /// last bin, which counts every allocation of `B` bytes or more.
    pub alloc_counts: Vec<u64>,
    /// Bytes of the allocations counted in the last bin.
    pub alloc_large_bytes: u64,
    /// Free counts per bin.
    pub free_counts: Vec<u64>,
    /// Bytes freed in the last bin.
    pub free_large_bytes: u64,
}

/// Totals of one side (allocations or frees) of the histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BinTotals {
    /// How many allocations (or frees).
    pub count: u128,
    /// How many bytes.
    pub bytes: u128,
    /// Count and bytes of the last ("B bytes or more") bin.
    pub large_count: u64,
    /// Bytes of the allocations in the last bin.
    pub large_bytes: u64,
}

impl SizeBins {
    fn totals(counts: &[u64], large_bytes: u64) -> BinTotals {
        let mut t = BinTotals {
            large_bytes,
            ..BinTotals::default()
        };
        let last = counts.len().saturating_sub(1);
        for (k, &n) in counts.iter().enumerate() {
            t.count += u128::from(n);
            if k == last {
                t.large_count = n;
                t.bytes += u128::from(large_bytes);
            } else {
                t.bytes += u128::from(n) * (k as u128 + 1);
            }
        }
        t
    }

    /// What mprof's bin table sums as "allocated".
    pub fn alloc_totals(&self) -> BinTotals {
        Self::totals(&self.alloc_counts, self.alloc_large_bytes)
    }

    /// Totals of the free bins.
    pub fn free_totals(&self) -> BinTotals {
        Self::totals(&self.free_counts, self.free_large_bytes)
    }
}

/// One profiling record: what the allocations of one call stack did, split
/// by size class (docs/formats/mpatrol.md §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilingRecord {
    /// Byte offset of the record in the file.
    pub offset: usize,
    /// 1-based, in creation order.
    pub index: u64,
    /// Allocations per size class.
    pub alloc_count: [u64; 4],
    /// Bytes allocated per size class.
    pub alloc_bytes: [u64; 4],
    /// Frees per size class.
    pub free_count: [u64; 4],
    /// Bytes freed per size class.
    pub free_bytes: [u64; 4],
}

/// One call site: a return address in a call stack (docs/formats/mpatrol.md §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// Byte offset of the call site in the file.
    pub offset: usize,
    /// 1-based, in creation order.
    pub index: u64,
    /// The call site one frame further out, 0 = none.
    pub parent: u64,
    /// The return address.
    pub address: u64,
    /// 1-based index into the symbol addresses, 0 = unknown.
    pub symbol: u64,
    /// Offset of the function name in the string table, 0 = no name.
    pub name_offset: u64,
    /// 1-based index of the profiling record this call site carries, 0 = none.
    pub record: u64,
}

/// Everything an `mpatrol.out` file holds, checked.
#[derive(Debug, Clone)]
pub struct MpatrolFile {
    /// Byte order of the file.
    pub endian: Endian,
    /// Word size of the file in bytes.
    pub word_size: usize,
    /// `MP_VERNUM` of the library that wrote the file.
    pub version: u64,
    /// The small, medium and large allocation bounds, in bytes.
    pub bounds: [u64; 3],
    /// The size histogram; `None` when the bin count is 0.
    pub bins: Option<SizeBins>,
    /// In file order.
    pub records: Vec<ProfilingRecord>,
    /// In file order (sorted by address, not by index).
    pub call_sites: Vec<CallSite>,
    /// Start addresses of the functions the call sites are in.
    pub symbol_addresses: Vec<u64>,
    /// The string table, leading NUL included.
    pub strings: Vec<u8>,
    /// Frames in the stacks of all profiling records together.
    pub stack_frames: u64,
    /// `call_site_of_index[i - 1]`: position in `call_sites` of the call site with index `i`.
    pub(super) call_site_of_index: Vec<usize>,
    /// `record_of_index[i - 1]`: position in `records` of the record with index `i`.
    pub(super) record_of_index: Vec<usize>,
}

impl MpatrolFile {
    /// `1.4.8` for 10408.
    pub fn version_text(&self) -> String {
        version_text(self.version)
    }

    /// The call site with 1-based `index`.
    #[cfg(test)]
    pub fn call_site(&self, index: u64) -> Option<&CallSite> {
        let i = usize::try_from(index.checked_sub(1)?).ok()?;
        self.call_sites.get(*self.call_site_of_index.get(i)?)
    }

    /// The profiling record with 1-based `index`.
    pub fn record(&self, index: u64) -> Option<&ProfilingRecord> {
        let i = usize::try_from(index.checked_sub(1)?).ok()?;
        self.records.get(*self.record_of_index.get(i)?)
    }

    /// The function name of a call site, from the string table (lossy UTF-8).
    pub fn name(&self, site: &CallSite) -> Option<String> {
        if site.name_offset == 0 {
            return None;
        }
        let start = usize::try_from(site.name_offset).ok()?;
        let tail = self.strings.get(start..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&tail[..end]).into_owned())
    }

    /// The start address of the function a call site is in.
    pub fn symbol_address(&self, site: &CallSite) -> Option<u64> {
        let i = usize::try_from(site.symbol.checked_sub(1)?).ok()?;
        self.symbol_addresses.get(i).copied()
    }

    /// The stack of a call site, leaf first: it, its parent, and so on.
    /// [`super::parse`] has already refused missing parents and loops.
    #[cfg(test)]
    pub fn stack<'a>(&'a self, site: &'a CallSite) -> Vec<&'a CallSite> {
        let mut out = vec![site];
        let mut parent = site.parent;
        while parent != 0 && out.len() <= self.call_sites.len() {
            let Some(p) = self.call_site(parent) else {
                break;
            };
            out.push(p);
            parent = p.parent;
        }
        out
    }

    /// The same stack as positions in `call_sites`.
    pub(super) fn stack_positions(&self, start: usize, out: &mut Vec<usize>) {
        out.clear();
        let mut pos = Some(start);
        while let Some(p) = pos {
            if out.len() > self.call_sites.len() {
                break;
            }
            out.push(p);
            pos = self
                .call_sites
                .get(p)
                .and_then(|s| s.parent.checked_sub(1))
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.call_site_of_index.get(i).copied());
        }
    }

    /// Sums of the records per size class: (alloc count, alloc bytes, free count, free bytes).
    pub fn class_totals(&self) -> [[u128; 4]; 4] {
        let mut out = [[0u128; 4]; 4];
        for r in &self.records {
            for (k, class) in out.iter_mut().enumerate() {
                class[0] += u128::from(r.alloc_count[k]);
                class[1] += u128::from(r.alloc_bytes[k]);
                class[2] += u128::from(r.free_count[k]);
                class[3] += u128::from(r.free_bytes[k]);
            }
        }
        out
    }
}

pub(super) fn version_text(v: u64) -> String {
    format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_splits_major_minor_patch() {
        assert_eq!(version_text(10408), "1.4.8");
        assert_eq!(version_text(10300), "1.3.0");
        assert_eq!(version_text(10501), "1.5.1");
    }

    #[test]
    fn bin_totals_count_the_last_bin_by_its_bytes() {
        let bins = SizeBins {
            alloc_counts: vec![2, 0, 1, 3],
            alloc_large_bytes: 100,
            free_counts: vec![1, 0, 0, 0],
            free_large_bytes: 0,
        };
        let a = bins.alloc_totals();
        assert_eq!((a.count, a.bytes, a.large_count), (6, 2 + 3 + 100, 3));
        assert_eq!(bins.free_totals().bytes, 1);
    }
}
