//! What `profconv info` shows about APS sample files.

use std::collections::{BTreeMap, BTreeSet};

use super::head::event_name;
use super::records::ApsFile;
use super::tables::{merged_modules, module_file_name};
use crate::error::Result;
use crate::read::info::Entry;
use crate::read::input::Input;
use crate::read::options::ReadOptions;

/// Where the values of a sample file's fields start.
pub(super) const KEY_WIDTH: usize = 15;

/// What the records of one file add up to.
#[derive(Default)]
struct RecordCounts {
    user: u64,
    idle: u64,
    clamped: u64,
    per_event: BTreeMap<u32, u64>,
}

/// One sample file: its layout, head fields, tables and what its records count.
pub(super) fn describe_file(input: &Input, options: &ReadOptions) -> Result<Entry> {
    let (file, src) = ApsFile::open(input, options)?;
    let mut entries = head_fields(&file);
    entries.extend(tables(&file));
    let depth = file.layout.call_depth;
    let mut n = RecordCounts::default();
    file.for_each_record(&src, options, |r| {
        n.user += u64::from(r.user());
        n.idle += u64::from(r.pid() == 0);
        n.clamped += u64::from(r.cs_layer() < 0 || r.cs_layer() as u64 > depth as u64);
        *n.per_event.entry(r.event()).or_insert(0) += 1;
    })?;
    let total = u64::from(file.head.index);
    entries.push(Entry::field(
        "samples",
        format!(
            "{} user, {} kernel, {} of pid 0 (idle)",
            n.user,
            total - n.user,
            n.idle
        ),
    ));
    let events = n.per_event.iter().map(|(event, count)| {
        Entry::line(format!(
            "{} (event {event}): {count} samples",
            event_name(*event)
        ))
    });
    entries.push(Entry::Indented(events.collect()));
    if n.clamped > 0 {
        entries.push(Entry::field(
            "warning",
            format!(
                "{} records have cs_layer outside 0..={depth} (clamped)",
                n.clamped
            ),
        ));
    }
    let title = format!("{}:", input.name().display());
    Ok(Entry::aligned(title, KEY_WIDTH, entries))
}

/// The layout profconv chose and the head's fields.
fn head_fields(file: &ApsFile) -> Vec<Entry> {
    let h = &file.head;
    let l = &file.layout;
    let cpu = match file.cpu {
        Some(cpu) => format!("{cpu} (from the file name)"),
        None => "unknown (the file name is not sample_cpu_<N>_...)".to_string(),
    };
    vec![
        Entry::field("format", "APS sample file"),
        Entry::field("cpu", cpu),
        Entry::field(
            "byte order",
            format!(
                "head and records {}, module table {}, vma table {}",
                h.endian.name(),
                l.module_endian.name(),
                l.vma_endian.name()
            ),
        ),
        Entry::field(
            "call depth",
            format!("{} ({})", l.call_depth, l.call_depth_origin.describe()),
        ),
        Entry::field(
            "path length",
            format!("{} ({})", l.path_len, l.path_len_origin.describe()),
        ),
        Entry::field("record size", format!("{} bytes", l.record_size())),
        Entry::field("records", h.index),
        Entry::field(
            "begintime",
            format!("{}.{:06} s (Unix time)", h.begin_sec, h.begin_usec),
        ),
        Entry::field(
            "endtime",
            format!("{}.{:06} s (Unix time)", h.end_sec, h.end_usec),
        ),
        Entry::field(
            "duration",
            format!("{:.6} s", (h.end_nanos() - h.begin_nanos()) as f64 / 1e9),
        ),
        Entry::field("stBeginTime", format!("{} ticks", h.st_begin_time)),
        Entry::field("stEndTime", format!("{} ticks", h.st_end_time)),
        Entry::field(
            "reset_value",
            format!("{} events per sample", h.reset_value),
        ),
        Entry::field("cputype", h.cputype),
    ]
}

/// The module table (as merged ranges) and the per-process vma table.
fn tables(file: &ApsFile) -> Vec<Entry> {
    let l = &file.layout;
    let merged = merged_modules(&file.modules);
    let ranges = merged.iter().map(|m| {
        Entry::line(format!(
            "{:#010x}..={:#010x} {}",
            m.start,
            m.end,
            module_file_name(&m.name)
        ))
    });
    let pids: BTreeSet<i32> = file.vmas.iter().map(|v| v.pid).collect();
    vec![
        Entry::field(
            "modules",
            format!(
                "{} entries at byte {}, {} merged ranges",
                file.modules.len(),
                l.module_offset,
                merged.len()
            ),
        ),
        Entry::Indented(ranges.collect()),
        Entry::field(
            "vmas",
            format!(
                "{} entries at byte {} for {} processes",
                file.vmas.len(),
                l.vma_offset,
                pids.len()
            ),
        ),
    ]
}
