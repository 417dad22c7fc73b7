//! The DCPI profile in parts ([`PartSink`]): a head (sample types, period,
//! time, metadata, and the strings every mapping names), then one part per
//! image (its mapping, one location and one one-frame sample per sampled
//! address), then a tail with the warnings as comments.
//!
//! Images are read one at a time; each image's counts (one dense array per
//! event) and its part are dropped once the sink has the part, so memory
//! follows the largest image, not the database.

use super::super::input::Input;
use super::super::options::ReadOptions;
use super::collection::{Collection, Image, Warnings};
use super::counts::Counts;
use super::scan::{self, ImageScan};
use super::{header, index, symbols};
use crate::error::{Error, Result};
use crate::profile::{too_many_values, GroupBy, Label, Location, Mapping, PartSink, Profile};

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

    /// A profile with the sample types of `image`'s events only (a part's
    /// values are as wide as its image's events, not the database's), and
    /// where each of the image's columns goes in it: the index of its
    /// event's `_samples` type, and its period.
    fn image_profile(&self, image: &Image) -> (Profile, Vec<(usize, u64)>) {
        let mut slots: Vec<usize> = image.columns.iter().map(|c| self.slot[c.event]).collect();
        slots.sort_unstable();
        slots.dedup();
        let refs: Vec<(&str, &str)> = slots
            .iter()
            .flat_map(|&s| &self.types[s..s + 2])
            .map(|(k, u)| (k.as_str(), *u))
            .collect();
        let columns = image
            .columns
            .iter()
            .map(|c| {
                let at = slots.binary_search(&self.slot[c.event]).unwrap_or(0);
                (2 * at, c.period)
            })
            .collect();
        (Profile::new(&refs), columns)
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
    let (mut samples, mut nonzero) = (0u64, 0u64);
    // One image at a time, on this thread: measured on 2 cores, reading
    // two images at once on rayon saved no time (the sink's encoding is
    // the longer path, and gzip already runs on the other cores) and cost
    // memory and cross-thread frees.
    for i in 0..c.images.len() {
        let mut scan = scan::scan_image(&c, inputs, options, i, true)?;
        let mut part = image_part(&c, &c.images[i], &layout, &mut scan, (samples, nonzero))?;
        scan::apply(&mut c, &mut scan);
        samples += part.samples().len() as u64;
        nonzero += nonzero_values(&part);
        if let Some(why) = too_many_values(layout.types.len(), samples, nonzero) {
            return Err(Error::unsupported(first_path(&c), why));
        }
        plan.symbolize(&c.images[i], i, &mut part, options, &mut symbol_warnings)?;
        sink.part(part)?;
    }
    sink.part(tail(&c.warnings, &symbol_warnings))
}

/// The values of a part that are not zero.
fn nonzero_values(part: &Profile) -> u64 {
    let values = part.samples().iter().flat_map(|s| &s.values);
    values.filter(|v| **v != 0).count() as u64
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

/// The part of one image: its mapping, and a location and a one-frame
/// sample per sampled address, in address order.
/// `before`: samples and non-zero values of the parts before (for the
/// bounds on values, checked before anything is allocated).
fn image_part(
    c: &Collection,
    image: &Image,
    layout: &Layout,
    scan: &mut ImageScan,
    before: (u64, u64),
) -> Result<Profile> {
    let counts = std::mem::take(&mut scan.counts);
    let rows = Rows::new(&counts);
    let distinct = rows.distinct();
    // Each (address, event) count gives two values: samples and events.
    let nonzero = before.1.saturating_add(2 * rows.entries());
    let samples = before.0.saturating_add(distinct);
    if let Some(why) = too_many_values(layout.types.len(), samples, nonzero) {
        return Err(Error::unsupported(first_path(c), why));
    }
    let (mut part, columns) = layout.image_profile(image);
    let width = part.sample_types().len();
    let distinct = usize::try_from(distinct).unwrap_or(usize::MAX);
    part.reserve(distinct, distinct);
    let filename = part.intern(&image.name);
    let build_id = part.intern(&image.id);
    let limit = image.limit(image.end.max(scan.end));
    let mapping = part.add_mapping(Mapping::new(image.tstart, limit, 0, filename, build_id));
    let labels: Vec<Label> = match &image.label {
        Some(l) => vec![part.label_str("label", l)],
        None => Vec::new(),
    };
    let mut values = vec![0i64; width];
    let mut current: Option<u64> = None;
    let flush = |part: &mut Profile, address: u64, values: &mut [i64]| {
        let location = part.add_distinct_location(Location {
            mapping: Some(mapping),
            address,
            is_return_address: false,
            lines: Vec::new(),
        });
        part.add_distinct_sample(&[location], values, &labels);
        values.iter_mut().for_each(|v| *v = 0);
    };
    rows.for_each(|address, column, count| {
        if current.is_some_and(|a| a != address) {
            flush(&mut part, current.unwrap_or(0), &mut values);
        }
        current = Some(address);
        if let Some(&(s, period)) = columns.get(column) {
            let samples = i64::try_from(count).unwrap_or(i64::MAX);
            let events = i64::try_from(u128::from(count) * u128::from(period)).unwrap_or(i64::MAX);
            values[s] = values[s].saturating_add(samples);
            values[s + 1] = values[s + 1].saturating_add(events);
        }
    });
    if let Some(address) = current {
        flush(&mut part, address, &mut values);
    }
    Ok(part)
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
