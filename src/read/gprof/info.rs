//! What `profconv info` shows about gmon.out files.

use std::collections::BTreeSet;

use super::data::GmonData;
use super::parse;
use super::ticks::{assign_ticks, gprof_functions};
use crate::error::Result;
use crate::read::info::{Entry, Summary};
use crate::read::input::Input;
use crate::read::options::ReadOptions;
use crate::symbolize::{Binary, SymbolRules};

/// Describes each gmon.out: its variant, records, histograms and arcs, and
/// with `--binary` how many of the executable's functions have samples.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<Summary> {
    let binary = options
        .binary
        .as_deref()
        .map(|b| Binary::open_with(b, true, SymbolRules::Gprof, options.gprof.inline_frames))
        .transpose()?;
    let mut summary = Summary::default();
    for input in inputs {
        let path = input.name();
        let pointer_size = binary.as_ref().map(|b| b.pointer_size);
        let d = parse(path, input.bytes()?, options, pointer_size)?;
        let mut fields = describe(&d);
        if let Some(b) = &binary {
            fields.push(executable(&d, b));
        }
        summary.push(Entry::aligned(format!("{}:", path.display()), 15, fields));
    }
    Ok(summary)
}

/// The facts of one parsed file.
fn describe(d: &GmonData) -> Vec<Entry> {
    let mut fields = vec![
        Entry::field("format", format!("gprof, {}", d.variant.name())),
        Entry::field("byte order", d.endian.name()),
        Entry::field("pointer size", format!("{} bytes", d.pointer_size)),
        Entry::field(
            "records",
            format!(
                "{} histogram, {} arc, {} basic-block",
                d.histogram_records, d.arc_records, d.bb_records
            ),
        ),
    ];
    for (i, h) in d.histograms.iter().enumerate() {
        let total = h.total();
        let value = format!(
            "{:#x}..{:#x}, {} bins of {:.2} bytes, {} Hz, {} ticks = {:.2} {}{}",
            h.low_pc,
            h.high_pc,
            h.bins.len(),
            h.scale(),
            h.prof_rate,
            total,
            total as f64 / h.prof_rate as f64,
            h.dimension,
            if d.rate_assumed {
                " (rate assumed)"
            } else {
                ""
            }
        );
        fields.push(Entry::field(format!("histogram {i}"), value));
    }
    let calls: u64 = d.arcs.iter().fold(0u64, |t, a| t.saturating_add(a.count));
    fields.push(Entry::field(
        "arcs",
        format!("{} distinct, {calls} calls", d.arcs.len()),
    ));
    if !d.basic_blocks.is_empty() {
        fields.push(Entry::field("basic blocks", d.basic_blocks.len()));
    }
    if d.saturated_bins > 0 {
        fields.push(Entry::field(
            "warning",
            format!("{} bins saturated at 65535", d.saturated_bins),
        ));
    }
    fields
}

/// The executable, its function count and how many functions have ticks.
fn executable(d: &GmonData, b: &Binary) -> Entry {
    let funcs = gprof_functions(b);
    let hit: BTreeSet<usize> = assign_ticks(d, &funcs, 1.0)
        .iter()
        .filter_map(|t| t.func)
        .collect();
    Entry::field(
        "executable",
        format!(
            "{} ({} functions, {} with samples)",
            b.path.display(),
            funcs.len(),
            hit.len()
        ),
    )
}
