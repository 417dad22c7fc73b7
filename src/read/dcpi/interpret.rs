//! The header of a binary DCPI profile interpreted (docs/formats/dcpi.md §2.2,
//! §6.2): required lines, numbers checked, the facts kept, what is missing
//! or repeated said as warnings.

use std::collections::HashMap;
use std::path::Path;

use super::collection::{Facts, Warnings};
use super::header::{self, parse_hex, parse_number, parse_version, HeaderLine};
use crate::error::{Error, Result};

/// The facts of a binary profile header that reading needs.
pub(super) struct BinaryHeader {
    pub version: Option<String>,
    pub image: String,
    pub epoch: Option<String>,
    pub event: String,
    pub period: u64,
    pub tstart: Option<u64>,
    pub tsize: Option<u64>,
    pub paths: Vec<String>,
    pub name: Option<String>,
    pub label: Option<String>,
}

/// Interprets the header lines of a binary profile (docs/formats/dcpi.md §2.2, §6.2).
pub(super) fn interpret_header(
    file: &Path,
    raw: &header::RawHeader,
    facts: &mut Facts,
    warnings: &mut Warnings,
) -> Result<BinaryHeader> {
    let mut seen: HashMap<&str, &HeaderLine> = HashMap::new();
    let mut paths = Vec::new();
    let mut local_facts: Vec<(String, String)> = Vec::new();
    for line in &raw.lines {
        let keyword = line.keyword.as_str();
        if keyword == "path" {
            paths.push(line.value.clone());
            continue;
        }
        check_line(file, line, warnings)?;
        if seen.contains_key(keyword) {
            warnings.add(
                file,
                format!("the `{keyword}` line appears more than once: the first one is used"),
            );
            continue;
        }
        seen.insert(keyword, line);
        let described = matches!(
            keyword,
            "version" | "image" | "event" | "period" | "tstart" | "tsize" | "name" | "label"
        );
        if !described {
            // The machine's facts, and unknown lines, which must be
            // preserved (§2.2).
            local_facts.push((keyword.to_owned(), line.value.clone()));
        }
    }
    let header = build_header(file, raw, &seen, paths, warnings)?;
    for (k, v) in &local_facts {
        facts.add(k, v);
    }
    Ok(header)
}

/// Checks one header line's value for its keyword: refuses what cannot be
/// read, warns about what is read with a guess.
fn check_line(file: &Path, line: &HeaderLine, warnings: &mut Warnings) -> Result<()> {
    let keyword = line.keyword.as_str();
    let bad = |what: &str| {
        Error::format(
            file,
            line.offset as u64,
            format!("{keyword} `{}`: {what}", line.value),
        )
    };
    match keyword {
        "version" => {
            let (major, minor) =
                parse_version(&line.value).ok_or_else(|| bad("expected pdb-<major>.<minor>"))?;
            if major >= 1 {
                return Err(Error::unsupported(
                    file,
                    format!(
                        "profile format version {}: the binary layout of major version 1 is undocumented \
                         (dcpiformat(4) describes only versions 0.06 and 0.07). Run `dcpicat` on this file \
                         on the Alpha host and convert its text output instead",
                        line.value
                    ),
                ));
            }
            if !(6..=7).contains(&minor) {
                warnings.add(
                    file,
                    format!(
                        "version {}: only 0.06 and 0.07 are documented; read with their layout",
                        line.value
                    ),
                );
            }
        }
        // Image ids are longer than 64 bits (the dcpicat example has 20 digits).
        "image" if !line.value.bytes().all(|b| b.is_ascii_hexdigit()) => {
            return Err(bad("expected a hexadecimal image id"));
        }
        "tstart" | "cpuamask" => {
            parse_hex(&line.value).ok_or_else(|| bad("expected a hexadecimal number"))?;
        }
        "period" | "tsize" | "cpuspeed" | "cpuimplv" | "cpucount" => {
            let n = parse_number(&line.value).ok_or_else(|| bad("expected a decimal number"))?;
            if keyword == "period" && n == 0 {
                return Err(bad("the sampling period must be at least 1"));
            }
        }
        "epoch" if header::epoch_seconds(&line.value).is_none() => {
            warnings.add(
                file,
                format!(
                    "epoch `{}` is not YYMMDDHHMM, YYYYMMDDHHMM or YYYYMMDDHHMMSS: time unknown",
                    line.value
                ),
            );
        }
        _ => {}
    }
    Ok(())
}

/// The header from the first line of each keyword: the required ones must
/// be there; missing optional ones are warnings.
fn build_header(
    file: &Path,
    raw: &header::RawHeader,
    seen: &HashMap<&str, &HeaderLine>,
    paths: Vec<String>,
    warnings: &mut Warnings,
) -> Result<BinaryHeader> {
    let at_samples = raw.samples_offset as u64;
    let required = |key: &str| {
        seen.get(key).map(|l| l.value.clone()).ok_or_else(|| {
            Error::format(
                file,
                at_samples,
                format!("the header has no `{key}` line, which a DCPI profile requires"),
            )
        })
    };
    let image = required("image")?;
    let event = required("event")?;
    let period = parse_number(&required("period")?).unwrap_or(1);
    let version = seen.get("version").map(|l| l.value.clone());
    if version.is_none() {
        warnings.add(
            file,
            "no `version` line: read as pdb-0.x (the older dcpiformat variant)".into(),
        );
    }
    let tstart = seen.get("tstart").and_then(|l| parse_hex(&l.value));
    if tstart.is_none() {
        warnings.add(
            file,
            "no `tstart` line: addresses are offsets from the image's text start (tstart 0)".into(),
        );
    }
    let missing: Vec<&str> = ["epoch", "platform", "tsize", "cpuspeed"]
        .into_iter()
        .filter(|k| !seen.contains_key(k))
        .collect();
    if !missing.is_empty() {
        warnings.add(
            file,
            format!("the header lacks required lines: {}", missing.join(", ")),
        );
    }
    let value = |key: &str| seen.get(key).map(|l| l.value.clone());
    Ok(BinaryHeader {
        version,
        image,
        epoch: value("epoch"),
        event,
        period,
        tstart,
        tsize: seen.get("tsize").and_then(|l| parse_number(&l.value)),
        paths,
        name: value("name"),
        label: value("label"),
    })
}
