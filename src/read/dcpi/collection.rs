//! What the DCPI reader knows about its inputs: the files, images, events,
//! epochs, header facts and warnings. Everything here is O(files + images +
//! events), never O(addresses): counts live elsewhere, one image at a time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::header::HeaderLine;

/// What kind of input a file was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileKind {
    /// A binary profile, with its `version` line (`None`: the variant without one).
    Binary(Option<String>),
    Dcpicat,
}

/// One event of one input file.
#[derive(Debug, Clone)]
pub(super) struct FileEvent {
    pub name: String,
    pub period: u64,
    /// Samples the file holds (known once its counts are read).
    pub samples: u64,
    /// The total the file declares (dcpicat `event W …`).
    pub declared: Option<u64>,
}

/// Where a file's bytes come from when its counts are read.
#[derive(Debug, Clone)]
pub(super) enum Origin {
    /// One of the inputs (by index), already open.
    Input(usize),
    /// A file of a database walk, opened again by its path.
    Walked,
}

/// One input file: what `info` says about it, and where to read its counts.
#[derive(Debug, Clone)]
pub(super) struct FileSummary {
    pub path: PathBuf,
    pub origin: Origin,
    pub kind: FileKind,
    pub image: String,
    pub epoch: Option<String>,
    pub events: Vec<FileEvent>,
    pub chunks: u64,
    /// Addresses with samples (binary), rows (dcpicat).
    pub addresses: u64,
    /// The header lines; kept for the first file only (`info` shows the
    /// header of a lone file), so that thousands of files cost little.
    pub header: Vec<HeaderLine>,
    /// The image's column of each of the file's events.
    pub columns: Vec<usize>,
    /// Where the binary section starts (binary profiles).
    pub binary_start: usize,
    pub tstart: u64,
    pub tsize: Option<u64>,
}

/// Counts of one event (at one sampling period) in one image.
#[derive(Debug, Clone)]
pub(super) struct Column {
    pub event: usize,
    pub period: u64,
    /// Sum of the column's counts (saturating), once read.
    pub total: u64,
}

/// One image (program or shared library), and one label if labels are in use.
#[derive(Debug, Clone)]
pub(super) struct Image {
    pub id: String,
    pub label: Option<String>,
    /// The name outputs show: the first `path`, else `name`, else the id.
    pub name: String,
    pub paths: Vec<String>,
    pub tstart: u64,
    pub tsize: Option<u64>,
    /// One past the highest sampled address (once its counts are read).
    pub end: u64,
    /// Its files, by index into [`Collection::files`], in reading order.
    pub files: Vec<usize>,
    pub columns: Vec<Column>,
}

impl Image {
    /// The end of the image's mapping when its samples end at `end`: its
    /// text (`tstart + tsize`), or further if samples lie beyond.
    pub fn limit(&self, end: u64) -> u64 {
        self.tsize
            .map_or(end, |size| self.tstart.saturating_add(size).max(end))
    }
}

/// Key/value facts in first-seen order, each with its distinct values.
#[derive(Debug, Clone, Default)]
pub(super) struct Facts(pub Vec<(String, Vec<String>)>);

impl Facts {
    pub fn add(&mut self, key: &str, value: &str) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, values)) => {
                if !values.iter().any(|v| v == value) {
                    values.push(value.to_owned());
                }
            }
            None => self.0.push((key.to_owned(), vec![value.to_owned()])),
        }
    }
}

/// Where in the reading a warning was met: the file (by reading order),
/// the pass over it (0: header, 1: counts), and a running number. Files'
/// headers are read before their counts, so warnings are ordered by this
/// key rather than by when they were met: the order reading each file
/// whole, one after the other, would give.
pub(super) type At = (usize, u8, u64);

/// Warnings, each said once with the first file it concerns and a count.
#[derive(Debug, Clone, Default)]
pub(super) struct Warnings {
    /// (what, first file, how many, where first met).
    entries: Vec<(String, PathBuf, usize, At)>,
    index: HashMap<String, usize>,
    /// Where the next warnings are met (file, pass), and the running number.
    here: (usize, u8),
    seq: u64,
}

impl Warnings {
    /// Warnings added from now on were met in file `file`, pass `pass`.
    pub fn at(&mut self, file: usize, pass: u8) {
        self.here = (file, pass);
    }

    pub fn add(&mut self, file: &Path, what: String) {
        self.seq += 1;
        let at = (self.here.0, self.here.1, self.seq);
        match self.index.get(&what) {
            Some(&i) => {
                let entry = &mut self.entries[i];
                entry.2 += 1;
                if at < entry.3 {
                    entry.1 = file.to_path_buf();
                    entry.3 = at;
                }
            }
            None => {
                self.index.insert(what.clone(), self.entries.len());
                self.entries.push((what, file.to_path_buf(), 1, at));
            }
        }
    }

    /// One line per warning, in the order they would be met reading each
    /// file whole in turn.
    pub fn lines(&self) -> Vec<String> {
        let mut order: Vec<&(String, PathBuf, usize, At)> = self.entries.iter().collect();
        order.sort_by_key(|e| e.3);
        order
            .into_iter()
            .map(|(what, file, n, _)| match n {
                1 => format!("{}: {what}", file.display()),
                n => format!("{} and {} more files: {what}", file.display(), n - 1),
            })
            .collect()
    }
}

/// Everything read from the inputs' headers, and the totals their counts add.
#[derive(Debug, Default)]
pub(super) struct Collection {
    pub insn: u32,
    /// Event names in first-seen order.
    pub events: Vec<String>,
    pub event_index: HashMap<String, usize>,
    pub images: Vec<Image>,
    pub image_index: HashMap<(String, Option<String>), usize>,
    pub files: Vec<FileSummary>,
    /// Skipped (not a profile) files met in database walks.
    pub skipped: usize,
    /// epoch, platform, cpuspeed…, and unknown header lines.
    pub facts: Facts,
    pub epochs: BTreeMap<String, usize>,
    pub warnings: Warnings,
}

/// The facts of one file that place it in an image.
pub(super) struct ImageFacts<'a> {
    pub id: &'a str,
    pub label: Option<&'a str>,
    pub name: Option<&'a str>,
    pub paths: &'a [String],
    pub tstart: u64,
    pub tsize: Option<u64>,
}

impl Collection {
    pub fn event(&mut self, name: &str) -> usize {
        if let Some(&i) = self.event_index.get(name) {
            return i;
        }
        self.events.push(name.to_owned());
        self.event_index
            .insert(name.to_owned(), self.events.len() - 1);
        self.events.len() - 1
    }

    /// The image with this id and label, created from the first file's
    /// facts; `file` (an index into `files`, about to be pushed) joins it.
    pub fn image(&mut self, path: &Path, file: usize, f: &ImageFacts<'_>) -> usize {
        let key = (f.id.to_ascii_lowercase(), f.label.map(str::to_owned));
        if let Some(&i) = self.image_index.get(&key) {
            let image = &mut self.images[i];
            image.files.push(file);
            if image.tstart != f.tstart {
                let what = format!(
                    "image {}: tstart {:#x} differs from {:#x} in an earlier file of the same image",
                    f.id, f.tstart, image.tstart
                );
                image.tstart = image.tstart.min(f.tstart);
                self.warnings.add(path, what);
            }
            for p in f.paths {
                if !image.paths.contains(p) {
                    image.paths.push(p.clone());
                }
            }
            if let Some(size) = f.tsize {
                image.tsize = Some(image.tsize.map_or(size, |s| s.max(size)));
            }
            return i;
        }
        let display = f
            .paths
            .first()
            .map(String::as_str)
            .or(f.name)
            .unwrap_or(f.id);
        self.images.push(Image {
            id: f.id.to_owned(),
            label: f.label.map(str::to_owned),
            name: display.to_owned(),
            paths: f.paths.to_vec(),
            tstart: f.tstart,
            tsize: f.tsize,
            end: f.tstart,
            files: vec![file],
            columns: Vec::new(),
        });
        self.image_index.insert(key, self.images.len() - 1);
        self.images.len() - 1
    }

    /// The image's column of `event` at `period`, created when new.
    pub fn column(&mut self, image: usize, event: usize, period: u64) -> usize {
        let columns = &mut self.images[image].columns;
        match columns
            .iter()
            .position(|c| c.event == event && c.period == period)
        {
            Some(i) => i,
            None => {
                columns.push(Column {
                    event,
                    period,
                    total: 0,
                });
                columns.len() - 1
            }
        }
    }

    pub fn note_epoch(&mut self, epoch: Option<&str>) {
        *self
            .epochs
            .entry(epoch.unwrap_or("(none)").to_owned())
            .or_insert(0) += 1;
    }
}
