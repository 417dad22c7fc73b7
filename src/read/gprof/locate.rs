//! Addresses → locations (§3). Every address the profile names (arc ends,
//! tick addresses, basic blocks) is known before any sample is added, so
//! each distinct address is looked up once, in address order
//! ([`Resolved::new`], while another thread builds the call graph and the
//! stacks); [`Locator`] then numbers the locations in order of first use, as
//! the samples are added. Memory: the frames of each distinct address.

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;

use super::data::GmonData;
use super::ticks::{function_at, Func, Tick};
use crate::profile::{FunctionId, Line, Location, LocationId, MappingId, Profile, SymbolFlags};
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
    out.sort_unstable();
    out.dedup();
    out
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

impl<'a> Resolved<'a> {
    /// Looks up every address of `addresses` (sorted: the line tables are
    /// read in address order) in `binary`.
    pub(super) fn new(binary: Option<&'a Binary>, funcs: &[Func<'a>], addresses: &[u64]) -> Self {
        let mut starts = Vec::with_capacity(addresses.len() + 1);
        // Mostly one frame per address.
        let mut frames = Vec::with_capacity(if binary.is_some() { addresses.len() } else { 0 });
        starts.push(0);
        for &address in addresses {
            if let Some(binary) = binary {
                let found = binary.frames_at(address);
                if found.is_empty() && !funcs.is_empty() {
                    // Padding between functions: gprof credits it to the
                    // symbol before it; outside every symbol it is `[unknown]`.
                    let (name, system) = function_at(funcs, address)
                        .map_or(("[unknown]", ""), |i| (funcs[i].name, funcs[i].system_name));
                    frames.push((Cow::Borrowed(name), Cow::Borrowed(system), "", 0));
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
            functions: HashMap::default(),
            found: SymbolFlags::default(),
        }
    }

    /// The location of `address` (one of the addresses resolved).
    pub(super) fn location(&mut self, profile: &mut Profile, address: u64) -> LocationId {
        self.at(profile, index_of(self.addresses, address))
    }

    /// The location of the `index`-th address.
    pub(super) fn at(&mut self, profile: &mut Profile, index: u32) -> LocationId {
        let index = index as usize;
        if self.ids[index] != u32::MAX {
            return LocationId::from_index(self.ids[index] as usize);
        }
        let frames = self.resolved.frames(index);
        self.found.inline_frames |= frames.len() > 1;
        let mut lines = Vec::with_capacity(frames.len());
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
