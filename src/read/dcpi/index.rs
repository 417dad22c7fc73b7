//! The first pass over DCPI inputs: every file's header, nothing of its
//! counts (docs/formats/dcpi.md §2.2, §3, §4). It finds the events, the
//! images and which files hold each, so that the second pass can read the
//! counts one image at a time. Each file is opened, its header parsed and
//! the file closed again: memory is O(files + images), whatever the counts.

use std::path::Path;

use super::super::input::Input;
use super::super::options::ReadOptions;
use super::collection::{Collection, FileEvent, FileKind, FileSummary, ImageFacts, Origin};
use super::interpret::interpret_header;
use super::{database, dcpicat, header, insn_size};
use crate::error::Result;

/// Reads the headers of every input (files, and the profile files of
/// database directories) into a collection with no counts yet.
pub(super) fn index(inputs: &[Input], options: &ReadOptions) -> Result<Collection> {
    let mut c = Collection {
        insn: insn_size(options)?,
        ..Collection::default()
    };
    for (i, input) in inputs.iter().enumerate() {
        if input.is_dir() {
            let walk =
                database::for_each_profile(input.name(), &options.dcpi.epoch, &mut |file| {
                    index_file(&mut c, file, Origin::Walked)
                })?;
            c.skipped += walk.skipped;
        } else {
            index_file(&mut c, input, Origin::Input(i))?;
        }
    }
    Ok(c)
}

/// Bytes of a binary profile read for its header before all of it is: a
/// header is a few hundred bytes, and the counts are read by the second pass.
const HEADER_WINDOW: usize = 64 << 10;

/// Indexes one binary profile or dcpicat dump.
fn index_file(c: &mut Collection, input: &Input, origin: Origin) -> Result<()> {
    let path = input.name();
    c.warnings.at(c.files.len(), 0);
    if dcpicat::looks_like(input.head()) {
        return index_dump(c, path, origin, input.bytes()?);
    }
    let raw = binary_header(input)?;
    let h = interpret_header(path, &raw, &mut c.facts, &mut c.warnings)?;
    let tstart = h.tstart.unwrap_or(0);
    let file = c.files.len();
    let image = c.image(
        path,
        file,
        &ImageFacts {
            id: &h.image,
            label: h.label.as_deref(),
            name: h.name.as_deref(),
            paths: &h.paths,
            tstart,
            tsize: h.tsize,
        },
    );
    let event = c.event(&h.event);
    let column = c.column(image, event, h.period);
    c.note_epoch(h.epoch.as_deref());
    c.files.push(FileSummary {
        path: path.to_path_buf(),
        origin,
        kind: FileKind::Binary(h.version),
        image: h.image,
        epoch: h.epoch,
        events: vec![FileEvent {
            name: h.event,
            period: h.period,
            samples: 0,
            declared: None,
        }],
        chunks: 0,
        addresses: 0,
        header: if file == 0 { raw.lines } else { Vec::new() },
        columns: vec![column],
        binary_start: raw.binary_start,
        tstart,
        tsize: h.tsize,
    });
    Ok(())
}

/// The header of a binary profile, read from its first bytes (all of them
/// when the header does not end there: the error, if any, is the one of
/// the whole file).
fn binary_header(input: &Input) -> Result<header::RawHeader> {
    let len = input.len().min(HEADER_WINDOW as u64) as usize;
    let mut buf = Vec::new();
    let window = input.window(0, len, &mut buf)?;
    match header::parse(input.name(), window) {
        Ok(raw) => Ok(raw),
        Err(_) if (len as u64) < input.len() => header::parse(input.name(), input.bytes()?),
        Err(e) => Err(e),
    }
}

/// Indexes a dcpicat dump: its header lines and event columns.
fn index_dump(c: &mut Collection, path: &Path, origin: Origin, data: &[u8]) -> Result<()> {
    let dump = dcpicat::parse_header(path, data)?;
    let facts = dump_facts(c, path, &dump);
    let tstart = dump.text_start.unwrap_or(0);
    let file = c.files.len();
    let image = c.image(
        path,
        file,
        &ImageFacts {
            id: &facts.image_id,
            label: facts.label.as_deref(),
            name: facts.name.as_deref(),
            paths: &facts.paths,
            tstart,
            tsize: dump.text_size,
        },
    );
    // A dump's columns come into being with its first row (a dump of no
    // rows adds no period to its events).
    let has_rows = data
        .get(dump.rows_start..)
        .is_some_and(|rows| rows.iter().any(|b| !b.is_ascii_whitespace()));
    let (columns, events) = dump_events(c, &dump, image, has_rows);
    c.note_epoch(facts.epoch.as_deref());
    c.files.push(FileSummary {
        path: path.to_path_buf(),
        origin,
        kind: FileKind::Dcpicat,
        image: facts.image_id,
        epoch: facts.epoch,
        events,
        chunks: 0,
        addresses: 0,
        header: if file == 0 { dump.lines } else { Vec::new() },
        columns,
        binary_start: dump.rows_start,
        tstart,
        tsize: dump.text_size,
    });
    Ok(())
}

/// What a dump's header lines say about its image.
struct DumpFacts {
    name: Option<String>,
    image_id: String,
    paths: Vec<String>,
    label: Option<String>,
    epoch: Option<String>,
}

/// The image facts of a dump's header lines; the other lines become facts
/// of the collection, and a missing `text_start` a warning.
fn dump_facts(c: &mut Collection, path: &Path, dump: &dcpicat::DumpHeader) -> DumpFacts {
    let first = |key: &str| {
        dump.lines
            .iter()
            .find(|l| l.keyword == key)
            .map(|l| l.value.clone())
    };
    let name = first("name");
    let image_id = first("image")
        .or_else(|| name.clone())
        .unwrap_or_else(|| path.display().to_string());
    let paths: Vec<String> = dump
        .lines
        .iter()
        .filter(|l| l.keyword == "path")
        .map(|l| l.value.clone())
        .collect();
    let (label, epoch) = (first("label"), first("epoch"));
    for line in &dump.lines {
        match line.keyword.as_str() {
            "name" | "image" | "label" | "path" | "text_start" | "text_size" | "event" => {}
            keyword => c.facts.add(keyword, &line.value),
        }
    }
    if dump.text_start.is_none() {
        c.warnings.add(
            path,
            "no `text_start` line: addresses taken as they are (text start 0)".into(),
        );
    }
    DumpFacts {
        name,
        image_id,
        paths,
        label,
        epoch,
    }
}

/// The image's column of each of a dump's events (none when it has no
/// rows), and the events as the file's.
fn dump_events(
    c: &mut Collection,
    dump: &dcpicat::DumpHeader,
    image: usize,
    has_rows: bool,
) -> (Vec<usize>, Vec<FileEvent>) {
    let mut columns = Vec::with_capacity(dump.events.len());
    let mut events = Vec::with_capacity(dump.events.len());
    for e in &dump.events {
        let event = c.event(&e.name);
        if has_rows {
            columns.push(c.column(image, event, e.period));
        }
        if e.fraction < 10_000 {
            c.facts.add(
                &format!("{} monitored fraction", e.name),
                &format!("{:.2}%", e.fraction as f64 / 100.0),
            );
        }
        events.push(FileEvent {
            name: e.name.clone(),
            period: e.period,
            samples: 0,
            declared: Some(e.declared_samples),
        });
    }
    (columns, events)
}
