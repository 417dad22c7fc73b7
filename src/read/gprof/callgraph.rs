//! The call graph and stack synthesis (§4): self time is handed to callers
//! along the arcs, cycles collapsed first, into rooted stacks whose
//! inclusive and arc times match gprof's.

use rustc_hash::FxHashMap as HashMap;

use crate::profile::apportion;

/// How many nodes of [`CallGraph::search_down`] trees are kept at most
/// (about 30 MB).
const MAX_KEPT_TREE_NODES: usize = 1 << 20;

/// Member → (its caller on a shortest chain from an entry member, call site).
type InnerTree = HashMap<usize, (usize, u64)>;

/// Cycles of more members than this route every stack through one hub
/// member ([`HubTrees`]) instead of searching from each entry member.
const SMALL_CYCLE: usize = 64;

/// The two search trees of a big cycle, both through its hub member: how
/// the hub reaches each member (`down`: member → its caller, call site) and
/// how each member reaches the hub (`up`: member → its callee towards the
/// hub, call site in the member).
pub(super) struct HubTrees {
    hub: usize,
    down: InnerTree,
    up: InnerTree,
}

/// A caller of a function: the calling function and the call site.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caller {
    pub(super) func: usize,
    /// The call site, which the graph only carries into [`SynthPath::sites`]:
    /// the profile's builder gives the index of its address among the
    /// profile's sorted addresses.
    pub(super) from_pc: u64,
    pub(super) count: u64,
}

/// One synthesized stack of a function's self time: the call sites from the
/// function up to a root of the call graph (innermost first) and the
/// nanoseconds of its self time that the stack carries.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SynthPath {
    pub(super) sites: Vec<u64>,
    pub(super) nanos: i64,
}

/// The call graph between functions, with its cycles (strongly connected
/// components) collapsed the way gprof collapses them before it hands time
/// to callers.
pub(super) struct CallGraph {
    /// Arcs into each function from other functions.
    pub(super) callers: Vec<Vec<Caller>>,
    /// The component of each function. Tarjan's algorithm over the caller
    /// lists numbers a caller's component below its callees' (reverse
    /// topological order of the caller edges).
    pub(super) component: Vec<usize>,
    /// Arcs into each component from outside it: (entry member, caller).
    pub(super) entering: Vec<Vec<(usize, Caller)>>,
    /// Where a stack starts inside a root component: the component itself
    /// when it is one function; for a cycle no outside function calls, the
    /// member called from outside the executable (`main` from libc), else
    /// its first member.
    pub(super) root_entry: Vec<usize>,
    /// Arcs from each function to the members of its own component: (callee,
    /// call site).
    pub(super) inner_callees: Vec<Vec<(usize, u64)>>,
    /// [`CallGraph::search_down`] of each entry member asked for so far.
    pub(super) inner_trees: std::cell::RefCell<HashMap<usize, InnerTree>>,
    /// Nodes in `inner_trees`, kept as they are added.
    pub(super) inner_tree_nodes: std::cell::Cell<usize>,
    /// Members of each component.
    pub(super) members: Vec<usize>,
    /// The hub trees of each big cycle asked for so far.
    pub(super) hub_trees: std::cell::RefCell<HashMap<usize, HubTrees>>,
}

impl CallGraph {
    /// `spontaneous[f]`: `f` is called from outside the executable's symbols
    /// (the arcs gprof drops, shown as `<spontaneous>`).
    pub(super) fn new(callers: Vec<Vec<Caller>>, spontaneous: &[bool]) -> Self {
        let component = strongly_connected_components(&callers);
        let ncomp = component.iter().map(|c| c + 1).max().unwrap_or(0);
        let mut entering = vec![Vec::new(); ncomp];
        for (f, list) in callers.iter().enumerate() {
            for c in list {
                if component[c.func] != component[f] && c.count > 0 {
                    entering[component[f]].push((f, *c));
                }
            }
        }
        let mut root_entry = vec![usize::MAX; ncomp];
        let mut members = vec![0usize; ncomp];
        for (f, &comp) in component.iter().enumerate() {
            members[comp] += 1;
            let chosen = root_entry[comp];
            if chosen == usize::MAX
                || (spontaneous.get(f) == Some(&true) && spontaneous.get(chosen) != Some(&true))
            {
                root_entry[comp] = f;
            }
        }
        let mut inner_callees = vec![Vec::new(); callers.len()];
        for (f, list) in callers.iter().enumerate() {
            for c in list {
                if component[c.func] == component[f] {
                    inner_callees[c.func].push((f, c.from_pc));
                }
            }
        }
        CallGraph {
            callers,
            component,
            entering,
            root_entry,
            inner_callees,
            inner_trees: Default::default(),
            inner_tree_nodes: Default::default(),
            members,
            hub_trees: Default::default(),
        }
    }

    /// Appends to `sites` the call sites (innermost first) of a shortest
    /// chain of calls inside one component from `entry` down to `target`.
    /// One breadth-first search per entry member, over the component's own
    /// arcs, serves every target (a cycle has few entries, many targets).
    fn inner_path(&self, entry: usize, target: usize, sites: &mut Vec<u64>) {
        if entry == target {
            return;
        }
        let comp = self.component[target];
        if self.members[comp] > SMALL_CYCLE {
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
            let Some(&(caller, from_pc)) = tree.get(&at) else {
                break;
            };
            sites.push(from_pc);
            at = caller;
        }
    }

    /// [`CallGraph::inner_path`] in a big cycle: from `entry` along its
    /// shortest chain to the hub, then down the hub's shortest chain to
    /// `target`. Two searches per cycle serve every (entry, target), so the
    /// work is linear in the cycle's arcs whatever the number of entries;
    /// the chain may pass a member twice (recursion), each call a real arc.
    fn hub_path(&self, comp: usize, entry: usize, target: usize, sites: &mut Vec<u64>) {
        let mut hubs = self.hub_trees.borrow_mut();
        let trees = hubs.entry(comp).or_insert_with(|| {
            let hub = self.root_entry[comp];
            HubTrees {
                hub,
                down: self.search_down(hub),
                up: self.search_up(hub),
            }
        });
        let mut at = target;
        while at != trees.hub {
            let Some(&(caller, from_pc)) = trees.down.get(&at) else {
                break;
            };
            sites.push(from_pc);
            at = caller;
        }
        // Entry to hub, found outward from the entry: pushed, then turned
        // innermost first.
        let start = sites.len();
        let mut at = entry;
        while at != trees.hub {
            let Some(&(callee, from_pc)) = trees.up.get(&at) else {
                break;
            };
            sites.push(from_pc);
            at = callee;
        }
        sites[start..].reverse();
    }

    /// For every member of `hub`'s component that reaches it inside the
    /// component, its callee on a shortest chain of calls to the hub and the
    /// call site.
    fn search_up(&self, hub: usize) -> InnerTree {
        let comp = self.component[hub];
        let mut via: HashMap<usize, (usize, u64)> = HashMap::default();
        let mut queue = std::collections::VecDeque::from([hub]);
        while let Some(f) = queue.pop_front() {
            for c in &self.callers[f] {
                if self.component[c.func] == comp && c.func != hub && !via.contains_key(&c.func) {
                    via.insert(c.func, (f, c.from_pc));
                    queue.push_back(c.func);
                }
            }
        }
        via
    }

    /// For every member of `entry`'s component reachable from it inside the
    /// component, its caller on a shortest chain of calls and the call site.
    fn search_down(&self, entry: usize) -> InnerTree {
        let mut via: HashMap<usize, (usize, u64)> = HashMap::default();
        let mut queue = std::collections::VecDeque::from([entry]);
        while let Some(f) = queue.pop_front() {
            for &(callee, from_pc) in &self.inner_callees[f] {
                if callee != entry && !via.contains_key(&callee) {
                    via.insert(callee, (f, from_pc));
                    queue.push_back(callee);
                }
            }
        }
        via
    }

    /// gprof's propagation (§4): every component's inclusive time (its
    /// members' self time plus what its callees hand it) is handed to the
    /// arcs entering it in proportion to their call counts. Returns the time
    /// of each entering arc, per component, in integer nanoseconds that add
    /// up exactly to the component's inclusive time; a component nobody
    /// calls keeps its time: it is a root.
    fn arc_times(&self, self_ns: &[i64]) -> Vec<Vec<i64>> {
        let mut inclusive = vec![0i64; self.entering.len()];
        for (f, &ns) in self_ns.iter().enumerate() {
            let c = self.component[f];
            inclusive[c] = inclusive[c].saturating_add(ns);
        }
        let mut times = vec![Vec::new(); self.entering.len()];
        // Callees before callers: components in decreasing number.
        for comp in (0..self.entering.len()).rev() {
            let counts: Vec<f64> = self.entering[comp]
                .iter()
                .map(|(_, c)| c.count as f64)
                .collect();
            let shares = apportion(inclusive[comp], &counts);
            for ((_, caller), &share) in self.entering[comp].iter().zip(&shares) {
                let parent = self.component[caller.func];
                debug_assert!(parent < comp, "a caller's component comes first");
                inclusive[parent] = inclusive[parent].saturating_add(share);
            }
            times[comp] = shares;
        }
        times
    }

    /// Stacks for every function's self time, each from a root of the call
    /// graph down to the function, such that every function outside a cycle
    /// gets exactly gprof's inclusive time (self + children) and every arc
    /// between components exactly the time gprof propagates along it.
    ///
    /// The arc times form a flow from the roots down to the functions' self
    /// time, conserved at every component; it decomposes into paths
    /// (flow decomposition): from a function with self time left, climb
    /// through any entering arc with flow left up to a root, and take the
    /// smallest amount left on the way. Each path empties an arc or a
    /// function's self time, so there are at most `arcs + functions` of them,
    /// however many paths the graph has (exponentially many in general).
    pub(super) fn stacks(&self, self_ns: &[i64]) -> Vec<Vec<SynthPath>> {
        let mut flow = self.arc_times(self_ns);
        // Arcs only lose flow, so each component's first arc with flow left
        // only moves forward: finding it costs O(arcs) over the whole run.
        let mut first = vec![0usize; flow.len()];
        let mut out = vec![Vec::new(); self_ns.len()];
        // One growing buffer for every path: each path is then one
        // allocation of its exact size, however deep.
        let mut scratch = (Vec::new(), Vec::new());
        for (f, &ns) in self_ns.iter().enumerate() {
            let mut left = ns;
            while left > 0 {
                let path = self.climb(f, left, &mut flow, &mut first, &mut scratch);
                left -= path.nanos;
                out[f].push(path);
            }
        }
        out
    }

    /// One path of [`CallGraph::stacks`]: from `func` up to a root through
    /// arcs with flow left, carrying at most `left` nanoseconds.
    fn climb(
        &self,
        func: usize,
        left: i64,
        flow: &mut [Vec<i64>],
        first: &mut [usize],
        (sites, used): &mut (Vec<u64>, Vec<(usize, usize)>),
    ) -> SynthPath {
        sites.clear();
        used.clear();
        let mut nanos = left;
        let mut at = func;
        loop {
            let comp = self.component[at];
            let arcs = &flow[comp];
            let mut i = first[comp];
            while arcs.get(i) == Some(&0) {
                i += 1;
            }
            first[comp] = i;
            let Some(&carried) = arcs.get(i) else {
                // A root. (Flow is conserved, so a component with callers
                // always has an arc with flow left when a path reaches it.)
                debug_assert!(self.entering[comp].is_empty(), "flow not conserved");
                self.inner_path(self.root_entry[comp], at, sites);
                break;
            };
            let (entry, caller) = self.entering[comp][i];
            self.inner_path(entry, at, sites);
            sites.push(caller.from_pc);
            nanos = nanos.min(carried);
            used.push((comp, i));
            at = caller.func;
        }
        for &(comp, i) in used.iter() {
            flow[comp][i] -= nanos;
        }
        SynthPath {
            sites: sites.clone(),
            nanos,
        }
    }
}

/// Tarjan's algorithm, iterative; the graph is given as caller lists (the
/// components are the same whichever way the arcs point).
pub(super) fn strongly_connected_components(callers: &[Vec<Caller>]) -> Vec<usize> {
    let n = callers.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![usize::MAX; n];
    let (mut next_index, mut ncomp) = (0, 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(c) = callers[v].get(*i) {
                *i += 1;
                let w = c.func;
                if index[w] == usize::MAX {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = ncomp;
                    if w == v {
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

    fn site(parent: usize, child: usize) -> u64 {
        ((parent as u64) << 20) | child as u64
    }

    fn graph(arcs: &[(usize, usize, u64)], n: usize, spontaneous: &[usize]) -> CallGraph {
        let mut callers = vec![Vec::new(); n];
        for &(parent, child, count) in arcs {
            callers[child].push(Caller {
                func: parent,
                from_pc: site(parent, child),
                count,
            });
        }
        let spont: Vec<bool> = (0..n).map(|f| spontaneous.contains(&f)).collect();
        CallGraph::new(callers, &spont)
    }

    /// The functions of a synthesized stack of `leaf`, leaf first.
    fn frames(leaf: usize, sites: &[u64]) -> Vec<usize> {
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
        let stacks = g.stacks(&[0, 0, 1000, 0]);
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
        let stacks = g.stacks(&[300, 700, 0, 0]);
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
        let stacks = g.stacks(&[10, 0, 20]);
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
        assert!(g.members[g.component[1]] > SMALL_CYCLE);
        let stacks = g.stacks(&self_ns);
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
        let stacks = g.stacks(&self_ns);

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
