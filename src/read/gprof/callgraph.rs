//! The call graph and stack synthesis (§4): self time is handed to callers
//! along the arcs, cycles collapsed first, into rooted stacks whose
//! inclusive and arc times match gprof's.
//!
//! Memory: flat tables (one array of rows each: callers, arcs entering each
//! component, arcs inside components, flow per arc) with `u32` function,
//! component and call-site ids; the synthesized stacks are one array of
//! call sites with a range per stack.

use std::ops::Range;

use rustc_hash::FxHashMap as HashMap;

use crate::profile::Apportioner;

/// How many nodes of [`CallGraph::search_down`] trees are kept at most
/// (about 8 MB).
const MAX_KEPT_TREE_NODES: usize = 1 << 20;

/// For each member of a component (by its [`CallGraph`] `position`): its
/// caller on a shortest chain from an entry member and the call site, or
/// [`UNREACHED`].
type InnerTree = Vec<(u32, u32)>;

/// What [`InnerTree`] holds for the search's start and members it does not
/// reach.
const UNREACHED: (u32, u32) = (u32::MAX, u32::MAX);

/// Cycles of more members than this route every stack through one hub
/// member ([`HubTrees`]) instead of searching from each entry member.
const SMALL_CYCLE: usize = 64;

/// The two search trees of a big cycle, both through its hub member: how
/// the hub reaches each member (`down`: member → its caller, call site) and
/// how each member reaches the hub (`up`: member → its callee towards the
/// hub, call site in the member).
pub(super) struct HubTrees {
    hub: u32,
    down: InnerTree,
    up: InnerTree,
}

/// An arc into a function: the calling function, the call site and the
/// calls along it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Caller {
    pub(super) func: u32,
    /// The call site, which the graph only carries into [`Stacks::sites`]:
    /// the profile's builder gives its location id.
    pub(super) site: u32,
    pub(super) count: u64,
}

/// An arc into a component from outside it.
#[derive(Debug, Clone, Copy, Default)]
struct Entering {
    /// The member called.
    entry: u32,
    /// The calling function and call site.
    caller: u32,
    site: u32,
    count: u64,
}

/// Rows of items in one array: row `r` is `items[starts[r]..starts[r + 1]]`.
struct Table<T> {
    starts: Vec<usize>,
    items: Vec<T>,
}

impl<T: Copy + Default> Table<T> {
    /// `rows` rows of the `(row, item)` pairs, each row in the pairs' order
    /// (a counting sort: one pass to count, one to place).
    fn grouped<I>(rows: usize, pairs: I) -> Self
    where
        I: Iterator<Item = (usize, T)> + Clone,
    {
        let mut starts = vec![0usize; rows + 1];
        for (r, _) in pairs.clone() {
            starts[r + 1] += 1;
        }
        for r in 0..rows {
            starts[r + 1] += starts[r];
        }
        let mut next = starts.clone();
        let mut items = vec![T::default(); starts[rows]];
        for (r, item) in pairs {
            items[next[r]] = item;
            next[r] += 1;
        }
        Table { starts, items }
    }

    fn rows(&self) -> usize {
        self.starts.len() - 1
    }

    fn range(&self, r: usize) -> Range<usize> {
        self.starts[r]..self.starts[r + 1]
    }

    fn row(&self, r: usize) -> &[T] {
        &self.items[self.range(r)]
    }
}

/// Synthesized stacks (paths), as [`Synthesis::paths_of`] makes them: each
/// path is the call sites from a function up to a root of the call graph
/// (innermost first, as address indexes) and the nanoseconds of the
/// function's self time that it carries. Paths are numbered from 0 in the
/// order made, a function's paths consecutively.
#[derive(Default)]
pub(super) struct Stacks {
    paths: Vec<Path>,
    /// The call sites of every path, one after the other.
    sites: Vec<u32>,
}

/// One stack of [`Stacks`]: its call sites `sites[start..end]`, its time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Path {
    start: usize,
    end: usize,
    pub(super) nanos: i64,
}

impl Stacks {
    /// Empty, with room for `sites` call sites and `paths` paths.
    pub(super) fn with_capacity(sites: usize, paths: usize) -> Self {
        Stacks {
            paths: Vec::with_capacity(paths),
            sites: Vec::with_capacity(sites),
        }
    }

    /// Emptied, its room kept.
    pub(super) fn clear(&mut self) {
        self.paths.clear();
        self.sites.clear();
    }

    /// The paths numbered `range`.
    pub(super) fn paths(&self, range: Range<usize>) -> &[Path] {
        &self.paths[range]
    }

    /// The call sites of path `k`, innermost first.
    pub(super) fn sites(&self, k: usize) -> &[u32] {
        let p = &self.paths[k];
        &self.sites[p.start..p.end]
    }

    /// The call sites held, over all paths.
    pub(super) fn sites_len(&self) -> usize {
        self.sites.len()
    }
}

/// The call graph between functions, with its cycles (strongly connected
/// components) collapsed the way gprof collapses them before it hands time
/// to callers. Functions are `0..n`, components `0..` as numbered by
/// [`strongly_connected_components`].
pub(super) struct CallGraph {
    /// Arcs into each function from other functions.
    callers: Table<Caller>,
    /// The component of each function. Tarjan's algorithm over the caller
    /// lists numbers a caller's component below its callees' (reverse
    /// topological order of the caller edges).
    pub(super) component: Vec<u32>,
    /// Arcs into each component from outside it.
    entering: Table<Entering>,
    /// Where a stack starts inside a root component: the component itself
    /// when it is one function; for a cycle no outside function calls, the
    /// member called from outside the executable (`main` from libc), else
    /// its first member.
    root_entry: Vec<u32>,
    /// Arcs from each function to the members of its own component: (callee,
    /// call site).
    inner_callees: Table<(u32, u32)>,
    /// [`CallGraph::search_down`] of each entry member asked for so far.
    inner_trees: std::cell::RefCell<HashMap<u32, InnerTree>>,
    /// Nodes in `inner_trees`, kept as they are added.
    inner_tree_nodes: std::cell::Cell<usize>,
    /// Members of each component.
    pub(super) members: Vec<u32>,
    /// The place of each function among its component's members (in
    /// function order), which indexes [`InnerTree`]s.
    position: Vec<u32>,
    /// The hub trees of each big cycle asked for so far.
    hub_trees: std::cell::RefCell<HashMap<u32, HubTrees>>,
}

impl CallGraph {
    /// The graph of functions `0..n` (fewer than `u32::MAX`) from `arcs`:
    /// (callee, caller) of every arc between two distinct functions, in
    /// the order the callers are to be tried. `spontaneous[f]`: `f` is
    /// called from outside the executable's symbols (the arcs gprof drops,
    /// shown as `<spontaneous>`).
    pub(super) fn new(n: usize, arcs: &[(u32, Caller)], spontaneous: &[bool]) -> Self {
        let callers = Table::grouped(n, arcs.iter().map(|&(f, c)| (f as usize, c)));
        let component = strongly_connected_components(&callers);
        let ncomp = component.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        // Arcs entering each component from outside, and arcs inside one,
        // grouped straight from the caller lists (read twice, no list of
        // pairs made).
        let arcs = || {
            (0..n).flat_map(|f| {
                let comp = component[f];
                callers.row(f).iter().map(move |c| (f, comp, c))
            })
        };
        let entering = arcs()
            .filter(|&(_, comp, c)| component[c.func as usize] != comp && c.count > 0)
            .map(|(f, comp, c)| {
                let arc = Entering {
                    entry: f as u32,
                    caller: c.func,
                    site: c.site,
                    count: c.count,
                };
                (comp as usize, arc)
            });
        let entering = Table::grouped(ncomp, entering);
        let inner = arcs()
            .filter(|&(_, comp, c)| component[c.func as usize] == comp)
            .map(|(f, _, c)| (c.func as usize, (f as u32, c.site)));
        let inner_callees = Table::grouped(n, inner);
        let (root_entry, members, position) = root_entries(&component, ncomp, spontaneous);
        CallGraph {
            callers,
            component,
            entering,
            root_entry,
            inner_callees,
            inner_trees: Default::default(),
            inner_tree_nodes: Default::default(),
            members,
            position,
            hub_trees: Default::default(),
        }
    }

    /// Appends to `sites` the call sites (innermost first) of a shortest
    /// chain of calls inside one component from `entry` down to `target`.
    #[inline]
    fn inner_path(&self, entry: u32, target: u32, sites: &mut Vec<u32>) {
        if entry != target {
            self.cycle_path(entry, target, sites);
        }
    }

    /// [`CallGraph::inner_path`] between two members of a cycle. One
    /// breadth-first search per entry member, over the component's own
    /// arcs, serves every target (a cycle has few entries, many targets).
    #[inline(never)]
    fn cycle_path(&self, entry: u32, target: u32, sites: &mut Vec<u32>) {
        let comp = self.component[target as usize];
        if self.members[comp as usize] as usize > SMALL_CYCLE {
            return self.hub_path(comp, entry, target, sites);
        }
        let mut trees = self.inner_trees.borrow_mut();
        if !trees.contains_key(&entry) {
            // Bounded memory for cycles of thousands of functions entered
            // in many places: forget the trees kept so far past a limit.
            if self.inner_tree_nodes.get() > MAX_KEPT_TREE_NODES {
                trees.clear();
                self.inner_tree_nodes.set(0);
            }
            let tree = self.search_down(entry);
            self.inner_tree_nodes
                .set(self.inner_tree_nodes.get() + tree.len());
            trees.insert(entry, tree);
        }
        let tree = &trees[&entry];
        let mut at = target;
        while at != entry {
            let (caller, site) = tree[self.position[at as usize] as usize];
            if caller == u32::MAX {
                break;
            }
            sites.push(site);
            at = caller;
        }
    }

    /// [`CallGraph::inner_path`] in a big cycle: from `entry` along its
    /// shortest chain to the hub, then down the hub's shortest chain to
    /// `target`. Two searches per cycle serve every (entry, target), so the
    /// work is linear in the cycle's arcs whatever the number of entries;
    /// the chain may pass a member twice (recursion), each call a real arc.
    fn hub_path(&self, comp: u32, entry: u32, target: u32, sites: &mut Vec<u32>) {
        let mut hubs = self.hub_trees.borrow_mut();
        let trees = hubs.entry(comp).or_insert_with(|| {
            let hub = self.root_entry[comp as usize];
            HubTrees {
                hub,
                down: self.search_down(hub),
                up: self.search_up(hub),
            }
        });
        let mut at = target;
        while at != trees.hub {
            let (caller, site) = trees.down[self.position[at as usize] as usize];
            if caller == u32::MAX {
                break;
            }
            sites.push(site);
            at = caller;
        }
        // Entry to hub, found outward from the entry: pushed, then turned
        // innermost first.
        let start = sites.len();
        let mut at = entry;
        while at != trees.hub {
            let (callee, site) = trees.up[self.position[at as usize] as usize];
            if callee == u32::MAX {
                break;
            }
            sites.push(site);
            at = callee;
        }
        sites[start..].reverse();
    }

    /// For every member of `hub`'s component that reaches it inside the
    /// component, its callee on a shortest chain of calls to the hub and the
    /// call site.
    fn search_up(&self, hub: u32) -> InnerTree {
        let comp = self.component[hub as usize];
        let mut via = vec![UNREACHED; self.members[comp as usize] as usize];
        let mut queue = std::collections::VecDeque::from([hub]);
        while let Some(f) = queue.pop_front() {
            for c in self.callers.row(f as usize) {
                let inside = self.component[c.func as usize] == comp && c.func != hub;
                let at = self.position[c.func as usize] as usize;
                if inside && via[at] == UNREACHED {
                    via[at] = (f, c.site);
                    queue.push_back(c.func);
                }
            }
        }
        via
    }

    /// For every member of `entry`'s component reachable from it inside the
    /// component, its caller on a shortest chain of calls and the call site.
    fn search_down(&self, entry: u32) -> InnerTree {
        let comp = self.component[entry as usize];
        let mut via = vec![UNREACHED; self.members[comp as usize] as usize];
        let mut queue = std::collections::VecDeque::from([entry]);
        while let Some(f) = queue.pop_front() {
            for &(callee, site) in self.inner_callees.row(f as usize) {
                let at = self.position[callee as usize] as usize;
                if callee != entry && via[at] == UNREACHED {
                    via[at] = (f, site);
                    queue.push_back(callee);
                }
            }
        }
        via
    }

    /// gprof's propagation (§4): every component's inclusive time (its
    /// members' self time, ≥ 0, plus what its callees hand it) is handed to
    /// the arcs entering it in proportion to their call counts. Returns the
    /// time of each entering arc (as `entering.items`), in integer
    /// nanoseconds that add up exactly to the component's inclusive time; a
    /// component nobody calls keeps its time: it is a root.
    fn arc_times(&self, self_ns: &[i64]) -> Vec<i64> {
        let ncomp = self.entering.rows();
        let mut inclusive = vec![0i64; ncomp];
        for (f, &ns) in self_ns.iter().enumerate() {
            let c = self.component[f] as usize;
            inclusive[c] = inclusive[c].saturating_add(ns);
        }
        let mut times = vec![0i64; self.entering.items.len()];
        let mut counts = Vec::new();
        let mut split = Apportioner::default();
        // Callees before callers: components in decreasing number.
        for comp in (0..ncomp).rev() {
            let range = self.entering.range(comp);
            let arcs = &self.entering.items[range.clone()];
            let shares = &mut times[range];
            match arcs {
                [] => {}
                // What `apportion` gives one arc of calls (entering arcs
                // have some) for a time ≥ 0.
                [_] => shares[0] = inclusive[comp],
                _ => {
                    counts.clear();
                    counts.extend(arcs.iter().map(|a| a.count as f64));
                    split.split_into(inclusive[comp], &counts, shares);
                }
            }
            for (arc, &share) in arcs.iter().zip(shares.iter()) {
                let parent = self.component[arc.caller as usize] as usize;
                debug_assert!(parent < comp, "a caller's component comes first");
                inclusive[parent] = inclusive[parent].saturating_add(share);
            }
        }
        times
    }

    /// The flow decomposition that synthesizes stacks for every function's
    /// self time (`self_ns[f]` ≥ 0 for each of the graph's functions), each
    /// from a root of the call graph down to the function, such that every
    /// function outside a cycle gets exactly gprof's inclusive time (self +
    /// children) and every arc between components exactly the time gprof
    /// propagates along it: [`Synthesis::paths_of`] gives each function's
    /// stacks, function after function.
    ///
    /// The arc times form a flow from the roots down to the functions' self
    /// time, conserved at every component; it decomposes into paths
    /// (flow decomposition): from a function with self time left, climb
    /// through any entering arc with flow left up to a root, and take the
    /// smallest amount left on the way. Each path empties an arc or a
    /// function's self time, so there are at most `arcs + functions` of them,
    /// however many paths the graph has (exponentially many in general).
    pub(super) fn synthesis<'a>(&'a self, self_ns: &'a [i64]) -> Synthesis<'a> {
        Synthesis {
            graph: self,
            self_ns,
            climb: Climb::new(self, self.arc_times(self_ns)),
        }
    }

    /// One path of [`Synthesis::paths_of`]: from `func` up to a root through
    /// arcs with flow left, carrying at most `left` nanoseconds; its call
    /// sites appended to `sites`. Returns the nanoseconds it carries.
    ///
    /// Two walks up the heads: the first finds what the path carries (the
    /// least flow on its way) and how long it is, the second appends its
    /// sites and takes that amount off each arc. A component is on a path
    /// once (its callers' components come before it), so a head moved on
    /// by the second walk is never read again by it.
    fn climb(&self, func: u32, left: i64, state: &mut Climb, sites: &mut Vec<u32>) -> i64 {
        let mut nanos = left;
        let mut steps = 0;
        let mut comp = self.component[func as usize];
        loop {
            let head = &state.heads[comp as usize];
            if head.caller == NO_ARC {
                break;
            }
            nanos = nanos.min(head.flow);
            steps += 1;
            comp = head.caller_comp;
        }
        sites.reserve(steps);
        let mut at = func;
        let mut comp = self.component[at as usize];
        loop {
            let head = state.heads[comp as usize];
            self.inner_path(head.entry, at, sites);
            if head.caller == NO_ARC {
                // A root. (Flow is conserved, so a component with callers
                // always has an arc with flow left when a path reaches it.)
                debug_assert!(
                    self.entering.row(comp as usize).is_empty(),
                    "flow not conserved"
                );
                break;
            }
            sites.push(head.site);
            let flow = &mut state.heads[comp as usize].flow;
            *flow -= nanos;
            if *flow == 0 {
                state.advance(self, comp as usize);
            }
            at = head.caller;
            comp = head.caller_comp;
        }
        nanos
    }
}

/// [`CallGraph::synthesis`] under way: the flow left on each arc.
pub(super) struct Synthesis<'a> {
    graph: &'a CallGraph,
    /// Each function's self time, as the synthesis began with it.
    self_ns: &'a [i64],
    climb: Climb,
}

impl Synthesis<'_> {
    /// The stacks of function `f`'s self time, appended to `out`; the
    /// numbers of the paths added. Asked for once per function.
    pub(super) fn paths_of(&mut self, f: usize, out: &mut Stacks) -> Range<usize> {
        let first = out.paths.len();
        let mut left = self.self_ns[f];
        while left > 0 {
            let start = out.sites.len();
            let nanos = self
                .graph
                .climb(f as u32, left, &mut self.climb, &mut out.sites);
            left -= nanos;
            let end = out.sites.len();
            out.paths.push(Path { start, end, nanos });
        }
        first..out.paths.len()
    }
}

/// What [`CallGraph::climb`] reads and updates, laid out for it: a climb
/// step reads one [`Head`] (24 bytes per component, so the whole table of a
/// 20 000-function program stays in a core's cache), the flow left on the
/// other arcs is read only when a head's runs out.
struct Climb {
    /// Per component: its first entering arc with flow left.
    heads: Vec<Head>,
    /// Per component: the index (as `entering.items`) of its head's arc.
    /// Arcs only lose flow, so it only moves forward: O(arcs) over the
    /// whole run.
    next: Vec<usize>,
    /// The flow left on each entering arc (as `entering.items`) behind
    /// the heads; a head's own flow is in the head.
    flow: Vec<i64>,
}

/// What [`Head::caller`] holds for a component with no entering arc with
/// flow left: a root.
const NO_ARC: u32 = u32::MAX;

/// A component's first entering arc with flow left during
/// [`CallGraph::climb`], or, for a root, the member its stacks start at.
#[derive(Clone, Copy)]
struct Head {
    /// The flow left on the arc (0 for a root).
    flow: i64,
    /// The member the arc calls; for a root its `root_entry`.
    entry: u32,
    /// The calling function, or [`NO_ARC`].
    caller: u32,
    caller_comp: u32,
    site: u32,
}

impl Head {
    /// The head of root component `comp`.
    fn root(graph: &CallGraph, comp: usize) -> Self {
        Head {
            flow: 0,
            entry: graph.root_entry[comp],
            caller: NO_ARC,
            caller_comp: NO_ARC,
            site: NO_ARC,
        }
    }
}

impl Climb {
    fn new(graph: &CallGraph, flow: Vec<i64>) -> Self {
        let ncomp = graph.entering.rows();
        let mut climb = Climb {
            heads: (0..ncomp).map(|comp| Head::root(graph, comp)).collect(),
            next: graph.entering.starts[..ncomp].to_vec(),
            flow,
        };
        for comp in 0..ncomp {
            climb.find_head(graph, comp);
        }
        climb
    }

    /// Moves `comp`'s head past its arc, now without flow.
    fn advance(&mut self, graph: &CallGraph, comp: usize) {
        self.next[comp] += 1;
        self.find_head(graph, comp);
    }

    /// Makes `comp`'s head its first arc with flow left from `next[comp]`
    /// on, or a root's when none is left (as a root's stacks start: flow
    /// conservation keeps paths from a component whose arcs are emptied).
    fn find_head(&mut self, graph: &CallGraph, comp: usize) {
        let end = graph.entering.starts[comp + 1];
        let mut i = self.next[comp];
        while i < end && self.flow[i] == 0 {
            i += 1;
        }
        self.next[comp] = i;
        self.heads[comp] = match (i < end).then(|| graph.entering.items[i]) {
            Some(arc) => Head {
                flow: self.flow[i],
                entry: arc.entry,
                caller: arc.caller,
                caller_comp: graph.component[arc.caller as usize],
                site: arc.site,
            },
            None => Head::root(graph, comp),
        };
    }
}

/// Where a stack starts inside each of the `ncomp` components (see
/// [`CallGraph`]'s `root_entry`), how many members each has, and the
/// place of each function among its component's members.
fn root_entries(
    component: &[u32],
    ncomp: usize,
    spontaneous: &[bool],
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut root_entry = vec![u32::MAX; ncomp];
    let mut members = vec![0u32; ncomp];
    let mut position = Vec::with_capacity(component.len());
    for (f, &comp) in component.iter().enumerate() {
        let comp = comp as usize;
        position.push(members[comp]);
        members[comp] += 1;
        let chosen = root_entry[comp];
        let spont = |g: usize| spontaneous.get(g) == Some(&true);
        if chosen == u32::MAX || (spont(f) && !spont(chosen as usize)) {
            root_entry[comp] = f as u32;
        }
    }
    (root_entry, members, position)
}

/// Tarjan's algorithm, iterative; the graph is given as caller lists (the
/// components are the same whichever way the arcs point).
fn strongly_connected_components(callers: &Table<Caller>) -> Vec<u32> {
    const UNSEEN: u32 = u32::MAX;
    let n = callers.rows();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![UNSEEN; n];
    let (mut next_index, mut ncomp) = (0u32, 0u32);
    let mut work: Vec<(u32, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        work.push((root as u32, 0));
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            let v = v as usize;
            if let Some(c) = callers.row(v).get(*i) {
                *i += 1;
                let w = c.func as usize;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    work.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u as usize] = low[u as usize].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    component[w as usize] = ncomp;
                    if w as usize == v {
                        break;
                    }
                }
                ncomp += 1;
            }
        }
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(parent: usize, child: usize) -> u32 {
        ((parent as u32) << 20) | child as u32
    }

    fn graph(arcs: &[(usize, usize, u64)], n: usize, spontaneous: &[usize]) -> CallGraph {
        let arcs: Vec<(u32, Caller)> = arcs
            .iter()
            .map(|&(parent, child, count)| {
                let caller = Caller {
                    func: parent as u32,
                    site: site(parent, child),
                    count,
                };
                (child as u32, caller)
            })
            .collect();
        let spont: Vec<bool> = (0..n).map(|f| spontaneous.contains(&f)).collect();
        CallGraph::new(n, &arcs, &spont)
    }

    /// One synthesized stack, as the tests compare them.
    #[derive(Debug, Clone, PartialEq)]
    struct SynthPath {
        sites: Vec<u32>,
        nanos: i64,
    }

    /// The stacks of each function, functions in order.
    fn stacks_of(g: &CallGraph, self_ns: &[i64]) -> Vec<Vec<SynthPath>> {
        let mut synthesis = g.synthesis(self_ns);
        let mut stacks = Stacks::default();
        (0..self_ns.len())
            .map(|f| {
                let range = synthesis.paths_of(f, &mut stacks);
                range
                    .map(|k| SynthPath {
                        sites: stacks.sites(k).to_vec(),
                        nanos: stacks.paths[k].nanos,
                    })
                    .collect()
            })
            .collect()
    }

    /// The functions of a synthesized stack of `leaf`, leaf first.
    fn frames(leaf: usize, sites: &[u32]) -> Vec<usize> {
        let mut out = vec![leaf];
        out.extend(sites.iter().map(|s| (s >> 20) as usize));
        out
    }

    /// gprof's inclusive time of every function of an acyclic graph, in f64.
    fn gprof_inclusive(arcs: &[(usize, usize, u64)], self_ns: &[i64]) -> Vec<f64> {
        let n = self_ns.len();
        let mut ncalls = vec![0u64; n];
        for &(_, c, k) in arcs {
            ncalls[c] += k;
        }
        let mut memo: Vec<Option<f64>> = vec![None; n];
        fn inc(
            f: usize,
            arcs: &[(usize, usize, u64)],
            self_ns: &[i64],
            ncalls: &[u64],
            memo: &mut Vec<Option<f64>>,
        ) -> f64 {
            if let Some(v) = memo[f] {
                return v;
            }
            let mut v = self_ns[f] as f64;
            for &(p, c, k) in arcs {
                if p == f {
                    v += inc(c, arcs, self_ns, ncalls, memo) * k as f64 / ncalls[c] as f64;
                }
            }
            memo[f] = Some(v);
            v
        }
        (0..n)
            .map(|f| inc(f, arcs, self_ns, &ncalls, &mut memo))
            .collect()
    }

    /// Each function's inclusive time over all synthesized stacks.
    fn synthesized_inclusive(stacks: &[Vec<SynthPath>], n: usize) -> Vec<i64> {
        let mut cum = vec![0i64; n];
        for (leaf, paths) in stacks.iter().enumerate() {
            for p in paths {
                let mut seen = frames(leaf, &p.sites);
                seen.sort();
                seen.dedup();
                for f in seen {
                    cum[f] += p.nanos;
                }
            }
        }
        cum
    }

    #[test]
    fn self_time_is_handed_to_callers_in_proportion_to_calls() {
        // 0 → 2 (1 call), 1 → 2 (3 calls), 3 → 0, 3 → 1
        let g = graph(&[(0, 2, 1), (1, 2, 3), (3, 0, 1), (3, 1, 1)], 4, &[]);
        let stacks = stacks_of(&g, &[0, 0, 1000, 0]);
        let mut paths = stacks[2].clone();
        paths.sort_by_key(|p| p.nanos);
        assert_eq!(
            paths,
            vec![
                SynthPath {
                    sites: vec![site(0, 2), site(3, 0)],
                    nanos: 250
                },
                SynthPath {
                    sites: vec![site(1, 2), site(3, 1)],
                    nanos: 750
                },
            ]
        );
    }

    #[test]
    fn a_cycle_hands_its_time_to_callers_outside_it() {
        // 0 ↔ 1 mutual recursion entered from 2 only; 3 → 2.
        let g = graph(&[(0, 1, 500), (1, 0, 499), (2, 0, 1), (3, 2, 1)], 4, &[]);
        assert_eq!(g.component[0], g.component[1]);
        let stacks = stacks_of(&g, &[300, 700, 0, 0]);
        assert_eq!(
            stacks[1],
            vec![SynthPath {
                sites: vec![site(0, 1), site(2, 0), site(3, 2)],
                nanos: 700
            }]
        );
        assert_eq!(
            stacks[0],
            vec![SynthPath {
                sites: vec![site(2, 0), site(3, 2)],
                nanos: 300
            }]
        );
    }

    #[test]
    fn a_cycle_nobody_calls_starts_at_the_member_called_from_outside() {
        // 0 ↔ 1, 1 → 2; 1 is `main`, called from libc (spontaneous).
        let g = graph(&[(0, 1, 5), (1, 0, 5), (1, 2, 1)], 3, &[1]);
        let stacks = stacks_of(&g, &[10, 0, 20]);
        assert_eq!(stacks[0][0].sites, vec![site(1, 0)]);
        assert_eq!(stacks[2][0].sites, vec![site(1, 2)]);
    }

    #[test]
    fn stacks_inside_a_big_cycle_are_chains_of_real_arcs_through_its_hub() {
        // A ring of 100 members 1..=100 (i -> i+1, 100 -> 1) with chords
        // i -> i+7, entered from the root 0 at every tenth member.
        let ring = 100;
        let mut arcs = Vec::new();
        for i in 1..=ring {
            arcs.push((i, i % ring + 1, 3));
            arcs.push((i, (i + 6) % ring + 1, 1));
        }
        for i in (1..=ring).step_by(10) {
            arcs.push((0, i, 2));
        }
        let self_ns: Vec<i64> = (0..=ring).map(|f| 1000 + 13 * f as i64).collect();
        let g = graph(&arcs, ring + 1, &[0]);
        assert!(g.members[g.component[1] as usize] as usize > SMALL_CYCLE);
        let stacks = stacks_of(&g, &self_ns);
        for (leaf, paths) in stacks.iter().enumerate() {
            let total: i64 = paths.iter().map(|p| p.nanos).sum();
            assert_eq!(total, self_ns[leaf], "self time of {leaf} kept");
            for p in paths {
                let chain = frames(leaf, &p.sites);
                assert_eq!(*chain.last().unwrap(), 0, "rooted: {chain:?}");
                for w in chain.windows(2) {
                    let (callee, caller) = (w[0], w[1]);
                    assert!(
                        arcs.iter().any(|&(a, b, _)| a == caller && b == callee),
                        "{caller} -> {callee} is no arc in {chain:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn exponentially_many_paths_give_few_rooted_stacks_with_exact_times() {
        // A root over 40 levels of two functions, each called by both
        // functions of the level above: 2^40 paths to the bottom.
        let levels = 40;
        let n = 1 + 2 * levels;
        let mut arcs = vec![(0, 1, 3), (0, 2, 5)];
        for l in 1..levels {
            for a in [2 * l - 1, 2 * l] {
                for (k, b) in [2 * l + 1, 2 * l + 2].into_iter().enumerate() {
                    arcs.push((a, b, (a as u64 % 7) + 2 * k as u64 + 1));
                }
            }
        }
        let self_ns: Vec<i64> = (0..n).map(|f| 1_000_000 + 7919 * f as i64).collect();
        let g = graph(&arcs, n, &[]);
        let stacks = stacks_of(&g, &self_ns);

        let count: usize = stacks.iter().map(Vec::len).sum();
        assert!(count <= arcs.len() + n, "{count} stacks");
        for (leaf, paths) in stacks.iter().enumerate() {
            let total: i64 = paths.iter().map(|p| p.nanos).sum();
            assert_eq!(total, self_ns[leaf], "self time of {leaf} kept");
            for p in paths {
                assert_eq!(*frames(leaf, &p.sites).last().unwrap(), 0, "rooted");
            }
        }
        let want = gprof_inclusive(&arcs, &self_ns);
        let got = synthesized_inclusive(&stacks, n);
        for f in 0..n {
            // Whole nanoseconds are handed down each arc: a rounding of at
            // most one per level.
            assert!(
                (got[f] as f64 - want[f]).abs() <= levels as f64,
                "function {f}: {} vs gprof's {}",
                got[f],
                want[f]
            );
        }
        // Every arc carries gprof's propagated time.
        let mut ncalls = vec![0u64; n];
        for &(_, c, k) in &arcs {
            ncalls[c] += k;
        }
        let mut edge: HashMap<(usize, usize), i64> = HashMap::default();
        for (leaf, paths) in stacks.iter().enumerate() {
            for p in paths {
                for w in frames(leaf, &p.sites).windows(2) {
                    *edge.entry((w[1], w[0])).or_default() += p.nanos;
                }
            }
        }
        for &(p, c, k) in &arcs {
            let want = want[c] * k as f64 / ncalls[c] as f64;
            let got = edge.get(&(p, c)).copied().unwrap_or(0) as f64;
            assert!(
                (got - want).abs() <= levels as f64,
                "arc {p}→{c}: {got} vs {want}"
            );
        }
    }
}
