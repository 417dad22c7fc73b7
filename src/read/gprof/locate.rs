//! Addresses → locations (§3). Every address the profile names (arc ends,
//! tick addresses, basic blocks) is known before any sample is added, so
//! each distinct address is looked up once, in address order
//! ([`Resolved::new`]: one pass over the line tables). [`Numbering`]
//! numbers the locations of the addresses the samples will name, in address
//! order, before any is made: the call graph's call sites and the samples
//! name them by these numbers, which [`add_all_locations`] makes the
//! locations' ids. Memory: the frames of each distinct address, and the
//! file names of the units they fall in.

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;

use super::data::GmonData;
use super::ticks::{callee_at, function_at, index_of, Func, Tick, UNCREDITED, UNCREDITED_NAME};
use crate::profile::{
    FunctionId, Line, Lines, Location, LocationId, MappingId, Profile, SymbolFlags,
};
use crate::symbolize::lines::{Found, SortedLines};
use crate::symbolize::{Binary, FunctionSymbol, RawFrame};

/// The addresses of the arcs' ends, sorted and distinct: the addresses an
/// unsymbolized profile names for its arcs.
fn arc_ends(data: &GmonData) -> Vec<u64> {
    let mut out: Vec<u64> = data
        .arcs
        .iter()
        .flat_map(|a| [a.self_pc, a.from_pc])
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Every address the profile may name, sorted and distinct: the ticks' and
/// the basic blocks', and the arcs' ends ([`arc_ends`]). With functions
/// (a binary), an arc's callee is named by the entry of the function gprof
/// counts the call for (§3.3), so its `self_pc` is not needed: only the
/// call sites (`from_pc`) and those entries are named. With functions,
/// also each arc's callee ([`callee_at`], `u32::MAX` for none), found once
/// here for the call graph too.
pub(super) fn addresses(
    data: &GmonData,
    funcs: &[Func<'_>],
    ticks: &[Tick],
) -> (Vec<u64>, Vec<u32>) {
    let mut rest: Vec<u64> = ticks
        .iter()
        .map(|t| t.address)
        .chain(data.basic_blocks.keys().copied())
        .collect();
    let mut callees = Vec::new();
    let ends = if funcs.is_empty() {
        arc_ends(data)
    } else {
        callees.reserve(data.arcs.len());
        let starts: Vec<u64> = funcs.iter().map(|f| f.start).collect();
        let mut called = vec![false; funcs.len()];
        for arc in &data.arcs {
            let callee = callee_at(funcs, &starts, arc.self_pc);
            callees.push(callee.map_or(u32::MAX, |f| f as u32));
            if let Some(f) = callee {
                called[f] = true;
            }
        }
        // Each entry once, in order.
        let entries = starts.iter().zip(&called).filter(|(_, &c)| c);
        rest.extend(entries.map(|(&start, _)| start));
        // The arcs come sorted by `from_pc` (`merge_arcs`): then the sort
        // only looks.
        let mut sites: Vec<u64> = data.arcs.iter().map(|a| a.from_pc).collect();
        sites.sort_unstable();
        sites.dedup();
        sites
    };
    if rest.is_empty() {
        return (ends, callees);
    }
    // A few runs in order (the ticks', the basic blocks', the entries'):
    // the stable sort merges them.
    rest.sort();
    rest.dedup();
    (merge_distinct(&ends, &rest), callees)
}

/// The values of two sorted, distinct lists, sorted and distinct.
fn merge_distinct(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        out.push(x.min(y));
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The frames of each address, innermost first, borrowed from the binary.
pub(super) struct Resolved<'a> {
    /// The symbols and the line tables' file names that [`OneFrame`]s name.
    symbols: &'a [FunctionSymbol],
    files: &'a [String],
    /// The one frame of each address the line tables answered for, or
    /// [`OneFrame::NONE`]: most addresses, 16 bytes each instead of a frame.
    one: Vec<OneFrame>,
    /// The frames of the other addresses: those of the i-th are
    /// `frames[starts[i]..starts[i + 1]]` (none for one with a [`OneFrame`]).
    starts: Vec<usize>,
    frames: Vec<RawFrame<'a>>,
}

/// A single frame found in one pass over the line tables: its symbol and
/// file (indexes into [`Resolved`]'s) and line.
#[derive(Debug, Clone, Copy)]
struct OneFrame {
    symbol: u32,
    /// `u32::MAX`: no file.
    file: u32,
    line: i64,
}

impl OneFrame {
    /// The address's frames are a [`RawFrame`] list.
    const NONE: OneFrame = OneFrame {
        symbol: u32::MAX,
        file: u32::MAX,
        line: 0,
    };

    /// True for [`OneFrame::NONE`].
    fn is_none(self) -> bool {
        self.symbol == u32::MAX
    }
}

/// A frame's function name, name in the symbol table, file and line.
type Frame<'r> = (&'r str, &'r str, &'r str, i64);

/// The one frame of `address` in `binary`, its file and line `found` in the
/// line tables; or [`OneFrame::NONE`], its frames appended to `frames`
/// (addr2line's reader opened only if an address needs it; the padding
/// frame where it finds none, §3). `cursor` is
/// [`SymbolView::single_frame_index_with`]'s.
///
/// [`SymbolView::single_frame_index_with`]: crate::symbolize::SymbolView::single_frame_index_with
fn look_up<'a>(
    binary: &'a Binary,
    funcs: &[Func<'a>],
    (found, address): (Option<Found>, u64),
    cursor: &mut usize,
    frames: &mut Vec<RawFrame<'a>>,
) -> OneFrame {
    let view = binary.symbol_view();
    let before = frames.len();
    match found {
        Some(found @ (Found::At { .. } | Found::Nowhere)) => {
            if let Some(symbol) = view.single_frame_index_with(address, cursor) {
                return one_frame(symbol, found);
            }
        }
        Some(Found::Ask) | None => {
            let dwarf = binary.dwarf_reader();
            if let Some((sym, file, line)) = dwarf.and_then(|d| view.single_frame_at(d, address)) {
                let (name, system) = (&*sym.name, &*sym.system_name);
                frames.push((Cow::Borrowed(name), Cow::Borrowed(system), file, line));
                return OneFrame::NONE;
            }
        }
    }
    frames.extend(binary.frames_at(address));
    if frames.len() == before && !funcs.is_empty() {
        frames.push(padding_frame(funcs, address));
    }
    OneFrame::NONE
}

/// The one frame of an address in `symbol`, at the file and line `found`
/// in the line tables (as [`Found::location`] gives them: no file and line
/// 0 where no table holds the address).
fn one_frame(symbol: usize, found: Found) -> OneFrame {
    let (file, line) = match found {
        Found::At { file, line } => (file, i64::from(line)),
        _ => (u32::MAX, 0),
    };
    OneFrame {
        symbol: symbol as u32,
        file,
        line,
    }
}

/// The frame gprof gives an address in the padding between functions: the
/// symbol before it, or `[unknown]` outside every symbol (§3); the
/// [`UNCREDITED`] address its own frame.
fn padding_frame<'a>(funcs: &[Func<'a>], address: u64) -> RawFrame<'a> {
    if address == UNCREDITED {
        return (Cow::Borrowed(UNCREDITED_NAME), Cow::Borrowed(""), "", 0);
    }
    let (name, system) = function_at(funcs, address)
        .map_or(("[unknown]", ""), |i| (funcs[i].name, funcs[i].system_name));
    (Cow::Borrowed(name), Cow::Borrowed(system), "", 0)
}

impl<'a> Resolved<'a> {
    /// Looks up every address of `addresses` (sorted) in `binary`: the
    /// files and lines of single frames in one pass over the line tables
    /// (`sorted`, as [`Binary::sorted_lines`]; their file names kept in
    /// `files`, which the frames borrow), anything else through addr2line.
    pub(super) fn new(
        binary: Option<&'a Binary>,
        funcs: &[Func<'a>],
        (addresses, sorted): (&[u64], impl FnOnce(&[u64]) -> Option<SortedLines>),
        files: &'a mut Vec<String>,
    ) -> Self {
        let mut one = Vec::with_capacity(addresses.len());
        let mut starts = Vec::with_capacity(addresses.len() + 1);
        let mut frames = Vec::new();
        starts.push(0);
        let sorted = sorted(addresses);
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
            let this = match binary {
                Some(binary) => {
                    let at = (found.get(i).copied(), address);
                    look_up(binary, funcs, at, &mut cursor, &mut frames)
                }
                None => OneFrame::NONE,
            };
            one.push(this);
            starts.push(frames.len());
        }
        let symbols = binary.map_or(&[][..], |b| b.symbols());
        Resolved {
            symbols,
            files,
            one,
            starts,
            frames,
        }
    }

    /// How many frames the `index`-th address has.
    fn frame_count(&self, index: usize) -> usize {
        if self.one[index].is_none() {
            self.starts[index + 1] - self.starts[index]
        } else {
            1
        }
    }

    /// The `k`-th frame of the `index`-th address.
    fn frame(&self, index: usize, k: usize) -> Frame<'_> {
        let one = self.one[index];
        if one.is_none() {
            let (name, system, file, line) = &self.frames[self.starts[index] + k];
            return (name, system, file, *line);
        }
        let sym = &self.symbols[one.symbol as usize];
        let file = self.files.get(one.file as usize).map_or("", String::as_str);
        (&sym.name, &sym.system_name, file, one.line)
    }
}

/// Adds every location `numbering` names to `profile`, in its order (of
/// `addresses` in `mapping`, their frames `resolved`), with their
/// functions. Returns what they carry.
pub(super) fn add_all_locations(
    profile: &mut Profile,
    (addresses, resolved, mapping): (&[u64], &Resolved<'_>, MappingId),
    numbering: &Numbering,
) -> SymbolFlags {
    let order = &numbering.order[..];
    let mut found = SymbolFlags::default();
    // The function of a single frame, by its symbol and file in `resolved`
    // (most frames): a lookup of two numbers instead of three strings.
    let mut single: HashMap<(u32, u32), FunctionId> = HashMap::default();
    single.reserve(resolved.symbols.len());
    for (n, &index) in order.iter().enumerate() {
        let count = resolved.frame_count(index as usize);
        found.inline_frames |= count > 1;
        let one = resolved.one[index as usize];
        let mut lines = Lines::with_capacity(count);
        for k in 0..count {
            let (name, system, file, line) = resolved.frame(index as usize, k);
            found.line_numbers |= line > 0;
            found.filenames |= !file.is_empty();
            let mut add = || profile.add_function(name, system, file, 0);
            let function = match one.is_none() {
                true => add(),
                false => *single.entry((one.symbol, one.file)).or_insert_with(add),
            };
            lines.push(Line { function, line });
        }
        let id = profile.add_location(Location {
            mapping: Some(mapping),
            address: addresses[index as usize],
            is_return_address: false,
            lines,
        });
        // Each address is a location of its own, and the profile has no
        // other: the ids are the numbering's.
        debug_assert_eq!(id.index(), n);
    }
    found
}

/// Location ids in address order: the `i`-th location of the profile is
/// the one of the `i`-th of the addresses the samples name. Known before
/// the samples are made, so that the locations are built while they are.
pub(super) struct Numbering {
    /// The location id of each address index named (`u32::MAX` for the
    /// others).
    ids: Vec<u32>,
    /// The address index of each location id.
    order: Vec<u32>,
}

impl Numbering {
    /// The locations of the address indexes in `named` (any order, any
    /// number of times), among `addresses` addresses.
    pub(super) fn new(addresses: usize, named: impl IntoIterator<Item = u32>) -> Self {
        const NAMED: u32 = 0;
        let mut ids = vec![u32::MAX; addresses];
        for index in named {
            ids[index as usize] = NAMED;
        }
        let mut order = Vec::new();
        for (index, id) in ids.iter_mut().enumerate() {
            if *id == NAMED {
                *id = order.len() as u32;
                order.push(index as u32);
            }
        }
        Numbering { ids, order }
    }

    /// How many locations there are: the addresses named.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// The location of the `index`-th address (one named).
    #[inline]
    pub(super) fn at(&self, index: u32) -> LocationId {
        let id = self.ids[index as usize];
        debug_assert!(id != u32::MAX, "address {index} is not named");
        LocationId::from_index(id as usize)
    }

    /// The location of `address` (one of the sorted `addresses`, named).
    pub(super) fn location(&self, addresses: &[u64], address: u64) -> LocationId {
        self.at(index_of(addresses, address))
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::{add_all_locations, merge_distinct, Numbering, OneFrame, Resolved};
    use crate::profile::{MappingId, Profile};
    use crate::symbolize::FunctionSymbol;

    /// Locations as add_all_locations makes them, for 2 × `n` addresses: the
    /// function `f{i % 7}` (inlined into `g` at odd addresses), a single
    /// frame of the symbol table at even addresses and an owned copy of its
    /// name at odd ones, for the addresses `named` names (in any order, some
    /// more than once).
    fn locations_of(n: usize, named: &[u32]) -> Profile {
        let names: Vec<String> = (0..7).map(|i| format!("f{i}")).collect();
        let symbols: Vec<FunctionSymbol> = names
            .iter()
            .map(|name| FunctionSymbol::new(0, 0, name))
            .collect();
        let files = vec!["b.c".to_owned(), "a.c".to_owned()];
        let mut starts = vec![0];
        let mut frames = Vec::new();
        let mut one = Vec::new();
        for i in 0..2 * n {
            if i % 2 == 0 {
                // One frame from the line tables; every other one without
                // a file.
                let file = if i % 4 == 0 { 1 } else { u32::MAX };
                one.push(OneFrame {
                    symbol: (i % 7) as u32,
                    file,
                    line: i as i64,
                });
            } else {
                let name: Cow<str> = Cow::Owned(names[i % 7].clone());
                frames.push((name.clone(), name, "a.c", i as i64));
                frames.push((Cow::Borrowed("g"), Cow::Borrowed("_Z1gv"), "b.c", 7));
                one.push(OneFrame::NONE);
            }
            starts.push(frames.len());
        }
        let resolved = Resolved {
            symbols: &symbols,
            files: &files,
            one,
            starts,
            frames,
        };
        let addresses: Vec<u64> = (0..2 * n as u64).map(|a| 0x1000 + a).collect();
        let numbering = Numbering::new(addresses.len(), named.iter().copied());
        let mut profile = Profile::new(&[("samples", "count")]);
        let mapping = MappingId::from_index(0);
        add_all_locations(&mut profile, (&addresses, &resolved, mapping), &numbering);
        for &index in named {
            let id = numbering.at(index);
            assert_eq!(
                profile.locations()[id.index()].address,
                addresses[index as usize]
            );
        }
        profile
    }

    /// The same through Profile::add_function, one frame after another.
    fn expected(order: &[u32]) -> Profile {
        let mut profile = Profile::new(&[("samples", "count")]);
        for &index in order {
            let i = index as usize;
            let name = format!("f{}", i % 7);
            let mut lines = crate::profile::Lines::new();
            let file = if i % 4 == 2 { "" } else { "a.c" };
            let function = profile.add_function(&name, &name, file, 0);
            lines.push(crate::profile::Line {
                function,
                line: i as i64,
            });
            if i % 2 == 1 {
                let function = profile.add_function("g", "_Z1gv", "b.c", 0);
                lines.push(crate::profile::Line { function, line: 7 });
            }
            profile.add_location(crate::profile::Location {
                mapping: Some(MappingId::from_index(0)),
                address: 0x1000 + index as u64,
                is_return_address: false,
                lines,
            });
        }
        profile
    }

    #[test]
    fn locations_in_address_order_number_functions_as_add_function_does() {
        for n in [10, 5000] {
            // Named backwards, every other address twice, a third of them
            // never: numbered in address order, each once.
            let mut named: Vec<u32> = (0..2 * n as u32).rev().filter(|i| i % 3 != 1).collect();
            named.extend((0..2 * n as u32).step_by(2).filter(|i| i % 3 != 1));
            let order: Vec<u32> = (0..2 * n as u32).filter(|i| i % 3 != 1).collect();
            let want = expected(&order);
            let got = locations_of(n, &named);
            assert_eq!(got.locations(), want.locations(), "{n}");
            assert_eq!(got.functions(), want.functions(), "{n}");
            assert_eq!(got.strings().as_slice(), want.strings().as_slice());
        }
    }

    #[test]
    fn merged_addresses_are_every_address_sorted_once() {
        let mut rng = crate::test_rng::XorShift(0x2545_f491_4f6c_dd1d);
        for (a, b, mask) in [
            (0, 0, 0xff),
            (0, 5, 0xff),
            (7, 0, 0xff),
            (300, 40, 0x1ff),
            (2000, 2000, u64::MAX),
        ] {
            let mut list = |n: usize| -> Vec<u64> {
                let mut v: Vec<u64> = (0..n).map(|_| rng.next() & mask).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (x, y) = (list(a), list(b));
            let expected: Vec<u64> = x
                .iter()
                .chain(&y)
                .copied()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(merge_distinct(&x, &y), expected);
        }
    }
}
