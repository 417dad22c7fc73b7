//! What `profconv info` shows about mpatrol files.

use std::path::Path;

use super::file::{MpatrolFile, SizeBins, SIZE_CLASSES};
use super::profile::bounds_text;
use crate::read::info::Entry;

/// At most this many of the busiest size bins are listed.
const BUSIEST_BINS: usize = 10;

/// The file's header, the totals of its profiling records and its size histogram.
pub(super) fn describe(path: &Path, file: &MpatrolFile) -> Entry {
    let mut entries = vec![
        Entry::field(
            "mpatrol version",
            format!("{} ({})", file.version_text(), file.version),
        ),
        Entry::field("word size", format!("{} bytes", file.word_size)),
        Entry::field("byte order", file.endian.name()),
        Entry::field("allocation bounds", bounds_text(&file.bounds)),
        Entry::field(
            "profiling records",
            format!(
                "{}, call sites: {}, symbols: {}, string table: {} bytes",
                file.records.len(),
                file.call_sites.len(),
                file.symbol_addresses.len(),
                file.strings.len()
            ),
        ),
        record_totals(file),
    ];
    entries.push(match &file.bins {
        Some(bins) => histogram(bins),
        None => Entry::field("size histogram", "none (bin count 0)"),
    });
    Entry::block(
        format!("{}: mpatrol profiling file (mpatrol.out)", path.display()),
        entries,
    )
}

/// `objects, bytes` as info shows a count and a size.
fn objects(count: impl std::fmt::Display, bytes: impl std::fmt::Display) -> String {
    format!("{count} objects, {bytes} bytes")
}

/// What the profiling records add up to, in all and per size class.
fn record_totals(file: &MpatrolFile) -> Entry {
    let totals = file.class_totals();
    let sum = |i: usize| totals.iter().map(|t| t[i]).sum::<u128>();
    let mut entries = vec![
        Entry::field("allocated", objects(sum(0), sum(1))),
        Entry::field("freed", objects(sum(2), sum(3))),
        Entry::field(
            "in use",
            objects(
                sum(0) as i128 - sum(2) as i128,
                sum(1) as i128 - sum(3) as i128,
            ),
        ),
    ];
    for (class, t) in SIZE_CLASSES.iter().zip(totals) {
        entries.push(Entry::line(format!(
            "{class:<7} allocated {}; freed {}",
            objects(t[0], t[1]),
            objects(t[2], t[3])
        )));
    }
    Entry::aligned("totals of the profiling records:", 11, entries)
}

/// The whole-program size histogram: totals and the busiest bins.
fn histogram(bins: &SizeBins) -> Entry {
    let n = bins.alloc_counts.len();
    let a = bins.alloc_totals();
    let f = bins.free_totals();
    let mut entries = vec![
        Entry::field("allocated", objects(a.count, a.bytes)),
        Entry::field("freed", objects(f.count, f.bytes)),
        Entry::field(
            "unfreed",
            objects(
                a.count as i128 - f.count as i128,
                a.bytes as i128 - f.bytes as i128,
            ),
        ),
    ];
    // The busiest bins, shown in size order.
    let mut busiest: Vec<usize> = (0..n).filter(|&k| bins.alloc_counts[k] != 0).collect();
    busiest.sort_by_key(|&k| std::cmp::Reverse(bins.alloc_counts[k]));
    let shown = busiest.len().min(BUSIEST_BINS);
    let mut top: Vec<usize> = busiest[..shown].to_vec();
    top.sort_unstable();
    if !top.is_empty() {
        entries.push(Entry::Table {
            header: ["size", "allocated", "freed", "bytes"]
                .map(String::from)
                .to_vec(),
            widths: vec![8, 10, 10, 12],
            rows: top.into_iter().map(|k| bin_row(bins, k)).collect(),
        });
    }
    let more = busiest.len() - shown;
    if more > 0 {
        let s = if more == 1 { "" } else { "s" };
        entries.push(Entry::line(format!("({more} more non-empty bin{s})")));
    }
    Entry::aligned(
        format!("size histogram ({n} bins, whole program):"),
        11,
        entries,
    )
}

/// One bin: its size (the last bin is "B bytes or more"), counts and bytes.
fn bin_row(bins: &SizeBins, k: usize) -> Vec<String> {
    let n = bins.alloc_counts.len();
    let count = bins.alloc_counts[k];
    let freed = bins.free_counts.get(k).copied().unwrap_or(0);
    let (size, bytes) = if k + 1 == n {
        (format!(">={n}"), u128::from(bins.alloc_large_bytes))
    } else {
        ((k + 1).to_string(), u128::from(count) * (k as u128 + 1))
    };
    vec![
        size,
        count.to_string(),
        freed.to_string(),
        bytes.to_string(),
    ]
}
