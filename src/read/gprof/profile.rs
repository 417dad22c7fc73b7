//! Building the profile: locations per function and call site, the sample
//! types `cpu` and `calls`, flat or synthesized stacks.

use rustc_hash::FxHashMap as HashMap;

use super::bsd::DEFAULT_RATE;
use super::callgraph::{CallGraph, Caller};
use super::data::GmonData;
use super::ticks::{assign_ticks, function_at, gprof_functions, Func, Tick};
use crate::profile::{apportion, Line, LocationId, Mapping, MappingId, Profile, SymbolFlags};
use crate::read::options::GprofStacks;
use crate::symbolize::Binary;

/// Builds locations, symbolized through the binary, with a cache per address.
pub(super) struct Locator<'a, 'b> {
    pub(super) binary: Option<&'a Binary>,
    pub(super) funcs: &'a [Func<'b>],
    pub(super) mapping: MappingId,
    pub(super) cache: HashMap<u64, LocationId>,
    pub(super) any_file: bool,
    pub(super) any_line: bool,
    pub(super) any_inline: bool,
}

impl Locator<'_, '_> {
    fn location(&mut self, profile: &mut Profile, address: u64) -> LocationId {
        if let Some(&id) = self.cache.get(&address) {
            return id;
        }
        let mut lines = Vec::new();
        if let Some(binary) = self.binary {
            let home = function_at(self.funcs, address);
            let mut depth = 0;
            binary.for_each_frame(address, |f| {
                self.any_file |= !f.file.is_empty();
                self.any_line |= f.line > 0;
                let function = profile.add_function(f.function, f.system_name, f.file, 0);
                lines.push(Line {
                    function,
                    line: f.line,
                });
                depth += 1;
            });
            self.any_inline |= depth > 1;
            if lines.is_empty() && !self.funcs.is_empty() {
                // Padding between functions: gprof credits it to the symbol
                // before it; outside every symbol it is `[unknown]`.
                let (name, system) = home.map_or(("[unknown]", ""), |i| {
                    (self.funcs[i].name, self.funcs[i].system_name)
                });
                let function = profile.add_function(name, system, "", 0);
                lines.push(Line { function, line: 0 });
            }
        }
        let id = profile.add_location(crate::profile::Location {
            mapping: Some(self.mapping),
            address,
            is_return_address: false,
            lines,
        });
        self.cache.insert(address, id);
        id
    }
}

/// Adds a `calls` sample per arc (callee under caller) and returns the call
/// graph between the executable's functions. gprof drops arcs whose caller
/// or callee is outside every symbol (e.g. `main` called from libc): the
/// callee of such an arc is `<spontaneous>` in gprof's call graph. Without a
/// binary every arc is kept as a sample and the graph is empty.
pub(super) fn add_arcs(
    profile: &mut Profile,
    data: &GmonData,
    funcs: &[Func<'_>],
    locator: &mut Locator<'_, '_>,
) -> CallGraph {
    let mut callers: Vec<Vec<Caller>> = vec![Vec::new(); funcs.len()];
    let mut spontaneous = vec![false; funcs.len()];
    let mut dropped_arcs = 0u64;
    let mut calls = vec![0i64; profile.sample_types().len()];
    for arc in &data.arcs {
        if locator.binary.is_some() {
            let parent = function_at(funcs, arc.from_pc);
            let Some(child) = function_at(funcs, arc.self_pc) else {
                dropped_arcs = dropped_arcs.saturating_add(arc.count);
                continue;
            };
            let Some(parent) = parent else {
                spontaneous[child] = true;
                dropped_arcs = dropped_arcs.saturating_add(arc.count);
                continue;
            };
            if parent != child {
                callers[child].push(Caller {
                    func: parent,
                    from_pc: arc.from_pc,
                    count: arc.count,
                });
            }
        }
        let callee = locator.location(profile, arc.self_pc);
        let caller = locator.location(profile, arc.from_pc);
        calls[2] = arc.count as i64;
        profile.add_sample(&[callee, caller], &calls, &[]);
    }
    if dropped_arcs > 0 {
        profile.add_comment(format!(
            "{dropped_arcs} calls from or to addresses outside the executable's symbols are not counted, as gprof does (e.g. main called from libc)"
        ));
    }
    CallGraph::new(callers, &spontaneous)
}

/// Puts every function's ticks on the stacks [`CallGraph::stacks`]
/// synthesizes for it (§4). A function's ticks (one per address) and its
/// stacks are matched in order, each piece taking what is left of the
/// smaller, so each stack gets exactly its time, each address keeps its
/// ticks, and the pieces number at most ticks + stacks.
pub(super) fn add_synthesized_ticks(
    profile: &mut Profile,
    ticks: &[Tick],
    graph: &CallGraph,
    locator: &mut Locator<'_, '_>,
) {
    let mut per_func: Vec<Vec<Tick>> = vec![Vec::new(); graph.callers.len()];
    let mut unknown = Vec::new();
    for t in ticks {
        match t.func {
            Some(f) => per_func[f].push(*t),
            None => unknown.push(*t),
        }
    }
    let self_ns: Vec<i64> = per_func
        .iter()
        .map(|ts| {
            ts.iter()
                .fold(0i64, |t, x| t.saturating_add(x.nanos.max(0)))
        })
        .collect();
    let stacks = graph.stacks(&self_ns);
    let mut values = vec![0i64; profile.sample_types().len()];
    let mut stack = Vec::new();
    let mut add = |profile: &mut Profile, t: &Tick, sites: &[u64], samples: i64, nanos: i64| {
        stack.clear();
        stack.push(locator.location(profile, t.address));
        for &pc in sites {
            stack.push(locator.location(profile, pc));
        }
        values[0] = samples;
        values[1] = nanos;
        profile.add_sample(&stack, &values, &[]);
    };
    for t in &unknown {
        add(profile, t, &[], t.samples, t.nanos);
    }
    for (fticks, paths) in per_func.iter().zip(&stacks) {
        let mut p = 0;
        let mut path_left = paths.first().map_or(0, |p| p.nanos);
        for t in fticks {
            // (path index, nanoseconds) pieces of this tick
            let mut pieces = Vec::new();
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
            for (&(k, nanos), samples) in pieces.iter().zip(samples) {
                let sites = paths.get(k).map_or(&[][..], |p| &p.sites[..]);
                add(profile, t, sites, samples, nanos);
            }
        }
    }
}

/// The profile gprof's data stands for (§4).
pub fn to_profile(data: &GmonData, binary: Option<&Binary>, stacks: GprofStacks) -> Profile {
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
    let mapping = add_image_mapping(&mut profile, binary);

    let funcs = binary.map(gprof_functions).unwrap_or_default();
    let mut locator = Locator {
        binary,
        funcs: &funcs,
        mapping,
        cache: HashMap::default(),
        any_file: false,
        any_line: false,
        any_inline: false,
    };
    let ticks = assign_ticks(data, &funcs, period_ns);

    let graph = add_arcs(&mut profile, data, &funcs, &mut locator);
    profile.add_comment(stacks_comment(binary.is_some(), stacks));
    if binary.is_some() && stacks == GprofStacks::Synthesized {
        add_synthesized_ticks(&mut profile, &ticks, &graph, &mut locator);
    } else {
        let mut values = vec![0i64; profile.sample_types().len()];
        for t in &ticks {
            let leaf = locator.location(&mut profile, t.address);
            values[0] = t.samples;
            values[1] = t.nanos;
            profile.add_sample(&[leaf], &values, &[]);
        }
    }
    if let Some(bt) = bb_type {
        let mut values = vec![0i64; profile.sample_types().len()];
        for (&addr, &count) in &data.basic_blocks {
            let loc = locator.location(&mut profile, addr);
            values[bt] = count as i64;
            profile.add_sample(&[loc], &values, &[]);
        }
    }
    let flags = SymbolFlags {
        functions: !funcs.is_empty(),
        filenames: locator.any_file,
        line_numbers: locator.any_line,
        inline_frames: locator.any_inline,
    };
    profile.add_mapping_flags(mapping, flags);
    let ticks_total: u64 = data
        .histograms
        .iter()
        .fold(0u64, |t, h| t.saturating_add(h.total()));
    profile.duration_nanos = (ticks_total as f64 * period_ns).round() as i64;
    profile
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
        (true, GprofStacks::Synthesized) => "stacks: synthesized from the call-graph arcs by flow decomposition: gprof's call-graph times (self time handed to callers in proportion to call counts, cycles collapsed) split into at most arcs + functions stacks, each from a root of the call graph; every function outside a cycle gets gprof's self + children and every arc gprof's propagated time",
        (true, GprofStacks::Flat) => "stacks: flat (--gprof-stacks=flat): one frame per sampled function",
        (false, _) => "stacks: flat, unsymbolized: no --binary was given, so functions and the call graph are unknown",
    }
}
