//! The samples of the counted keys (§10), aggregated in the reader before
//! they reach the IR: locations interned once per distinct (mapping,
//! address, caller) frame, samples summed per (labels, stack) in flat
//! tables, then handed to the profile in order of first appearance. The
//! result is what `Profile::add_location` and `Profile::add_sample` would
//! make, without a hash of a whole `Location` per frame or an index entry
//! and three allocations per key.
//!
//! Memory: one location id per distinct frame, one stack, label set id and
//! row of values per sample.

use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

use crate::profile::{add_values, Label, Location, LocationId, MappingId, Profile};

/// Locations by (mapping, address, is a caller frame), across files.
pub(super) struct Locations {
    ids: FxHashMap<(u32, u32, bool), LocationId>,
}

impl Locations {
    /// Room for `frames` distinct frames, here and in `profile`.
    pub(super) fn new(profile: &mut Profile, frames: usize) -> Locations {
        profile.reserve(frames, 0);
        let mut ids = FxHashMap::default();
        ids.reserve(frames);
        Locations { ids }
    }

    /// The unsymbolized location of a frame, made on first use.
    pub(super) fn get(
        &mut self,
        profile: &mut Profile,
        mapping: Option<MappingId>,
        address: u32,
        is_return_address: bool,
    ) -> LocationId {
        let m = mapping.map_or(0, |m| m.index() as u32 + 1);
        *self
            .ids
            .entry((m, address, is_return_address))
            .or_insert_with(|| {
                profile.add_distinct_location(Location {
                    mapping,
                    address: u64::from(address),
                    is_return_address,
                    lines: Default::default(),
                })
            })
    }
}

/// Distinct label sets (sorted, as the IR wants them), by id.
#[derive(Default)]
pub(super) struct LabelSets {
    ids: FxHashMap<Vec<Label>, u32>,
    sets: Vec<Vec<Label>>,
}

impl LabelSets {
    /// The id of `labels` (in any order).
    pub(super) fn id(&mut self, labels: &[Label]) -> u32 {
        let mut set = labels.to_vec();
        set.sort();
        if let Some(&id) = self.ids.get(&set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(set.clone());
        self.ids.insert(set, id);
        id
    }
}

/// No sample: the end of a chain of samples sharing a hash.
const NONE: u32 = u32::MAX;

/// Samples summed per (label set, stack), in order of first appearance.
pub(super) struct Samples {
    /// Values per sample (the profile's sample types).
    width: usize,
    /// The newest sample of each (label set, stack) hash.
    heads: FxHashMap<u64, u32>,
    /// For each sample, the previous one with the same hash, or [`NONE`].
    next: Vec<u32>,
    label_sets: Vec<u32>,
    /// Every sample's stack, one after the other; `ends[i]` ends sample i's.
    stacks: Vec<LocationId>,
    ends: Vec<usize>,
    /// `width` values per sample.
    values: Vec<i64>,
}

impl Samples {
    /// Room for `samples` samples of `width` values.
    pub(super) fn new(width: usize, samples: usize) -> Samples {
        let mut heads = FxHashMap::default();
        heads.reserve(samples);
        Samples {
            width,
            heads,
            next: Vec::with_capacity(samples),
            label_sets: Vec::with_capacity(samples),
            stacks: Vec::new(),
            ends: Vec::with_capacity(samples),
            values: Vec::with_capacity(samples.saturating_mul(width)),
        }
    }

    /// The stack of sample `i`.
    fn stack(&self, i: usize) -> &[LocationId] {
        let start = i
            .checked_sub(1)
            .and_then(|p| self.ends.get(p))
            .map_or(0, |&e| e);
        let end = self.ends.get(i).map_or(start, |&e| e);
        self.stacks.get(start..end).unwrap_or(&[])
    }

    /// The values of sample `i`.
    fn row(&mut self, i: usize) -> &mut [i64] {
        let start = i * self.width;
        self.values
            .get_mut(start..start + self.width)
            .unwrap_or(&mut [])
    }

    /// Adds `values` (one per sample type) to the sample of `labels` and
    /// `stack`, making it if needed.
    pub(super) fn add(&mut self, labels: u32, stack: &[LocationId], values: &[i64]) {
        let mut hasher = FxHasher::default();
        labels.hash(&mut hasher);
        stack.hash(&mut hasher);
        let hash = hasher.finish();
        let head = self.heads.get(&hash).copied().unwrap_or(NONE);
        let mut i = head;
        while i != NONE {
            let s = i as usize;
            if self.label_sets.get(s) == Some(&labels) && self.stack(s) == stack {
                add_values(self.row(s), values);
                return;
            }
            i = self.next.get(s).map_or(NONE, |&n| n);
        }
        let s = self.next.len();
        self.heads.insert(hash, s as u32);
        self.next.push(head);
        self.label_sets.push(labels);
        self.stacks.extend_from_slice(stack);
        self.ends.push(self.stacks.len());
        self.values.resize(self.values.len() + self.width, 0);
        for (acc, v) in self.row(s).iter_mut().zip(values) {
            *acc = *v;
        }
    }

    /// Hands every sample to `profile`, in order of first appearance.
    pub(super) fn into_profile(self, profile: &mut Profile, label_sets: &LabelSets) {
        profile.reserve(0, self.next.len());
        let w = self.width;
        for i in 0..self.next.len() {
            let row = self.values.get(i * w..(i + 1) * w).unwrap_or(&[]);
            let set = self.label_sets.get(i).map_or(u32::MAX, |&l| l);
            let labels = label_sets.sets.get(set as usize).map_or(&[][..], |s| s);
            profile.add_distinct_sample(self.stack(i), row, labels);
        }
    }
}
