//! The walk of an archive into units, one folder at a time in name order.
//!
//! A folder is listed (its entries sorted by name, each classified: a file,
//! a folder that is one profile, an APS capture folder, a folder to walk
//! into, or something that cannot be converted), the output names of the
//! units directly in it are decided, and then its units and subfolders are
//! visited in name order. So units come in order of their relative paths,
//! component by component, byte by byte: the report's order
//! ([`super::walk_order`]).
//!
//! Output names are decided per folder, before any of its units is
//! converted: outputs only ever collide between siblings. An input keeps
//! its `.gz` in its outputs' names when a sibling input has the shorter
//! name (`gmon.out` beside `gmon.out.gz`); two units with one output, or an
//! output named like a sibling folder that holds units (`x` → `x.folded`
//! beside a folder `x.folded/`), fail both units: the one here, and the
//! first unit in walk order below that folder, which is failed when the
//! walk reaches it. The names alone decide, so every run and every shard
//! agree.
//!
//! Memory: the listing of each folder on the way down from the archive (a
//! name and a few words per entry), and the units failed ahead of the walk
//! by a collision; never the whole tree.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::{BinaryFingerprint, Status};
use crate::error::{Error, Result};
use crate::read::{self, PathTest};
use crate::write::OutputFormat;

/// How deep the walk goes.
pub(crate) const MAX_DEPTH: usize = 64;

/// A folder of the archive, shared by the units directly in it.
pub(crate) struct Folder {
    /// Its path.
    pub path: PathBuf,
    /// Its path relative to the archive (empty for the archive itself).
    pub rel: PathBuf,
    /// The executable beside its gmon.out files (`a.out`, else the only
    /// one) with its fingerprint: looked up once, when a unit first needs it.
    pub neighbour: OnceLock<Option<(PathBuf, BinaryFingerprint)>>,
}

/// One input of the archive: a file, or a folder that is one profile.
pub(crate) struct Unit {
    /// The unit's path (a file, or a folder that is one profile).
    pub path: PathBuf,
    /// Path relative to the archive root, with `/` separators (lossy for
    /// names that are not UTF-8: for display and globs only).
    pub rel: String,
    /// The exact relative path when `rel` is lossy (a name that is not
    /// UTF-8), escaped as [`super::Record::path_bytes`] says; `None` when
    /// `rel` is exact.
    pub rel_bytes: Option<String>,
    /// The outputs' path relative to the output directory, less the
    /// format's extension: the input's own relative path (not lossy), less
    /// a `.gz` unless a sibling input has that name.
    pub out_stem: PathBuf,
    /// True for a folder unit (a DCPI database, an APS capture).
    pub is_dir: bool,
    /// Input bytes, for the progress bar.
    pub bytes: u64,
    /// Why the entry is listed but not converted (a FIFO, a folder too deep
    /// or unreadable, a symbolic link, a collision of outputs), with the
    /// status to report.
    pub problem: Option<(Status, String)>,
    /// The folder the unit lies in.
    pub folder: Arc<Folder>,
}

/// What a walk hands on, in walk order.
pub(crate) trait Visit {
    /// A folder's units, directly in it, are about to be visited
    /// ([`Listing::units`]), their output names decided.
    fn folder(&mut self, listing: &Listing);
    /// The next unit.
    fn unit(&mut self, unit: Unit);
    /// Every unit of the folder and below it has been visited: the walk
    /// goes back to the folder holding it. Folders are entered
    /// ([`Visit::folder`]) and left like brackets, and a unit is visited
    /// between its own folder's two.
    fn left(&mut self, _listing: &Listing) {}
}

/// What a folder's entry is to the walk.
enum Kind {
    /// A file, or a folder that is one profile (`dir`): one unit.
    Unit { dir: bool, bytes: u64 },
    /// An APS capture folder: one unit of its sample files, and walked for
    /// what else it holds.
    Capture { bytes: u64, is_member: PathTest },
    /// A folder walked for the units below it.
    Folder,
    /// Listed and reported, not converted: the status and why.
    Problem(Box<(bool, Status, String)>),
}

impl Kind {
    fn problem(dir: bool, status: Status, why: impl Into<String>) -> Kind {
        Kind::Problem(Box::new((dir, status, why.into())))
    }

    /// Whether the entry is a unit that can have outputs.
    fn has_outputs(&self) -> bool {
        matches!(self, Kind::Unit { .. } | Kind::Capture { .. })
    }
}

/// One entry of a folder.
struct Entry {
    name: OsString,
    kind: Kind,
    /// Its outputs' names drop the name's `.gz`.
    strip_gz: bool,
}

/// A folder's entries, sorted by name, with its units' outputs decided.
pub(crate) struct Listing {
    folder: Arc<Folder>,
    root: PathBuf,
    entries: Vec<Entry>,
    /// Entries that fail for their outputs colliding, with why.
    clashes: HashMap<usize, String>,
}

impl Listing {
    /// The folder listed.
    pub fn folder(&self) -> &Folder {
        &self.folder
    }

    /// The unit of entry `i` (not a plain folder).
    fn unit(&self, i: usize) -> Unit {
        let entry = &self.entries[i];
        let path = self.folder.path.join(&entry.name);
        let rel_path = self.folder.rel.join(&entry.name);
        let out_stem = match entry.strip_gz {
            true => self.folder.rel.join(strip_gz(&entry.name)),
            false => rel_path.clone(),
        };
        let (is_dir, bytes, problem) = match &entry.kind {
            Kind::Unit { dir, bytes } => (*dir, *bytes, None),
            Kind::Capture { bytes, .. } => (true, *bytes, None),
            Kind::Folder => (true, 0, None),
            Kind::Problem(p) => (p.0, 0, Some((p.1, p.2.clone()))),
        };
        let clash = self
            .clashes
            .get(&i)
            .map(|why| (Status::Failed, why.clone()));
        Unit {
            rel: relative(&self.root, &path),
            rel_bytes: escaped_if_not_utf8(&rel_path),
            out_stem,
            path,
            is_dir,
            bytes,
            problem: problem.or(clash),
            folder: self.folder.clone(),
        }
    }

    /// The unit of the folder entry `i`, which could not be read.
    fn unreadable(&self, i: usize, e: &std::io::Error) -> Unit {
        Unit {
            problem: Some((Status::Failed, format!("cannot read the folder: {e}"))),
            ..self.unit(i)
        }
    }

    fn position(&self, name: &OsStr) -> Option<usize> {
        self.entries
            .binary_search_by(|e| e.name.as_os_str().cmp(name))
            .ok()
    }
}

/// A walk of one archive.
pub(crate) struct Walk<'a> {
    root: &'a Path,
    /// The output folder, canonical, when it lies inside the archive: left out.
    exclude: Option<PathBuf>,
    formats: &'a [OutputFormat],
    /// Units not reached yet that fail for colliding with an output of an
    /// earlier folder, by path, with why.
    doomed: HashMap<PathBuf, String>,
}

impl<'a> Walk<'a> {
    /// A walk of `root` for outputs in `formats`, leaving out the folder
    /// `exclude` (the output folder); refused when `root` is not a folder
    /// that can be read.
    pub fn new(
        root: &'a Path,
        exclude: Option<&Path>,
        formats: &'a [OutputFormat],
    ) -> Result<Self> {
        let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
        if !meta.is_dir() {
            return Err(Error::Usage(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        std::fs::read_dir(root).map_err(|e| Error::io(root, e))?;
        Ok(Walk {
            root,
            exclude: exclude.and_then(|p| p.canonicalize().ok()),
            formats,
            doomed: HashMap::new(),
        })
    }

    /// Walks the archive, handing every unit to `visit` in walk order.
    pub fn run(mut self, visit: &mut dyn Visit) {
        let folder = Arc::new(Folder {
            path: self.root.to_path_buf(),
            rel: PathBuf::new(),
            neighbour: OnceLock::new(),
        });
        // Read a moment ago by `new`; unreadable now, there is nothing to walk.
        if let Ok(listing) = self.list(folder, 0, None) {
            self.visit(&listing, 0, visit);
        }
    }

    /// Visits a folder's units and, in their places, its subfolders.
    fn visit(&mut self, listing: &Listing, depth: usize, visit: &mut dyn Visit) {
        visit.folder(listing);
        for (i, entry) in listing.entries.iter().enumerate() {
            let members = match &entry.kind {
                Kind::Folder => None,
                Kind::Capture { is_member, .. } => {
                    visit.unit(listing.unit(i));
                    Some(*is_member)
                }
                _ => {
                    visit.unit(listing.unit(i));
                    continue;
                }
            };
            let folder = Arc::new(Folder {
                path: listing.folder.path.join(&entry.name),
                rel: listing.folder.rel.join(&entry.name),
                neighbour: OnceLock::new(),
            });
            match self.list(folder, depth + 1, members) {
                Ok(inner) => self.visit(&inner, depth + 1, visit),
                Err(e) => visit.unit(listing.unreadable(i, &e)),
            }
        }
        visit.left(listing);
    }

    /// Lists the folder at `depth`, less the sample files of a capture
    /// (`members`), with its outputs decided.
    fn list(
        &mut self,
        folder: Arc<Folder>,
        depth: usize,
        members: Option<PathTest>,
    ) -> std::io::Result<Listing> {
        let entries = self.entries(&folder.path, depth, members)?;
        let mut listing = Listing {
            folder,
            root: self.root.to_path_buf(),
            entries,
            clashes: HashMap::new(),
        };
        self.take_doomed(&mut listing);
        keep_gz_where_names_collide(&mut listing.entries);
        self.fail_colliding_outputs(&mut listing, depth);
        Ok(listing)
    }

    /// The entries of the folder `dir` at `depth`, classified, in name order.
    fn entries(
        &self,
        dir: &Path,
        depth: usize,
        members: Option<PathTest>,
    ) -> std::io::Result<Vec<Entry>> {
        let mut names: Vec<OsString> = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .filter_map(|name| {
                let kind = self.classify(&dir.join(&name), depth, members)?;
                Some(Entry {
                    name,
                    kind,
                    strip_gz: false,
                })
            })
            .collect())
    }

    /// What the entry at `path`, in a folder at `depth`, is to the walk;
    /// `None` for what the walk leaves out (the output folder, a capture's
    /// sample files).
    fn classify(&self, path: &Path, depth: usize, members: Option<PathTest>) -> Option<Kind> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => return Some(Kind::problem(false, Status::Failed, e.to_string())),
        };
        let kind = meta.file_type();
        Some(if kind.is_symlink() {
            // Not followed: links can loop or leave the archive.
            Kind::problem(false, Status::Skipped, "symbolic link, not followed")
        } else if kind.is_dir() {
            let excluded = (self.exclude.as_deref())
                .is_some_and(|x| path.canonicalize().is_ok_and(|p| p == x));
            if excluded {
                return None;
            }
            classify_folder(path, depth)
        } else if kind.is_file() {
            if members.is_some_and(|is_member| is_member(path)) {
                // Read with the capture, its unit.
                return None;
            }
            Kind::Unit {
                dir: false,
                bytes: meta.len(),
            }
        } else {
            // Opening a FIFO would wait for a writer; devices are no profiles.
            Kind::problem(
                false,
                Status::Skipped,
                "not a regular file (FIFO, socket or device)",
            )
        })
    }

    /// Fails the units of `listing` that an earlier folder's output
    /// collided with.
    fn take_doomed(&mut self, listing: &mut Listing) {
        if self.doomed.is_empty() {
            return;
        }
        for (i, entry) in listing.entries.iter().enumerate() {
            let path = listing.folder.path.join(&entry.name);
            if let Some(why) = self.doomed.remove(&path) {
                listing.clashes.insert(i, why);
            }
        }
    }

    /// Fails the units of `listing` whose outputs collide: two units with
    /// one output (both fail), and an output named like a sibling folder
    /// that holds units (the unit fails, and the first unit below that
    /// folder when the walk gets there). A unit keeps the first reason.
    fn fail_colliding_outputs(&mut self, listing: &mut Listing, depth: usize) {
        // Every output once, sorted by name: equal names side by side.
        let mut outputs: Vec<(OsString, usize)> = Vec::new();
        for (i, entry) in listing.entries.iter().enumerate() {
            if entry.kind.has_outputs() {
                let stem = match entry.strip_gz {
                    true => strip_gz(&entry.name),
                    false => &entry.name,
                };
                outputs.extend(self.formats.iter().map(|f| (output_name(stem, *f), i)));
            }
        }
        outputs.sort();
        let mut clashes: Vec<(usize, String)> = Vec::new();
        for (k, (out, i)) in outputs.iter().enumerate() {
            let next = outputs.get(k + 1);
            match next {
                Some((name, j)) if name == out => {
                    if j != i {
                        let why = self.clash(listing, out, *i, "an output", &listing.unit(*j).rel);
                        clashes.push((*i, why.clone()));
                        clashes.push((*j, why));
                    }
                }
                // The last unit with this output: is it also a folder of outputs?
                _ => {
                    let Some(folder) = listing.position(out) else {
                        continue;
                    };
                    let members = match listing.entries[folder].kind {
                        Kind::Capture { is_member, .. } => Some(is_member),
                        Kind::Folder => None,
                        _ => continue,
                    };
                    let below = listing.folder.path.join(out);
                    if let Some(first) = self.first_unit_below(&below, depth + 1, members) {
                        let other = relative(self.root, &first);
                        let why = self.clash(listing, out, *i, "a folder of the outputs", &other);
                        clashes.push((*i, why.clone()));
                        self.doomed.entry(first).or_insert(why);
                    }
                }
            }
        }
        for (i, why) in clashes {
            listing.clashes.entry(i).or_insert(why);
        }
    }

    /// Why the unit of entry `i`, whose output `out` is also `what` of
    /// the unit at `other` (relative path), fails.
    fn clash(&self, listing: &Listing, out: &OsStr, i: usize, what: &str, other: &str) -> String {
        let unit = listing.unit(i);
        format!(
            "outputs collide: {}, an output of {}, is also {what} of {other}; neither is converted: rename one of them",
            listing.folder.rel.join(out).display(),
            unit.rel,
        )
    }

    /// The first unit in walk order that can have outputs, below the
    /// folder `dir` at `depth` (less the capture's `members`).
    fn first_unit_below(
        &self,
        dir: &Path,
        depth: usize,
        members: Option<PathTest>,
    ) -> Option<PathBuf> {
        let entries = self.entries(dir, depth, members).ok()?;
        entries.into_iter().find_map(|entry| {
            let path = dir.join(&entry.name);
            match entry.kind {
                _ if entry.kind.has_outputs() => Some(path),
                Kind::Folder => self.first_unit_below(&path, depth + 1, None),
                _ => None,
            }
        })
    }
}

/// What a folder is, in a folder at `depth`: one profile (a DCPI
/// database), too deep, a capture, unreadable, or a folder to walk.
fn classify_folder(path: &Path, depth: usize) -> Kind {
    if read::is_whole_profile_dir(path) {
        Kind::Unit {
            dir: true,
            bytes: dir_bytes(path, 0),
        }
    } else if depth >= MAX_DEPTH {
        Kind::problem(
            true,
            Status::Skipped,
            format!("folder deeper than {MAX_DEPTH} levels, not walked"),
        )
    } else if let Some(is_member) = read::capture_dir(path) {
        Kind::Capture {
            bytes: member_bytes(path, is_member),
            is_member,
        }
    } else if let Err(e) = std::fs::read_dir(path) {
        Kind::problem(true, Status::Failed, format!("cannot read the folder: {e}"))
    } else {
        Kind::Folder
    }
}

/// The bytes of a capture's sample files (its regular files `is_member`
/// takes), read together as its unit.
fn member_bytes(dir: &Path, is_member: PathTest) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| is_member(&e.path()))
        .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

fn dir_bytes(dir: &Path, depth: usize) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => dir_bytes(&e.path(), depth + 1),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Drops a `.gz` from the output names of compressed inputs, except where
/// the shorter name is a sibling unit's (`gmon.out` beside `gmon.out.gz`):
/// every input gets outputs of its own.
fn keep_gz_where_names_collide(entries: &mut [Entry]) {
    let gz = |name: &OsStr| strip_gz(name).len() < name.len();
    if !entries.iter().any(|e| gz(&e.name)) {
        return;
    }
    let units: std::collections::HashSet<&OsStr> = entries
        .iter()
        .filter(|e| !matches!(e.kind, Kind::Folder))
        .map(|e| e.name.as_os_str())
        .collect();
    let strip: Vec<bool> = entries
        .iter()
        .map(|e| gz(&e.name) && !units.contains(strip_gz(&e.name)))
        .collect();
    for (entry, strip) in entries.iter_mut().zip(strip) {
        entry.strip_gz = strip;
    }
}

/// `name.gz` → `name` for any file name (not only UTF-8 ones); `name`
/// itself when it has no `.gz` or nothing would be left but `.` or `..`.
pub(crate) fn strip_gz(name: &OsStr) -> &OsStr {
    #[cfg(unix)]
    let short = {
        use std::os::unix::ffi::OsStrExt;
        name.as_bytes().strip_suffix(b".gz").map(OsStr::from_bytes)
    };
    #[cfg(not(unix))]
    let short = name
        .to_str()
        .and_then(|n| n.strip_suffix(".gz"))
        .map(OsStr::new);
    match short {
        Some(s) if !s.is_empty() && s != "." && s != ".." => s,
        _ => name,
    }
}

/// The output file name of `stem` in `format`: `stem.EXT`.
pub(crate) fn output_name(stem: &OsStr, format: OutputFormat) -> OsString {
    let mut name = stem.to_os_string();
    name.push(".");
    name.push(format.extension());
    name
}

/// `path` written losslessly when it is not UTF-8: its UTF-8 runs as they
/// are (a backslash doubled), every other byte as `\xHH`. `None` for a UTF-8
/// path, which its plain text already names exactly.
pub(crate) fn escaped_if_not_utf8(path: &Path) -> Option<String> {
    use std::fmt::Write as _;
    let bytes = path.as_os_str().as_encoded_bytes();
    if std::str::from_utf8(bytes).is_ok() {
        return None;
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Some(out)
}

/// `path` relative to `root`, its components joined by `/` (lossy).
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The units a walk hands on, in order.
    #[derive(Default)]
    struct Seen(Vec<Unit>);

    impl Visit for Seen {
        fn folder(&mut self, _: &Listing) {}

        fn unit(&mut self, unit: Unit) {
            self.0.push(unit);
        }
    }

    /// The units of a folder holding the files `files` (relative paths).
    fn walk(files: &[&str], formats: &[OutputFormat]) -> Vec<Unit> {
        let dir = tempfile::tempdir().unwrap();
        for rel in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        let mut seen = Seen::default();
        Walk::new(dir.path(), None, formats).unwrap().run(&mut seen);
        seen.0
    }

    #[test]
    fn units_come_in_path_order_component_by_component() {
        let units = walk(&["b.gz", "a.x", "c/d/e", "a-1", "a/b"], &[]);
        let rels: Vec<&str> = units.iter().map(|u| u.rel.as_str()).collect();
        assert_eq!(rels, ["a/b", "a-1", "a.x", "b.gz", "c/d/e"]);
        assert!(units.iter().all(|u| u.problem.is_none() && u.bytes == 1));
    }

    #[test]
    fn outputs_keep_the_relative_path_and_drop_gz_unless_a_sibling_has_that_name() {
        let files = ["run1/gmon.out.gz", "run2/gmon.out", "run2/gmon.out.gz"];
        let units = walk(&files, &[OutputFormat::Pprof]);
        let stems: Vec<&Path> = units.iter().map(|u| u.out_stem.as_path()).collect();
        assert_eq!(
            stems,
            ["run1/gmon.out", "run2/gmon.out", "run2/gmon.out.gz"].map(Path::new)
        );
        let out = |format| super::super::output_path(Path::new("/o"), &units[0], format);
        assert_eq!(
            out(OutputFormat::Pprof),
            Path::new("/o/run1/gmon.out.pb.gz")
        );
        assert_eq!(
            out(OutputFormat::Speedscope),
            Path::new("/o/run1/gmon.out.speedscope.json")
        );
    }

    #[test]
    fn an_output_named_like_a_sibling_folder_fails_its_unit_and_the_first_below() {
        let files = ["x", "x.folded/y", "x.folded/z", "x.svg/w"];
        let units = walk(&files, &[OutputFormat::Folded]);
        let problems: Vec<(&str, bool)> = units
            .iter()
            .map(|u| (u.rel.as_str(), u.problem.is_some()))
            .collect();
        assert_eq!(
            problems,
            [
                ("x", true),
                ("x.folded/y", true),
                ("x.folded/z", false),
                ("x.svg/w", false)
            ]
        );
        let why = &units[0].problem.as_ref().unwrap().1;
        assert_eq!(why, &units[1].problem.as_ref().unwrap().1);
        assert!(
            why.starts_with(
                "outputs collide: x.folded, an output of x, is also a folder of the outputs of x.folded/y"
            ),
            "{why}"
        );
    }
}
