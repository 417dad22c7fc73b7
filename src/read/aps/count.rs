//! Counting records (§3.2) per distinct (mode, pid, tid, event, stack) key
//! (§10), at the speed of memory: memory grows with the distinct stacks,
//! not with the records.
//!
//! The records are parsed in place in the input's bytes (mapped, or
//! decompressed), in chunks of a few megabytes counted on every core (the
//! records have a fixed size, so chunk boundaries are record boundaries) and
//! released once counted, so that a mapped file's pages do not pile up. Each
//! record becomes a fixed-size key of `5 + D` words, `[user, pid, tid,
//! event, pc, cs…]` with `user` made 0/1 and the `cs` entries past the
//! stack's end (§10: `cs_layer` clamped to [0, D], cut at the first 0)
//! zeroed, so that equal samples give equal keys whatever the junk after
//! them. The words stay in the file's byte order while counting (equality
//! does not care) and are decoded for the few distinct keys only. Layouts
//! deeper than [`MAX_FAST_DEPTH`] (the reporter's D is 5) are counted one
//! [`Record`](super::records::Record) at a time, with the same results.

use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::head::FILE_HEAD_SIZE;
use super::key_table::{random_seed, KeyTable};
use super::records::ApsFile;
use super::source::Source;
use crate::error::Result;
use crate::read::cursor::Endian;
use crate::read::options::ReadOptions;

/// The deepest call stack counted with fixed-size keys.
const MAX_FAST_DEPTH: usize = 11;

/// Bytes of records counted as one piece of work, and released from memory
/// at a time. (Smaller chunks keep more pages mapped: a chunk's edge page,
/// read again by its neighbour, maps the pages around it again.)
pub(super) const CHUNK_BYTES: usize = 4 << 20;

/// Bytes of records between two progress reports: a quarter of a chunk, so
/// that the progress bar moves on an 8 MB file even though both cores
/// finish their first chunks together.
const PROGRESS_BYTES: usize = CHUNK_BYTES / 4;

/// Records between prefetching a key's index slot and its entry.
const SLOT_AHEAD: usize = 8;
/// Records between prefetching a key's index slot and counting it.
const ADD_AHEAD: usize = 16;
/// Keys in flight (a power of two above [`ADD_AHEAD`]).
const RING: usize = 32;

/// Words of a key before the call stack: user, pid, tid, event, pc.
const KEY_HEAD: usize = 5;

/// Records of one file counted per distinct `[user, pid, tid, event,
/// stack…]` key (stack leaf first), sorted by key.
pub(super) struct FileCounts {
    pub(super) entries: Vec<(Box<[u32]>, u64)>,
    pub(super) dropped_idle: u64,
}

/// Counts the records of `file` (§10).
pub(super) fn count_records(
    file: &ApsFile,
    src: &Source<'_>,
    options: &ReadOptions,
) -> Result<FileCounts> {
    macro_rules! fast {
        ($($depth:literal => $words:literal),*) => {
            match file.layout.call_depth {
                $($depth => count_fast::<$words>(file, src, options),)*
                _ => count_slow(file, src, options),
            }
        };
    }
    // One instance per D: the key width (5 + D words) is a constant in each.
    fast!(0 => 5, 1 => 6, 2 => 7, 3 => 8, 4 => 9, 5 => 10, 6 => 11, 7 => 12,
          8 => 13, 9 => 14, 10 => 15, 11 => 16)
}

/// Counts with keys of `W = 5 + D` words, on every core.
fn count_fast<const W: usize>(
    file: &ApsFile,
    src: &Source<'_>,
    options: &ReadOptions,
) -> Result<FileCounts> {
    let size = RecordShape::<W>::SIZE;
    debug_assert_eq!(size as u64, file.layout.record_size());
    let records_len = u64::from(file.head.index) * size as u64;
    let records = src.slice(&file.path, FILE_HEAD_SIZE, records_len as usize)?;
    let shape = RecordShape::<W> {
        swap: file.head.endian != native_endian(),
        drop_idle: options.aps.drop_idle,
    };
    let (table, dropped_idle) = count_in_parallel(
        records,
        FILE_HEAD_SIZE as usize,
        |table, bytes| {
            let step = (PROGRESS_BYTES / size).max(1) * size;
            let mut dropped = 0;
            for piece in bytes.chunks(step) {
                dropped += shape.count(table, piece);
                options.advance(piece.len() as u64);
            }
            dropped
        },
        src,
    );
    let mut entries = Vec::with_capacity(table.len());
    entries.extend(table.into_entries().map(|(key, n)| (shape.decode(key), n)));
    // Sorted, so that outputs do not depend on hash order or chunking.
    entries.sort_unstable();
    Ok(FileCounts {
        entries,
        dropped_idle,
    })
}

/// Counts `records` (found at byte `base` of `src`) in chunks on every
/// core, one table per thread (work stealing keeps a busy core from holding
/// the others up), then merges the tables.
fn count_in_parallel<const W: usize>(
    records: &[u8],
    base: usize,
    count: impl Fn(&mut KeyTable<W>, &[u8]) -> u64 + Sync,
    src: &Source<'_>,
) -> (KeyTable<W>, u64) {
    let seed = random_seed();
    let size = RecordShape::<W>::SIZE;
    let chunk = (CHUNK_BYTES / size).max(1) * size;
    let threads = rayon::current_num_threads().max(1);
    let tables: Vec<Mutex<(KeyTable<W>, u64)>> = (0..threads)
        .map(|_| Mutex::new((KeyTable::new(seed), 0)))
        .collect();
    records
        .par_chunks(chunk)
        .enumerate()
        .for_each(|(i, bytes)| {
            let thread = rayon::current_thread_index().unwrap_or(0) % threads;
            if let Some(Ok(mut mine)) = tables.get(thread).map(|t| t.lock()) {
                let (table, dropped) = &mut *mine;
                *dropped += count(table, bytes);
            }
            src.release(base + i * chunk, bytes.len());
        });
    tables
        .into_iter()
        .filter_map(|t| t.into_inner().ok())
        .fold((KeyTable::new(seed), 0), |(a, da), (b, db)| {
            (a.merge(b), da + db)
        })
}

fn native_endian() -> Endian {
    if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    }
}

/// How records of `16 + 4·W` bytes (`36 + 4·D`) become keys of `W` words.
struct RecordShape<const W: usize> {
    /// The file's byte order is not this machine's.
    swap: bool,
    /// Leave pid 0 out (`--drop-idle`).
    drop_idle: bool,
}

impl<const W: usize> RecordShape<W> {
    /// Bytes of a record (§3.2).
    const SIZE: usize = 16 + 4 * W;
    /// D.
    const DEPTH: usize = W - KEY_HEAD;

    /// Counts the whole records of `bytes` into `table`; returns how many
    /// idle records were left out.
    ///
    /// A software pipeline: the index slot of a record's key is prefetched
    /// when the key is made, its entry [`SLOT_AHEAD`] records later, and the
    /// count added [`ADD_AHEAD`] records later, so that the cache misses of
    /// many lookups are under way at once instead of one after another.
    fn count(&self, table: &mut KeyTable<W>, bytes: &[u8]) -> u64 {
        let mut dropped = 0;
        let mut ring = [([0u32; W], 0u64); RING];
        let mut n = 0usize;
        for record in bytes.chunks_exact(Self::SIZE) {
            let Some(key) = self.key(record) else {
                dropped += 1;
                continue;
            };
            let h = table.hash(&key);
            table.prefetch_slot(h);
            if let Some(slot) = ring.get_mut(n % RING) {
                *slot = (key, h);
            }
            if let Some((_, h)) = n.checked_sub(SLOT_AHEAD).and_then(|i| ring.get(i % RING)) {
                table.prefetch_entry(*h);
            }
            if let Some((key, h)) = n.checked_sub(ADD_AHEAD).and_then(|i| ring.get(i % RING)) {
                table.add_hashed(key, *h, 1);
            }
            n += 1;
        }
        for i in n.saturating_sub(ADD_AHEAD)..n {
            if let Some((key, h)) = ring.get(i % RING) {
                table.add_hashed(key, *h, 1);
            }
        }
        dropped
    }

    /// The key of one record, words in the file's byte order but `user`
    /// (0 or 1); `None` for an idle record left out.
    #[inline(always)]
    fn key(&self, record: &[u8]) -> Option<[u32; W]> {
        let word = |i: usize| match record.get(4 * i..4 * i + 4) {
            Some(&[a, b, c, d]) => u32::from_ne_bytes([a, b, c, d]),
            _ => 0,
        };
        let pid = word(1);
        if self.drop_idle && pid == 0 {
            return None;
        }
        let mut key = [0u32; W];
        key[..KEY_HEAD].copy_from_slice(&[u32::from(word(0) != 0), pid, word(2), word(6), word(8)]);
        let layer = if self.swap {
            word(5).swap_bytes()
        } else {
            word(5)
        } as i32;
        let valid = layer.clamp(0, Self::DEPTH as i32) as usize;
        let mut alive = true;
        for (i, slot) in key[KEY_HEAD..].iter_mut().enumerate() {
            let address = word(9 + i);
            alive &= (i < valid) & (address != 0);
            *slot = if alive { address } else { 0 };
        }
        Some(key)
    }

    /// The counted key of `key`: `[user, pid, tid, event, pc, cs…]` in this
    /// machine's byte order, the stack without its zeroed tail.
    fn decode(&self, mut key: [u32; W]) -> Box<[u32]> {
        if self.swap {
            for w in &mut key[1..] {
                *w = w.swap_bytes();
            }
        }
        let callers = key[KEY_HEAD..].iter().take_while(|&&a| a != 0).count();
        key[..KEY_HEAD + callers].into()
    }
}

/// Counts deep layouts one record at a time.
fn count_slow(file: &ApsFile, src: &Source<'_>, options: &ReadOptions) -> Result<FileCounts> {
    debug_assert!(file.layout.call_depth > MAX_FAST_DEPTH);
    let drop_idle = options.aps.drop_idle;
    // FxHash, as the IR's tables: about twice as fast as SipHash on these keys.
    let mut counts: FxHashMap<Box<[u32]>, u64> = FxHashMap::default();
    let mut key: Vec<u32> = Vec::with_capacity(KEY_HEAD + file.layout.call_depth);
    let mut dropped_idle = 0u64;
    file.for_each_record(src, options, |r| {
        if drop_idle && r.pid() == 0 {
            dropped_idle += 1;
            return;
        }
        key.clear();
        key.extend([
            u32::from(r.user()),
            r.pid() as u32,
            r.tid() as u32,
            r.event(),
        ]);
        r.push_stack(&mut key);
        match counts.get_mut(key.as_slice()) {
            Some(n) => *n += 1,
            None => {
                counts.insert(key.as_slice().into(), 1);
            }
        }
    })?;
    let mut entries: Vec<(Box<[u32]>, u64)> = counts.into_iter().collect();
    // Sorted, so that outputs do not depend on hash order.
    entries.sort_unstable();
    Ok(FileCounts {
        entries,
        dropped_idle,
    })
}
