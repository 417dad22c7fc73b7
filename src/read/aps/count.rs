//! Counting records (§3.2) per distinct (mode, pid, tid, event, stack) key
//! (§10), at the speed of memory: memory grows with the distinct stacks,
//! not with the records.
//!
//! The records are parsed in chunks of a few megabytes (the records have a
//! fixed size, so chunk boundaries are record boundaries): in place in a
//! decompressed input's bytes, else each chunk read into a buffer, so that
//! memory holds a chunk per thread, never the file. One thread counts them
//! in order; with [`ReadOptions::threads`] above 1 the chunks are counted
//! side by side in the reading's pool, one table per thread, merged at the
//! end (the keys are sorted, so the result is the same). Each
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
use rayon::ThreadPool;
use rustc_hash::FxHashMap;

use super::head::FILE_HEAD_SIZE;
use super::key_table::{random_seed, KeyTable};
use super::records::{ApsFile, CHUNK_BYTES};
use super::source::Source;
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::options::ReadOptions;

/// The deepest call stack counted with fixed-size keys.
const MAX_FAST_DEPTH: usize = 11;

/// Bytes of records between two progress reports: a quarter of a chunk, so
/// that the progress bar moves on an 8 MB file even when two threads
/// finish their first chunks together.
const PROGRESS_BYTES: usize = CHUNK_BYTES / 4;

/// Words of a key before the call stack: user, pid, tid, event, pc.
const KEY_HEAD: usize = 5;

/// Records of one file counted per distinct `[user, pid, tid, event,
/// stack…]` key (stack leaf first), sorted by key. Keys are stored flat,
/// `width` words each, the stack padded with zeros (a stack holds no 0
/// entry, so padded keys sort as the stacks do); no allocation per key.
pub(super) struct FileCounts {
    /// Words per key: `5 + D`.
    width: usize,
    /// The keys, one after the other, in this machine's byte order.
    keys: Vec<u32>,
    /// The count of each key.
    counts: Vec<u64>,
    pub(super) dropped_idle: u64,
}

impl FileCounts {
    /// Distinct keys.
    pub(super) fn len(&self) -> usize {
        self.counts.len()
    }

    /// Every key, sorted, without its padding, with its count.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u32], u64)> + '_ {
        let width = self.width.max(1);
        self.keys
            .chunks_exact(width)
            .zip(&self.counts)
            .map(|(key, &n)| {
                let callers = key
                    .get(KEY_HEAD..)
                    .map_or(0, |cs| cs.iter().take_while(|&&a| a != 0).count());
                (key.get(..KEY_HEAD + callers).unwrap_or(key), n)
            })
    }

    /// The counts of fixed-width keys: sorted here.
    fn from_keys<const W: usize>(mut entries: Vec<([u32; W], u64)>, dropped_idle: u64) -> Self {
        // Sorted, so that outputs do not depend on hash order or chunking.
        entries.sort_unstable_by_key(|a| a.0);
        let mut keys = Vec::with_capacity(entries.len() * W);
        let mut counts = Vec::with_capacity(entries.len());
        for (key, n) in entries {
            keys.extend_from_slice(&key);
            counts.push(n);
        }
        FileCounts {
            width: W,
            keys,
            counts,
            dropped_idle,
        }
    }
}

/// Counts the records of `file` (§10), in `pool` when the reading has one
/// ([`ReadOptions::pool`]).
pub(super) fn count_records(
    file: &ApsFile,
    src: &Source<'_>,
    options: &ReadOptions,
    pool: Option<&ThreadPool>,
) -> Result<FileCounts> {
    macro_rules! fast {
        ($($depth:literal => $words:literal),*) => {
            match file.layout.call_depth {
                $($depth => count_fast::<$words, { 16 + 4 * $words }>(file, src, options, pool),)*
                _ => count_slow(file, src, options),
            }
        };
    }
    // One instance per D: the key width (5 + D words) is a constant in each.
    fast!(0 => 5, 1 => 6, 2 => 7, 3 => 8, 4 => 9, 5 => 10, 6 => 11, 7 => 12,
          8 => 13, 9 => 14, 10 => 15, 11 => 16)
}

/// Counts with keys of `W = 5 + D` words, records of `B = 16 + 4·W`
/// bytes.
fn count_fast<const W: usize, const B: usize>(
    file: &ApsFile,
    src: &Source<'_>,
    options: &ReadOptions,
    pool: Option<&ThreadPool>,
) -> Result<FileCounts> {
    let size = RecordShape::<W, B>::SIZE;
    debug_assert_eq!(size as u64, file.layout.record_size());
    let records_len = u64::from(file.head.index) * size as u64;
    let shape = RecordShape::<W, B> {
        swap: file.head.endian != native_endian(),
        drop_idle: options.aps.drop_idle,
    };
    let count = |table: &mut KeyTable<W>, bytes: &[u8]| {
        let step = (PROGRESS_BYTES / size).max(1) * size;
        let mut dropped = 0;
        for piece in bytes.chunks(step) {
            dropped += shape.count(table, piece);
            options.advance(piece.len() as u64);
        }
        dropped
    };
    let chunks = Chunks {
        records_len,
        chunk: ((CHUNK_BYTES / size).max(1) * size) as u64,
    };
    let (table, dropped_idle) = match pool {
        None => count_in_order(chunks, count, src)?,
        Some(pool) => pool.install(|| count_in_parallel(chunks, count, src))?,
    };
    let entries = table.into_entries().map(|(key, n)| (shape.decode(key), n));
    Ok(FileCounts::from_keys(entries.collect(), dropped_idle))
}

/// The records of a file in chunks: `records_len` bytes after the file
/// head, `chunk` bytes (whole records) at a time.
#[derive(Clone, Copy)]
struct Chunks {
    records_len: u64,
    chunk: u64,
}

impl Chunks {
    fn len(self) -> u64 {
        self.records_len.div_ceil(self.chunk)
    }

    /// Chunk `i`'s bytes, read into `buf` unless they are in memory.
    fn read<'b>(self, src: &'b Source<'_>, i: u64, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
        let offset = i * self.chunk;
        let len = self.chunk.min(self.records_len - offset) as usize;
        src.window(FILE_HEAD_SIZE + offset, len, buf)
    }
}

/// Counts the chunks one after the other into one table, reading each
/// into one buffer; the first chunk that cannot be read (the file got
/// shorter) fails the count.
fn count_in_order<const W: usize>(
    chunks: Chunks,
    count: impl Fn(&mut KeyTable<W>, &[u8]) -> u64,
    src: &Source<'_>,
) -> Result<(KeyTable<W>, u64)> {
    let mut table = KeyTable::new(random_seed());
    let mut dropped = 0;
    let mut buf = Vec::new();
    for i in 0..chunks.len() {
        dropped += count(&mut table, chunks.read(src, i, &mut buf)?);
    }
    Ok((table, dropped))
}

/// Counts the chunks on the threads of the current pool, one table per
/// thread (work stealing keeps a busy thread from holding the others up),
/// then merges the tables. Each task reads its chunk into a buffer of its
/// own, reused for its next chunk; the first chunk that cannot be read
/// (the file got shorter) fails the count.
fn count_in_parallel<const W: usize>(
    chunks: Chunks,
    count: impl Fn(&mut KeyTable<W>, &[u8]) -> u64 + Sync,
    src: &Source<'_>,
) -> Result<(KeyTable<W>, u64)> {
    let seed = random_seed();
    let threads = rayon::current_num_threads().max(1);
    let tables: Vec<Mutex<(KeyTable<W>, u64)>> = (0..threads)
        .map(|_| Mutex::new((KeyTable::new(seed), 0)))
        .collect();
    let failed: Mutex<Option<(u64, Error)>> = Mutex::new(None);
    (0..chunks.len())
        .into_par_iter()
        .for_each_init(Vec::new, |buf, i| {
            let bytes = match chunks.read(src, i, buf) {
                Ok(bytes) => bytes,
                Err(e) => {
                    if let Ok(mut first) = failed.lock() {
                        if first.as_ref().is_none_or(|(at, _)| *at > i) {
                            *first = Some((i, e));
                        }
                    }
                    return;
                }
            };
            let thread = rayon::current_thread_index().unwrap_or(0) % threads;
            if let Some(Ok(mut mine)) = tables.get(thread).map(|t| t.lock()) {
                let (table, dropped) = &mut *mine;
                *dropped += count(table, bytes);
            }
        });
    if let Some((_, e)) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(tables
        .into_iter()
        .filter_map(|t| t.into_inner().ok())
        .fold((KeyTable::new(seed), 0), |(a, da), (b, db)| {
            (a.merge(b), da + db)
        }))
}

fn native_endian() -> Endian {
    if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    }
}

/// How records of `B = 16 + 4·W` bytes (`36 + 4·D`) become keys of `W` words.
struct RecordShape<const W: usize, const B: usize> {
    /// The file's byte order is not this machine's.
    swap: bool,
    /// Leave pid 0 out (`--drop-idle`).
    drop_idle: bool,
}

/// Word `i` of a record, in the file's byte order (0 past its end, which
/// the callers' constant indexes never reach: the check compiles away).
#[inline(always)]
fn word<const B: usize>(record: &[u8; B], i: usize) -> u32 {
    match record.get(4 * i..4 * i + 4) {
        Some(&[a, b, c, d]) => u32::from_ne_bytes([a, b, c, d]),
        _ => 0,
    }
}

impl<const W: usize, const B: usize> RecordShape<W, B> {
    /// Bytes of a record (§3.2).
    const SIZE: usize = {
        assert!(B == 16 + 4 * W && W >= KEY_HEAD && W - KEY_HEAD < 32);
        B
    };
    /// D.
    const DEPTH: usize = W - KEY_HEAD;

    /// Counts the whole records of `bytes` into `table`; returns how many
    /// idle records were left out.
    fn count(&self, table: &mut KeyTable<W>, bytes: &[u8]) -> u64 {
        let mut dropped = 0;
        for record in bytes.chunks_exact(Self::SIZE) {
            let Ok(record) = <&[u8; B]>::try_from(record) else {
                continue; // unreachable: the chunks are B bytes long
            };
            match self.key(record) {
                Some(key) => table.add(&key, 1),
                None => dropped += 1,
            }
        }
        dropped
    }

    /// The key of one record, words in the file's byte order but `user`
    /// (0 or 1); `None` for an idle record left out. Branch-free: the
    /// stack keeps its first `min(cs_layer clamped to [0, D], first 0)`
    /// entries, the others are masked to 0.
    #[inline(always)]
    fn key(&self, record: &[u8; B]) -> Option<[u32; W]> {
        let pid = word(record, 1);
        if self.drop_idle && pid == 0 {
            return None;
        }
        let mut key = [0u32; W];
        let head = [u32::from(word(record, 0) != 0), pid, word(record, 2)];
        key[..3].copy_from_slice(&head);
        key[3] = word(record, 6);
        key[4] = word(record, 8);
        let layer = word(record, 5);
        let layer = if self.swap { layer.swap_bytes() } else { layer } as i32;
        let valid = layer.clamp(0, Self::DEPTH as i32) as u32;
        // Bit i: cs[i] is not 0; the stack ends at the first 0 bit.
        let mut nonzero = 0u32;
        for i in 0..Self::DEPTH {
            nonzero |= u32::from(word(record, 9 + i) != 0) << i;
        }
        let len = valid.min((!nonzero).trailing_zeros());
        for (i, slot) in key[KEY_HEAD..].iter_mut().enumerate() {
            let keep = 0u32.wrapping_sub(u32::from((i as u32) < len));
            *slot = word(record, 9 + i) & keep;
        }
        Some(key)
    }

    /// The counted key of `key`: `[user, pid, tid, event, pc, cs…]` in this
    /// machine's byte order, the stack's tail still zeroed.
    fn decode(&self, mut key: [u32; W]) -> [u32; W] {
        if self.swap {
            for w in &mut key[1..] {
                *w = w.swap_bytes();
            }
        }
        key
    }
}

/// Counts deep layouts one record at a time.
fn count_slow(file: &ApsFile, src: &Source<'_>, options: &ReadOptions) -> Result<FileCounts> {
    debug_assert!(file.layout.call_depth > MAX_FAST_DEPTH);
    let drop_idle = options.aps.drop_idle;
    let width = KEY_HEAD + file.layout.call_depth;
    // FxHash, as the IR's tables: about twice as fast as SipHash on these keys.
    let mut counts: FxHashMap<Box<[u32]>, u64> = FxHashMap::default();
    let mut key: Vec<u32> = Vec::with_capacity(width);
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
    let mut keys = Vec::with_capacity(entries.len() * width);
    for (key, _) in &entries {
        keys.extend_from_slice(key);
        keys.resize(keys.len() + width.saturating_sub(key.len()), 0);
    }
    Ok(FileCounts {
        width,
        keys,
        counts: entries.into_iter().map(|(_, n)| n).collect(),
        dropped_idle,
    })
}
