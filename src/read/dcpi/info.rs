//! What `profconv info` shows about DCPI inputs: from the headers and the
//! totals of a pass that only sums the counts (nothing kept per address).

use super::collection::{Collection, FileKind, FileSummary, Image};
use super::event_order;
use crate::read::info::{Entry, Summary};

/// At most this many files are listed one by one.
const LISTED: usize = 50;

/// The collection's files, epochs, events and images, its header facts and
/// its warnings.
pub(super) fn describe(c: &Collection) -> Summary {
    let mut entries = vec![
        Entry::field("format", format_line(c)),
        Entry::field("instruction size", format!("{} bytes", c.insn)),
        Entry::block(
            "epochs:",
            c.epochs
                .iter()
                .map(|(epoch, n)| Entry::line(format!("{epoch}  ({n} files)")))
                .collect(),
        ),
        Entry::block("events:", events(c)),
        Entry::block("images:", c.images.iter().map(|i| image(c, i)).collect()),
    ];
    if !c.facts.0.is_empty() {
        let facts = c.facts.0.iter().map(|(k, v)| Entry::field(k, v.join(", ")));
        entries.push(Entry::block("header facts:", facts.collect()));
    }
    if let [only] = c.files.as_slice() {
        let lines = only
            .header
            .iter()
            .map(|line| Entry::line(format!("{} {}", line.keyword, line.value)));
        let title = format!("header of {}:", only.path.display());
        entries.push(Entry::block(title, lines.collect()));
    }
    let mut files: Vec<Entry> = c.files.iter().take(LISTED).map(file).collect();
    if c.files.len() > LISTED {
        let more = c.files.len() - LISTED;
        files.push(Entry::line(format!("… and {more} more files")));
    }
    entries.push(Entry::block("files:", files));
    let warnings = c.warnings.lines();
    if !warnings.is_empty() {
        let lines = warnings.iter().map(|w| Entry::line(w.to_string()));
        entries.push(Entry::block("warnings:", lines.collect()));
    }
    Summary {
        align: None,
        entries,
    }
}

/// How many files of each kind, and how many were skipped.
fn format_line(c: &Collection) -> String {
    let binaries = c
        .files
        .iter()
        .filter(|f| matches!(f.kind, FileKind::Binary(_)))
        .count();
    let skipped = if c.skipped > 0 {
        format!("; {} other files skipped", c.skipped)
    } else {
        String::new()
    };
    format!(
        "DCPI ({} profile files: {binaries} binary, {} dcpicat dumps){skipped}",
        c.files.len(),
        c.files.len() - binaries,
    )
}

/// Each event's periods and its samples and events over every image.
fn events(c: &Collection) -> Vec<Entry> {
    let mut entries = Vec::new();
    for &e in &event_order(&c.events) {
        let mut periods: Vec<u64> = Vec::new();
        let (mut samples, mut events) = (0u64, 0u128);
        let columns = c.images.iter().flat_map(|i| &i.columns);
        for column in columns.filter(|col| col.event == e) {
            if !periods.contains(&column.period) {
                periods.push(column.period);
            }
            let total = column.total;
            samples = samples.saturating_add(total);
            events += u128::from(total) * u128::from(column.period);
        }
        let periods: Vec<String> = periods.iter().map(u64::to_string).collect();
        let value = format!(
            "period {}, {samples} samples, {events} events",
            periods.join("/")
        );
        entries.push(Entry::field(&c.events[e], value));
    }
    entries
}

/// One image: its id, name, text range, file count and samples per event.
fn image(c: &Collection, image: &Image) -> Entry {
    let mut text = format!("{} {}", image.id, image.name);
    if let Some(label) = &image.label {
        text += &format!(" label {label}");
    }
    text += &format!(": text {:#x}", image.tstart);
    if let Some(size) = image.tsize {
        text += &format!("+{size:#x}");
    }
    text += &format!(", {} files;", image.files.len());
    for &e in &event_order(&c.events) {
        let total: u64 = image
            .columns
            .iter()
            .filter(|col| col.event == e)
            .map(|col| col.total)
            .sum();
        if total > 0 {
            text += &format!(" {} {total}", c.events[e]);
        }
    }
    Entry::line(text)
}

/// One profile file: its kind, image, epoch, events and how much it holds.
fn file(f: &FileSummary) -> Entry {
    let kind = match &f.kind {
        FileKind::Binary(Some(v)) => v.clone(),
        FileKind::Binary(None) => "pdb-0.x (no version line)".to_owned(),
        FileKind::Dcpicat => "dcpicat dump".to_owned(),
    };
    let mut text = format!(
        "{}: {kind}, image {}, epoch {}",
        f.path.display(),
        f.image,
        f.epoch.as_deref().unwrap_or("(none)")
    );
    for e in &f.events {
        text += &format!(", {} period {} {} samples", e.name, e.period, e.samples);
        if let Some(d) = e.declared {
            text += &format!(" (declared {d})");
        }
    }
    if f.kind == FileKind::Dcpicat {
        text += &format!(", {} rows", f.addresses);
    } else {
        text += &format!(
            ", {} chunks, {} addresses with samples",
            f.chunks, f.addresses
        );
    }
    Entry::line(text)
}
