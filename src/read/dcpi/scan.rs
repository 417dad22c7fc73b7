//! The second pass over DCPI inputs: the counts of one image, read from
//! each of its files in turn (docs/formats/dcpi.md §2.3, §4). The counts go
//! into one dense array per event of the image ([`Counts`]), or, for
//! `info`, are only summed ([`Tally`]); what else the files said (totals,
//! chunks, warnings) comes back as an [`ImageScan`] to apply to the
//! collection. A scan reads nothing but the collection, so images can be
//! scanned on several threads.

use std::path::Path;

use super::super::input::Input;
use super::super::options::ReadOptions;
use super::binary;
use super::collection::{Collection, FileKind, FileSummary, Origin};
use super::counts::{CountSink, Counts, Tally};
use super::dcpicat;
use crate::error::{Error, Result};

/// What one file's counts held.
#[derive(Debug, Default)]
pub(super) struct FileScan {
    pub file: usize,
    pub chunks: u64,
    /// Addresses with samples (binary), rows (dcpicat).
    pub addresses: u64,
    /// Samples per event of the file.
    pub samples: Vec<u64>,
    pub warnings: Vec<String>,
}

/// What one image's counts held.
#[derive(Debug, Default)]
pub(super) struct ImageScan {
    pub image: usize,
    pub files: Vec<FileScan>,
    /// One past the highest sampled address.
    pub end: u64,
    /// Sum of each column's counts.
    pub totals: Vec<u64>,
    /// Each column's counts, unless only tallied.
    pub counts: Vec<Counts>,
}

/// What a scan keeps of the counts.
pub(super) enum Keep<'s> {
    /// Only their sums (`info`).
    Sums,
    /// Every count, per address and column ([`ImageScan::counts`]).
    Counts,
    /// Every count, handed to this sink as the files' runs come: only for
    /// an image of one binary file (one column, runs in address order).
    Into(&'s mut dyn CountSink),
}

/// Reads the counts of image `image` from its files, keeping what `keep`
/// says; a file read from disk goes into `buf`, which the caller reuses for
/// the next image (its memory is then neither allocated nor zeroed again).
pub(super) fn scan_image(
    c: &Collection,
    inputs: &[Input],
    options: &ReadOptions,
    (image, buf): (usize, &mut Vec<u8>),
    mut keep: Keep<'_>,
) -> Result<ImageScan> {
    let img = &c.images[image];
    let mut scan = ImageScan {
        image,
        end: img.end,
        totals: vec![0; img.columns.len()],
        counts: match keep {
            Keep::Counts => img.columns.iter().map(|_| Counts::new(c.insn)).collect(),
            _ => Vec::new(),
        },
        ..ImageScan::default()
    };
    // A database's files are read whole, one after the other, into one buffer.
    for &file in &img.files {
        let summary = &c.files[file];
        let walked;
        let data = match summary.origin {
            Origin::Input(i) => inputs.get(i).map_or(Ok(&[][..]), Input::bytes)?,
            Origin::Walked => {
                walked = Input::open(&summary.path, None)?;
                walked.window(0, usize::try_from(walked.len()).unwrap_or(usize::MAX), buf)?
            }
        };
        options.advance(data.len() as u64);
        let file_scan = match summary.kind {
            FileKind::Binary(_) => scan_binary(c.insn, summary, data, &mut scan, &mut keep)?,
            FileKind::Dcpicat => scan_dump(c.insn, summary, data, &mut scan)?,
        };
        scan.files.push(FileScan { file, ..file_scan });
    }
    Ok(scan)
}

/// The chunks of a binary profile, into its one column.
fn scan_binary(
    insn: u32,
    f: &FileSummary,
    data: &[u8],
    scan: &mut ImageScan,
    keep: &mut Keep<'_>,
) -> Result<FileScan> {
    let column = f.columns.first().copied().unwrap_or(0);
    if let (Some(counts), Some(tsize)) = (scan.counts.get_mut(column), f.tsize) {
        // The image's text, bounded by twice the counts the file can hold.
        let held = (data.len() / 4) as u64;
        counts.reserve((tsize / u64::from(insn)).min(2 * held + 256));
    }
    let mut warnings = Vec::new();
    let stats = match (keep, scan.counts.get_mut(column)) {
        (Keep::Into(sink), _) => section(f, data, insn, *sink, &mut warnings)?,
        (_, Some(counts)) => section(f, data, insn, counts, &mut warnings)?,
        (_, None) => section(f, data, insn, &mut Tally, &mut warnings)?,
    };
    if let Some(tsize) = f.tsize {
        if stats.end_offset > tsize {
            warnings.push(format!(
                "chunks reach text offset {:#x}, beyond tsize {tsize:#x}",
                stats.end_offset
            ));
        }
    }
    if let Some(total) = scan.totals.get_mut(column) {
        *total = total.saturating_add(stats.samples);
    }
    scan.end = scan.end.max(f.tstart.saturating_add(stats.end_offset));
    Ok(FileScan {
        chunks: stats.chunks,
        addresses: stats.nonzero,
        samples: vec![stats.samples],
        warnings,
        ..FileScan::default()
    })
}

fn section(
    f: &FileSummary,
    data: &[u8],
    insn: u32,
    counts: &mut (impl CountSink + ?Sized),
    warnings: &mut Vec<String>,
) -> Result<binary::SectionStats> {
    binary::read_section(
        &f.path,
        data,
        f.binary_start,
        f.tstart,
        insn,
        counts,
        warnings,
    )
}

/// The rows of a dcpicat dump, one column per event.
fn scan_dump(insn: u32, f: &FileSummary, data: &[u8], scan: &mut ImageScan) -> Result<FileScan> {
    let dump = dcpicat::parse_header(&f.path, data)?;
    if dump.rows_start != f.binary_start {
        return Err(changed(&f.path));
    }
    let mut sums = vec![0u64; dump.events.len()];
    let mut end = f.tstart;
    let insn = u64::from(insn);
    let rows = dcpicat::read_rows(&f.path, data, &dump, |i, pc, count| {
        if let Some(&column) = f.columns.get(i) {
            if let Some(counts) = scan.counts.get_mut(column) {
                counts.add(pc, count);
            }
            if let Some(total) = scan.totals.get_mut(column) {
                *total = total.saturating_add(count);
            }
            if let Some(s) = sums.get_mut(i) {
                *s = s.saturating_add(count);
            }
            end = end.max(pc.saturating_add(insn));
        }
    })?;
    scan.end = scan.end.max(end);
    let mut warnings = Vec::new();
    for (e, &sum) in dump.events.iter().zip(&sums) {
        if sum != e.declared_samples {
            warnings.push(format!(
                "event {}: the rows sum to {sum} samples, the event line declares {}",
                e.name, e.declared_samples
            ));
        }
    }
    Ok(FileScan {
        addresses: rows,
        samples: sums,
        warnings,
        ..FileScan::default()
    })
}

/// A file read twice (header, then counts) that changed in between.
fn changed(path: &Path) -> Error {
    Error::format(
        path,
        0,
        "the file changed while it was being read (its header is no longer the one read first)",
    )
}

/// Applies what a scan found to the collection: the files' totals, the
/// image's end and column totals, and the warnings, in the order reading
/// each file whole would have met them.
pub(super) fn apply(c: &mut Collection, scan: &mut ImageScan) {
    let image = &mut c.images[scan.image];
    image.end = image.end.max(scan.end);
    for (column, &total) in image.columns.iter_mut().zip(&scan.totals) {
        column.total = column.total.saturating_add(total);
    }
    for f in scan.files.drain(..) {
        let Some(summary) = c.files.get_mut(f.file) else {
            continue;
        };
        summary.chunks = f.chunks;
        summary.addresses = f.addresses;
        for (event, &samples) in summary.events.iter_mut().zip(&f.samples) {
            event.samples = samples;
        }
        let path = summary.path.clone();
        c.warnings.at(f.file, 1);
        for w in f.warnings {
            c.warnings.add(&path, w);
        }
    }
}
