//! Frames by id, for writers that walk many deep stacks: every location's
//! frames and every sample's group frames are interned once, and a sample's
//! stack is then a walk over ids, root first. Memory is linear in the
//! profile (locations, inline depth, samples), not in the sum of all stack
//! depths, which for a deep call chain is quadratic in the input.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::profile::{Frame, GroupBy, LocationId, Profile, Sample};

/// The frame table of a profile. Frame ids are given in order of first
/// appearance, walking the samples in order and each stack root first.
pub struct Frames<'p> {
    /// Frame id → the frame.
    pub frames: Vec<Frame<'p>>,
    /// Frame id → whether it names an unsymbolized address.
    pub of_address: Vec<bool>,
    ids: StackIds,
}

impl<'p> Frames<'p> {
    /// Frames are one when their names are (and, `by_file`, their files;
    /// `by_line`, their lines: a frame per source line).
    pub fn new(
        profile: &'p Profile,
        group_by: &[GroupBy],
        by_file: bool,
        by_line: bool,
    ) -> Frames<'p> {
        // Frames by the hash of what tells them apart, as indexes into
        // `frames`: no copy of a name is kept (an address's name is made
        // once per location, and there can be millions), with room for a
        // frame per location, the most there are at addresses.
        let mut interner = Interner {
            frames: Vec::new(),
            of_address: Vec::new(),
            index: HashTable::with_capacity(profile.locations().len()),
            by_file,
            by_line,
        };
        let mut ids = StackIds::new(profile.locations().len(), profile.samples().len());
        let mut of_function: Vec<Option<u32>> = vec![None; profile.functions().len()];
        // An image's frame is named once, not once per sample.
        let mut of_image: Vec<Option<u32>> = vec![None; profile.mappings().len() + 1];
        for sample in profile.samples() {
            let start = ids.start();
            for g in group_by {
                let id = match g {
                    GroupBy::Image => {
                        let image = leaf_image(profile, sample);
                        let slot = image.map_or(profile.mappings().len(), |m| m);
                        *of_image[slot]
                            .get_or_insert_with(|| interner.intern(image_frame(profile, image)))
                    }
                    GroupBy::Label(key) => interner.intern(label_frame(profile, sample, key)),
                };
                ids.push(id);
            }
            ids.end_group(start);
            for &loc in sample.stack.iter().rev() {
                if !ids.has_location(loc.index()) {
                    interner.add_location(profile, loc, &mut of_function, &mut ids);
                }
            }
        }
        interner.of_address.resize(interner.frames.len(), false);
        Frames {
            frames: interner.frames,
            of_address: interner.of_address,
            ids,
        }
    }

    /// The frame ids of sample `i` of `profile`, root first.
    pub fn stack<'a>(
        &'a self,
        profile: &'a Profile,
        i: usize,
    ) -> impl Iterator<Item = u32> + Clone + 'a {
        self.ids.stack(profile, i)
    }
}

/// The frame ids of every location (root first: inlined callers before
/// their callees) and of every sample's group frames, as ranges of one
/// array: a sample's stack is then a walk over ids ([`StackIds::stack`]).
pub struct StackIds {
    location: Vec<Option<Range<usize>>>,
    group: Vec<Range<usize>>,
    ids: Vec<u32>,
}

impl StackIds {
    /// Room for `locations` locations' and `samples` samples' ids.
    pub fn new(locations: usize, samples: usize) -> StackIds {
        StackIds {
            location: vec![None; locations],
            group: Vec::with_capacity(samples),
            ids: Vec::new(),
        }
    }

    /// Adds a frame id to the location or group being made.
    pub fn push(&mut self, id: u32) {
        self.ids.push(id);
    }

    /// Where the next location's or group's ids start.
    pub fn start(&self) -> usize {
        self.ids.len()
    }

    /// Whether location `index` has its ids (or is out of range).
    pub fn has_location(&self, index: usize) -> bool {
        self.location.get(index).is_none_or(Option::is_some)
    }

    /// Ends location `index`'s ids, pushed since `start`.
    pub fn end_location(&mut self, index: usize, start: usize) {
        if let Some(slot) = self.location.get_mut(index) {
            *slot = Some(start..self.ids.len());
        }
    }

    /// Ends the next sample's group ids, pushed since `start`.
    pub fn end_group(&mut self, start: usize) {
        self.group.push(start..self.ids.len());
    }

    /// The frame ids of sample `i` of `profile`, root first.
    pub fn stack<'a>(
        &'a self,
        profile: &'a Profile,
        i: usize,
    ) -> impl Iterator<Item = u32> + Clone + 'a {
        let group = self.group.get(i).cloned().unwrap_or(0..0);
        let stack = profile.samples().get(i).map_or(&[][..], |s| &s.stack[..]);
        self.ids[group].iter().copied().chain(
            stack
                .iter()
                .rev()
                .filter_map(|&loc| self.location.get(loc.index()).cloned().flatten())
                .flat_map(|r| self.ids[r].iter().copied()),
        )
    }
}

/// The frames of a [`Frames`] while it is made, each kept once.
struct Interner<'p> {
    frames: Vec<Frame<'p>>,
    of_address: Vec<bool>,
    /// Frame ids by the hash of [`frame_key`].
    index: HashTable<u32>,
    by_file: bool,
    by_line: bool,
}

impl<'p> Interner<'p> {
    /// The id of frame `f` (its line dropped unless `by_line`), added if new.
    fn intern(&mut self, mut f: Frame<'p>) -> u32 {
        if !self.by_line {
            f.line = 0;
        }
        let by_file = self.by_file;
        intern_in(
            &mut self.frames,
            &mut self.index,
            f,
            |f| fx_hash(frame_key(f, by_file)),
            |a, b| frame_key(a, by_file) == frame_key(b, by_file),
        )
    }

    /// Adds the ids of location `loc`'s frames to `ids`, root first: its
    /// address's, or its lines' (inlined callers first), each function's
    /// frame found once through `of_function` unless frames are lines.
    fn add_location(
        &mut self,
        profile: &'p Profile,
        loc: LocationId,
        of_function: &mut [Option<u32>],
        ids: &mut StackIds,
    ) {
        let start = ids.start();
        let lines = &profile.location(loc).lines;
        if lines.is_empty() {
            for f in profile.location_frames(loc) {
                let id = self.intern(f);
                self.of_address.resize(self.frames.len(), false);
                self.of_address[id as usize] = true;
                ids.push(id);
            }
        }
        // A function is one frame: its name is hashed once, not once per
        // location (a C++ name can be a megabyte long).
        for line in lines.iter().rev() {
            let id = match self.by_line {
                true => self.intern(profile.line_frame(line)),
                false => match of_function[line.function.index()] {
                    Some(id) => id,
                    None => {
                        let id = self.intern(profile.line_frame(line));
                        of_function[line.function.index()] = Some(id);
                        id
                    }
                },
            };
            ids.push(id);
        }
        ids.end_location(loc.index(), start);
    }
}

/// The id of `item` in `items`, found through `index` (ids by `hash`, told
/// apart by `same`); added at the end when it is new.
pub fn intern_in<T>(
    items: &mut Vec<T>,
    index: &mut HashTable<u32>,
    item: T,
    hash: impl Fn(&T) -> u64,
    same: impl Fn(&T, &T) -> bool,
) -> u32 {
    let h = hash(&item);
    if let Some(&id) = index.find(h, |&id| same(&items[id as usize], &item)) {
        return id;
    }
    items.push(item);
    let id = (items.len() - 1) as u32;
    index.insert_unique(h, id, |&id| hash(&items[id as usize]));
    id
}

/// `value`'s FxHash.
pub fn fx_hash(value: impl Hash) -> u64 {
    let mut h = FxHasher::default();
    value.hash(&mut h);
    h.finish()
}

/// What tells frames apart: name, line, and (`by_file`) file.
fn frame_key<'a>(f: &'a Frame<'_>, by_file: bool) -> (&'a str, Option<&'a str>, i64) {
    (&f.name, f.file.filter(|_| by_file), f.line)
}

/// The synthetic frames `group_by` puts at the root of a sample's stack
/// (its image, process, thread...), root first.
pub fn group_frames<'p>(
    profile: &'p Profile,
    sample: &Sample,
    group_by: &[GroupBy],
) -> Vec<Frame<'p>> {
    let frame = |g: &GroupBy| match g {
        GroupBy::Image => image_frame(profile, leaf_image(profile, sample)),
        GroupBy::Label(key) => label_frame(profile, sample, key),
    };
    group_by.iter().map(frame).collect()
}

/// The mapping (an index) of a sample's leaf location, if it has one.
fn leaf_image(profile: &Profile, sample: &Sample) -> Option<usize> {
    let leaf = sample.stack.first()?;
    let mapping = profile.locations().get(leaf.index())?.mapping?;
    (mapping.index() < profile.mappings().len()).then_some(mapping.index())
}

/// The group frame of an image: its file's base name.
fn image_frame<'p>(profile: &Profile, image: Option<usize>) -> Frame<'p> {
    let name = image
        .map(|m| crate::profile::basename(profile.str(profile.mappings()[m].filename)))
        .filter(|n| !n.is_empty())
        .unwrap_or("[unknown image]");
    owned_frame(name.to_owned())
}

/// The group frame of a label ([`group_frame_name`]).
fn label_frame<'p>(profile: &Profile, sample: &Sample, key: &str) -> Frame<'p> {
    owned_frame(group_frame_name(profile, sample, key))
}

fn owned_frame<'p>(name: String) -> Frame<'p> {
    Frame {
        name: std::borrow::Cow::Owned(name),
        file: None,
        line: 0,
    }
}

/// The frame for a label group: `name-value` when the sample has a
/// `<key>_name` label (e.g. `thread_name`, like perf's `comm-tid`), else
/// `key value`.
fn group_frame_name(profile: &Profile, sample: &Sample, key: &str) -> String {
    let value = profile.label_text(sample, key);
    let name_key = match key {
        "pid" => "process_name",
        "tid" => "thread_name",
        other => other,
    };
    let name = if name_key != key {
        profile.label_text(sample, name_key)
    } else {
        profile.label_text(sample, &format!("{key}_name"))
    };
    match (name, value) {
        (Some(n), Some(v)) => format!("{n}-{v}"),
        (None, Some(v)) => format!("{key} {v}"),
        (Some(n), None) => n,
        (None, None) => format!("{key} ?"),
    }
}
