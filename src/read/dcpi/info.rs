//! What `profconv info` prints about DCPI inputs: from the headers and the
//! totals of a pass that only sums the counts (nothing kept per address).

use std::fmt::Write as _;

use super::collection::{Collection, FileKind};
use super::event_order;

/// What `profconv info` prints.
pub(super) fn describe(c: &Collection) -> String {
    let mut out = String::new();
    let binaries = c
        .files
        .iter()
        .filter(|f| matches!(f.kind, FileKind::Binary(_)))
        .count();
    let _ = writeln!(
        out,
        "format: DCPI ({} profile files: {binaries} binary, {} dcpicat dumps){}",
        c.files.len(),
        c.files.len() - binaries,
        if c.skipped > 0 {
            format!("; {} other files skipped", c.skipped)
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "instruction size: {} bytes", c.insn);
    let _ = writeln!(out, "epochs:");
    for (epoch, n) in &c.epochs {
        let _ = writeln!(out, "  {epoch}  ({n} files)");
    }
    let _ = writeln!(out, "events:");
    for &e in &event_order(&c.events) {
        let name = &c.events[e];
        let mut periods: Vec<u64> = Vec::new();
        let (mut samples, mut events) = (0u64, 0u128);
        for column in c
            .images
            .iter()
            .flat_map(|i| &i.columns)
            .filter(|col| col.event == e)
        {
            if !periods.contains(&column.period) {
                periods.push(column.period);
            }
            let total = column.total;
            samples = samples.saturating_add(total);
            events += u128::from(total) * u128::from(column.period);
        }
        let periods: Vec<String> = periods.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "  {name}: period {}, {samples} samples, {events} events",
            periods.join("/")
        );
    }
    let _ = writeln!(out, "images:");
    for image in &c.images {
        let _ = write!(out, "  {} {}", image.id, image.name);
        if let Some(label) = &image.label {
            let _ = write!(out, " label {label}");
        }
        let _ = write!(out, ": text {:#x}", image.tstart);
        if let Some(size) = image.tsize {
            let _ = write!(out, "+{size:#x}");
        }
        let _ = write!(out, ", {} files;", image.files.len());
        for &e in &event_order(&c.events) {
            let total: u64 = image
                .columns
                .iter()
                .filter(|col| col.event == e)
                .map(|col| col.total)
                .sum();
            if total > 0 {
                let _ = write!(out, " {} {total}", c.events[e]);
            }
        }
        let _ = writeln!(out);
    }
    if !c.facts.0.is_empty() {
        let _ = writeln!(out, "header facts:");
        for (k, v) in &c.facts.0 {
            let _ = writeln!(out, "  {k}: {}", v.join(", "));
        }
    }
    if let [only] = c.files.as_slice() {
        let _ = writeln!(out, "header of {}:", only.path.display());
        for line in &only.header {
            let _ = writeln!(out, "  {} {}", line.keyword, line.value);
        }
    }
    const LISTED: usize = 50;
    let _ = writeln!(out, "files:");
    for f in c.files.iter().take(LISTED) {
        let kind = match &f.kind {
            FileKind::Binary(Some(v)) => v.clone(),
            FileKind::Binary(None) => "pdb-0.x (no version line)".to_owned(),
            FileKind::Dcpicat => "dcpicat dump".to_owned(),
        };
        let _ = write!(
            out,
            "  {}: {kind}, image {}, epoch {}",
            f.path.display(),
            f.image,
            f.epoch.as_deref().unwrap_or("(none)")
        );
        for e in &f.events {
            let _ = write!(
                out,
                ", {} period {} {} samples",
                e.name, e.period, e.samples
            );
            if let Some(d) = e.declared {
                let _ = write!(out, " (declared {d})");
            }
        }
        if f.kind == FileKind::Dcpicat {
            let _ = writeln!(out, ", {} rows", f.addresses);
        } else {
            let _ = writeln!(
                out,
                ", {} chunks, {} addresses with samples",
                f.chunks, f.addresses
            );
        }
    }
    if c.files.len() > LISTED {
        let _ = writeln!(out, "  … and {} more files", c.files.len() - LISTED);
    }
    let warnings = c.warnings.lines();
    if !warnings.is_empty() {
        let _ = writeln!(out, "warnings:");
        for w in warnings {
            let _ = writeln!(out, "  {w}");
        }
    }
    out
}
