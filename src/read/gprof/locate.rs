//! Addresses → locations (§3). Every address the profile names (arc ends,
//! tick addresses, basic blocks) is known before any sample is added, so
//! each distinct address is looked up once, in address order
//! ([`Resolved::new`]: one pass over the line tables, while another thread
//! builds the call graph and the stacks, [`resolve_beside`]); [`Locator`]
//! then numbers the locations in order of first use, as the samples are
//! added. Memory: the frames of each distinct address, and the file names
//! of the units they fall in.

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;

use super::data::GmonData;
use super::ticks::{function_at, Func, Tick};
use crate::profile::{
    FunctionId, Line, Lines, Location, LocationId, MappingId, Profile, SymbolFlags,
};
use crate::symbolize::{Binary, RawFrame};

/// Every address the profile may name, sorted and distinct.
pub(super) fn addresses(data: &GmonData, ticks: &[Tick]) -> Vec<u64> {
    let mut out: Vec<u64> = data
        .arcs
        .iter()
        .flat_map(|a| [a.self_pc, a.from_pc])
        .chain(ticks.iter().map(|t| t.address))
        .chain(data.basic_blocks.keys().copied())
        .collect();
    radix_sort(&mut out);
    out.dedup();
    out
}

/// Sorts `values` by bytes, least significant first (LSD radix sort),
/// skipping the bytes every value shares (the high bytes of addresses in
/// one executable): a few linear passes instead of a comparison sort.
fn radix_sort(values: &mut Vec<u64>) {
    let (Some(&first), true) = (values.first(), values.len() > 64) else {
        values.sort_unstable();
        return;
    };
    let differing = values.iter().fold(0u64, |acc, &v| acc | (v ^ first));
    let mut other = vec![0u64; values.len()];
    for shift in (0..64).step_by(8) {
        if (differing >> shift) & 0xff == 0 {
            continue;
        }
        let mut counts = [0usize; 256];
        for &v in values.iter() {
            counts[((v >> shift) & 0xff) as usize] += 1;
        }
        let mut start = 0;
        for count in counts.iter_mut() {
            (*count, start) = (start, start + *count);
        }
        for &v in values.iter() {
            let slot = &mut counts[((v >> shift) & 0xff) as usize];
            other[*slot] = v;
            *slot += 1;
        }
        std::mem::swap(values, &mut other);
    }
}

/// The index of `address` in the sorted `addresses` (where it is).
pub(super) fn index_of(addresses: &[u64], address: u64) -> u32 {
    addresses.partition_point(|&a| a < address) as u32
}

/// The frames of each address, innermost first, borrowed from the binary.
pub(super) struct Resolved<'a> {
    /// Frames of the i-th address: `frames[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
    frames: Vec<RawFrame<'a>>,
}

/// The frame gprof gives an address in the padding between functions: the
/// symbol before it, or `[unknown]` outside every symbol (§3).
fn padding_frame<'a>(funcs: &[Func<'a>], address: u64) -> RawFrame<'a> {
    let (name, system) = function_at(funcs, address)
        .map_or(("[unknown]", ""), |i| (funcs[i].name, funcs[i].system_name));
    (Cow::Borrowed(name), Cow::Borrowed(system), "", 0)
}

impl<'a> Resolved<'a> {
    /// Looks up every address of `addresses` (sorted) in `binary`: the
    /// files and lines of single frames in one pass over the line tables
    /// ([`Binary::sorted_lines`], their file names kept in `files`, which
    /// the frames borrow), anything else through addr2line.
    pub(super) fn new(
        binary: Option<&'a Binary>,
        funcs: &[Func<'a>],
        addresses: &[u64],
        files: &'a mut Vec<String>,
    ) -> Self {
        let mut starts = Vec::with_capacity(addresses.len() + 1);
        // Mostly one frame per address.
        let mut frames = Vec::with_capacity(if binary.is_some() { addresses.len() } else { 0 });
        starts.push(0);
        let sorted = binary.and_then(|b| b.sorted_lines(addresses));
        let found = match sorted {
            Some(sorted) => {
                *files = sorted.files;
                sorted.found
            }
            None => Vec::new(),
        };
        let files: &'a [String] = files;
        let mut cursor = 0; // the symbols below the address (ascending)
        for (i, &address) in addresses.iter().enumerate() {
            if let Some(binary) = binary {
                // The one frame of an address, without a frame list.
                // addr2line's reader opens only if an address needs it.
                let view = binary.symbol_view();
                let one = match found.get(i).and_then(|f| f.location(files)) {
                    Some(location) => view.single_frame_with(address, location, &mut cursor),
                    None => binary
                        .dwarf_reader()
                        .and_then(|dwarf| view.single_frame_at(dwarf, address)),
                };
                if let Some((sym, file, line)) = one {
                    let (name, system) = (sym.name.as_str(), sym.system_name.as_str());
                    frames.push((Cow::Borrowed(name), Cow::Borrowed(system), file, line));
                    starts.push(frames.len());
                    continue;
                }
                let found = binary.frames_at(address);
                if found.is_empty() && !funcs.is_empty() {
                    frames.push(padding_frame(funcs, address));
                } else {
                    frames.extend(found);
                }
            }
            starts.push(frames.len());
        }
        Resolved { starts, frames }
    }

    fn frames(&self, index: usize) -> &[RawFrame<'a>] {
        &self.frames[self.starts[index]..self.starts[index + 1]]
    }
}

/// Looks every address up, as [`Resolved::new`], while `beside` runs on
/// another thread.
pub(super) fn resolve_beside<'a, T: Send>(
    binary: Option<&'a Binary>,
    funcs: &[Func<'a>],
    addresses: &[u64],
    beside: impl FnOnce() -> T + Send,
    files: &'a mut Vec<String>,
) -> (Resolved<'a>, T) {
    std::thread::scope(|scope| {
        let beside = scope.spawn(beside);
        let resolved = Resolved::new(binary, funcs, addresses, files);
        let beside = beside
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (resolved, beside)
    })
}

/// A function's names and file, by where their bytes are: equal keys are
/// equal strings (every string is alive while the locator is), so a hit
/// skips interning three strings; equal strings elsewhere only miss.
type FunctionKey = [usize; 6];

/// Builds locations from [`Resolved`] frames, numbered in order of first use.
pub(super) struct Locator<'r, 'a> {
    addresses: &'r [u64],
    resolved: &'r Resolved<'a>,
    mapping: MappingId,
    /// The location of each address once used (`u32::MAX` before).
    ids: Vec<u32>,
    functions: HashMap<FunctionKey, FunctionId>,
    /// What the locations used so far carry.
    pub(super) found: SymbolFlags,
}

impl<'r, 'a> Locator<'r, 'a> {
    pub(super) fn new(
        addresses: &'r [u64],
        resolved: &'r Resolved<'a>,
        mapping: MappingId,
    ) -> Self {
        Locator {
            addresses,
            resolved,
            mapping,
            ids: vec![u32::MAX; addresses.len()],
            // At most one function per frame; about one per two here.
            functions: HashMap::with_capacity_and_hasher(
                resolved.frames.len() / 2,
                Default::default(),
            ),
            found: SymbolFlags::default(),
        }
    }

    /// The location of `address` (one of the addresses resolved).
    pub(super) fn location(&mut self, profile: &mut Profile, address: u64) -> LocationId {
        self.at(profile, index_of(self.addresses, address))
    }

    /// The location of the `index`-th address.
    #[inline]
    pub(super) fn at(&mut self, profile: &mut Profile, index: u32) -> LocationId {
        let index = index as usize;
        match self.ids[index] {
            u32::MAX => self.add(profile, index),
            id => LocationId::from_index(id as usize),
        }
    }

    /// Adds the location of the `index`-th address, at its first use.
    #[inline(never)]
    fn add(&mut self, profile: &mut Profile, index: usize) -> LocationId {
        let frames = self.resolved.frames(index);
        self.found.inline_frames |= frames.len() > 1;
        let mut lines = Lines::with_capacity(frames.len());
        for frame in frames {
            self.found.filenames |= !frame.2.is_empty();
            self.found.line_numbers |= frame.3 > 0;
            let function = self.function(profile, frame);
            lines.push(Line {
                function,
                line: frame.3,
            });
        }
        // Each address is one location: nothing to look up.
        let id = profile.add_distinct_location(Location {
            mapping: Some(self.mapping),
            address: self.addresses[index],
            is_return_address: false,
            lines,
        });
        self.ids[index] = id.index() as u32;
        id
    }

    fn function(
        &mut self,
        profile: &mut Profile,
        (name, system, file, _): &RawFrame<'_>,
    ) -> FunctionId {
        let at = |s: &str| [s.as_ptr() as usize, s.len()];
        let ([a, b], [c, d], [e, f]) = (at(name), at(system), at(file));
        *self
            .functions
            .entry([a, b, c, d, e, f])
            .or_insert_with(|| profile.add_function(name, system, file, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::radix_sort;

    #[test]
    fn radix_sort_sorts_like_sort_unstable() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (len, mask) in [
            (0, u64::MAX),
            (10, u64::MAX),
            (1000, u64::MAX),
            (5000, 0xf_ffff),
        ] {
            let mut values: Vec<u64> = (0..len).map(|_| 0x40_0000 + (next() & mask)).collect();
            let mut expected = values.clone();
            expected.sort_unstable();
            radix_sort(&mut values);
            assert_eq!(values, expected);
        }
    }
}
