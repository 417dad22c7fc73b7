//! `profconv report merge`: the shards' reports of one run joined into the
//! report the run would have made in one piece, after checking that they
//! are of one run (the same archive, output folder, formats, options and
//! shard count), that every shard is there once, and that the shards listed
//! one same archive (their shares are cut from it, `shard.rs`); with each
//! shard's units and bytes, and how far the largest is from the mean. The
//! reports are held in memory together, with the merged one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{shard, Record, Report, Shard, Share, Tree};
use crate::error::{Error, Result};

/// Joins the reports of the shards of one run (each with the file it was
/// read from, for the messages) into the report one run would have made:
/// records in walk order, counts summed, `seconds` the longest shard's,
/// each shard's share ([`Report::shards`]) and their spread. Refused:
/// reports of different runs, a shard twice, a record in two reports,
/// shards that listed different trees or saw theirs change, and, unless
/// `partial`, a missing shard (with `partial`, the merged report lists
/// them in [`Report::missing_shards`]).
pub fn merge(reports: &[(PathBuf, Report)], partial: bool) -> Result<Report> {
    let Some((first_path, first)) = reports.first() else {
        return Err(Error::Usage("no report to merge".into()));
    };
    let mut shards: BTreeMap<u64, &Path> = BTreeMap::new();
    let mut count = None::<(u64, &Path)>;
    for (path, report) in reports {
        same_run(first_path, first, path, report)?;
        let shard = shard_of(path, report)?;
        match count {
            Some((n, other)) if n != shard.count => {
                return Err(Error::format(
                    path,
                    0,
                    format!(
                        "{} is shard {shard} (of {} shards), {} one of {n} shards: the shards of one run are split alike; merge the reports of one --shard K/N run",
                        path.display(),
                        shard.count,
                        other.display()
                    ),
                ))
            }
            _ => count = Some((shard.count, path)),
        }
        if let Some(other) = shards.insert(shard.index, path) {
            return Err(Error::format(
                path,
                0,
                format!(
                    "shard {shard} is in {} and in {}: merge each shard's last report once",
                    other.display(),
                    path.display()
                ),
            ));
        }
    }
    let n = count.map_or(1, |(n, _)| n);
    let tree = same_tree(reports, n)?;
    let missing: Vec<String> = (0..n)
        .filter(|k| !shards.contains_key(k))
        .map(|k| Shard { index: k, count: n }.to_string())
        .collect();
    if !missing.is_empty() && !partial {
        return Err(Error::format(
            first_path,
            0,
            format!(
                "shard {} of the run missing (found {} of {n}): merge every shard's report, or pass --partial to merge those found",
                missing.join(", "),
                shards.len()
            ),
        ));
    }
    let mut merged = Report::of(
        first.archive.clone(),
        first.out_dir.clone(),
        reports.iter().map(|(_, r)| r.seconds).fold(0.0, f64::max),
        records(reports)?,
    );
    merged.formats = first.formats.clone();
    merged.options = first.options.clone();
    merged.missing_shards = missing;
    merged.tree = tree;
    merged.shards = shares(reports)?;
    merged.shard_spread = shard::spread(&merged.shards);
    Ok(merged)
}

/// Each report's share, in shard order.
fn shares(reports: &[(PathBuf, Report)]) -> Result<Vec<Share>> {
    let mut shares = Vec::with_capacity(reports.len());
    for (path, report) in reports {
        let shard = shard_of(path, report)?;
        let share = Share {
            shard: shard.to_string(),
            units: report.inputs.len(),
            bytes: report.inputs.iter().map(|r| r.bytes).sum(),
        };
        shares.push((shard.index, share));
    }
    shares.sort_by_key(|(k, _)| *k);
    Ok(shares.into_iter().map(|(_, s)| s).collect())
}

/// The tree the shards of `reports` (of `n` shards) listed, refused when
/// one saw it change while it ran or two listed different ones: their
/// shares, cut from what each listed, may then overlap or leave units out.
/// Reports without a tree are not compared.
fn same_tree(reports: &[(PathBuf, Report)], n: u64) -> Result<Option<Tree>> {
    let again = "re-run every shard (with --resume: only what is missing or changed is converted), then merge their new reports";
    let mut first = None::<(&Path, &Tree)>;
    for (path, report) in reports {
        let Some(tree) = &report.tree else { continue };
        if tree.changed && n > 1 {
            return Err(Error::format(
                path,
                0,
                format!(
                    "{}: the archive changed while this shard ran, so its share may overlap another's or leave inputs out; {again}",
                    path.display()
                ),
            ));
        }
        match first {
            Some((other, seen)) if !seen.same_units(tree) => {
                return Err(Error::format(
                    path,
                    0,
                    format!(
                        "{} listed {} inputs of {} bytes (fingerprint {}), {} listed {} of {} bytes ({}): the archive changed between the shards' runs, so their shares may overlap or leave inputs out; {again}",
                        other.display(),
                        seen.units,
                        seen.bytes,
                        seen.fingerprint,
                        path.display(),
                        tree.units,
                        tree.bytes,
                        tree.fingerprint
                    ),
                ))
            }
            Some(_) => {}
            None => first = Some((path, tree)),
        }
    }
    Ok(first.map(|(_, t)| t.clone()))
}

/// Every record of `reports`, each once.
fn records(reports: &[(PathBuf, Report)]) -> Result<Vec<Record>> {
    let mut seen = std::collections::HashMap::new();
    let mut inputs = Vec::new();
    for (path, report) in reports {
        for record in &report.inputs {
            if let Some(other) = seen.insert((&record.path, &record.path_bytes), path) {
                return Err(Error::format(
                    path,
                    0,
                    format!(
                        "{} is in {} and in {}: the reports are not of one split run",
                        record.path_bytes.as_ref().unwrap_or(&record.path),
                        other.display(),
                        path.display()
                    ),
                ));
            }
            inputs.push(record.clone());
        }
    }
    Ok(inputs)
}

/// The shard a report is of; a report of a whole run is shard 0/1.
fn shard_of(path: &Path, report: &Report) -> Result<Shard> {
    let Some(text) = &report.shard else {
        return Ok(Shard { index: 0, count: 1 });
    };
    let parsed = text.split_once('/').and_then(|(k, n)| {
        let (index, count) = (k.parse().ok()?, n.parse().ok()?);
        (index < count).then_some(Shard { index, count })
    });
    parsed.ok_or_else(|| {
        Error::format(
            path,
            0,
            format!("its shard {text:?} is not K/N with K < N: not a report profconv wrote"),
        )
    })
}

/// Refuses `report` unless its run is `first`'s: the same archive, output
/// folder, formats and options.
fn same_run(first_path: &Path, first: &Report, path: &Path, report: &Report) -> Result<()> {
    let fields = [
        ("archive", &first.archive, &report.archive),
        ("output folder", &first.out_dir, &report.out_dir),
        ("options", &first.options, &report.options),
    ];
    let differs = fields
        .iter()
        .find(|(_, a, b)| a != b)
        .map(|(what, a, b)| (*what, a.to_string(), b.to_string()))
        .or_else(|| {
            (first.formats != report.formats)
                .then(|| ("formats", first.formats.join(","), report.formats.join(",")))
        });
    match differs {
        None => Ok(()),
        Some((what, a, b)) => Err(Error::format(
            path,
            0,
            format!(
                "{} and {} are reports of different runs: the {what} differ ({a:?} and {b:?}); merge the shards of one run",
                first_path.display(),
                path.display()
            ),
        )),
    }
}
