//! A counting hash table of fixed-size record keys (`W` words), for the
//! record counting of `count.rs` (§10).
//!
//! The keys and their counts sit in one dense array in the order they were
//! first seen (the frequent keys come first, so they share cache lines and
//! pages); an open-addressing index with linear probing finds them, each
//! slot 8 bytes (a 32-bit tag of the hash and the entry's number), so a
//! lookup reads one index line and, on a tag match, one entry. No
//! allocation per distinct key. The hash is a folded 64×64→128 multiply (as
//! wyhash and foldhash do) over the key four words at a time, seeded from the
//! standard library's random state: crafted files cannot force long probe
//! chains, and outputs do not depend on the seed because the caller sorts
//! the keys. Memory: one entry per distinct key, plus an index of at most
//! 2 / 0.7 slots per key.

/// The multiplier that mixes the last step (from wyhash's secrets).
const MIX: u64 = 0xe703_7ed1_a0b4_28db;
/// The multiplier of every word pair (from wyhash's secrets).
const PAIR: u64 = 0x8ebc_6af0_9c88_c6e3;
/// Slots of a new table (a power of two).
const INITIAL_SLOTS: usize = 1024;

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

/// The bits of an index slot that hold the tag (the hash's high half).
const TAG: u64 = !(u32::MAX as u64);

/// Asks the processor to bring `item` into the cache, both its first and
/// its last byte (an entry of 48 bytes straddles two cache lines one time
/// in two); a hint that never faults (a no-op on other processors than
/// x86-64).
#[inline(always)]
fn prefetch<T>(item: Option<&T>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = item {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (item as *const T).cast::<i8>();
        let last = p.wrapping_add(std::mem::size_of::<T>().saturating_sub(1));
        // SAFETY: a prefetch reads nothing into the program and cannot fault;
        // both bytes are in a live allocation anyway. (Safe to call since
        // Rust 1.87; `unsafe` kept for older compilers.)
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(last);
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// `a == b`, without the call to `memcmp` that `==` on arrays compiles to.
#[inline(always)]
fn same<const W: usize>(a: &[u32; W], b: &[u32; W]) -> bool {
    a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Counts per distinct `[u32; W]` key.
pub(super) struct KeyTable<const W: usize> {
    /// Power-of-two open-addressing index: 0 for an empty slot, else the
    /// high half of the key's hash (the tag) and its entry number + 1.
    slots: Vec<u64>,
    /// Keys in the order they were first seen, with their counts: the
    /// frequent keys come first and stay in cache together.
    entries: Vec<([u32; W], u64)>,
    seed: u64,
}

impl<const W: usize> KeyTable<W> {
    /// An empty table hashing with `seed`.
    pub(super) fn new(seed: u64) -> KeyTable<W> {
        KeyTable {
            slots: vec![0; INITIAL_SLOTS],
            entries: Vec::new(),
            seed,
        }
    }

    /// Distinct keys held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The hash of `key` in this table.
    #[inline(always)]
    pub(super) fn hash(&self, key: &[u32; W]) -> u64 {
        hash(key, self.seed)
    }

    /// Asks for the index slot of hash `h` to be brought into the cache
    /// (the first step of a lookup that will come a little later).
    #[inline(always)]
    pub(super) fn prefetch_slot(&self, h: u64) {
        prefetch(self.slots.get(h as usize & (self.slots.len() - 1)));
    }

    /// Asks for the entry that the index slot of `h` points to, when its
    /// tag matches, to be brought into the cache (the second step; the slot
    /// should be in the cache by now).
    #[inline(always)]
    pub(super) fn prefetch_entry(&self, h: u64) {
        match self.slots.get(h as usize & (self.slots.len() - 1)) {
            Some(&slot) if slot & TAG == h & TAG => {
                prefetch(self.entries.get((slot as u32 as usize).wrapping_sub(1)));
            }
            _ => {}
        }
    }

    /// Adds `n` to the count of `key`.
    pub(super) fn add(&mut self, key: &[u32; W], n: u64) {
        self.add_hashed(key, hash(key, self.seed), n);
    }

    /// Adds `n` to the count of `key`, whose hash is `h`.
    #[inline(always)]
    pub(super) fn add_hashed(&mut self, key: &[u32; W], h: u64, n: u64) {
        let tag = h & TAG;
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let Some(slot) = self.slots.get_mut(i) else {
                return; // unreachable: i is masked to the table
            };
            if *slot == 0 {
                // At most u32::MAX - 1 entries: records are counted by a u32.
                let number = u32::try_from(self.entries.len() + 1).unwrap_or(u32::MAX);
                *slot = tag | u64::from(number);
                self.entries.push((*key, n));
                if self.entries.len() * 10 > self.slots.len() * 7 {
                    self.grow();
                }
                return;
            }
            if *slot & TAG == tag {
                let number = (*slot as u32 as usize).wrapping_sub(1);
                if let Some((k, count)) = self.entries.get_mut(number) {
                    if same(k, key) {
                        *count = count.saturating_add(n);
                        return;
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the index and puts every entry back in it.
    #[cold]
    fn grow(&mut self) {
        let mut slots = vec![0u64; self.slots.len() * 2];
        let mask = slots.len() - 1;
        for (number, (key, _)) in self.entries.iter().enumerate() {
            let h = hash(key, self.seed);
            let mut i = h as usize & mask;
            while slots.get(i).is_some_and(|&s| s != 0) {
                i = (i + 1) & mask;
            }
            if let Some(slot) = slots.get_mut(i) {
                let number = u32::try_from(number + 1).unwrap_or(u32::MAX);
                *slot = (h & TAG) | u64::from(number);
            }
        }
        self.slots = slots;
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
    /// time, through the prefetching steps and across merged tables, give
    /// the counts a plain map gives.
    #[test]
    fn counts_match_a_plain_map_through_growth_and_merges() {
        let key = |i: u32| -> [u32; 3] { [i % 7, 0, i / 7] };
        let mut expected: HashMap<[u32; 3], u64> = HashMap::new();
        let seed = random_seed();
        let mut tables = [KeyTable::<3>::new(seed), KeyTable::<3>::new(seed)];
        for i in 0..50_000u32 {
            let k = key(i.wrapping_mul(2_654_435_761) % 9_000);
            *expected.entry(k).or_insert(0) += 1;
            let table = &mut tables[(i % 2) as usize];
            let h = table.hash(&k);
            table.prefetch_slot(h);
            table.prefetch_entry(h);
            table.add_hashed(&k, h, 1);
        }
        let [a, b] = tables;
        let merged = a.merge(b);
        assert_eq!(merged.len(), expected.len());
        let got: HashMap<[u32; 3], u64> = merged.into_entries().collect();
        assert_eq!(got, expected);
    }
}
