//! The callgrind profile format, as valgrind's "Callgrind Format
//! Specification" (version 1) describes it and KCachegrind, QCachegrind and
//! `callgrind_annotate` read it: a header (`positions:`, `events:`), then per
//! function (`ob=`/`fl=`/`fn=`, names compressed as `(id) name`) its self cost
//! lines and its calls (`cfl=`/`cfn=`, `calls=COUNT TARGET`, then the call
//! site and the call's inclusive cost).
//!
//! - One event per sample type, the default type first (the column viewers
//!   sort by). Costs are unsigned: negative values are written as 0.
//! - Positions are source lines where locations are symbolized and
//!   instruction addresses where they are not (`positions: line`,
//!   `positions: instr`, or both when a profile has both kinds).
//! - Inclusive costs follow the samples' stacks. Viewers sum a function's
//!   incoming call costs (its outgoing ones for a function never called), so
//!   each sample's value goes to the call into the *first* (outermost)
//!   occurrence of each function on its stack: inclusive costs stay exact
//!   under recursion instead of counting a sample twice.
//! - Call counts come from the profile's call-count type (gprof's arcs,
//!   exact). Sampled profiles do not know them; since `callgrind_annotate`
//!   reads `calls=0` as "no call" and books the call's cost as self cost, an
//!   unknown count is written as 1.
//!
//! Everything is aggregated in memory per (function, position) and per call
//! site, so the output is in proportion to the distinct sites, not samples.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::profile::{basename, Profile};
use crate::write::WriteOptions;

/// A position in a function: an instruction address and a source line
/// (0 = unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Pos {
    line: i64,
    addr: u64,
}

/// One frame of a stack: an index into [`Callgrind::functions`] and where in it.
#[derive(Debug, Clone, Copy)]
struct Site {
    func: usize,
    pos: Pos,
}

/// A function as callgrind names it: object, source file, name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Func {
    /// Shared by every function of one image (a large image has a
    /// function per sampled address).
    object: Rc<str>,
    file: Rc<str>,
    name: String,
}

/// The calls from one site to one function.
#[derive(Debug, Clone)]
struct Call {
    count: u64,
    known_count: bool,
    target: Pos,
    costs: Vec<u64>,
}

/// The whole profile aggregated by site, in event order.
struct Callgrind {
    functions: Vec<Func>,
    /// Self costs by (function, position).
    own: BTreeMap<(usize, Pos), Vec<u64>>,
    /// Calls by (caller, call site, callee).
    calls: BTreeMap<(usize, Pos, usize), Call>,
    has_lines: bool,
    has_addresses: bool,
}

/// A callgrind event: one sample type.
#[derive(Debug, Clone)]
struct Event {
    /// The name in `events:` (letters, digits and `_`).
    name: String,
    /// `type (unit)`, for the `event:` line.
    long_name: String,
    /// Index into the profile's sample types.
    sample_type: usize,
}

/// The events: one per sample type, the default first.
fn events(profile: &Profile) -> Vec<Event> {
    let mut order: Vec<usize> = (0..profile.sample_types().len()).collect();
    if let Some(d) = profile.default_sample_type.filter(|&d| d < order.len()) {
        order.retain(|&i| i != d);
        order.insert(0, d);
    }
    let mut out: Vec<Event> = Vec::new();
    for i in order {
        let (kind, unit) = profile.sample_type_name(i);
        let mut name: String = kind
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            name.insert(0, 'e');
        }
        // Two types of one kind in different units stay two events.
        if out.iter().any(|e| e.name == name) {
            name = format!("{name}_{i}");
        }
        out.push(Event {
            name,
            long_name: one_line(&format!("{kind} ({unit})")),
            sample_type: i,
        });
    }
    out
}

/// Text made safe for a one-line field.
fn one_line(s: &str) -> String {
    super::names::callgrind_name(s).into_owned()
}

impl Callgrind {
    /// The profile aggregated by site; with `both`, every position keeps
    /// its address and its line (`positions: instr line`) whatever the
    /// profile has (a run of a larger profile, whose header is written for
    /// all runs).
    fn new(profile: &Profile, events: &[Event], both: bool) -> Self {
        let mut cg = Callgrind {
            functions: Vec::new(),
            own: BTreeMap::new(),
            calls: BTreeMap::new(),
            has_lines: false,
            has_addresses: false,
        };
        let mut location_sites = cg.location_sites(profile);
        if both {
            (cg.has_lines, cg.has_addresses) = (true, true);
        }
        // Positions differ only in the subpositions written.
        let (lines, addresses) = (cg.has_lines, cg.has_addresses);
        for site in location_sites.iter_mut().flatten() {
            if !lines {
                site.pos.line = 0;
            }
            if !addresses {
                site.pos.addr = 0;
            }
        }
        let mut stack: Vec<Site> = Vec::new();
        let mut seen: Vec<bool> = vec![false; cg.functions.len()];
        let mut costs = vec![0u64; events.len()];
        for sample in profile.samples() {
            stack.clear();
            for &loc in sample.stack.iter().rev() {
                if let Some(sites) = location_sites.get(loc.index()) {
                    stack.extend_from_slice(sites);
                }
            }
            for (c, e) in costs.iter_mut().zip(events) {
                *c = sample
                    .values
                    .get(e.sample_type)
                    .copied()
                    .unwrap_or(0)
                    .max(0) as u64;
            }
            let calls = profile
                .call_count_type
                .and_then(|t| sample.values.get(t))
                .copied()
                .unwrap_or(0)
                .max(0) as u64;
            cg.add_stack(&stack, &costs, calls, &mut seen);
        }
        cg
    }

    /// The sites of each location, outermost (inlining) first, with the
    /// functions interned.
    fn location_sites(&mut self, profile: &Profile) -> Vec<Vec<Site>> {
        let mut index: HashMap<Func, usize> = HashMap::new();
        let mut intern = |functions: &mut Vec<Func>, f: Func| {
            *index.entry(f.clone()).or_insert_with(|| {
                functions.push(f);
                functions.len() - 1
            })
        };
        // A function of one image is one callgrind function: its names are
        // made once, not once per location (a C++ name can be a megabyte).
        let mut of_function: HashMap<(Option<usize>, usize), usize> = HashMap::new();
        // An unsymbolized address is a function of its own, named by its
        // image and address: found by those, with no name made twice.
        let mut of_address: HashMap<(Option<usize>, u64), usize> = HashMap::new();
        let objects: Vec<Rc<str>> = profile
            .mappings()
            .iter()
            .map(|m| Rc::from(one_line(profile.str(m.filename))))
            .collect();
        let (no_object, unknown_file): (Rc<str>, Rc<str>) = (Rc::from(""), Rc::from("???"));
        let mut out = Vec::with_capacity(profile.locations().len());
        for location in profile.locations() {
            let mapping = location.mapping.map(|m| m.index());
            let object = mapping.and_then(|m| objects.get(m)).unwrap_or(&no_object);
            let mut sites = Vec::with_capacity(location.lines.len().max(1));
            if location.lines.is_empty() {
                self.has_addresses = true;
                let func = match of_address.entry((mapping, location.address)) {
                    std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        self.functions.push(Func {
                            object: object.clone(),
                            file: unknown_file.clone(),
                            name: one_line(&profile.address_name(location)),
                        });
                        *e.insert(self.functions.len() - 1)
                    }
                };
                let pos = Pos {
                    line: 0,
                    addr: location.address,
                };
                sites.push(Site { func, pos });
            }
            for line in location.lines.iter().rev() {
                self.has_lines = true;
                let Some(function) = profile.functions().get(line.function.index()) else {
                    continue;
                };
                let key = (mapping, line.function.index());
                let func = *of_function.entry(key).or_insert_with(|| {
                    let file = profile.str(function.filename);
                    let f = Func {
                        object: object.clone(),
                        file: if file.is_empty() {
                            unknown_file.clone()
                        } else {
                            Rc::from(one_line(file))
                        },
                        name: one_line(profile.str(function.name)),
                    };
                    intern(&mut self.functions, f)
                });
                let pos = Pos {
                    line: line.line.max(0),
                    addr: location.address,
                };
                sites.push(Site { func, pos });
            }
            out.push(sites);
        }
        out
    }

    /// Books one root-first stack: its costs as the leaf's self cost and on
    /// the call into each function's first occurrence; `calls` (the
    /// call-count type's value) on the innermost call.
    fn add_stack(&mut self, stack: &[Site], costs: &[u64], calls: u64, seen: &mut Vec<bool>) {
        let Some(leaf) = stack.last() else {
            return;
        };
        if costs.iter().any(|&c| c != 0) {
            add(self.own.entry((leaf.func, leaf.pos)).or_default(), costs);
        }
        seen.resize(self.functions.len(), false);
        if let Some(root) = stack.first() {
            seen[root.func] = true;
        }
        for (i, pair) in stack.windows(2).enumerate() {
            let (caller, callee) = (pair[0], pair[1]);
            let first = !seen[callee.func];
            seen[callee.func] = true;
            let innermost = i + 2 == stack.len();
            // Every call on the stack is written, with a zero cost when the
            // sample's value went to an outer occurrence: the call graph keeps
            // the edge.
            let call = self
                .calls
                .entry((caller.func, caller.pos, callee.func))
                .or_insert_with(|| Call {
                    count: 0,
                    known_count: false,
                    target: callee.pos,
                    costs: vec![0; costs.len()],
                });
            call.target = call.target.min(callee.pos);
            if first {
                add(&mut call.costs, costs);
            }
            if innermost && calls > 0 {
                call.count = call.count.saturating_add(calls);
                call.known_count = true;
            }
        }
        for site in stack {
            seen[site.func] = false;
        }
    }

    fn positions(&self) -> &'static str {
        match (self.has_addresses, self.has_lines) {
            (true, true) => "instr line",
            (true, false) => "instr",
            _ => "line",
        }
    }

    fn format_pos(&self, pos: Pos) -> String {
        match (self.has_addresses, self.has_lines) {
            (true, true) => format!("{:#x} {}", pos.addr, pos.line),
            (true, false) => format!("{:#x}", pos.addr),
            _ => pos.line.to_string(),
        }
    }
}

fn add(acc: &mut Vec<u64>, costs: &[u64]) {
    acc.resize(costs.len().max(acc.len()), 0);
    for (a, c) in acc.iter_mut().zip(costs) {
        *a = a.saturating_add(*c);
    }
}

/// Names written as `(id) name` the first time and `(id)` after (the
/// specification's "Name Compression"); one table per kind (`ob`, `fl`, `fn`),
/// shared by the `c`-prefixed keys as the specification requires.
struct Names<'a> {
    /// Borrowed from the functions written: no name copied.
    ids: HashMap<(&'static str, &'a str), usize>,
    /// The first id this table gives.
    first: usize,
}

impl<'a> Names<'a> {
    /// Names given ids from `first` on (a run's names follow the previous
    /// run's ids, never reusing one).
    fn starting_at(first: usize) -> Names<'a> {
        Names {
            ids: HashMap::new(),
            first,
        }
    }

    /// The id the next new name gets.
    fn next(&self) -> usize {
        self.first + self.ids.len()
    }

    fn get(&mut self, kind: &'static str, name: &'a str) -> String {
        let next = self.next();
        match self.ids.entry((kind, name)) {
            std::collections::hash_map::Entry::Occupied(e) => format!("({})", e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next);
                format!("({next}) {name}")
            }
        }
    }
}

fn cost_text(costs: &[u64]) -> String {
    let mut end = costs.len();
    while end > 1 && costs[end - 1] == 0 {
        end -= 1;
    }
    costs[..end]
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes the profile in the callgrind format.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    if profile.sample_types().is_empty() {
        return Err(Error::Usage("the profile has no sample types".into()));
    }
    let events = events(profile);
    let cg = Callgrind::new(profile, &events, false);
    let io = Error::unnamed_output;
    write_header(profile, options, &events, cg.positions(), out).map_err(io)?;
    write_body(&cg, &mut Names::starting_at(1), out).map_err(io)?;
    let mut totals = vec![0u64; events.len()];
    for costs in cg.own.values() {
        add(&mut totals, costs);
    }
    writeln!(out, "\ntotals: {}", cost_text(&totals)).map_err(io)
}

fn write_header(
    profile: &Profile,
    options: &WriteOptions,
    events: &[Event],
    positions: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(out, "creator: profconv {}", env!("CARGO_PKG_VERSION"))?;
    if !options.title.is_empty() {
        writeln!(out, "cmd: {}", one_line(&options.title))?;
    }
    for (key, value) in profile.metadata() {
        writeln!(out, "desc: {}: {}", one_line(key), one_line(value))?;
    }
    for comment in profile.comments() {
        writeln!(out, "# {}", one_line(comment))?;
    }
    writeln!(out, "positions: {positions}")?;
    for e in events {
        writeln!(out, "event: {} : {}", e.name, e.long_name)?;
    }
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    // callgrind_annotate takes `events:` as the end of the header.
    writeln!(out, "events: {}", names.join(" "))
}

fn write_body<'a>(
    cg: &'a Callgrind,
    names: &mut Names<'a>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut funcs: Vec<usize> = cg
        .own
        .keys()
        .map(|k| k.0)
        .chain(cg.calls.keys().map(|k| k.0))
        .collect();
    funcs.sort_unstable();
    funcs.dedup();
    for f in funcs {
        let func = &cg.functions[f];
        writeln!(out)?;
        if !func.object.is_empty() {
            writeln!(out, "ob={}", names.get("ob", &func.object))?;
        }
        writeln!(out, "fl={}", names.get("fl", &func.file))?;
        writeln!(out, "fn={}", names.get("fn", &func.name))?;
        for ((_, pos), costs) in cg.own.range((f, MIN_POS)..=(f, MAX_POS)) {
            writeln!(out, "{} {}", cg.format_pos(*pos), cost_text(costs))?;
        }
        for ((_, pos, callee), call) in cg.calls.range((f, MIN_POS, 0)..=(f, MAX_POS, usize::MAX)) {
            let target = &cg.functions[*callee];
            if target.object != func.object && !target.object.is_empty() {
                writeln!(out, "cob={}", names.get("ob", &target.object))?;
            }
            // Always name the callee's file: callgrind_annotate otherwise
            // assumes the caller's.
            writeln!(out, "cfl={}", names.get("fl", &target.file))?;
            writeln!(out, "cfn={}", names.get("fn", &target.name))?;
            let count = if call.known_count {
                call.count.max(1)
            } else {
                1
            };
            writeln!(out, "calls={count} {}", cg.format_pos(call.target))?;
            writeln!(out, "{} {}", cg.format_pos(*pos), cost_text(&call.costs))?;
        }
    }
    Ok(())
}

const MIN_POS: Pos = Pos {
    line: i64::MIN,
    addr: 0,
};
const MAX_POS: Pos = Pos {
    line: i64::MAX,
    addr: u64::MAX,
};

/// The callgrind output of a profile read in parts, at every address: the
/// body of each run of parts (aggregated as [`write`] aggregates a whole
/// profile) is written as the run is made, to an anonymous temporary file;
/// the header and the totals, which depend on every run, are written at the
/// end around it. A function of several runs has a block in each (callgrind
/// tools add a function's cost lines up wherever they are), its name given
/// a new id in each run; every position gives its address and its line.
/// Memory: one run's aggregate.
pub(crate) struct CallgrindRuns {
    body: std::io::BufWriter<std::fs::File>,
    /// The id the next run's first name gets.
    next_name: usize,
    totals: Vec<u64>,
}

impl CallgrindRuns {
    /// Runs in an anonymous temporary file in `dir`
    /// ([`super::runs::spill_file`]).
    pub fn new(dir: &std::path::Path) -> Result<CallgrindRuns> {
        Ok(CallgrindRuns {
            body: super::runs::spill_file(dir)?,
            next_name: 1,
            totals: Vec::new(),
        })
    }

    /// Writes the body of `profile` (some parts of the whole).
    pub fn add(&mut self, profile: &Profile) -> Result<()> {
        if profile.sample_types().is_empty() {
            return Err(Error::Usage("the profile has no sample types".into()));
        }
        let events = events(profile);
        let cg = Callgrind::new(profile, &events, true);
        let mut names = Names::starting_at(self.next_name);
        write_body(&cg, &mut names, &mut self.body).map_err(Error::unnamed_output)?;
        self.next_name = names.next();
        for costs in cg.own.values() {
            add(&mut self.totals, costs);
        }
        Ok(())
    }

    /// Writes the whole output: the header of `head` (the profile's
    /// tables: sample types, metadata, comments), the runs' bodies, the
    /// totals.
    pub fn write(
        &mut self,
        head: &Profile,
        options: &WriteOptions,
        out: &mut dyn Write,
    ) -> Result<()> {
        if head.sample_types().is_empty() {
            return Err(Error::Usage("the profile has no sample types".into()));
        }
        let io = Error::unnamed_output;
        let events = events(head);
        write_header(head, options, &events, "instr line", out).map_err(io)?;
        self.body.flush().map_err(io)?;
        let file = self.body.get_ref();
        let bytes = file.metadata().map_err(io)?.len();
        super::runs::copy_range(file, 0..bytes, out)?;
        let mut totals = self.totals.clone();
        totals.resize(events.len().max(totals.len()), 0);
        writeln!(out, "\ntotals: {}", cost_text(&totals)).map_err(io)
    }
}

/// The file name callgrind tools look for: `callgrind.out.*`, or `*.callgrind`.
pub fn is_callgrind_name(name: &str) -> bool {
    let name = basename(name).to_ascii_lowercase();
    name.starts_with("callgrind.out") || name.ends_with(".callgrind")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Line, Location, LocationId};

    fn symbolized(p: &mut Profile, name: &str, line: i64, addr: u64) -> LocationId {
        let f = p.add_function(name, name, "prog.c", 1);
        p.add_location(Location {
            mapping: None,
            address: addr,
            is_return_address: false,
            lines: vec![Line { function: f, line }].into(),
        })
    }

    fn text(p: &Profile) -> String {
        let mut out = Vec::new();
        write(p, &WriteOptions::default(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_are_compressed_after_their_first_use() {
        let mut p = Profile::new(&[("cpu", "nanoseconds")]);
        let main = symbolized(&mut p, "main", 10, 0x100);
        let work = symbolized(&mut p, "work", 20, 0x200);
        p.add_sample(&[work, main], &[5], &[]);
        p.add_sample(&[main], &[1], &[]);
        let t = text(&p);
        assert!(t.contains("positions: line\n"), "{t}");
        assert!(t.contains("events: cpu\n"), "{t}");
        assert!(
            t.contains(
                "fl=(1) prog.c\nfn=(2) main\n10 1\ncfl=(1)\ncfn=(3) work\ncalls=1 20\n10 5\n"
            ),
            "{t}"
        );
        assert!(t.contains("fl=(1)\nfn=(3)\n20 5\n"), "{t}");
        assert!(t.ends_with("totals: 6\n"), "{t}");
    }

    #[test]
    fn recursion_counts_each_sample_once_on_the_call_into_the_first_occurrence() {
        let mut p = Profile::new(&[("samples", "count")]);
        let main = symbolized(&mut p, "main", 1, 0x10);
        let f1 = symbolized(&mut p, "f", 2, 0x20);
        let g = symbolized(&mut p, "g", 3, 0x30);
        let f2 = symbolized(&mut p, "f", 4, 0x40);
        // main → f → g → f (leaf)
        p.add_sample(&[f2, g, f1, main], &[7], &[]);
        let events = events(&p);
        let cg = Callgrind::new(&p, &events, false);
        let costs: Vec<(String, String, u64)> = cg
            .calls
            .iter()
            .map(|((a, _, b), c)| {
                (
                    cg.functions[*a].name.clone(),
                    cg.functions[*b].name.clone(),
                    c.costs[0],
                )
            })
            .collect();
        assert_eq!(
            costs,
            vec![
                ("main".into(), "f".into(), 7),
                ("f".into(), "g".into(), 7),
                ("g".into(), "f".into(), 0),
            ]
        );
    }

    #[test]
    fn call_counts_come_from_the_call_count_type() {
        let mut p = Profile::new(&[("cpu", "nanoseconds"), ("calls", "count")]);
        p.call_count_type = Some(1);
        let main = symbolized(&mut p, "main", 1, 0x10);
        let work = symbolized(&mut p, "work", 2, 0x20);
        p.add_sample(&[work, main], &[0, 42], &[]);
        p.add_sample(&[work, main], &[9, 0], &[]);
        let t = text(&p);
        assert!(t.contains("calls=42 2\n1 9 42\n"), "{t}");
    }

    #[test]
    fn unsymbolized_locations_are_instruction_addresses() {
        let mut p = Profile::new(&[("samples", "count")]);
        let a = p.address_location(None, 0x1234, false);
        p.add_sample(&[a], &[3], &[]);
        let t = text(&p);
        assert!(t.contains("positions: instr\n"), "{t}");
        assert!(t.contains("fl=(1) ???\nfn=(2) 0x1234\n0x1234 3\n"), "{t}");
    }

    #[test]
    fn file_names_callgrind_tools_use_are_recognized() {
        assert!(is_callgrind_name("callgrind.out.1234"));
        assert!(is_callgrind_name("dir/prog.callgrind"));
        assert!(!is_callgrind_name("out.pb.gz"));
    }
}
