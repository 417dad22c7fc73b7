//! `dcpicat` text dumps (docs/formats/dcpi.md §2.5): `keyword value` header lines, one
//! `event W name:period:fraction` line per event, then rows of a PC and one
//! count per event.

use std::path::Path;

use super::header::{parse_hex, parse_number, split_line, HeaderLine};
use crate::error::{Error, Result};

/// One `event` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpEvent {
    /// Event name (`sampleset:counter` for ProfileMe).
    pub name: String,
    /// W: the event's total samples as the dump declares it.
    pub declared_samples: u64,
    /// Y: one sample every `period` events.
    pub period: u64,
    /// Z: 10000 × the fraction of the time the event was monitored.
    pub fraction: u64,
}

/// The header of a dump.
#[derive(Debug, Clone, Default)]
pub struct DumpHeader {
    pub lines: Vec<HeaderLine>,
    pub events: Vec<DumpEvent>,
    pub text_start: Option<u64>,
    pub text_size: Option<u64>,
    /// Offset of the first PC row.
    pub rows_start: usize,
}

/// Does `head` look like a dcpicat dump: a `name` line first, and a
/// `text_start` line in the header?
pub fn looks_like(head: &[u8]) -> bool {
    let mut lines = head.split(|&b| b == b'\n');
    let first_is_name =
        matches!(lines.next().map(split_line), Some(Ok(Some((k, _)))) if k == "name");
    first_is_name
        && head
            .split(|&b| b == b'\n')
            .take_while(|l| l.first().is_some_and(|b| !b.is_ascii_digit()))
            .any(|l| l.starts_with(b"text_start"))
}

/// An event spec `name:period:fraction` (the name may hold colons).
fn parse_event(value: &str) -> Option<DumpEvent> {
    let mut words = value.split_whitespace();
    let declared_samples = parse_number(words.next()?)?;
    let spec = words.next()?;
    if words.next().is_some() {
        return None;
    }
    let mut parts = spec.rsplitn(3, ':');
    let fraction = parse_number(parts.next()?)?;
    let period = parse_number(parts.next()?)?;
    let name = parts.next()?;
    if name.is_empty() || period == 0 {
        return None;
    }
    Some(DumpEvent {
        name: name.to_owned(),
        declared_samples,
        period,
        fraction,
    })
}

/// Reads the header lines up to the first PC row.
pub fn parse_header(file: &Path, data: &[u8]) -> Result<DumpHeader> {
    let mut header = DumpHeader::default();
    let mut pos = 0usize;
    while let Some(rest) = data.get(pos..).filter(|r| !r.is_empty()) {
        let nl = rest.iter().position(|&b| b == b'\n');
        let line = &rest[..nl.unwrap_or(rest.len())];
        let next = pos + nl.map_or(rest.len(), |n| n + 1);
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            pos = next;
            continue;
        }
        if line.first().is_some_and(u8::is_ascii_digit) {
            break;
        }
        let (keyword, value) = match split_line(line) {
            Ok(Some(kv)) => kv,
            Ok(None) => {
                return Err(Error::format(
                    file,
                    pos as u64,
                    "a `samples` line in a dcpicat dump",
                ))
            }
            Err(what) => return Err(Error::format(file, pos as u64, what)),
        };
        note_field(file, pos, &keyword, &value, &mut header)?;
        header.lines.push(HeaderLine {
            offset: pos,
            keyword,
            value,
        });
        pos = next;
    }
    header.rows_start = pos;
    if header.events.is_empty() {
        return Err(Error::format(
            file,
            pos as u64,
            "the dcpicat header has no `event` line, so the count columns have no meaning",
        ));
    }
    Ok(header)
}

/// Takes what the header needs from one `keyword value` line at `pos`:
/// events, and the text start and size (the first of each counts).
fn note_field(
    file: &Path,
    pos: usize,
    keyword: &str,
    value: &str,
    header: &mut DumpHeader,
) -> Result<()> {
    match keyword {
        "event" => header.events.push(parse_event(value).ok_or_else(|| {
            Error::format(
                file,
                pos as u64,
                format!(
                    "expected `event <total> <name>:<period>:<fraction>`, found `event {value}`"
                ),
            )
        })?),
        "text_start" | "text_size" => {
            let number = parse_hex(value).ok_or_else(|| {
                Error::format(
                    file,
                    pos as u64,
                    format!("{keyword} `{value}` is not a hexadecimal number"),
                )
            })?;
            let slot = if keyword == "text_start" {
                &mut header.text_start
            } else {
                &mut header.text_size
            };
            slot.get_or_insert(number);
        }
        _ => {}
    }
    Ok(())
}

/// Reads the PC rows from `header.rows_start`: `add(column, pc, count)` for
/// every count. Returns the number of rows.
pub fn read_rows(
    file: &Path,
    data: &[u8],
    header: &DumpHeader,
    mut add: impl FnMut(usize, u64, u64),
) -> Result<u64> {
    let columns = header.events.len();
    let mut rows = 0u64;
    let mut pos = header.rows_start;
    while let Some(rest) = data.get(pos..).filter(|r| !r.is_empty()) {
        let nl = rest.iter().position(|&b| b == b'\n');
        let line = &rest[..nl.unwrap_or(rest.len())];
        let row_at = pos;
        pos += nl.map_or(rest.len(), |n| n + 1);
        let text = String::from_utf8_lossy(line);
        let mut words = text.split_whitespace();
        let Some(pc_text) = words.next() else {
            continue;
        };
        let pc = parse_hex(pc_text).ok_or_else(|| {
            Error::format(
                file,
                row_at as u64,
                format!(
                    "expected a PC row `0x<pc> <count>…`, found `{}`",
                    text.trim()
                ),
            )
        })?;
        let mut n = 0;
        for word in words {
            let count = parse_number(word).filter(|_| n < columns).ok_or_else(|| {
                Error::format(
                    file,
                    row_at as u64,
                    format!("expected {columns} decimal counts after the PC (one per event line), found `{}`", text.trim()),
                )
            })?;
            add(n, pc, count);
            n += 1;
        }
        if n != columns {
            return Err(Error::format(
                file,
                row_at as u64,
                format!("expected {columns} counts after the PC (one per event line), found {n}"),
            ));
        }
        rows += 1;
    }
    Ok(rows)
}
