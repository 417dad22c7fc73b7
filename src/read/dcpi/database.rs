//! Profile database directories (docs/formats/dcpi.md §3): one subdirectory per epoch,
//! named by its start time, and below it a layout the public sources do not
//! describe. So the walk is recursive and picks profile files by content.

use std::path::{Path, PathBuf};

use super::super::directory::Survey;
use super::super::input::Input;
use super::super::options::EpochSelect;
use super::super::options::Format;
use crate::error::{Error, Result};

/// How deep a database walk goes below the root.
const MAX_DEPTH: usize = 16;

/// What a database walk met.
#[derive(Debug, Default)]
pub struct Walk {
    /// DCPI profile files, each handed to the visitor.
    pub files: usize,
    /// Files that are not DCPI profiles (logs, maps…).
    pub skipped: usize,
}

/// Called with every profile file of a walk, in a stable (sorted) order.
pub type Visit<'v> = dyn FnMut(&Input) -> Result<()> + 'v;

/// Entries of a directory, sorted by name.
fn sorted_entries(dir: &Path) -> Result<Vec<(PathBuf, std::fs::FileType)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(&entry.path(), e))?;
        entries.push((entry.path(), kind));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// An epoch directory's name: the digits of its GMT start time.
fn is_epoch_name(name: &str) -> bool {
    (6..=14).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_digit())
}

/// A sort key that orders `YYMMDDHHMM` and `YYYYMMDDHHMM[SS]` names in time.
fn epoch_key(name: &str) -> String {
    let full = if name.len() == 10 {
        let century = if name < "70" { "20" } else { "19" };
        format!("{century}{name}")
    } else {
        name.to_owned()
    };
    format!("{full:0<14}")
}

/// The file opened once, if it is a DCPI profile by its first bytes.
fn open_profile(path: &Path) -> Option<Input> {
    Input::open(path, None)
        .ok()
        .filter(|input| super::detect(input.head(), input.len()))
}

fn walk(dir: &Path, depth: usize, out: &mut Walk, visit: &mut Visit<'_>) -> Result<()> {
    for (path, kind) in sorted_entries(dir)? {
        // Symbolic links to directories are not followed (no cycles).
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, out, visit)?;
            }
        } else if path.is_file() {
            match open_profile(&path) {
                Some(input) => {
                    out.files += 1;
                    visit(&input)?;
                }
                None => out.skipped += 1,
            }
        }
    }
    Ok(())
}

/// Hands every profile file of the database at `root` for the chosen epochs
/// to `visit`, each opened once.
pub fn for_each_profile(root: &Path, epoch: &EpochSelect, visit: &mut Visit<'_>) -> Result<Walk> {
    let epochs: Vec<PathBuf> = sorted_entries(root)?
        .into_iter()
        .filter(|(p, kind)| {
            kind.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_epoch_name)
        })
        .map(|(p, _)| p)
        .collect();
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let start = match epoch {
        EpochSelect::All => root.to_path_buf(),
        EpochSelect::Latest => match epochs.iter().max_by_key(|p| epoch_key(&name_of(p))) {
            Some(latest) => latest.clone(),
            None => root.to_path_buf(),
        },
        EpochSelect::Named(wanted) => match epochs.iter().find(|p| name_of(p) == *wanted) {
            Some(found) => found.clone(),
            None => {
                let known: Vec<String> = epochs.iter().map(|p| name_of(p)).collect();
                return Err(Error::Usage(format!(
                    "{}: no epoch {wanted}; the database has: {}",
                    root.display(),
                    if known.is_empty() {
                        "no epoch directories".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        },
    };
    let mut out = Walk::default();
    walk(&start, 0, &mut out, visit)?;
    if out.files == 0 {
        return Err(Error::unsupported(
            &start,
            "no DCPI profile files in this directory (files are recognized by their header, not their name)",
        ));
    }
    Ok(out)
}

/// Whether a directory input is a profile database (or one epoch, or one
/// host, of one) by its layout (§3): its profiles, all DCPI, lie below
/// epoch directories (`<epoch>/<host>/…`), or the directory is itself an
/// epoch directory or a host directory in one.
pub fn is_database_layout(root: &Path, survey: &Survey) -> bool {
    let epoch = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .is_some_and(is_epoch_name)
    };
    let part =
        epoch(Some(root)) || epoch(root.canonicalize().ok().as_deref().and_then(Path::parent));
    let below_epoch = |rel: &Path| {
        let mut parts = rel.components();
        let first = parts.next().and_then(|c| c.as_os_str().to_str());
        first.is_some_and(is_epoch_name) && parts.next().is_some()
    };
    !survey.profiles.is_empty()
        && survey
            .profiles
            .iter()
            .all(|(format, rel)| *format == Format::Dcpi && (part || below_epoch(rel)))
}

/// A profile database proper: epoch directories directly below `root`, and
/// profiles somewhere below. (A tree of archived files that merely holds a
/// database further down is not one.)
pub fn is_database(root: &Path) -> bool {
    let has_epoch = sorted_entries(root).is_ok_and(|entries| {
        entries.iter().any(|(path, kind)| {
            kind.is_dir()
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_epoch_name)
        })
    });
    has_epoch && holds_profiles(root)
}

/// Does the directory (a few levels deep) hold a DCPI profile? Bounded
/// (500 entries, 4 levels), as archive migration asks it of every
/// directory.
pub fn holds_profiles(root: &Path) -> bool {
    fn look(dir: &Path, depth: usize, budget: &mut usize) -> bool {
        let Ok(entries) = sorted_entries(dir) else {
            return false;
        };
        for (path, kind) in entries {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            if kind.is_dir() {
                if depth < 4 && look(&path, depth + 1, budget) {
                    return true;
                }
            } else if path.is_file() && open_profile(&path).is_some() {
                return true;
            }
        }
        false
    }
    let mut budget = 500;
    look(root, 0, &mut budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_names_order_in_time_across_widths() {
        assert!(epoch_key("9912312359") < epoch_key("200001010000"));
        assert!(epoch_key("0001010000") > epoch_key("9912312359"));
        assert!(epoch_key("200212042334") < epoch_key("20021204233401"));
    }
}
