//! Building the profile: locations per function and call site, the sample
//! types `cpu` and `calls`, flat or synthesized stacks.

use super::bsd::DEFAULT_RATE;
use super::callgraph::{CallGraph, Caller, Path, Stacks};
use super::data::GmonData;
use super::locate::{add_all_locations, addresses, Numbering, Resolved};
use super::ticks::{assign_ticks, gprof_functions, index_of, ArcEnds, Func, Tick};
use crate::profile::{apportion, LocationId, Mapping, MappingId, Profile, SymbolFlags};
use crate::read::options::GprofStacks;
use crate::symbolize::lines::SortedLines;
use crate::symbolize::Binary;

/// The arcs as the call graph and the `calls` samples take them (§4).
/// gprof drops arcs whose caller or callee is outside every symbol (e.g.
/// `main` called from libc): the callee of such an arc is `<spontaneous>`
/// in gprof's call graph.
pub(super) struct Arcs {
    /// The arcs the call graph is made of.
    between: Between,
    /// The arcs that are `calls` samples, in file order: (callee, caller)
    /// as indexes into the profile's addresses, and the count.
    pub(super) kept: Vec<(u32, u32, u64)>,
    /// Which of `kept` are calls of a function to itself (none without a
    /// binary): gprof's flat profile leaves them out of a function's calls,
    /// and so does the `calls` sample type; `recursive_calls` has them.
    pub(super) recursive: Vec<bool>,
    /// The calls of the arcs dropped.
    pub(super) dropped_calls: u64,
}

/// The arcs between the executable's functions, as the call graph takes
/// them.
struct Between {
    /// (callee, caller and call site).
    arcs: Vec<(u32, Caller)>,
    /// The functions some dropped arc calls.
    spontaneous: Vec<bool>,
}

impl Between {
    /// The call graph between the executable's functions, of `funcs` (none
    /// without a binary), its call sites (turned in place) the locations
    /// `numbering` gives them: the synthesized stacks are then made of
    /// location ids.
    fn graph(mut self, funcs: usize, numbering: &Numbering) -> CallGraph {
        for (_, caller) in &mut self.arcs {
            caller.site = numbering.at(caller.site).index() as u32;
        }
        CallGraph::new(funcs, &self.arcs, &self.spontaneous)
    }
}

/// The arcs between the executable's functions, their call sites as
/// indexes into `addresses`; `callees` is each arc's callee function
/// ([`super::locate::addresses`]). Without a binary every arc is kept (as
/// a sample) and none is between functions.
pub(super) fn kept_arcs(
    data: &GmonData,
    (funcs, callees): (&[Func<'_>], &[u32]),
    symbolized: bool,
    addresses: &[u64],
) -> Arcs {
    let mut between = Vec::with_capacity(data.arcs.len());
    let mut spontaneous = vec![false; funcs.len()];
    let mut dropped_calls = 0u64;
    let mut kept = Vec::with_capacity(data.arcs.len());
    let mut recursive = Vec::new();
    if !symbolized {
        for arc in &data.arcs {
            let site = index_of(addresses, arc.from_pc);
            kept.push((index_of(addresses, arc.self_pc), site, arc.count));
        }
    } else {
        let mut ends = ArcEnds::new(addresses, funcs);
        for (arc, &child) in data.arcs.iter().zip(callees) {
            let (site, parent) = ends.site(arc.from_pc, funcs);
            // A call into an untyped label counts for the function before
            // it ([`super::ticks::callee_at`]).
            if child == u32::MAX {
                dropped_calls = dropped_calls.saturating_add(arc.count);
                continue;
            }
            let Some(parent) = parent else {
                spontaneous[child as usize] = true;
                dropped_calls = dropped_calls.saturating_add(arc.count);
                continue;
            };
            if parent != child as usize {
                let caller = Caller {
                    func: parent as u32,
                    site,
                    count: arc.count,
                };
                between.push((child, caller));
            }
            // Counted on the function gprof names, at its entry: never on
            // a frame inlined at self_pc.
            kept.push((ends.entry(child as usize, funcs), site, arc.count));
            recursive.push(parent == child as usize);
        }
    }
    Arcs {
        between: Between {
            arcs: between,
            spontaneous,
        },
        kept,
        recursive,
        dropped_calls,
    }
}

/// Adds the `calls` samples: one per stack (a callee's location under its
/// call site's) of the arcs kept, their counts summed, as value 2
/// (`calls`), or value `recursive_type` for the arcs `recursive` marks (a
/// function calling itself: its stack is never another arc's).
fn add_arcs(
    profile: &mut Profile,
    (kept, recursive): (&[(u32, u32, u64)], &[bool]),
    numbering: &Numbering,
    recursive_type: usize,
) {
    let mut values = vec![0i64; profile.sample_types().len()];
    for (i, &(callee, site, count)) in kept.iter().enumerate() {
        let value = match recursive.get(i) {
            Some(true) => recursive_type,
            _ => 2,
        };
        values.fill(0);
        values[value] = count as i64;
        let stack = [numbering.at(callee), numbering.at(site)];
        profile.add_sample(&stack, &values, &[]);
    }
}

/// Says how many calls the arcs dropped carried.
fn note_dropped_calls(profile: &mut Profile, dropped_calls: u64) {
    if dropped_calls > 0 {
        profile.add_comment(format!(
            "{dropped_calls} calls from or to addresses outside the executable's symbols are not counted, as gprof does (e.g. main called from libc)"
        ));
    }
}

/// One sample of synthesized stacks: a tick's address (an index into the
/// profile's addresses) on a stack (a path of its [`Synthesized`] batch's
/// [`Stacks`], none for a tick outside every function) with its share of
/// the tick.
pub(super) struct Piece {
    leaf: u32,
    path: Option<u32>,
    samples: i64,
    nanos: i64,
}

/// Some functions' ticks put on the stacks [`CallGraph::synthesis`] makes
/// for them (§4), as pieces; call sites as the graph carries them. A batch of
/// [`synthesize`].
pub(super) struct Synthesized {
    stacks: Stacks,
    pieces: Vec<Piece>,
}

/// Call sites (about 4 bytes each) in a batch of [`synthesize`]: small
/// enough that the samples are made while the stacks still are.
const BATCH_SITES: usize = 1 << 15;

impl Synthesized {
    /// An empty batch with room for [`BATCH_SITES`] call sites and more
    /// (the last path may cross it), so that filling it copies nothing.
    fn with_room() -> Self {
        Synthesized {
            stacks: Stacks::with_capacity(2 * BATCH_SITES, BATCH_SITES / 8),
            pieces: Vec::with_capacity(BATCH_SITES / 8),
        }
    }

    /// Emptied, its room kept, to be filled again.
    fn clear(&mut self) {
        self.stacks.clear();
        self.pieces.clear();
    }
}

/// Every function's ticks put on its synthesized stacks, handed to `send`
/// in batches, functions in order (the ticks outside every function
/// first, in the first batch); `send` gives back an empty batch to fill
/// next.
///
/// A function's ticks (one per address) and its stacks are matched in
/// order, each piece taking what is left of the smaller, so each stack gets
/// exactly its time, each address keeps its ticks, and the pieces number at
/// most ticks + stacks.
pub(super) fn synthesize(
    ticks: &[Tick],
    graph: &CallGraph,
    addresses: &[u64],
    mut send: impl FnMut(Synthesized) -> Synthesized,
) {
    let mut batch = Synthesized::with_room();
    // The ticks of each function, in tick order: (function, tick).
    let mut by_func = Vec::new();
    for (i, t) in ticks.iter().enumerate() {
        match t.func {
            Some(f) => by_func.push((f, i)),
            None => batch.pieces.push(Piece {
                leaf: index_of(addresses, t.address),
                path: None,
                samples: t.samples,
                nanos: t.nanos,
            }),
        }
    }
    by_func.sort_unstable();
    let mut self_ns = vec![0i64; graph.component.len()];
    for &(f, i) in &by_func {
        self_ns[f] = self_ns[f].saturating_add(ticks[i].nanos.max(0));
    }
    let mut synthesis = graph.synthesis(&self_ns);
    // Functions without ticks have no self time, so no stacks: only those
    // with ticks are visited, in function order as the flow needs.
    let mut fticks = Vec::new();
    for group in by_func.chunk_by(|a, b| a.0 == b.0) {
        let f = group[0].0;
        fticks.clear();
        fticks.extend(group.iter().map(|&(_, i)| ticks[i]));
        let range = synthesis.paths_of(f, &mut batch.stacks);
        let first = range.start as u32;
        let paths = batch.stacks.paths(range);
        split_ticks(first, &fticks, paths, addresses, &mut batch.pieces);
        if batch.stacks.sites_len() >= BATCH_SITES {
            batch = send(batch);
        }
    }
    send(batch);
}

/// The pieces of one function's ticks over its stacks `paths`, numbered
/// from `first`.
fn split_ticks(
    first: u32,
    fticks: &[Tick],
    paths: &[Path],
    addresses: &[u64],
    out: &mut Vec<Piece>,
) {
    let mut p = 0;
    let mut path_left = paths.first().map_or(0, |p| p.nanos);
    let mut pieces = Vec::new();
    for t in fticks {
        // (path index, nanoseconds) pieces of this tick
        pieces.clear();
        let mut tick_left = t.nanos.max(0);
        while tick_left > 0 && p < paths.len() {
            let take = tick_left.min(path_left);
            pieces.push((p, take));
            tick_left -= take;
            path_left -= take;
            if path_left == 0 {
                p += 1;
                path_left = paths.get(p).map_or(0, |p| p.nanos);
            }
        }
        if pieces.is_empty() {
            // Ticks without time (a sliver of a bin): on the stack of
            // the time around them.
            pieces.push((p.min(paths.len().saturating_sub(1)), 0));
        }
        let weights: Vec<f64> = pieces.iter().map(|&(_, ns)| ns.max(1) as f64).collect();
        let samples = apportion(t.samples, &weights);
        let leaf = index_of(addresses, t.address);
        for (&(k, nanos), samples) in pieces.iter().zip(samples) {
            out.push(Piece {
                leaf,
                path: (k < paths.len()).then_some(first + k as u32),
                samples,
                nanos,
            });
        }
    }
}

/// Adds the samples of a batch of synthesized stacks (their call sites
/// location ids, as [`Between::graph`] gives them).
fn add_synthesized(profile: &mut Profile, synth: &Synthesized, numbering: &Numbering) {
    let mut values = vec![0i64; profile.sample_types().len()];
    let mut stack = Vec::new();
    for piece in &synth.pieces {
        stack.clear();
        stack.push(numbering.at(piece.leaf));
        if let Some(k) = piece.path {
            let sites = synth.stacks.sites(k as usize);
            stack.extend(sites.iter().map(|&id| LocationId::from_index(id as usize)));
        }
        values[0] = piece.samples;
        values[1] = piece.nanos;
        profile.add_sample(&stack, &values, &[]);
    }
}

/// Adds one sample per tick, its function alone on the stack.
fn add_flat(profile: &mut Profile, ticks: &[Tick], addresses: &[u64], numbering: &Numbering) {
    let mut values = vec![0i64; profile.sample_types().len()];
    for t in ticks {
        let leaf = numbering.location(addresses, t.address);
        values[0] = t.samples;
        values[1] = t.nanos;
        profile.add_sample(&[leaf], &values, &[]);
    }
}

/// Adds a `bb_executions` sample (type `bt`) per basic-block count.
fn add_basic_blocks(
    profile: &mut Profile,
    data: &GmonData,
    bt: usize,
    addresses: &[u64],
    numbering: &Numbering,
) {
    let mut values = vec![0i64; profile.sample_types().len()];
    for (&addr, &count) in &data.basic_blocks {
        let loc = numbering.location(addresses, addr);
        values[bt] = count as i64;
        profile.add_sample(&[loc], &values, &[]);
    }
}

/// The address indexes the samples name: both ends of the arcs kept, the
/// ticks' addresses and the basic blocks' (a synthesized stack's call
/// sites are those of arcs kept).
fn named<'a>(
    kept: &'a [(u32, u32, u64)],
    data: &'a GmonData,
    ticks: &'a [Tick],
    addresses: &'a [u64],
) -> impl Iterator<Item = u32> + 'a {
    let ends = kept.iter().flat_map(|&(callee, site, _)| [callee, site]);
    let ticks = ticks.iter().map(|t| t.address);
    let blocks = data.basic_blocks.keys().copied();
    ends.chain(ticks.chain(blocks).map(|a| index_of(addresses, a)))
}

/// Adds the ticks' samples: on their synthesized stacks when
/// `synthesized`, else one each.
fn add_ticks(
    profile: &mut Profile,
    between: Between,
    (funcs, ticks, addresses): (&[Func<'_>], &[Tick], &[u64]),
    numbering: &Numbering,
    synthesized: bool,
) {
    match synthesized {
        true => {
            let graph = between.graph(funcs.len(), numbering);
            synthesize(ticks, &graph, addresses, |mut batch| {
                add_synthesized(profile, &batch, numbering);
                batch.clear();
                batch
            })
        }
        false => add_flat(profile, ticks, addresses, numbering),
    }
}

/// The profile gprof's data stands for (§4). `lines` looks the sorted
/// addresses up in the binary's line tables ([`Binary::sorted_lines`]),
/// once.
pub(super) fn to_profile(
    data: &GmonData,
    binary: Option<&Binary>,
    stacks: GprofStacks,
    lines: impl FnOnce(&Binary, &[u64]) -> Option<SortedLines>,
) -> Profile {
    let (mut profile, period_ns, bb_type) = new_profile(data);
    let mapping = add_image_mapping(&mut profile, binary);
    let funcs = binary.map(gprof_functions).unwrap_or_default();
    let ticks = assign_ticks(data, &funcs, period_ns);
    let (addresses, callees) = addresses(data, &funcs, &ticks);
    let symbolized = binary.is_some();
    let synthesized = symbolized && stacks == GprofStacks::Synthesized;
    let Arcs {
        between,
        kept,
        recursive,
        dropped_calls,
    } = kept_arcs(data, (&funcs, &callees), symbolized, &addresses);
    let numbering = Numbering::new(addresses.len(), named(&kept, data, &ticks, &addresses));
    // Only a profile with such calls has the type (`calls` otherwise).
    let recursive_type = match recursive.contains(&true) {
        true => profile.add_sample_type("recursive_calls", "count"),
        false => 2,
    };
    // Room for a sample per arc kept and per tick (a tick on synthesized
    // stacks can be several, the tables then grow).
    let samples = kept.len() + ticks.len() + data.basic_blocks.len();
    profile.reserve(numbering.len(), samples, funcs.len());
    let mut files = Vec::new();
    let sorted = |addresses: &[u64]| binary.and_then(|b| lines(b, addresses));
    let resolved = Resolved::new(binary, &funcs, (&addresses, sorted), &mut files);
    let found = add_all_locations(
        &mut profile,
        (&addresses[..], &resolved, mapping),
        &numbering,
    );
    add_arcs(
        &mut profile,
        (&kept, &recursive),
        &numbering,
        recursive_type,
    );
    let inputs = (&funcs[..], &ticks[..], &addresses[..]);
    add_ticks(&mut profile, between, inputs, &numbering, synthesized);
    if let Some(bt) = bb_type {
        add_basic_blocks(&mut profile, data, bt, &addresses, &numbering);
    }
    note_dropped_calls(&mut profile, dropped_calls);
    profile.add_comment(stacks_comment(binary.is_some(), stacks));
    let flags = SymbolFlags {
        functions: !funcs.is_empty(),
        ..found
    };
    profile.add_mapping_flags(mapping, flags);
    profile
}

/// The profile's sample types, period, duration and description; the
/// period in nanoseconds, and the basic-block sample type when the data
/// has counts.
fn new_profile(data: &GmonData) -> (Profile, f64, Option<usize>) {
    let mut profile = Profile::new(&[
        ("samples", "count"),
        ("cpu", "nanoseconds"),
        ("calls", "count"),
    ]);
    profile.default_sample_type = Some(1);
    profile.call_count_type = Some(2);
    let rate = data
        .histograms
        .first()
        .map_or(DEFAULT_RATE, |h| h.prof_rate)
        .max(1);
    let period_ns = 1e9 / rate as f64;
    profile.set_period("cpu", "nanoseconds", period_ns.round() as i64);
    let bb_type =
        (!data.basic_blocks.is_empty()).then(|| profile.add_sample_type("bb_executions", "count"));
    describe_input(&mut profile, data, rate);
    let ticks_total: u64 = data
        .histograms
        .iter()
        .fold(0u64, |t, h| t.saturating_add(h.total()));
    profile.duration_nanos = (ticks_total as f64 * period_ns).round() as i64;
    (profile, period_ns, bb_type)
}

/// The input's variant as metadata, and what had to be assumed as warnings.
fn describe_input(profile: &mut Profile, data: &GmonData, rate: u32) {
    profile.add_metadata("format", data.variant.name());
    profile.add_metadata("byte order", data.endian.name());
    profile.add_metadata("pointer size", data.pointer_size.to_string());
    profile.add_metadata("prof_rate", format!("{rate} Hz"));
    if data.rate_assumed {
        profile.warn(format!(
            "the file records no clock rate; {rate} Hz assumed (--gmon-rate)"
        ));
    }
    if let Some(h) = data.histograms.first() {
        if h.dimension != "seconds" {
            profile.warn(format!(
                "histogram dimension is {:?}, converted as if seconds",
                h.dimension
            ));
        }
    }
    if data.saturated_bins > 0 {
        profile.warn(format!(
            "{} histogram bins are at 65535, the counter ceiling: their time is a lower bound",
            data.saturated_bins
        ));
    }
}

/// The image mapping: the executable's text when known, else the span of
/// every address the file mentions.
fn add_image_mapping(profile: &mut Profile, binary: Option<&Binary>) -> MappingId {
    let (start, limit, offset) = match binary.and_then(|b| b.text_segment()) {
        Some(seg) => (seg.vaddr, seg.vaddr + seg.memsz, seg.offset),
        // gmon.out addresses are link-time addresses (§1, PIE included): a
        // mapping from 0 to the end of the address space with offset 0 is
        // pprof's way of saying "no relocation", so `go tool pprof BINARY
        // out.pb.gz` symbolizes it later for PIE and non-PIE alike.
        None => (0, u64::MAX, 0),
    };
    let filename = binary.map_or(String::new(), |b| b.path.display().to_string());
    let build_id = binary.map_or(String::new(), |b| b.build_id.clone());
    let filename = profile.intern(&filename);
    let build_id = profile.intern(&build_id);
    profile.add_mapping(Mapping::new(start, limit, offset, filename, build_id))
}

/// What the stacks of the profile mean, as a comment.
fn stacks_comment(symbolized: bool, stacks: GprofStacks) -> &'static str {
    match (symbolized, stacks) {
        (true, GprofStacks::Synthesized) => "stacks: synthesized from gprof's call graph (see profconv docs/formats/gprof.md §4.3)",
        (true, GprofStacks::Flat) => "stacks: flat (--gprof-stacks=flat): one frame per sampled function",
        (false, _) => "stacks: flat, unsymbolized: no --binary was given, so functions and the call graph are unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain 0 → 1 → … → 199 and `leaves` functions called from 199, each
    /// with one tick at its own address: stacks of 200 call sites, so that
    /// 400 leaves fill more than two batches.
    fn chain_with_leaves(leaves: usize) -> (CallGraph, Vec<Tick>, Vec<u64>) {
        const CHAIN: usize = 200;
        let n = CHAIN + leaves;
        let address = |f: usize| 0x1000 + 0x10 * f as u64;
        let mut arcs = Vec::new();
        for f in 1..n {
            let caller = (f - 1).min(CHAIN - 1);
            let site = Caller {
                func: caller as u32,
                site: (n + f) as u32,
                count: 1 + f as u64 % 3,
            };
            arcs.push((f as u32, site));
        }
        let graph = CallGraph::new(n, &arcs, &[true]);
        let ticks = (CHAIN..n)
            .map(|f| Tick {
                func: Some(f),
                address: address(f),
                samples: 1 + f as i64 % 2,
                nanos: 1_000 * (1 + f as i64 % 5),
            })
            .collect();
        let addresses = (0..2 * n).map(address).collect();
        (graph, ticks, addresses)
    }

    /// What a batch carries, piece by piece (leaf, path number and its call
    /// sites, samples, nanoseconds), and how many call sites it holds.
    type Sent = (Vec<(u32, Option<u32>, Vec<u32>, i64, i64)>, usize);

    fn sent(batch: &Synthesized) -> Sent {
        let pieces = batch
            .pieces
            .iter()
            .map(|p| {
                let sites = p
                    .path
                    .map_or(Vec::new(), |k| batch.stacks.sites(k as usize).to_vec());
                (p.leaf, p.path, sites, p.samples, p.nanos)
            })
            .collect();
        (pieces, batch.stacks.sites_len())
    }

    #[test]
    fn batches_filled_again_carry_what_new_ones_do() {
        let (graph, ticks, addresses) = chain_with_leaves(400);
        let mut new = Vec::new();
        synthesize(&ticks, &graph, &addresses, |batch| {
            new.push(sent(&batch));
            Synthesized::with_room()
        });
        let mut again = Vec::new();
        synthesize(&ticks, &graph, &addresses, |mut batch| {
            again.push(sent(&batch));
            batch.clear();
            batch
        });
        assert!(
            new.len() >= 3,
            "{} batches: the test needs several",
            new.len()
        );
        let sites: usize = new.iter().map(|b| b.1).sum();
        assert_eq!(sites, 400 * 200, "every leaf's stack climbs the chain");
        assert_eq!(again, new);
    }
}
