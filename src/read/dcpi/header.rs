//! The ASCII header of a binary DCPI profile file (docs/formats/dcpi.md §2.2): keyword
//! lines up to a line that is exactly `samples`, after which the binary
//! section starts at once.

use std::path::Path;

use crate::error::{Error, Result};

/// Longest header line accepted. Real lines are short (a path at most); the
/// limit turns a file with megabytes and no newline into a clear error.
pub const MAX_LINE: usize = 64 * 1024;

/// One `<keyword> <value>` line of a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderLine {
    /// Byte offset of the line in the file.
    pub offset: usize,
    pub keyword: String,
    pub value: String,
}

/// The header lines of a binary profile and where its binary section starts.
#[derive(Debug, Clone)]
pub struct RawHeader {
    pub lines: Vec<HeaderLine>,
    /// Offset of the `samples` line.
    pub samples_offset: usize,
    /// Offset of the first byte after the `samples` line's newline.
    pub binary_start: usize,
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., last] = s {
        if is_blank(*last) || *last == b'\r' {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Splits one header line (without its newline) into keyword and value.
/// `Ok(None)` is the `samples` line.
pub fn split_line(line: &[u8]) -> std::result::Result<Option<(String, String)>, String> {
    let text = trim_end(line);
    if text == b"samples" {
        return Ok(None);
    }
    let key_len = text.iter().position(|&b| is_blank(b)).unwrap_or(text.len());
    let (keyword, rest) = text.split_at(key_len);
    if keyword.is_empty() {
        return Err("expected a header line `<keyword> <value>`, found a line that starts with a blank or is empty".into());
    }
    if let Some(bad) = keyword.iter().find(|b| !b.is_ascii_graphic()) {
        return Err(format!(
            "expected a header line `<keyword> <value>`, found byte {bad:#04x} in the keyword"
        ));
    }
    let value = &rest[rest
        .iter()
        .position(|&b| !is_blank(b))
        .unwrap_or(rest.len())..];
    let keyword = String::from_utf8_lossy(keyword).into_owned();
    if keyword == "samples" {
        return Err("the `samples` line must hold the word `samples` alone".into());
    }
    if value.is_empty() {
        return Err(format!("header line `{keyword}` has no value"));
    }
    if let Some(bad) = value.iter().find(|&&b| b < 0x20 && b != b'\t') {
        return Err(format!(
            "header line `{keyword}` holds control byte {bad:#04x}: not a text header"
        ));
    }
    Ok(Some((keyword, String::from_utf8_lossy(value).into_owned())))
}

/// Reads the header lines of `data` up to and including the `samples` line.
pub fn parse(file: &Path, data: &[u8]) -> Result<RawHeader> {
    let mut lines = Vec::new();
    let mut pos = 0usize;
    loop {
        let rest = data.get(pos..).unwrap_or_default();
        if rest.is_empty() {
            let what = if pos == 0 {
                "empty file: expected a DCPI profile header".to_owned()
            } else {
                "the header ends without a `samples` line (the file ends inside the header)"
                    .to_owned()
            };
            return Err(Error::format(file, pos as u64, what));
        }
        let window = &rest[..rest.len().min(MAX_LINE + 1)];
        let Some(nl) = window.iter().position(|&b| b == b'\n') else {
            let what = if rest.len() > MAX_LINE {
                format!("header line longer than {MAX_LINE} bytes without a newline: not a DCPI profile header")
            } else {
                "header line not terminated by a newline: the file ends inside the header"
                    .to_owned()
            };
            return Err(Error::format(file, pos as u64, what));
        };
        let line = &window[..nl];
        match split_line(line) {
            Ok(None) => {
                return Ok(RawHeader {
                    lines,
                    samples_offset: pos,
                    binary_start: pos + nl + 1,
                })
            }
            Ok(Some((keyword, value))) => lines.push(HeaderLine {
                offset: pos,
                keyword,
                value,
            }),
            Err(what) => return Err(Error::format(file, pos as u64, what)),
        }
        pos += nl + 1;
    }
}

/// Keywords of the dcpiformat(4) grammar (required and optional).
pub const KNOWN_KEYWORDS: &[&str] = &[
    "version", "image", "epoch", "platform", "event", "period", "tstart", "tsize", "cpuspeed",
    "cpuamask", "cpuimplv", "cpucount", "path",
];

/// Does `head` (the first bytes of a file) look like a binary DCPI profile?
/// Every complete line must be a header line; the header must name at least
/// two grammar keywords, the first line one of them, and either reach its
/// `samples` line within `head` or fill `head` with header lines.
pub fn looks_like_header(head: &[u8], head_is_truncated: bool) -> bool {
    let mut known = 0;
    let mut pos = 0;
    let mut first = true;
    while let Some(nl) = head
        .get(pos..)
        .and_then(|r| r.iter().position(|&b| b == b'\n'))
    {
        match split_line(&head[pos..pos + nl]) {
            Ok(None) => return known >= 2,
            Ok(Some((keyword, _))) => {
                let is_known = KNOWN_KEYWORDS.contains(&keyword.as_str());
                if first && !is_known {
                    return false;
                }
                first = false;
                known += usize::from(is_known);
            }
            Err(_) => return false,
        }
        pos += nl + 1;
    }
    head_is_truncated && known >= 2
}

/// `pdb-<major>.<minor>` → (major, minor).
pub fn parse_version(value: &str) -> Option<(u32, u32)> {
    let rest = value
        .get(..4)
        .filter(|p| p.eq_ignore_ascii_case("pdb-"))
        .and(value.get(4..))?;
    let (major, minor) = rest.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A hexadecimal number, with or without `0x`.
pub fn parse_hex(value: &str) -> Option<u64> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// A decimal number, or a hexadecimal one written with `0x`.
pub fn parse_number(value: &str) -> Option<u64> {
    if value.starts_with("0x") || value.starts_with("0X") {
        return parse_hex(value);
    }
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Unix time in seconds of an epoch stamp: `YYMMDDHHMM`, `YYYYMMDDHHMM` or
/// `YYYYMMDDHHMMSS`, UTC (docs/formats/dcpi.md §2.2). Two-digit years 70–99 are 19xx.
pub fn epoch_seconds(stamp: &str) -> Option<i64> {
    if !stamp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |s: &str| s.parse::<i64>().ok();
    let (year, rest) = match stamp.len() {
        10 => {
            let yy = num(stamp.get(..2)?)?;
            (
                if yy >= 70 { 1900 + yy } else { 2000 + yy },
                stamp.get(2..)?,
            )
        }
        12 | 14 => (num(stamp.get(..4)?)?, stamp.get(4..)?),
        _ => return None,
    };
    let month = num(rest.get(0..2)?)?;
    let day = num(rest.get(2..4)?)?;
    let hour = num(rest.get(4..6)?)?;
    let minute = num(rest.get(6..8)?)?;
    let second = match rest.get(8..10) {
        Some(s) => num(s)?,
        None => 0,
    };
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    Some(days_since_unix_epoch(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days from 1970-01-01 to the given proleptic Gregorian date.
fn days_since_unix_epoch(year: i64, month: i64, day: i64) -> i64 {
    // Count years from March so that the leap day ends the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_of_every_width_are_utc() {
        assert_eq!(epoch_seconds("7001010000"), Some(0));
        // 1998-05-19 17:24 UTC (the dcpicat man page's epoch).
        assert_eq!(epoch_seconds("199805191724"), Some(895_598_640));
        assert_eq!(epoch_seconds("9805191724"), Some(895_598_640));
        assert_eq!(epoch_seconds("20000229120030"), Some(951_825_630));
        assert_eq!(epoch_seconds("19981319"), None);
        assert_eq!(epoch_seconds("199813191724"), None);
    }

    #[test]
    fn versions_and_numbers() {
        assert_eq!(parse_version("pdb-0.07"), Some((0, 7)));
        assert_eq!(parse_version("PDB-1.01"), Some((1, 1)));
        assert_eq!(parse_version("0.07"), None);
        assert_eq!(parse_hex("120000000"), Some(0x1_2000_0000));
        assert_eq!(parse_hex("0x00012006CBB8"), Some(0x1_2006_cbb8));
        assert_eq!(parse_hex("12g"), None);
        assert_eq!(parse_number("4096"), Some(4096));
        assert_eq!(parse_number("0x800000"), Some(0x80_0000));
        assert_eq!(parse_number("-3"), None);
    }

    #[test]
    fn samples_line_ends_the_header_with_padding() {
        let data = b"version pdb-0.07\nimage 0a\nsamples   \n\x01\x02";
        let h = parse(Path::new("f"), data).unwrap();
        assert_eq!(h.lines.len(), 2);
        assert_eq!(h.lines[1].value, "0a");
        assert_eq!(h.binary_start, data.len() - 2);
    }
}
