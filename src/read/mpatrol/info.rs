//! What `profconv info` prints for mpatrol files.

use std::fmt::Write as _;
use std::path::Path;

use super::file::{MpatrolFile, SIZE_CLASSES};
use super::profile::bounds_text;

pub(super) fn describe(out: &mut String, path: &Path, file: &MpatrolFile) {
    let _ = writeln!(
        out,
        "{}: mpatrol profiling file (mpatrol.out)",
        path.display()
    );
    let _ = writeln!(
        out,
        "  mpatrol version: {} ({})",
        file.version_text(),
        file.version
    );
    let _ = writeln!(out, "  word size: {} bytes", file.word_size);
    let _ = writeln!(out, "  byte order: {}", file.endian.name());
    let _ = writeln!(out, "  allocation bounds: {}", bounds_text(&file.bounds));
    let _ = writeln!(
        out,
        "  profiling records: {}, call sites: {}, symbols: {}, string table: {} bytes",
        file.records.len(),
        file.call_sites.len(),
        file.symbol_addresses.len(),
        file.strings.len()
    );
    let totals = file.class_totals();
    let sum = |i: usize| totals.iter().map(|t| t[i]).sum::<u128>();
    let _ = writeln!(out, "  totals of the profiling records:");
    let _ = writeln!(out, "    allocated: {} objects, {} bytes", sum(0), sum(1));
    let _ = writeln!(out, "    freed:     {} objects, {} bytes", sum(2), sum(3));
    let _ = writeln!(
        out,
        "    in use:    {} objects, {} bytes",
        sum(0) as i128 - sum(2) as i128,
        sum(1) as i128 - sum(3) as i128
    );
    for (class, t) in SIZE_CLASSES.iter().zip(totals) {
        let _ = writeln!(
            out,
            "    {class:<7} allocated {} objects, {} bytes; freed {} objects, {} bytes",
            t[0], t[1], t[2], t[3]
        );
    }
    let Some(bins) = &file.bins else {
        let _ = writeln!(out, "  size histogram: none (bin count 0)");
        return;
    };
    let n = bins.alloc_counts.len();
    let a = bins.alloc_totals();
    let f = bins.free_totals();
    let _ = writeln!(out, "  size histogram ({n} bins, whole program):");
    let _ = writeln!(out, "    allocated: {} objects, {} bytes", a.count, a.bytes);
    let _ = writeln!(out, "    freed:     {} objects, {} bytes", f.count, f.bytes);
    let _ = writeln!(
        out,
        "    unfreed:   {} objects, {} bytes",
        a.count as i128 - f.count as i128,
        a.bytes as i128 - f.bytes as i128
    );
    // The busiest bins (at most ten), shown in size order.
    let mut busiest: Vec<usize> = (0..n).filter(|&k| bins.alloc_counts[k] != 0).collect();
    busiest.sort_by_key(|&k| std::cmp::Reverse(bins.alloc_counts[k]));
    let shown = busiest.len().min(10);
    let mut top: Vec<usize> = busiest[..shown].to_vec();
    top.sort_unstable();
    if !top.is_empty() {
        let _ = writeln!(
            out,
            "    {:>8}  {:>10}  {:>10}  {:>12}",
            "size", "allocated", "freed", "bytes"
        );
        for k in top {
            let count = bins.alloc_counts[k];
            let freed = bins.free_counts.get(k).copied().unwrap_or(0);
            let (size, bytes) = if k + 1 == n {
                (format!(">={n}"), u128::from(bins.alloc_large_bytes))
            } else {
                ((k + 1).to_string(), u128::from(count) * (k as u128 + 1))
            };
            let _ = writeln!(out, "    {size:>8}  {count:>10}  {freed:>10}  {bytes:>12}");
        }
        if busiest.len() > shown {
            let _ = writeln!(
                out,
                "    ({} more non-empty bin{})",
                busiest.len() - shown,
                if busiest.len() - shown == 1 { "" } else { "s" }
            );
        }
    }
}
