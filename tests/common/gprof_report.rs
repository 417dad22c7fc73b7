//! GNU gprof's reports (`gprof -b -p`, `gprof -b -q`) parsed, and the same
//! figures read back from a converted pprof profile, so tests can compare
//! profconv with gprof function by function.

use std::collections::{BTreeMap, BTreeSet};

use super::{pb, s};

/// One function of gprof's flat profile.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatRow {
    pub self_seconds: f64,
    pub calls: Option<u64>,
}

/// Parses `gprof -b -p` output: `%time cumulative self [calls self/call total/call] name`.
pub fn parse_flat(text: &str) -> BTreeMap<String, FlatRow> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.len() < 4 || tokens[..3].iter().any(|t| t.parse::<f64>().is_err()) {
            continue;
        }
        let self_seconds: f64 = tokens[2].parse().unwrap();
        let numeric = |t: &&str| t.parse::<f64>().is_ok();
        let (calls, name_at) = if tokens.len() >= 7 && tokens[3..6].iter().all(numeric) {
            (Some(tokens[3].parse::<u64>().unwrap()), 6)
        } else {
            (None, 3)
        };
        out.insert(
            tokens[name_at..].join(" "),
            FlatRow {
                self_seconds,
                calls,
            },
        );
    }
    out
}

/// Parses the primary lines of `gprof -b -q`: name → (self, children), for
/// functions outside cycles.
pub fn parse_graph(text: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if !line.starts_with('[') {
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        // [i] %time self children [called] name... [i]
        let self_s: f64 = tokens[2].parse().unwrap();
        let children: f64 = tokens[3].parse().unwrap();
        let rest = &tokens[4..tokens.len() - 1];
        let name_tokens = if rest
            .first()
            .is_some_and(|t| t.chars().all(|c| c.is_ascii_digit() || c == '+'))
        {
            &rest[1..]
        } else {
            rest
        };
        let name = name_tokens.join(" ");
        if name.contains("<cycle") {
            continue;
        }
        out.insert(name, (self_s, children));
    }
    out
}

/// The `called` column of each primary line of `gprof -b -q`: name → (calls
/// from other functions, calls from itself), for functions outside cycles.
pub fn parse_called(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if !line.starts_with('[') {
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(called) = tokens.get(4) else {
            continue;
        };
        if !called.chars().all(|c| c.is_ascii_digit() || c == '+') {
            continue;
        }
        let name = tokens[5..tokens.len() - 1].join(" ");
        if name.contains("<cycle") {
            continue;
        }
        let (others, own) = called.split_once('+').unwrap_or((called, "0"));
        out.insert(name, (others.parse().unwrap(), own.parse().unwrap()));
    }
    out
}

/// The function pprof's default views credit a location to: the first
/// (innermost) of its lines, as `go tool pprof -top` takes it without
/// `-noinlines`.
pub fn symbol_function(p: &pb::Profile, loc_id: u64) -> String {
    let loc = p.location.iter().find(|l| l.id == loc_id).unwrap();
    match loc.line.first() {
        Some(line) => {
            let f = p
                .function
                .iter()
                .find(|f| f.id == line.function_id)
                .unwrap();
            s(p, f.name).to_owned()
        }
        None => format!("{:#x}", loc.address),
    }
}

pub fn type_index(p: &pb::Profile, name: &str) -> usize {
    p.sample_type
        .iter()
        .position(|t| s(p, t.r#type) == name)
        .unwrap()
}

/// Per-function self cpu seconds and calls (as gprof's flat profile counts
/// them: recursive calls of a function to itself apart).
pub fn flat_from_pprof(p: &pb::Profile) -> (BTreeMap<String, f64>, BTreeMap<String, u64>) {
    let (cpu, calls) = (type_index(p, "cpu"), type_index(p, "calls"));
    let mut self_s = BTreeMap::new();
    let mut ncalls = BTreeMap::new();
    for sample in &p.sample {
        let leaf = symbol_function(p, sample.location_id[0]);
        *self_s.entry(leaf.clone()).or_insert(0.0) += sample.value[cpu] as f64 / 1e9;
        if sample.value[calls] > 0 {
            let caller = symbol_function(p, sample.location_id[1]);
            if caller != leaf {
                *ncalls.entry(leaf).or_insert(0) += sample.value[calls] as u64;
            }
        }
    }
    (self_s, ncalls)
}

/// Inclusive cpu seconds per function: samples whose stack holds it at least once.
pub fn inclusive_from_pprof(p: &pb::Profile) -> BTreeMap<String, f64> {
    let cpu = type_index(p, "cpu");
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        let names: BTreeSet<String> = sample
            .location_id
            .iter()
            .map(|&l| symbol_function(p, l))
            .collect();
        for n in names {
            *out.entry(n).or_insert(0.0) += sample.value[cpu] as f64 / 1e9;
        }
    }
    out
}

/// Rows of `go tool pprof ARGS` (a `-top` listing): name → flat value in
/// the printed unit; `None` when go is not installed.
pub fn pprof_top(args: &[&str]) -> Option<BTreeMap<String, f64>> {
    let text = super::go_pprof(args)?;
    let number = |flat: &str| {
        flat.trim_end_matches(|c: char| c.is_alphabetic())
            .parse()
            .unwrap_or(0.0)
    };
    let table = super::top_table(&text);
    Some(
        table
            .into_iter()
            .map(|(name, flat)| (name, number(&flat)))
            .collect(),
    )
}
