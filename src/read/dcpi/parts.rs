//! The DCPI profile in parts ([`PartSink`]): a head (sample types, period,
//! time, metadata, and the strings every mapping names), then one part per
//! image (its mapping, and per sampled address a row: an address and its
//! values, [`AddressPart`]), then a tail with the warnings as comments.
//!
//! Images are read one at a time into one lean part whose buffers every
//! image reuses: an image of one binary file straight from its chunks
//! (they come in address order), others through dense per-event counts
//! ([`Counts`]) merged by address. No location or sample object is made
//! unless the sink asks for the profile (or the image is symbolized), so
//! memory follows the largest image, not the database.

use super::super::input::Input;
use super::super::options::ReadOptions;
use super::collection::{Collection, FileKind, Image, Warnings};
use super::counts::{Counts, RowSink};
use super::scan::{self, ImageScan, Keep};
use super::{header, index, symbols};
use crate::error::{Error, Result};
use crate::profile::{too_many_values, AddressPart, GroupBy, Mapping, PartSink, Profile};

/// The sample types: `<event>_samples/count` and `<event>/events` per event,
/// `cycles` first (the default), then in the order met.
struct Layout {
    types: Vec<(String, &'static str)>,
    /// Index of each event's `_samples` type (its `events` type follows).
    slot: Vec<usize>,
    /// Events in output order.
    order: Vec<usize>,
}

impl Layout {
    fn new(c: &Collection) -> Result<Layout> {
        let order = super::event_order(&c.events);
        if order.is_empty() {
            return Err(Error::Usage(
                "no DCPI profile files among the inputs".into(),
            ));
        }
        let mut types = Vec::new();
        let mut slot = vec![0usize; c.events.len()];
        for (pos, &e) in order.iter().enumerate() {
            let name = &c.events[e];
            types.push((format!("{name}_samples"), "count"));
            types.push((name.clone(), "events"));
            slot[e] = 2 * pos;
        }
        Ok(Layout { types, slot, order })
    }

    fn profile(&self) -> Profile {
        let refs: Vec<(&str, &str)> = self.types.iter().map(|(k, u)| (k.as_str(), *u)).collect();
        Profile::new(&refs)
    }

    /// Sets `tables` to the sample types of `image`'s events only (a
    /// part's values are as wide as its image's events, not the
    /// database's), and says where each of the image's columns goes in
    /// them: the index of its event's `_samples` type, and its period.
    fn image_tables(&self, image: &Image, tables: &mut Profile) -> Vec<(usize, u64)> {
        let mut slots: Vec<usize> = image.columns.iter().map(|c| self.slot[c.event]).collect();
        slots.sort_unstable();
        slots.dedup();
        let refs: Vec<(&str, &str)> = slots
            .iter()
            .flat_map(|&s| &self.types[s..s + 2])
            .map(|(k, u)| (k.as_str(), *u))
            .collect();
        *tables = Profile::new(&refs);
        image
            .columns
            .iter()
            .map(|c| {
                let at = slots.binary_search(&self.slot[c.event]).unwrap_or(0);
                (2 * at, c.period)
            })
            .collect()
    }
}

/// Reads DCPI inputs and hands the profile to `sink` in parts.
pub(super) fn read_parts(
    inputs: &[Input],
    options: &ReadOptions,
    sink: &mut dyn PartSink,
) -> Result<()> {
    let mut c = index::index(inputs, options)?;
    let layout = Layout::new(&c)?;
    sink.part(head(&c, &layout))?;
    let mut symbol_warnings = Warnings::default();
    let mut plan = symbols::plan(&c, options, &mut symbol_warnings);
    let symbolizing = options.binary.is_some() || options.dcpi.image_dir.is_some();
    let (mut samples, mut nonzero) = (0u64, 0u64);
    // One image at a time, into one lean part whose buffers every image
    // reuses.
    let (mut part, mut buf) = (AddressPart::default(), Vec::new());
    for i in 0..c.images.len() {
        let mut scan = image_part(
            &c,
            (inputs, options),
            &layout,
            (i, &mut buf),
            (samples, nonzero),
            &mut part,
        )?;
        scan::apply(&mut c, &mut scan);
        samples += part.addresses.len() as u64;
        nonzero += part.values.iter().filter(|v| **v != 0).count() as u64;
        if let Some(why) = too_many_values(layout.types.len(), samples, nonzero) {
            return Err(Error::unsupported(first_path(&c), why));
        }
        if symbolizing {
            let mut whole = part.to_profile();
            plan.symbolize(&c.images[i], i, &mut whole, options, &mut symbol_warnings)?;
            sink.part(whole)?;
        } else {
            sink.address_part(&part)?;
        }
    }
    sink.part(tail(&c.warnings, &symbol_warnings))
}

/// The path errors about the whole profile name: the first file's.
fn first_path(c: &Collection) -> &std::path::Path {
    c.files
        .first()
        .map_or(std::path::Path::new("<dcpi>"), |f| f.path.as_path())
}

/// The head: sample types, period (the default event's first), start time
/// (the earliest epoch), metadata, grouping by image, and every image's
/// name, id and label as strings, in the order the images' parts name them.
fn head(c: &Collection, layout: &Layout) -> Profile {
    let mut profile = layout.profile();
    profile.default_sample_type = Some(1);
    let first = layout.order[0];
    let first_period = c
        .images
        .iter()
        .flat_map(|i| &i.columns)
        .find(|col| col.event == first)
        .map_or(1, |col| col.period);
    profile.set_period(
        &c.events[first],
        "events",
        i64::try_from(first_period).unwrap_or(i64::MAX),
    );
    profile.time_nanos = c
        .files
        .iter()
        .filter_map(|f| f.epoch.as_deref().and_then(header::epoch_seconds))
        .min()
        .map_or(0, |s| s.saturating_mul(1_000_000_000));
    for (key, values) in &c.facts.0 {
        profile.add_metadata(key.clone(), values.join(", "));
    }
    profile.add_group_by(GroupBy::Image);
    for image in &c.images {
        profile.intern(&image.name);
        profile.intern(&image.id);
        if let Some(label) = &image.label {
            profile.label_str("label", label);
        }
    }
    profile
}

/// The tail: every warning ([`Profile::warn`]).
fn tail(warnings: &Warnings, symbol_warnings: &Warnings) -> Profile {
    let mut tail = Profile::default();
    for line in warnings.lines().into_iter().chain(symbol_warnings.lines()) {
        tail.warn(line);
    }
    tail
}

/// Reads image `i` into `part`: its mapping, and a row per sampled
/// address, in address order. An image of one binary file is read straight
/// into the rows; others are counted first ([`Counts`]), then merged by
/// address. `before`: samples and non-zero values of the parts before (for
/// the bounds on values, checked before the rows are stored).
fn image_part(
    c: &Collection,
    (inputs, options): (&[Input], &ReadOptions),
    layout: &Layout,
    (i, buf): (usize, &mut Vec<u8>),
    before: (u64, u64),
    part: &mut AddressPart,
) -> Result<ImageScan> {
    let image = &c.images[i];
    part.clear();
    let columns = layout.image_tables(image, &mut part.tables);
    let direct = image.files.len() == 1
        && columns.len() == 1
        && c.files
            .get(image.files[0])
            .is_some_and(|f| matches!(f.kind, FileKind::Binary(_)));
    let scan = if direct {
        let (slot, period) = columns[0];
        let mut rows = RowSink::new(part, slot, period, c.insn).bound(layout.types.len(), before);
        let scan = scan::scan_image(c, inputs, options, (i, buf), Keep::Into(&mut rows))?;
        let (n, _) = rows.rows();
        check_values(c, layout, before, n, n)?;
        scan
    } else {
        let mut scan = scan::scan_image(c, inputs, options, (i, buf), Keep::Counts)?;
        let counts = std::mem::take(&mut scan.counts);
        let rows = Rows::new(&counts);
        check_values(c, layout, before, rows.distinct(), rows.entries())?;
        fill_rows(&rows, &columns, part);
        scan
    };
    let tables = &mut part.tables;
    let filename = tables.intern(&image.name);
    let build_id = tables.intern(&image.id);
    let limit = image.limit(image.end.max(scan.end));
    part.mapping = tables.add_mapping(Mapping::new(image.tstart, limit, 0, filename, build_id));
    if let Some(l) = &image.label {
        part.labels.push(tables.label_str("label", l));
    }
    Ok(scan)
}

/// The bounds on values ([`too_many_values`]) once an image brings
/// `distinct` addresses and `entries` (address, event) counts.
fn check_values(
    c: &Collection,
    layout: &Layout,
    before: (u64, u64),
    distinct: u64,
    entries: u64,
) -> Result<()> {
    // Each (address, event) count gives two values: samples and events.
    let nonzero = before.1.saturating_add(2 * entries);
    let samples = before.0.saturating_add(distinct);
    match too_many_values(layout.types.len(), samples, nonzero) {
        Some(why) => Err(Error::unsupported(first_path(c), why)),
        None => Ok(()),
    }
}

/// The rows of an image's counts: one per address, its values summed over
/// the columns (`columns`: each column's samples slot and period).
fn fill_rows(rows: &Rows<'_>, columns: &[(usize, u64)], part: &mut AddressPart) {
    let width = part.width();
    let mut current: Option<u64> = None;
    rows.for_each(|address, column, count| {
        if current != Some(address) {
            part.addresses.push(address);
            part.values.resize(part.values.len() + width, 0);
            current = Some(address);
        }
        let at = part.values.len() - width;
        if let Some(&(s, period)) = columns.get(column) {
            let samples = i64::try_from(count).unwrap_or(i64::MAX);
            let events = i64::try_from(u128::from(count) * u128::from(period)).unwrap_or(i64::MAX);
            if let Some(v) = part.values.get_mut(at + s..at + s + 2) {
                v[0] = v[0].saturating_add(samples);
                v[1] = v[1].saturating_add(events);
            }
        }
    });
}

/// The non-zero counts of an image's columns in address order, as
/// (address, column, count); an address sampled in several columns (or
/// twice in one) comes in consecutive entries.
enum Rows<'a> {
    /// One column: read in place.
    One(&'a Counts),
    /// Several: merged by address (a stable sort of their sorted runs).
    Many(Vec<(u64, u32, u64)>),
}

impl<'a> Rows<'a> {
    fn new(counts: &'a [Counts]) -> Self {
        if let [one] = counts {
            return Rows::One(one);
        }
        let mut entries = Vec::with_capacity(counts.iter().map(Counts::nonzero).sum());
        for (c, column) in counts.iter().enumerate() {
            column.for_each_sorted(|address, count| entries.push((address, c as u32, count)));
        }
        entries.sort_by_key(|&(address, _, _)| address);
        Rows::Many(entries)
    }

    fn for_each(&self, mut f: impl FnMut(u64, usize, u64)) {
        match self {
            Rows::One(counts) => counts.for_each_sorted(|a, n| f(a, 0, n)),
            Rows::Many(entries) => entries.iter().for_each(|&(a, c, n)| f(a, c as usize, n)),
        }
    }

    /// How many (address, column) counts there are.
    fn entries(&self) -> u64 {
        match self {
            Rows::One(counts) => counts.nonzero() as u64,
            Rows::Many(entries) => entries.len() as u64,
        }
    }

    /// How many distinct addresses (one column: at most; an address both
    /// in the dense array and the sparse map counts twice).
    fn distinct(&self) -> u64 {
        if let Rows::One(counts) = self {
            return counts.nonzero() as u64;
        }
        let mut n = 0u64;
        let mut last = None;
        self.for_each(|a, _, _| {
            if last != Some(a) {
                n += 1;
                last = Some(a);
            }
        });
        n
    }
}
