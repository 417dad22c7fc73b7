//! A counting hash table of fixed-size record keys (`W` words), for the
//! record counting of `count.rs` (§10).
//!
//! A `hashbrown::HashTable` of (key, count) entries, no allocation per
//! distinct key. The hash is a folded 64×64→128 multiply (as wyhash and
//! foldhash do) over the key four words at a time, seeded from the standard
//! library's random state: crafted files cannot force long probe chains,
//! and outputs do not depend on the seed because the caller sorts the keys.
//! Memory: one entry per distinct key, and the table's spare room.

use hashbrown::HashTable;

/// The multiplier that mixes the last step (from wyhash's secrets).
const MIX: u64 = 0xe703_7ed1_a0b4_28db;
/// The multiplier of every word pair (from wyhash's secrets).
const PAIR: u64 = 0x8ebc_6af0_9c88_c6e3;

/// A random seed for the hashes of one counting run.
pub(super) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
}

/// Multiplies to 128 bits and folds the halves together.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Two words as one 64-bit lane.
#[inline(always)]
fn lane(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// The hash of `key` under `seed`: as wyhash, one multiply per four words
/// (`h = fold(a ^ PAIR, b ^ h)` over 16-byte steps), then one to mix.
#[inline(always)]
fn hash<const W: usize>(key: &[u32; W], seed: u64) -> u64 {
    let mut h = seed;
    let mut quads = key.chunks_exact(4);
    for quad in &mut quads {
        if let &[a, b, c, d] = quad {
            h = fold_mul(lane(a, b) ^ PAIR, lane(c, d) ^ h);
        }
    }
    let (a, b) = match *quads.remainder() {
        [] => return fold_mul(h, MIX),
        [a] => (lane(a, 0), 0),
        [a, b] => (lane(a, b), 0),
        [a, b, c, ..] => (lane(a, b), u64::from(c)),
    };
    fold_mul(fold_mul(a ^ PAIR, b ^ h), MIX)
}

/// `a == b`, without the call to `memcmp` that `==` on arrays compiles to
/// (a third of the counting time).
#[inline(always)]
fn same<const W: usize>(a: &[u32; W], b: &[u32; W]) -> bool {
    a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Counts per distinct `[u32; W]` key.
pub(super) struct KeyTable<const W: usize> {
    entries: HashTable<([u32; W], u64)>,
    seed: u64,
}

impl<const W: usize> KeyTable<W> {
    /// An empty table hashing with `seed`.
    pub(super) fn new(seed: u64) -> KeyTable<W> {
        KeyTable {
            entries: HashTable::new(),
            seed,
        }
    }

    /// Distinct keys held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds `n` to the count of `key`.
    #[inline]
    pub(super) fn add(&mut self, key: &[u32; W], n: u64) {
        let seed = self.seed;
        let h = hash(key, seed);
        match self.entries.find_mut(h, |(k, _)| same(k, key)) {
            Some((_, count)) => *count = count.saturating_add(n),
            None => {
                self.entries
                    .insert_unique(h, (*key, n), |(k, _)| hash(k, seed));
            }
        }
    }

    /// The counts of both tables (which must share their seed).
    pub(super) fn merge(self, other: KeyTable<W>) -> KeyTable<W> {
        let (mut big, small) = if self.len() >= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        for (key, count) in &small.entries {
            big.add(key, *count);
        }
        big
    }

    /// Every key with its count, in no particular order.
    pub(super) fn into_entries(self) -> impl Iterator<Item = ([u32; W], u64)> {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Keys that differ in one word only, many of them, counted one at a
    /// time and across merged tables, give the counts a plain map gives.
    #[test]
    fn counts_match_a_plain_map_through_growth_and_merges() {
        let key = |i: u32| -> [u32; 3] { [i % 7, 0, i / 7] };
        let mut expected: HashMap<[u32; 3], u64> = HashMap::new();
        let seed = random_seed();
        let mut tables = [KeyTable::<3>::new(seed), KeyTable::<3>::new(seed)];
        for i in 0..50_000u32 {
            let k = key(i.wrapping_mul(2_654_435_761) % 9_000);
            *expected.entry(k).or_insert(0) += 1;
            tables[(i % 2) as usize].add(&k, 1);
        }
        let [a, b] = tables;
        let merged = a.merge(b);
        assert_eq!(merged.len(), expected.len());
        let got: HashMap<[u32; 3], u64> = merged.into_entries().collect();
        assert_eq!(got, expected);
    }
}
