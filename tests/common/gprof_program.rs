//! A generator of large C programs for gprof: thousands of functions in a
//! deep, wide call graph with shared callees, one self-recursive function and
//! one mutual-recursion cycle. Built with `gcc -pg -no-pie` and run, it gives
//! a real `gmon.out` of a real-sized program, which the tests compare with
//! GNU gprof's own call graph.
//!
//! Shape (deterministic for a seed):
//! - `fn_00000 .. fn_{N-1}`; `main` calls `fn_00000` a few dozen times.
//! - Every function but the first has a tree parent a few indices before it
//!   (long chains: a deep graph) or anywhere before it (wide fan-out); some
//!   functions also call a later function (shared callees, several callers).
//! - Call counts would explode along a DAG, so each call site is guarded by
//!   its own counter (`if (++site % P == 0) callee();`), P chosen from the
//!   exact number of times the caller runs.
//! - Every function spins on a volatile accumulator, loop lengths sized from
//!   the call counts so the run takes about `seconds` and self time spreads
//!   unevenly (log-normal weights) over the functions.
//! - glibc's `mcount` keeps at most about 3 % of the text size in arcs
//!   (`ARCDENSITY`): the spin loops give each function enough body.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::rng::Rng;

/// What to generate.
pub struct Shape {
    pub functions: usize,
    pub seed: u64,
    /// Spin-loop iterations over the whole run (about a nanosecond each).
    pub iterations: f64,
    pub main_calls: u64,
    /// The compiler's flags besides `-g -pg` (-fno-inline always: an
    /// inlined call has no mcount arc).
    pub cflags: Vec<&'static str>,
}

impl Shape {
    pub fn new(functions: usize) -> Shape {
        Shape {
            functions,
            seed: 0x5eed_0001,
            iterations: 3e9,
            main_calls: 40,
            cflags: vec!["-O1", "-no-pie", "-fno-pie"],
        }
    }
}

/// The generated call graph: children of each function, and the special
/// functions.
pub struct Program {
    pub children: Vec<Vec<usize>>,
    /// Calls itself (a self-arc that gprof shows as `n+m` calls).
    pub self_recursive: usize,
    /// `cycle.0` calls `cycle.1`, which calls `cycle.0` back.
    pub cycle: (usize, usize),
    pub sources: Vec<(String, String)>,
}

pub fn name(i: usize) -> String {
    format!("fn_{i:05}")
}

fn call_graph(n: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    let mut children = vec![Vec::new(); n];
    for j in 1..n {
        let lo = if rng.unit() < 0.75 {
            j.saturating_sub(8)
        } else {
            0
        };
        let mut parent = rng.range(lo, j - 1);
        for _ in 0..20 {
            if children[parent].len() < 3 {
                break;
            }
            parent = rng.range(lo, j - 1);
        }
        children[parent].push(j);
    }
    for (i, list) in children.iter_mut().enumerate().take(n - 1) {
        if list.len() < 4 && rng.unit() < 0.35 {
            let j = rng.range(i + 1, n - 1);
            if !list.contains(&j) {
                list.push(j);
            }
        }
    }
    children
}

pub fn generate(shape: &Shape) -> Program {
    let n = shape.functions.max(50);
    let mut rng = Rng(shape.seed | 1);
    let children = call_graph(n, &mut rng);

    // Exact call counts in index order (a topological order) and the period
    // of each call site.
    let mut calls = vec![0u64; n];
    calls[0] = shape.main_calls;
    let mut period = vec![Vec::new(); n];
    #[allow(clippy::needless_range_loop)] // calls[j] grows while calls[i] is read
    for i in 0..n {
        for &j in &children[i] {
            let target = rng.range(3, 200) as u64;
            let p = (calls[i] / target).max(1);
            period[i].push(p);
            calls[j] += calls[i] / p;
        }
    }
    // The recursive functions sit low in the graph, where their subtrees
    // (run again by the recursion) are small.
    let self_recursive = (n * 9 / 10..n)
        .find(|&i| children[i].is_empty() && calls[i] > 0)
        .unwrap_or(n - 1);
    let cycle_head = (n * 4 / 5..n)
        .find(|&i| children[i].len() >= 2 && calls[i] > 0 && i != self_recursive)
        .expect("a function with two callees for the cycle");
    let cycle = (cycle_head, children[cycle_head][0]);

    let weights: Vec<f64> = (0..n).map(|_| rng.lognormal()).collect();
    let wsum: f64 = weights.iter().sum();
    let spins: Vec<u64> = (0..n)
        .map(|i| {
            let c = calls[i].max(1) as f64;
            ((shape.iterations * weights[i] / wsum / c).round() as u64).max(50)
        })
        .collect();

    let mut sources = vec![(
        "gen.h".to_owned(),
        "extern volatile unsigned long gen_sink;\n".to_owned(),
    )];
    for i in 0..n {
        writeln!(sources[0].1, "void {}(void);", name(i)).unwrap();
    }
    let per_file = n.div_ceil(8);
    for (f, chunk) in (0..n).collect::<Vec<_>>().chunks(per_file).enumerate() {
        let mut c = String::from("#include \"gen.h\"\n\n");
        if f == 0 {
            c.push_str("volatile unsigned long gen_sink;\n\n");
            writeln!(
                c,
                "int main(void) {{\n    for (int i = 0; i < {}; i++) fn_00000();\n    return 0;\n}}\n",
                shape.main_calls
            )
            .unwrap();
        }
        for &i in chunk {
            function(&mut c, i, &children[i], &period[i], spins[i]);
            if i == self_recursive {
                c.push_str("    static int depth;\n    if (depth < 3) { depth++; ");
                writeln!(c, "{}(); depth--; }}", name(i)).unwrap();
            }
            if i == cycle.1 {
                c.push_str("    static int back;\n    if (back < 1) { back++; ");
                writeln!(c, "{}(); back--; }}", name(cycle.0)).unwrap();
            }
            c.push_str("}\n\n");
        }
        sources.push((format!("gen_{f:02}.c"), c));
    }
    Program {
        children,
        self_recursive,
        cycle,
        sources,
    }
}

/// A function's body up to (not including) its closing brace.
fn function(c: &mut String, i: usize, children: &[usize], period: &[u64], spins: u64) {
    writeln!(c, "void {}(void) {{", name(i)).unwrap();
    writeln!(
        c,
        "    for (unsigned long k = 0; k < {spins}UL; k++) gen_sink += k;"
    )
    .unwrap();
    for (k, (&j, &p)) in children.iter().zip(period).enumerate() {
        writeln!(
            c,
            "    static unsigned long site{k};\n    if (++site{k} % {p}UL == 0) {}();",
            name(j)
        )
        .unwrap();
    }
}

/// Writes, builds and runs the program in `dir`; returns the executable's
/// path (the run leaves `dir/gmon.out`). `None` when gcc is missing (only
/// outside CI).
pub fn build_and_run(shape: &Shape, dir: &Path) -> Option<(Program, PathBuf)> {
    let (program, exe) = build(shape, dir)?;
    let status = Command::new(&exe)
        .current_dir(dir)
        .status()
        .expect("run the generated program");
    assert!(status.success(), "generated program failed");
    assert!(dir.join("gmon.out").is_file(), "no gmon.out written");
    Some((program, exe))
}

/// Writes and builds the program in `dir` (`dir/prog`), without running it.
/// `None` when gcc is missing (only outside CI).
pub fn build(shape: &Shape, dir: &Path) -> Option<(Program, PathBuf)> {
    let program = generate(shape);
    let mut files = Vec::new();
    for (file, text) in &program.sources {
        std::fs::write(dir.join(file), text).expect("write generated source");
        if file.ends_with(".c") {
            files.push(dir.join(file));
        }
    }
    let exe = dir.join("prog");
    // -fno-inline: an inlined call has no mcount arc.
    let status = Command::new("gcc")
        .args(&shape.cflags)
        .args(["-fno-inline", "-g", "-pg", "-o"])
        .arg(&exe)
        .args(&files)
        .status();
    match status {
        Ok(s) => assert!(s.success(), "gcc failed on the generated program"),
        Err(_) => {
            assert!(
                !super::in_ci(),
                "gcc is needed for the generated gprof program"
            );
            {
                // Also compiled into the library's tests (no `skip_note!`
                // there): the real stderr, which the harness does not capture.
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "skipped: gcc not available");
            }
            return None;
        }
    }
    Some((program, exe))
}
