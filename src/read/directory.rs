//! What a directory given as an input is: one profile only by the layout of
//! a format that takes directories (a DCPI database, docs/formats/dcpi.md
//! §3: epoch directories holding profile files; an APS capture,
//! docs/formats/aps.md §7: `sample_cpu_<N>_…` files), with no profile of
//! another kind or place beside. Anything else (a tree of archived
//! profiles, several databases, a mix) is refused with what it holds.
//!
//! The survey walks the tree once (sorted, at most [`MAX_DEPTH`] levels and
//! [`MAX_ENTRIES`] entries, symbolic links to directories not followed) and
//! tells each file's format from its first bytes (a gzip-compressed file is
//! decompressed to tell); it keeps the format and relative path of each
//! profile found.

use std::path::{Path, PathBuf};

use super::input::{Input, DETECT_BYTES};
use super::options::Format;
use crate::error::Error;

/// How deep the survey goes below the directory.
const MAX_DEPTH: usize = 16;

/// How many entries the survey looks at, at most.
const MAX_ENTRIES: usize = 100_000;

/// How many paths of each kind a refusal shows.
const SHOWN: usize = 3;

/// The profiles found in a directory: each one's format and path relative
/// to the directory, in sorted walk order.
#[derive(Debug, Default)]
pub(crate) struct Survey {
    /// (format, relative path) of every profile file found.
    pub profiles: Vec<(Format, PathBuf)>,
    /// Files of no known format (logs, notes, maps).
    pub other_files: usize,
    /// True when the walk stopped at [`MAX_ENTRIES`] or [`MAX_DEPTH`].
    pub truncated: bool,
}

impl Survey {
    /// Surveys the tree below `root`.
    pub fn of(root: &Path) -> Survey {
        let mut survey = Survey::default();
        let mut budget = MAX_ENTRIES;
        survey.walk(root, Path::new(""), 0, &mut budget);
        survey
    }

    fn walk(&mut self, dir: &Path, rel: &Path, depth: usize, budget: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries
            .flatten()
            .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            if *budget == 0 {
                self.truncated = true;
                return;
            }
            *budget -= 1;
            let (path, rel) = (dir.join(&name), rel.join(&name));
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    self.walk(&path, &rel, depth + 1, budget);
                } else {
                    self.truncated = true;
                }
            } else if path.is_file() {
                match format_of_file(&path) {
                    Some(format) => self.profiles.push((format, rel)),
                    None => self.other_files += 1,
                }
            }
        }
    }

    /// What the survey found, for a refusal: counts by kind and a few
    /// paths of each.
    pub fn found(&self) -> String {
        let mut kinds: Vec<(Format, Vec<&Path>)> = Vec::new();
        for (format, path) in &self.profiles {
            match kinds.iter_mut().find(|(f, _)| f == format) {
                Some((_, paths)) => paths.push(path),
                None => kinds.push((*format, vec![path])),
            }
        }
        let mut parts: Vec<String> = kinds
            .iter()
            .map(|(format, paths)| {
                let shown = shown_paths(paths);
                let more = if paths.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                };
                format!(
                    "{} {} file{} ({}{more})",
                    paths.len(),
                    format.name(),
                    if paths.len() == 1 { "" } else { "s" },
                    shown.join(", ")
                )
            })
            .collect();
        if self.other_files > 0 {
            let s = if self.other_files == 1 { "" } else { "s" };
            parts.push(format!("{} other file{s}", self.other_files));
        }
        if parts.is_empty() {
            parts.push("no profile files".into());
        }
        let cut = if self.truncated {
            format!(" (in the first {MAX_ENTRIES} entries, {MAX_DEPTH} levels deep)")
        } else {
            String::new()
        };
        format!("{}{cut}", parts.join(", "))
    }
}

/// A few of `paths` to show, one from each top-level entry first (so that
/// the places they lie in show), then the next ones.
fn shown_paths(paths: &[&Path]) -> Vec<String> {
    let top = |p: &Path| p.components().next().map(|c| c.as_os_str().to_owned());
    let mut shown: Vec<&Path> = Vec::new();
    for p in paths {
        if shown.len() < SHOWN && !shown.iter().any(|s| top(s) == top(p)) {
            shown.push(p);
        }
    }
    for p in paths {
        if shown.len() < SHOWN && !shown.contains(p) {
            shown.push(p);
        }
    }
    shown.iter().map(|p| p.display().to_string()).collect()
}

/// The format of a file from its first bytes, as [`super::detect_bytes`]
/// tells it; a gzip-compressed file is opened (decompressed) to tell.
fn format_of_file(path: &Path) -> Option<Format> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut head = Vec::with_capacity(DETECT_BYTES);
    file.by_ref()
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let input = Input::open(path, None).ok()?;
        return super::detect_bytes(input.head(), input.len());
    }
    super::detect_bytes(&head, len)
}

/// The error for a directory input that is no format's layout.
pub(crate) fn not_one_profile(root: &Path, survey: &Survey) -> Error {
    Error::unsupported(
        root,
        format!(
            "this directory is not one profile: a DCPI database holds epoch directories (`YYYYMMDDhhmm`, with host directories and DCPI profile files below them) and no other profiles, an APS capture holds `sample_cpu_<N>_…` files and no other profiles; this one holds {}. Use `profconv convert DIR -o OUT_DIR --to FORMAT` to convert each profile of a tree, or give the files of one profile",
            survey.found()
        ),
    )
}
