//! DCPI reader (docs/formats/dcpi.md): binary profile files of versions 0.06/0.07
//! and the older variant with no `version`/`tstart` lines, `dcpicat` text
//! dumps, and whole profile database directories.
//!
//! Every file is streamed chunk by chunk into per-image, per-event count
//! arrays (`counts::Counts`); the profile is built once at the end, with
//! one one-frame sample per sampled address.

mod binary;
mod counts;
mod database;
mod dcpicat;
mod header;
mod info;
mod symbols;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::info::Summary;
use super::input::Detection;
use super::input::{Input, DETECT_BYTES};
use super::options::ReadOptions;
use crate::error::{Error, Result};
use crate::profile::{GroupBy, Mapping, MappingId, Profile};

use counts::Counts;
use header::{parse_hex, parse_number, parse_version, HeaderLine};

/// Does this file look like a binary DCPI profile or a `dcpicat` dump?
pub fn detect(head: &[u8], _file_len: u64) -> bool {
    header::looks_like_header(head, head.len() >= DETECT_BYTES) || dcpicat::looks_like(head)
}

/// DCPI files have no magic number: their header lines are recognised.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Likely
    } else {
        Detection::No
    }
}

/// Does this directory hold DCPI profiles (a profile database)?
pub fn detect_dir(path: &Path) -> bool {
    database::holds_profiles(path)
}

/// A directory with epoch directories of profiles directly below it: one
/// database, converted as one unit in archive migration.
pub fn is_database(path: &Path) -> bool {
    database::is_database(path)
}

/// Reads DCPI profile files, dumps and databases into one profile.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let collection = collect(inputs, options)?;
    build_profile(&collection, options)
}

/// Describes DCPI inputs: files, images, events, epochs and warnings.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<Summary> {
    let collection = collect(inputs, options)?;
    Ok(info::describe(&collection))
}

/// The instruction size from the options (docs/formats/dcpi.md §2.3: 4 unless told).
fn insn_size(options: &ReadOptions) -> Result<u32> {
    match options.dcpi.insn_size.unwrap_or(4) {
        n @ 1..=64 => Ok(n),
        n => Err(Error::Usage(format!(
            "--dcpi-insn-size {n}: the instruction size is 1 to 64 bytes"
        ))),
    }
}

/// What kind of input a file was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileKind {
    /// A binary profile, with its `version` line (`None`: the variant without one).
    Binary(Option<String>),
    Dcpicat,
}

/// One event of one input file.
#[derive(Debug, Clone)]
struct FileEvent {
    name: String,
    period: u64,
    samples: u64,
    /// The total the file declares (dcpicat `event W …`).
    declared: Option<u64>,
}

/// What one input file held, for `info`.
#[derive(Debug, Clone)]
struct FileSummary {
    path: PathBuf,
    kind: FileKind,
    image: String,
    epoch: Option<String>,
    events: Vec<FileEvent>,
    chunks: u64,
    addresses: u64,
    header: Vec<HeaderLine>,
}

/// Counts of one event (at one sampling period) in one image.
#[derive(Debug, Clone)]
struct Column {
    event: usize,
    period: u64,
    counts: Counts,
}

/// One image (program or shared library), and one label if labels are in use.
#[derive(Debug, Clone)]
struct Image {
    id: String,
    label: Option<String>,
    /// The name outputs show: the first `path`, else `name`, else the id.
    name: String,
    paths: Vec<String>,
    tstart: u64,
    tsize: Option<u64>,
    /// One past the highest sampled address.
    end: u64,
    files: usize,
    columns: Vec<Column>,
}

/// Key/value facts in first-seen order, each with its distinct values.
#[derive(Debug, Clone, Default)]
struct Facts(Vec<(String, Vec<String>)>);

impl Facts {
    fn add(&mut self, key: &str, value: &str) {
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

/// Warnings, each said once with the first file it concerns and a count.
#[derive(Debug, Clone, Default)]
struct Warnings(Vec<(String, PathBuf, usize)>);

impl Warnings {
    fn add(&mut self, file: &Path, what: String) {
        match self.0.iter_mut().find(|(w, _, _)| *w == what) {
            Some((_, _, n)) => *n += 1,
            None => self.0.push((what, file.to_path_buf(), 1)),
        }
    }

    fn lines(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(what, file, n)| match n {
                1 => format!("{}: {what}", file.display()),
                n => format!("{} and {} more files: {what}", file.display(), n - 1),
            })
            .collect()
    }
}

/// Everything read from the inputs.
#[derive(Debug, Default)]
struct Collection {
    insn: u32,
    /// Event names in first-seen order.
    events: Vec<String>,
    images: Vec<Image>,
    image_index: HashMap<(String, Option<String>), usize>,
    files: Vec<FileSummary>,
    /// Skipped (not a profile) files met in database walks.
    skipped: usize,
    /// epoch, platform, cpuspeed…, and unknown header lines.
    facts: Facts,
    epochs: BTreeMap<String, usize>,
    warnings: Warnings,
}

impl Collection {
    fn event(&mut self, name: &str) -> usize {
        match self.events.iter().position(|e| e == name) {
            Some(i) => i,
            None => {
                self.events.push(name.to_owned());
                self.events.len() - 1
            }
        }
    }

    /// The image with this id and label, created from the first file's facts.
    #[allow(clippy::too_many_arguments)]
    fn image(
        &mut self,
        file: &Path,
        id: &str,
        label: Option<&str>,
        name: Option<&str>,
        paths: &[String],
        tstart: u64,
        tsize: Option<u64>,
    ) -> usize {
        let key = (id.to_ascii_lowercase(), label.map(str::to_owned));
        if let Some(&i) = self.image_index.get(&key) {
            let image = &mut self.images[i];
            image.files += 1;
            if image.tstart != tstart {
                let what = format!(
                    "image {id}: tstart {tstart:#x} differs from {:#x} in an earlier file of the same image",
                    image.tstart
                );
                image.tstart = image.tstart.min(tstart);
                self.warnings.add(file, what);
            }
            for p in paths {
                if !image.paths.contains(p) {
                    image.paths.push(p.clone());
                }
            }
            if let Some(size) = tsize {
                image.tsize = Some(image.tsize.map_or(size, |s| s.max(size)));
            }
            return i;
        }
        let display = paths
            .first()
            .map(String::as_str)
            .or(name)
            .unwrap_or(id)
            .to_owned();
        self.images.push(Image {
            id: id.to_owned(),
            label: label.map(str::to_owned),
            name: display,
            paths: paths.to_vec(),
            tstart,
            tsize,
            end: tstart,
            files: 1,
            columns: Vec::new(),
        });
        self.image_index.insert(key, self.images.len() - 1);
        self.images.len() - 1
    }

    fn column(&mut self, image: usize, event: usize, period: u64) -> &mut Counts {
        let insn = self.insn;
        let columns = &mut self.images[image].columns;
        let i = match columns
            .iter()
            .position(|c| c.event == event && c.period == period)
        {
            Some(i) => i,
            None => {
                columns.push(Column {
                    event,
                    period,
                    counts: Counts::new(insn),
                });
                columns.len() - 1
            }
        };
        &mut columns[i].counts
    }

    fn note_epoch(&mut self, epoch: Option<&str>) {
        *self
            .epochs
            .entry(epoch.unwrap_or("(none)").to_owned())
            .or_insert(0) += 1;
    }
}

/// The facts of a binary profile header that reading needs.
struct BinaryHeader {
    version: Option<String>,
    image: String,
    epoch: Option<String>,
    event: String,
    period: u64,
    tstart: Option<u64>,
    tsize: Option<u64>,
    paths: Vec<String>,
    name: Option<String>,
    label: Option<String>,
}

/// Interprets the header lines of a binary profile (docs/formats/dcpi.md §2.2, §6.2).
fn interpret_header(
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
        let bad = |what: &str| {
            Error::format(
                file,
                line.offset as u64,
                format!("{keyword} `{}`: {what}", line.value),
            )
        };
        match keyword {
            "path" => {
                paths.push(line.value.clone());
                continue;
            }
            "version" => {
                let (major, minor) = parse_version(&line.value)
                    .ok_or_else(|| bad("expected pdb-<major>.<minor>"))?;
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
                let n =
                    parse_number(&line.value).ok_or_else(|| bad("expected a decimal number"))?;
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
        if seen.contains_key(keyword) {
            warnings.add(
                file,
                format!("the `{keyword}` line appears more than once: the first one is used"),
            );
            continue;
        }
        seen.insert(keyword, line);
        match keyword {
            "version" | "image" | "event" | "period" | "tstart" | "tsize" | "name" | "label" => {}
            "epoch" | "platform" | "cpuspeed" | "cpuamask" | "cpuimplv" | "cpucount" => {
                local_facts.push((keyword.to_owned(), line.value.clone()))
            }
            // Unknown lines must be preserved (§2.2).
            _ => local_facts.push((keyword.to_owned(), line.value.clone())),
        }
    }
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
    for (k, v) in &local_facts {
        facts.add(k, v);
    }
    Ok(BinaryHeader {
        version,
        image,
        epoch: seen.get("epoch").map(|l| l.value.clone()),
        event,
        period,
        tstart,
        tsize: seen.get("tsize").and_then(|l| parse_number(&l.value)),
        paths,
        name: seen.get("name").map(|l| l.value.clone()),
        label: seen.get("label").map(|l| l.value.clone()),
    })
}

/// Reads every input (files, and the profile files of database directories).
fn collect(inputs: &[Input], options: &ReadOptions) -> Result<Collection> {
    let mut collection = Collection {
        insn: insn_size(options)?,
        ..Collection::default()
    };
    for input in inputs {
        if input.is_dir() {
            let walk =
                database::for_each_profile(input.name(), &options.dcpi.epoch, &mut |file| {
                    options.advance(file.len());
                    read_file(&mut collection, file.name(), file.bytes())
                })?;
            collection.skipped += walk.skipped;
        } else {
            options.advance(input.len());
            read_file(&mut collection, input.name(), input.bytes())?;
        }
    }
    Ok(collection)
}

/// Reads one binary profile or dcpicat dump into the collection.
fn read_file(collection: &mut Collection, path: &Path, data: &[u8]) -> Result<()> {
    let head = data.get(..DETECT_BYTES).unwrap_or(data);
    if dcpicat::looks_like(head) {
        return read_dump(collection, path, data);
    }
    let raw = header::parse(path, data)?;
    let h = interpret_header(path, &raw, &mut collection.facts, &mut collection.warnings)?;
    let tstart = h.tstart.unwrap_or(0);
    let image = collection.image(
        path,
        &h.image,
        h.label.as_deref(),
        h.name.as_deref(),
        &h.paths,
        tstart,
        h.tsize,
    );
    let event = collection.event(&h.event);
    let insn = collection.insn;
    let mut section_warnings = Vec::new();
    let counts = collection.column(image, event, h.period);
    let stats = binary::read_section(
        path,
        data,
        raw.binary_start,
        tstart,
        insn,
        counts,
        &mut section_warnings,
    )?;
    for w in section_warnings {
        collection.warnings.add(path, w);
    }
    if let Some(tsize) = h.tsize {
        if stats.end_offset > tsize {
            collection.warnings.add(
                path,
                format!(
                    "chunks reach text offset {:#x}, beyond tsize {tsize:#x}",
                    stats.end_offset
                ),
            );
        }
    }
    let image_ref = &mut collection.images[image];
    image_ref.end = image_ref.end.max(tstart.saturating_add(stats.end_offset));
    collection.note_epoch(h.epoch.as_deref());
    collection.files.push(FileSummary {
        path: path.to_path_buf(),
        kind: FileKind::Binary(h.version),
        image: h.image,
        epoch: h.epoch,
        events: vec![FileEvent {
            name: h.event,
            period: h.period,
            samples: stats.samples,
            declared: None,
        }],
        chunks: stats.chunks,
        addresses: stats.nonzero,
        header: raw.lines,
    });
    Ok(())
}

/// Reads a dcpicat dump into the collection.
fn read_dump(collection: &mut Collection, path: &Path, data: &[u8]) -> Result<()> {
    let dump = dcpicat::parse_header(path, data)?;
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
    let label = first("label");
    let epoch = first("epoch");
    for line in &dump.lines {
        match line.keyword.as_str() {
            "name" | "image" | "label" | "path" | "text_start" | "text_size" | "event" => {}
            keyword => collection.facts.add(keyword, &line.value),
        }
    }
    if dump.text_start.is_none() {
        collection.warnings.add(
            path,
            "no `text_start` line: addresses taken as they are (text start 0)".into(),
        );
    }
    let tstart = dump.text_start.unwrap_or(0);
    let image = collection.image(
        path,
        &image_id,
        label.as_deref(),
        name.as_deref(),
        &paths,
        tstart,
        dump.text_size,
    );
    let columns: Vec<(usize, u64)> = dump
        .events
        .iter()
        .map(|e| (collection.event(&e.name), e.period))
        .collect();
    let mut sums = vec![0u64; columns.len()];
    let mut end = tstart;
    let insn = u64::from(collection.insn);
    let rows = dcpicat::read_rows(path, data, &dump, |i, pc, count| {
        if let Some(&(event, period)) = columns.get(i) {
            collection.column(image, event, period).add(pc, count);
            if let Some(s) = sums.get_mut(i) {
                *s = s.saturating_add(count);
            }
            end = end.max(pc.saturating_add(insn));
        }
    })?;
    let image_ref = &mut collection.images[image];
    image_ref.end = image_ref.end.max(end);
    let mut events = Vec::new();
    for (e, &sum) in dump.events.iter().zip(&sums) {
        if sum != e.declared_samples {
            collection.warnings.add(
                path,
                format!(
                    "event {}: the rows sum to {sum} samples, the event line declares {}",
                    e.name, e.declared_samples
                ),
            );
        }
        if e.fraction < 10_000 {
            collection.facts.add(
                &format!("{} monitored fraction", e.name),
                &format!("{:.2}%", e.fraction as f64 / 100.0),
            );
        }
        events.push(FileEvent {
            name: e.name.clone(),
            period: e.period,
            samples: sum,
            declared: Some(e.declared_samples),
        });
    }
    collection.note_epoch(epoch.as_deref());
    collection.files.push(FileSummary {
        path: path.to_path_buf(),
        kind: FileKind::Dcpicat,
        image: image_id,
        epoch,
        events,
        chunks: 0,
        addresses: rows,
        header: dump.lines,
    });
    Ok(())
}

/// Event indices in output order: `cycles` first (the default), then as met.
fn event_order(events: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i] != "cycles", i));
    order
}

/// Builds the profile: sample types `<event>_samples/count` and
/// `<event>/events` per event, one mapping per image, one one-frame sample
/// per sampled address.
fn build_profile(collection: &Collection, options: &ReadOptions) -> Result<Profile> {
    let order = event_order(&collection.events);
    if order.is_empty() {
        return Err(Error::Usage(
            "no DCPI profile files among the inputs".into(),
        ));
    }
    let mut types = Vec::new();
    for &e in &order {
        let name = &collection.events[e];
        types.push((format!("{name}_samples"), "count"));
        types.push((name.clone(), "events"));
    }
    let type_refs: Vec<(&str, &str)> = types.iter().map(|(k, u)| (k.as_str(), *u)).collect();
    let mut profile = Profile::new(&type_refs);
    // Position of each event's sample-count type.
    let mut slot = vec![0usize; collection.events.len()];
    for (pos, &e) in order.iter().enumerate() {
        slot[e] = 2 * pos;
    }
    profile.default_sample_type = Some(1);
    let first_period = collection
        .images
        .iter()
        .flat_map(|i| &i.columns)
        .find(|c| c.event == order[0])
        .map_or(1, |c| c.period);
    profile.set_period(
        &collection.events[order[0]],
        "events",
        i64::try_from(first_period).unwrap_or(i64::MAX),
    );
    profile.time_nanos = collection
        .files
        .iter()
        .filter_map(|f| f.epoch.as_deref().and_then(header::epoch_seconds))
        .min()
        .map_or(0, |s| s.saturating_mul(1_000_000_000));
    for (key, values) in &collection.facts.0 {
        profile.add_metadata(key.clone(), values.join(", "));
    }
    profile.add_group_by(GroupBy::Image);

    let width = types.len();
    let mut mapped: Vec<(MappingId, usize)> = Vec::new();
    // Non-zero values so far: samples and events of every (address, event).
    let mut nonzero = 0u64;
    for (index, image) in collection.images.iter().enumerate() {
        let limit = image.tsize.map_or(image.end, |size| {
            image.tstart.saturating_add(size).max(image.end)
        });
        let filename = profile.intern(&image.name);
        let build_id = profile.intern(&image.id);
        let mapping = profile.add_mapping(Mapping::new(image.tstart, limit, 0, filename, build_id));
        mapped.push((mapping, index));
        let labels = match &image.label {
            Some(l) => vec![profile.label_str("label", l)],
            None => Vec::new(),
        };
        // (address, column) of every sampled address, grouped by address.
        let mut entries: Vec<(u64, u32, u64)> = Vec::new();
        for (c, column) in image.columns.iter().enumerate() {
            column
                .counts
                .for_each_nonzero(|address, count| entries.push((address, c as u32, count)));
        }
        entries.sort_unstable_by_key(|&(address, c, _)| (address, c));
        let distinct = entries.windows(2).filter(|w| w[0].0 != w[1].0).count() + 1;
        let samples = (profile.samples().len() + distinct.min(entries.len())) as u64;
        nonzero = nonzero.saturating_add(2 * entries.len() as u64);
        if let Some(why) = crate::profile::too_many_values(width, samples, nonzero) {
            let path = collection
                .files
                .first()
                .map_or(Path::new("<dcpi>"), |f| f.path.as_path());
            return Err(Error::unsupported(path, why));
        }
        let mut values = vec![0i64; width];
        let mut i = 0;
        while let Some(&(address, _, _)) = entries.get(i) {
            values.iter_mut().for_each(|v| *v = 0);
            while let Some(&(a, c, count)) = entries.get(i) {
                if a != address {
                    break;
                }
                if let Some(column) = image.columns.get(c as usize) {
                    let s = slot[column.event];
                    let samples = i64::try_from(count).unwrap_or(i64::MAX);
                    let events = i64::try_from(u128::from(count) * u128::from(column.period))
                        .unwrap_or(i64::MAX);
                    values[s] = values[s].saturating_add(samples);
                    values[s + 1] = values[s + 1].saturating_add(events);
                }
                i += 1;
            }
            let location = profile.address_location(Some(mapping), address, false);
            profile.add_sample(&[location], &values, &labels);
        }
    }
    let mut warnings = collection.warnings.clone();
    symbols::symbolize_images(&mut profile, collection, &mapped, options, &mut warnings)?;
    for line in warnings.lines() {
        profile.warn(line);
    }
    Ok(profile)
}
