//! Shards: one run split into parts that machines convert without talking
//! (`--shard K/N`), cut by input bytes.
//!
//! Every shard walks the whole archive, in walk order. Its units are laid
//! end to end, each as long as its bytes plus one (so that empty files and
//! links, which have no bytes, are spread too); shard K of N takes the
//! units whose middle falls in the K-th of N equal stretches of that line.
//! A shard's bytes are thus the mean within about one unit. The line's
//! length is measured by the run's first walk ([`Tree`]: units, bytes, and
//! a fingerprint of every unit's path and size); the walks after it lay
//! each unit with the sizes they see and cut with that length. Shards
//! agree when they list the same tree: each report keeps the tree its run
//! listed, a run marks it `changed` when a later walk listed another, and
//! `report merge` refuses shards that did not list one same tree.
//!
//! Memory: a few counters, whatever the number of units.

use serde::{Deserialize, Serialize};

use super::walk::Unit;

/// A deterministic part of an archive run: shard `index` of `count` (from 0,
/// as Kubernetes Indexed Jobs count). The units, in walk order, are cut
/// into `count` runs of about equal input bytes, and shard `index` takes
/// the `index`-th; every machine listing the same archive agrees without
/// talking (see the module doc of `archive/shard.rs` for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u64,
    /// How many shards the run is split into (1 or more).
    pub count: u64,
}

impl Shard {
    /// Does the unit that weighs `weight` with `before` laid before it, on
    /// a line of `length` in all, belong to this shard? Its middle
    /// (`before + weight / 2`) falls in the shard's stretch,
    /// `[index·length/count, (index+1)·length/count)`; a middle past the
    /// end (a tree that grew since it was measured) is the last shard's.
    pub(crate) fn takes(&self, before: u64, weight: u64, length: u64) -> bool {
        let count = u128::from(self.count.max(1));
        // Doubled, so that the middle is a whole number.
        let middle = 2 * u128::from(before) + u128::from(weight);
        let stretch = (middle * count)
            .checked_div(2 * u128::from(length))
            .unwrap_or(0);
        stretch.min(count - 1) == u128::from(self.index)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The whole archive as a run listed it, every shard's units: what a
/// sharded run's share is cut from, and what the shards of one run must
/// agree on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// Units listed (of every shard).
    pub units: u64,
    /// Their input bytes, as the walk saw them (a folder unit: its files').
    pub bytes: u64,
    /// FNV-1a 64 of every unit's exact relative path and bytes, in walk
    /// order, 16 hex digits: equal when two walks listed the same units
    /// of the same sizes in the same order.
    pub fingerprint: String,
    /// A later walk of the same run listed another tree (a file added,
    /// removed, renamed or grown while the run went): the run's share may
    /// overlap another shard's or leave units out.
    #[serde(default)]
    pub changed: bool,
}

impl Tree {
    /// The length of the line the units are laid on: their bytes, plus
    /// one a unit.
    fn length(&self) -> u64 {
        self.bytes.saturating_add(self.units)
    }

    /// Whether `other` lists the same units as this one (`changed` aside).
    pub(crate) fn same_units(&self, other: &Tree) -> bool {
        (self.units, self.bytes, &self.fingerprint)
            == (other.units, other.bytes, &other.fingerprint)
    }
}

/// Follows one walk of the archive: where each unit lies on the line,
/// whether it is the run's, and the tree listed so far.
pub(crate) struct Cut {
    shard: Option<Shard>,
    /// The line's length from the run's first walk; 0 while it is measured.
    length: u64,
    units: u64,
    bytes: u64,
    hash: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

impl Cut {
    /// A walk measuring the tree (every unit the run's, as in a whole run).
    pub fn measure() -> Cut {
        Cut::with(None, 0)
    }

    /// A walk of a run converting `shard` (`None`: every unit) of `tree`,
    /// measured by the run's first walk.
    pub fn of(shard: Option<Shard>, tree: &Tree) -> Cut {
        Cut::with(shard, tree.length())
    }

    fn with(shard: Option<Shard>, length: u64) -> Cut {
        Cut {
            shard,
            length,
            units: 0,
            bytes: 0,
            hash: FNV_OFFSET,
        }
    }

    /// Lays `unit`, the walk's next, after those before it: whether it is
    /// the run's.
    pub fn takes(&mut self, unit: &Unit) -> bool {
        let weight = unit.bytes.saturating_add(1);
        let before = self.bytes.saturating_add(self.units);
        self.units += 1;
        self.bytes = self.bytes.saturating_add(unit.bytes);
        let path = unit.rel_bytes.as_deref().unwrap_or(&unit.rel);
        let record = path.bytes().chain([0]).chain(unit.bytes.to_le_bytes());
        self.hash = record.fold(self.hash, |h, b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME));
        self.shard
            .is_none_or(|s| s.takes(before, weight, self.length))
    }

    /// The tree listed so far.
    pub fn tree(&self) -> Tree {
        Tree {
            units: self.units,
            bytes: self.bytes,
            fingerprint: format!("{:016x}", self.hash),
            changed: false,
        }
    }
}

/// One shard's share as its report gives it, in a merged report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// The shard, `K/N`.
    pub shard: String,
    /// Its units (records).
    pub units: usize,
    /// Their input bytes (the records' `bytes`).
    pub bytes: u64,
}

/// The largest share's bytes over the mean share's: 1.0 when even; `None`
/// without shares or bytes.
pub(crate) fn spread(shares: &[Share]) -> Option<f64> {
    let total: u64 = shares.iter().map(|s| s.bytes).sum();
    let largest = shares.iter().map(|s| s.bytes).max()?;
    (total > 0).then(|| largest as f64 * shares.len() as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shard of each unit weighing `weights`, in order, cut into `n`.
    fn shards_of(weights: &[u64], n: u64) -> Vec<u64> {
        let length: u64 = weights.iter().sum();
        let mut before = 0;
        weights
            .iter()
            .map(|&w| {
                let mut of =
                    (0..n).filter(|&k| Shard { index: k, count: n }.takes(before, w, length));
                let k = of.next().expect("a unit in no shard");
                assert_eq!(of.next(), None, "a unit in two shards");
                before += w;
                k
            })
            .collect()
    }

    #[test]
    fn every_unit_is_in_exactly_one_shard_and_shards_follow_walk_order() {
        let mixed = [5, 1, 1, 900, 3, 0, 0, 40, 40, 7, 1, 1, 1, 2000, 6];
        for n in 1..=20 {
            let shards = shards_of(&mixed, n);
            assert!(shards.windows(2).all(|w| w[0] <= w[1]), "{n}: {shards:?}");
            assert!(shards.iter().all(|&k| k < n));
        }
        // Past the measured length (a tree that grew): the last shard.
        assert!(Shard { index: 2, count: 3 }.takes(100, 10, 50));
        // Nothing measured: the first.
        assert!(Shard { index: 0, count: 3 }.takes(0, 1, 0));
    }

    #[test]
    fn equal_units_are_shared_evenly() {
        assert_eq!(
            shards_of(&[10; 12], 3),
            [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
        );
        assert_eq!(shards_of(&[10; 3], 5), [0, 2, 4]);
    }

    #[test]
    fn spread_is_the_largest_share_over_the_mean() {
        let share = |bytes| Share {
            shard: String::new(),
            units: 1,
            bytes,
        };
        assert_eq!(spread(&[share(4), share(4), share(4)]), Some(1.0));
        assert_eq!(spread(&[share(6), share(2), share(4)]), Some(1.5));
        assert_eq!(spread(&[share(0)]), None);
        assert_eq!(spread(&[]), None);
    }
}
