//! Frames by id, for writers that walk many deep stacks: every location's
//! frames and every sample's group frames are interned once, and a sample's
//! stack is then a walk over ids, root first. Memory is linear in the
//! profile (locations, inline depth, samples), not in the sum of all stack
//! depths, which for a deep call chain is quadratic in the input.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::profile::{Frame, GroupBy, Profile, Sample};

/// The frame table of a profile. Frame ids are given in order of first
/// appearance, walking the samples in order and each stack root first.
pub struct Frames<'p> {
    /// Frame id → the frame.
    pub frames: Vec<Frame<'p>>,
    /// Frame id → whether it names an unsymbolized address.
    pub of_address: Vec<bool>,
    /// Ids of every location's frames, root first (inlined callers before
    /// their callees), as ranges of `ids`.
    location: Vec<Option<Range<usize>>>,
    /// Ids of every sample's group frames, as ranges of `ids`.
    group: Vec<Range<usize>>,
    ids: Vec<u32>,
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
        let mut table = Frames {
            frames: Vec::new(),
            of_address: Vec::new(),
            location: vec![None; profile.locations().len()],
            group: Vec::with_capacity(profile.samples().len()),
            ids: Vec::new(),
        };
        // Frames by the hash of what tells them apart, as indexes into
        // `frames`: no copy of a name is kept (an address's name is made
        // once per location, and there can be millions), with room for a
        // frame per location, the most there are at addresses.
        let mut index: HashTable<u32> = HashTable::with_capacity(profile.locations().len());
        let hash = move |f: &Frame<'p>| {
            let mut h = FxHasher::default();
            frame_key(f, by_file).hash(&mut h);
            h.finish()
        };
        let mut intern = |frames: &mut Vec<Frame<'p>>, mut f: Frame<'p>| -> u32 {
            if !by_line {
                f.line = 0;
            }
            let h = hash(&f);
            let found =
                |&id: &u32| frame_key(&frames[id as usize], by_file) == frame_key(&f, by_file);
            if let Some(&id) = index.find(h, found) {
                return id;
            }
            frames.push(f);
            let id = (frames.len() - 1) as u32;
            index.insert_unique(h, id, |&id| hash(&frames[id as usize]));
            id
        };
        let mut of_function: Vec<Option<u32>> = vec![None; profile.functions().len()];
        // An image's frame is named once, not once per sample.
        let mut of_image: Vec<Option<u32>> = vec![None; profile.mappings().len() + 1];
        for sample in profile.samples() {
            let start = table.ids.len();
            for g in group_by {
                let id = match g {
                    GroupBy::Image => {
                        let image = leaf_image(profile, sample);
                        let slot = image.map_or(profile.mappings().len(), |m| m);
                        *of_image[slot].get_or_insert_with(|| {
                            intern(&mut table.frames, image_frame(profile, image))
                        })
                    }
                    GroupBy::Label(key) => {
                        intern(&mut table.frames, label_frame(profile, sample, key))
                    }
                };
                table.ids.push(id);
            }
            table.group.push(start..table.ids.len());
            for &loc in sample.stack.iter().rev() {
                let Some(slot) = table.location.get(loc.index()) else {
                    continue;
                };
                if slot.is_some() {
                    continue;
                }
                let start = table.ids.len();
                let lines = &profile.location(loc).lines;
                if lines.is_empty() {
                    for f in profile.location_frames(loc) {
                        let id = intern(&mut table.frames, f);
                        table.of_address.resize(table.frames.len(), false);
                        table.of_address[id as usize] = true;
                        table.ids.push(id);
                    }
                }
                // A function is one frame: its name is hashed once, not
                // once per location (a C++ name can be a megabyte long).
                for line in lines.iter().rev() {
                    let id = match by_line {
                        true => intern(&mut table.frames, profile.line_frame(line)),
                        false => *of_function[line.function.index()].get_or_insert_with(|| {
                            intern(&mut table.frames, profile.line_frame(line))
                        }),
                    };
                    table.ids.push(id);
                }
                table.location[loc.index()] = Some(start..table.ids.len());
            }
        }
        table.of_address.resize(table.frames.len(), false);
        table
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
