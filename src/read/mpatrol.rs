//! mpatrol reader: `mpatrol.out` allocation profiles (spec: shared/specs/mpatrol.md).
//!
//! The file is a dump of native C words (`size_t`, `unsigned long`, `void *`)
//! in the producing machine's byte order and word size, framed by the magic
//! `MPTL` at both ends. [`parse`] checks and keeps everything in it;
//! [`to_profile`] turns it into a heap profile: one sample per profiling
//! record, its stack the chain of call sites from the one that carries the
//! record, leaf first, with function names from the file's own string table.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use super::input::Detection;
use super::input::Input;
use super::options::ReadOptions;
use crate::error::{Error, Result};
use crate::profile::{GroupBy, Line, LocationId, Mapping, MappingId, Profile};
use crate::read::cursor::{Cursor, Endian};
use crate::symbolize::{self, Binary};

/// The magic at the start and at the end of every profiling file.
pub const MAGIC: &[u8; 4] = b"MPTL";

/// The first library version (1.3.0) that wrote its version number after the
/// endianness marker; mprof refuses anything older.
pub const FIRST_VERSIONED: u64 = 10300;

/// Versions are `major * 10000 + minor * 100 + patch`: anything at or past
/// this is not a version (spec §2, detection).
const VERSION_LIMIT: u64 = 1_000_000;

/// Words in one profiling record: index, then four arrays of four.
const RECORD_WORDS: usize = 17;
/// Words in one call site.
const CALL_SITE_WORDS: usize = 6;

/// The four size classes of a profiling record (spec §2, "Profiling record").
pub const SIZE_CLASSES: [&str; 4] = ["small", "medium", "large", "xlarge"];

/// The sample types, in this order (spec §3).
const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("free_objects", "count"),
    ("free_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];
const DEFAULT_SAMPLE_TYPE: usize = 5;

/// At most this many frames in all the samples' stacks together: a small
/// hostile file can chain its call sites so that the stacks grow with the
/// square of its size, and the profile holds every frame.
pub const MAX_STACK_FRAMES: u64 = 1 << 24;

/// The whole-program size histogram (spec §2 row 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeBins {
    /// `alloc_counts[k]`: allocations of exactly `k + 1` bytes, except the
    /// last bin, which counts every allocation of `B` bytes or more.
    pub alloc_counts: Vec<u64>,
    /// Bytes of the allocations counted in the last bin.
    pub alloc_large_bytes: u64,
    pub free_counts: Vec<u64>,
    pub free_large_bytes: u64,
}

/// Totals of one side (allocations or frees) of the histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BinTotals {
    pub count: u128,
    pub bytes: u128,
    /// Count and bytes of the last ("B bytes or more") bin.
    pub large_count: u64,
    pub large_bytes: u64,
}

impl SizeBins {
    fn totals(counts: &[u64], large_bytes: u64) -> BinTotals {
        let mut t = BinTotals {
            large_bytes,
            ..BinTotals::default()
        };
        let last = counts.len().saturating_sub(1);
        for (k, &n) in counts.iter().enumerate() {
            t.count += u128::from(n);
            if k == last {
                t.large_count = n;
                t.bytes += u128::from(large_bytes);
            } else {
                t.bytes += u128::from(n) * (k as u128 + 1);
            }
        }
        t
    }

    /// What mprof's bin table sums as "allocated".
    pub fn alloc_totals(&self) -> BinTotals {
        Self::totals(&self.alloc_counts, self.alloc_large_bytes)
    }

    pub fn free_totals(&self) -> BinTotals {
        Self::totals(&self.free_counts, self.free_large_bytes)
    }
}

/// One profiling record: what the allocations of one call stack did, split
/// by size class (spec §2 row 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilingRecord {
    /// Byte offset of the record in the file.
    pub offset: usize,
    /// 1-based, in creation order.
    pub index: u64,
    pub alloc_count: [u64; 4],
    pub alloc_bytes: [u64; 4],
    pub free_count: [u64; 4],
    pub free_bytes: [u64; 4],
}

/// One call site: a return address in a call stack (spec §2 row 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// Byte offset of the call site in the file.
    pub offset: usize,
    /// 1-based, in creation order.
    pub index: u64,
    /// The call site one frame further out, 0 = none.
    pub parent: u64,
    /// The return address.
    pub address: u64,
    /// 1-based index into the symbol addresses, 0 = unknown.
    pub symbol: u64,
    /// Offset of the function name in the string table, 0 = no name.
    pub name_offset: u64,
    /// 1-based index of the profiling record this call site carries, 0 = none.
    pub record: u64,
}

/// Everything an `mpatrol.out` file holds, checked.
#[derive(Debug, Clone)]
pub struct MpatrolFile {
    pub endian: Endian,
    pub word_size: usize,
    /// `MP_VERNUM` of the library that wrote the file.
    pub version: u64,
    /// The small, medium and large allocation bounds, in bytes.
    pub bounds: [u64; 3],
    /// The size histogram; `None` when the bin count is 0.
    pub bins: Option<SizeBins>,
    /// In file order.
    pub records: Vec<ProfilingRecord>,
    /// In file order (sorted by address, not by index).
    pub call_sites: Vec<CallSite>,
    /// Start addresses of the functions the call sites are in.
    pub symbol_addresses: Vec<u64>,
    /// The string table, leading NUL included.
    pub strings: Vec<u8>,
    /// Frames in the stacks of all profiling records together.
    pub stack_frames: u64,
    /// `call_site_of_index[i - 1]`: position in `call_sites` of the call site with index `i`.
    call_site_of_index: Vec<usize>,
    /// `record_of_index[i - 1]`: position in `records` of the record with index `i`.
    record_of_index: Vec<usize>,
}

impl MpatrolFile {
    /// `1.4.8` for 10408.
    pub fn version_text(&self) -> String {
        version_text(self.version)
    }

    /// The call site with 1-based `index`.
    pub fn call_site(&self, index: u64) -> Option<&CallSite> {
        let i = usize::try_from(index.checked_sub(1)?).ok()?;
        self.call_sites.get(*self.call_site_of_index.get(i)?)
    }

    /// The profiling record with 1-based `index`.
    pub fn record(&self, index: u64) -> Option<&ProfilingRecord> {
        let i = usize::try_from(index.checked_sub(1)?).ok()?;
        self.records.get(*self.record_of_index.get(i)?)
    }

    /// The function name of a call site, from the string table (lossy UTF-8).
    pub fn name(&self, site: &CallSite) -> Option<String> {
        if site.name_offset == 0 {
            return None;
        }
        let start = usize::try_from(site.name_offset).ok()?;
        let tail = self.strings.get(start..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&tail[..end]).into_owned())
    }

    /// The start address of the function a call site is in.
    pub fn symbol_address(&self, site: &CallSite) -> Option<u64> {
        let i = usize::try_from(site.symbol.checked_sub(1)?).ok()?;
        self.symbol_addresses.get(i).copied()
    }

    /// The stack of a call site, leaf first: it, its parent, and so on.
    /// [`parse`] has already refused missing parents and loops.
    pub fn stack<'a>(&'a self, site: &'a CallSite) -> Vec<&'a CallSite> {
        let mut out = vec![site];
        let mut parent = site.parent;
        while parent != 0 && out.len() <= self.call_sites.len() {
            let Some(p) = self.call_site(parent) else {
                break;
            };
            out.push(p);
            parent = p.parent;
        }
        out
    }

    /// The same stack as positions in `call_sites`.
    fn stack_positions(&self, start: usize, out: &mut Vec<usize>) {
        out.clear();
        let mut pos = Some(start);
        while let Some(p) = pos {
            if out.len() > self.call_sites.len() {
                break;
            }
            out.push(p);
            pos = self
                .call_sites
                .get(p)
                .and_then(|s| s.parent.checked_sub(1))
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.call_site_of_index.get(i).copied());
        }
    }

    /// Sums of the records per size class: (alloc count, alloc bytes, free count, free bytes).
    pub fn class_totals(&self) -> [[u128; 4]; 4] {
        let mut out = [[0u128; 4]; 4];
        for r in &self.records {
            for (k, class) in out.iter_mut().enumerate() {
                class[0] += u128::from(r.alloc_count[k]);
                class[1] += u128::from(r.alloc_bytes[k]);
                class[2] += u128::from(r.free_count[k]);
                class[3] += u128::from(r.free_bytes[k]);
            }
        }
        out
    }
}

fn version_text(v: u64) -> String {
    format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

/// A file that starts with the magic: the trailing magic and the marker are
/// checked by [`parse`], which names the older layouts it refuses, so they
/// are detected here too.
pub fn detect(head: &[u8], _file_len: u64) -> bool {
    head.starts_with(MAGIC)
}

/// A file that starts with the magic.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect(head, file_len) {
        Detection::Magic
    } else {
        Detection::No
    }
}

/// The (word size, byte order) combinations, in the order the spec tries them.
const LAYOUTS: [(usize, Endian); 4] = [
    (8, Endian::Little),
    (8, Endian::Big),
    (4, Endian::Little),
    (4, Endian::Big),
];

/// Parses and checks a whole profiling file (spec §2).
pub fn parse(path: &Path, data: &[u8]) -> Result<MpatrolFile> {
    if data.get(..4) != Some(&MAGIC[..]) {
        let found = data.get(..4).unwrap_or(data);
        return Err(Error::format(
            path,
            0,
            format!(
                "expected the mpatrol magic \"MPTL\", found {}",
                show_bytes(found)
            ),
        ));
    }
    let mut first_error = None;
    let mut any_marker = false;
    let mut any_version = false;
    for (word_size, endian) in LAYOUTS {
        let mut c = Cursor::new(path, data, endian, word_size);
        c.seek(4)?;
        if c.word("marker").ok() != Some(1) {
            continue;
        }
        any_marker = true;
        let version_at = c.offset();
        let version = match c.word("the library version number") {
            Ok(v) => v,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        if !(FIRST_VERSIONED..VERSION_LIMIT).contains(&version) {
            first_error.get_or_insert_with(|| {
                c.error_at(
                    version_at,
                    format!(
                        "the version word holds {version}, not an mpatrol version number ({FIRST_VERSIONED} for 1.3.0 up to {})",
                        VERSION_LIMIT - 1
                    ),
                )
            });
            continue;
        }
        any_version = true;
        match parse_body(c, version) {
            Ok(file) => return Ok(file),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // A marker and a version were found: the file is of the current layout
    // and damaged; say where.
    if !any_version {
        if let Some(refusal) = older_layout(path, data, any_marker) {
            return Err(refusal);
        }
    }
    Err(first_error.unwrap_or_else(|| {
        Error::format(
            path,
            4,
            format!(
                "expected the endianness marker (a 4- or 8-byte word holding 1, in either byte order) after the magic, found {}",
                show_bytes(data.get(4..12).unwrap_or(&data[4..]))
            ),
        )
    }))
}

/// Names the layouts profconv knows of but does not read, when `data` is one.
fn older_layout(path: &Path, data: &[u8], any_marker: bool) -> Option<Error> {
    // 64-bit Windows (LLP64): an 8-byte `size_t` marker, then a 4-byte
    // `unsigned long` version (spec §5).
    for endian in [Endian::Little, Endian::Big] {
        let mut c = Cursor::new(path, data, endian, 8);
        if c.seek(4).is_ok() && c.word("marker").ok() == Some(1) {
            // The 8-byte word after the marker holds the version and half of
            // the small bound: no version as a whole, one in its first half.
            let whole = c.clone().word("version").ok();
            let implausible = whole.is_some_and(|w| !(FIRST_VERSIONED..VERSION_LIMIT).contains(&w));
            if let (true, Ok(v)) = (implausible, c.u32("version")) {
                if (FIRST_VERSIONED..VERSION_LIMIT).contains(&u64::from(v)) {
                    return Some(Error::unsupported(
                        path,
                        format!(
                            "an mpatrol {} profiling file from a 64-bit Windows build (8-byte size_t but 4-byte unsigned long), which profconv does not read",
                            version_text(u64::from(v))
                        ),
                    ));
                }
            }
        }
    }
    let ends_with_magic = data.len() >= 8 && data.ends_with(MAGIC);
    if !ends_with_magic {
        return None;
    }
    if any_marker {
        // A marker but no version word: the layout of May to November 2000,
        // before 1.3.0. The body is the current one, so a parse without the
        // version word tells it apart from a damaged file.
        for (word_size, endian) in LAYOUTS {
            let mut c = Cursor::new(path, data, endian, word_size);
            if c.seek(4).is_ok() && c.word("marker").ok() == Some(1) && parse_body(c, 0).is_ok() {
                return Some(Error::unsupported(
                    path,
                    "an mpatrol profiling file of the layout before 1.3.0 (endianness marker but no version word), which mprof 1.3 and later and profconv do not read",
                ));
            }
        }
        return None;
    }
    Some(Error::unsupported(
        path,
        "an mpatrol profiling file of the oldest layout (no endianness marker and no version word, mpatrol before 1.3.0), which mprof 1.3 and later and profconv do not read",
    ))
}

fn show_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "the end of the file".into();
    }
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("bytes {}", hex.join(" "))
}

/// Reads `n` words after checking that they fit.
fn words(c: &mut Cursor<'_>, n: u64, what: &str) -> Result<Vec<u64>> {
    c.check_items(n, c.word_size, what)?;
    (0..n).map(|_| c.word(what)).collect()
}

fn word_array4(c: &mut Cursor<'_>, what: &str) -> Result<[u64; 4]> {
    Ok([c.word(what)?, c.word(what)?, c.word(what)?, c.word(what)?])
}

/// Everything after the version word, through the trailing magic.
fn parse_body(mut c: Cursor<'_>, version: u64) -> Result<MpatrolFile> {
    let bounds = [
        c.word("the small allocation bound")?,
        c.word("the medium allocation bound")?,
        c.word("the large allocation bound")?,
    ];
    let bin_count = c.word("the allocation bin count")?;
    let bins = if bin_count > 0 {
        // Two arrays of B words and two totals.
        c.check_items(
            bin_count,
            2 * c.word_size,
            "allocation and deallocation bins",
        )?;
        let alloc_counts = words(&mut c, bin_count, "allocation bins")?;
        let alloc_large_bytes = c.word("the large allocation total")?;
        let free_counts = words(&mut c, bin_count, "deallocation bins")?;
        let free_large_bytes = c.word("the large deallocation total")?;
        Some(SizeBins {
            alloc_counts,
            alloc_large_bytes,
            free_counts,
            free_large_bytes,
        })
    } else {
        None
    };

    let record_count = c.word("the number of profiling records")?;
    c.check_items(
        record_count,
        RECORD_WORDS * c.word_size,
        "profiling records",
    )?;
    let mut records = Vec::with_capacity(record_count as usize);
    for _ in 0..record_count {
        let offset = c.offset();
        records.push(ProfilingRecord {
            offset,
            index: c.word("a profiling record index")?,
            alloc_count: word_array4(&mut c, "allocation counts")?,
            alloc_bytes: word_array4(&mut c, "allocation totals")?,
            free_count: word_array4(&mut c, "deallocation counts")?,
            free_bytes: word_array4(&mut c, "deallocation totals")?,
        });
    }

    let call_site_count = c.word("the number of call sites")?;
    c.check_items(call_site_count, CALL_SITE_WORDS * c.word_size, "call sites")?;
    let mut call_sites = Vec::with_capacity(call_site_count as usize);
    for _ in 0..call_site_count {
        let offset = c.offset();
        call_sites.push(CallSite {
            offset,
            index: c.word("a call site index")?,
            parent: c.word("a parent call site index")?,
            address: c.word("a call site address")?,
            symbol: c.word("a symbol index")?,
            name_offset: c.word("a symbol name offset")?,
            record: c.word("a profiling record index")?,
        });
    }

    let symbol_count = c.word("the number of symbols")?;
    let symbol_addresses = words(&mut c, symbol_count, "symbol addresses")?;

    let strings_len = c.word("the string table size")?;
    let strings_len = c.check_items(strings_len, 1, "the string table")?;
    let strings = c.bytes(strings_len, "the string table")?.to_vec();

    let magic_at = c.offset();
    let magic = c.bytes(4, "the trailing magic \"MPTL\"")?;
    if magic != MAGIC {
        return Err(c.error_at(
            magic_at,
            format!(
                "expected the trailing magic \"MPTL\", found {}",
                show_bytes(magic)
            ),
        ));
    }
    if !c.at_end() {
        return Err(c.error(format!(
            "{} bytes follow the trailing magic, which must end the file",
            c.remaining()
        )));
    }

    let mut file = MpatrolFile {
        endian: c.endian,
        word_size: c.word_size,
        version,
        bounds,
        bins,
        records,
        call_sites,
        symbol_addresses,
        strings,
        stack_frames: 0,
        call_site_of_index: Vec::new(),
        record_of_index: Vec::new(),
    };
    check_references(&c, &mut file)?;
    Ok(file)
}

/// Checks every index and offset the file holds against what it holds, and
/// that the parent chains end (spec §5), filling the index tables.
fn check_references(c: &Cursor<'_>, file: &mut MpatrolFile) -> Result<()> {
    let record_count = file.records.len();
    let mut record_of_index = vec![usize::MAX; record_count];
    for (pos, r) in file.records.iter().enumerate() {
        let slot = r
            .index
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| record_of_index.get_mut(i));
        match slot {
            Some(s) if *s == usize::MAX => *s = pos,
            Some(_) => {
                return Err(c.error_at(
                    r.offset,
                    format!("profiling record index {} appears twice", r.index),
                ));
            }
            None => {
                return Err(c.error_at(
                    r.offset,
                    format!(
                        "profiling record index {} is not in 1..={record_count}",
                        r.index
                    ),
                ));
            }
        }
    }

    let site_count = file.call_sites.len();
    let mut site_of_index = vec![usize::MAX; site_count];
    let mut carrier_of_record = vec![usize::MAX; record_count];
    let strings_len = file.strings.len() as u64;
    let symbol_count = file.symbol_addresses.len() as u64;
    let w = file.word_size;
    for (pos, s) in file.call_sites.iter().enumerate() {
        let slot = s
            .index
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| site_of_index.get_mut(i));
        match slot {
            Some(slot) if *slot == usize::MAX => *slot = pos,
            Some(_) => {
                return Err(c.error_at(
                    s.offset,
                    format!("call site index {} appears twice", s.index),
                ))
            }
            None => {
                return Err(c.error_at(
                    s.offset,
                    format!("call site index {} is not in 1..={site_count}", s.index),
                ))
            }
        }
        if s.parent > site_count as u64 {
            return Err(c.error_at(
                s.offset + w,
                format!(
                    "call site {} has parent {}, but there are only {site_count} call sites",
                    s.index, s.parent
                ),
            ));
        }
        if s.symbol > symbol_count {
            return Err(c.error_at(
                s.offset + 3 * w,
                format!(
                    "call site {} has symbol index {}, but there are only {symbol_count} symbols",
                    s.index, s.symbol
                ),
            ));
        }
        if s.name_offset != 0 {
            let terminated = usize::try_from(s.name_offset)
                .ok()
                .and_then(|o| file.strings.get(o..))
                .is_some_and(|tail| tail.contains(&0));
            if !terminated {
                return Err(c.error_at(
                    s.offset + 4 * w,
                    if s.name_offset >= strings_len {
                        format!(
                            "call site {} has its name at offset {}, past the {strings_len}-byte string table",
                            s.index, s.name_offset
                        )
                    } else {
                        format!(
                            "call site {} has its name at offset {} of the string table, which has no NUL after it",
                            s.index, s.name_offset
                        )
                    },
                ));
            }
        }
        if s.record != 0 {
            let slot = usize::try_from(s.record - 1)
                .ok()
                .and_then(|i| carrier_of_record.get_mut(i));
            match slot {
                Some(slot) if *slot == usize::MAX => *slot = pos,
                Some(_) => {
                    return Err(c.error_at(
                        s.offset + 5 * w,
                        format!("profiling record {} is carried by two call sites", s.record),
                    ))
                }
                None => {
                    return Err(c.error_at(
                        s.offset + 5 * w,
                        format!(
                            "call site {} carries profiling record {}, but there are only {record_count} records",
                            s.index, s.record
                        ),
                    ))
                }
            }
        }
    }
    if let Some(r) = carrier_of_record.iter().position(|&p| p == usize::MAX) {
        let record = file
            .records
            .get(record_of_index.get(r).copied().unwrap_or(0));
        return Err(c.error_at(
            record.map_or(0, |r| r.offset),
            format!("profiling record {} is carried by no call site", r + 1),
        ));
    }

    // Parent chains must end: colour each call site once (0 = unseen,
    // 1 = on the chain being walked, 2 = known to end), so the check is
    // linear whatever the file holds.
    // The depth of each stack is found on the way (1 + the parent's).
    let mut state = vec![0u8; site_count];
    let mut depth = vec![0u64; site_count];
    let mut chain = Vec::new();
    for start in 0..site_count {
        chain.clear();
        let mut pos = start;
        let mut base = 0u64;
        loop {
            match state.get(pos).copied() {
                Some(0) => {}
                Some(1) => {
                    let s = &file.call_sites[pos];
                    return Err(c.error_at(
                        s.offset + w,
                        format!("the parents of call site {} form a loop", s.index),
                    ));
                }
                _ => {
                    base = depth.get(pos).copied().unwrap_or(0);
                    break;
                }
            }
            state[pos] = 1;
            chain.push(pos);
            let parent = file.call_sites[pos].parent;
            if parent == 0 {
                break;
            }
            // In range: checked above.
            match site_of_index.get((parent - 1) as usize) {
                Some(&p) => pos = p,
                None => break,
            }
        }
        for &p in chain.iter().rev() {
            base += 1;
            depth[p] = base;
            state[p] = 2;
        }
    }
    file.stack_frames = file
        .call_sites
        .iter()
        .zip(&depth)
        .filter(|(s, _)| s.record != 0)
        .map(|(_, d)| d)
        .sum();
    file.call_site_of_index = site_of_index;
    file.record_of_index = record_of_index;
    Ok(())
}

/// `v` as a pprof value, or an error naming where it came from.
fn value(c: &Cursor<'_>, offset: usize, v: u128, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        c.error_at(
            offset,
            format!("{what} {v} is too large for a profile value"),
        )
    })
}

/// The six sample values of a record, over the size classes in `classes`.
fn record_values(
    c: &Cursor<'_>,
    r: &ProfilingRecord,
    classes: std::ops::Range<usize>,
) -> Result<[i64; 6]> {
    let sum = |a: &[u64; 4]| {
        a[classes.clone()]
            .iter()
            .map(|&v| u128::from(v))
            .sum::<u128>()
    };
    let ac = value(c, r.offset, sum(&r.alloc_count), "an allocation count")?;
    let ab = value(c, r.offset, sum(&r.alloc_bytes), "an allocation total")?;
    let fc = value(c, r.offset, sum(&r.free_count), "a deallocation count")?;
    let fb = value(c, r.offset, sum(&r.free_bytes), "a deallocation total")?;
    Ok([ac, ab, fc, fb, ac.saturating_sub(fc), ab.saturating_sub(fb)])
}

/// The load bias of the profiled program relative to `binary`'s link-time
/// addresses: the file names functions and gives their runtime start
/// addresses, the binary gives their link-time ones; the most common
/// difference wins (0 when no name matches, as for a non-PIE executable).
fn load_bias(file: &MpatrolFile, binary: &Binary) -> u64 {
    let mut by_name: HashMap<&str, u64> = HashMap::new();
    for s in binary.symbols() {
        by_name.entry(s.system_name.as_str()).or_insert(s.address);
        by_name.entry(s.name.as_str()).or_insert(s.address);
    }
    let mut votes: HashMap<u64, usize> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for site in &file.call_sites {
        if !seen.insert(site.symbol) {
            continue;
        }
        let (Some(name), Some(runtime)) = (file.name(site), file.symbol_address(site)) else {
            continue;
        };
        if let Some(&linked) = by_name.get(name.as_str()) {
            *votes.entry(runtime.wrapping_sub(linked)).or_insert(0) += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(bias, n)| (n, std::cmp::Reverse(bias)))
        .map_or(0, |(bias, _)| bias)
}

/// The mapping for `--binary`: its executable segment moved by the load bias.
fn binary_mapping(
    profile: &mut Profile,
    binary: &Binary,
    bias: u64,
) -> Option<(MappingId, u64, u64)> {
    let text = binary.text_segment()?;
    let (start, limit) = binary.text_range()?;
    let filename = profile.intern(&binary.path.to_string_lossy());
    let build_id = profile.intern(&binary.build_id);
    let start = start.wrapping_add(bias);
    let limit = limit.wrapping_add(bias);
    let id = profile.add_mapping(Mapping::new(start, limit, text.offset, filename, build_id));
    Some((id, start, limit))
}

/// Turns a parsed file into a heap profile (spec §3).
pub fn to_profile(
    path: &Path,
    data: &[u8],
    file: &MpatrolFile,
    options: &ReadOptions,
) -> Result<Profile> {
    let c = Cursor::new(path, data, file.endian, file.word_size);
    let copies = if options.mpatrol.size_classes { 4 } else { 1 };
    if file.stack_frames.saturating_mul(copies) > MAX_STACK_FRAMES {
        return Err(Error::unsupported(
            path,
            format!(
                "the stacks of the {} profiling records hold {} frames in all, more than profconv's limit of {MAX_STACK_FRAMES}",
                file.records.len(),
                file.stack_frames.saturating_mul(copies)
            ),
        ));
    }
    let mut profile = Profile::new(&SAMPLE_TYPES);
    profile.default_sample_type = Some(DEFAULT_SAMPLE_TYPE);
    profile.set_period("space", "bytes", 1);
    add_metadata(&mut profile, file);

    let binary = match &options.binary {
        Some(b) => Some(Binary::open(b)?),
        None => None,
    };
    let bias = binary.as_ref().map_or(0, |b| load_bias(file, b));
    let mapping = match &binary {
        Some(b) => binary_mapping(&mut profile, b, bias),
        None => None,
    };

    // One location per call site, shared by equal addresses.
    let mut location_of_site: Vec<Option<LocationId>> = vec![None; file.call_sites.len()];
    let mut named: Vec<(LocationId, usize)> = Vec::new();
    for (pos, site) in file.call_sites.iter().enumerate() {
        let in_binary =
            mapping.filter(|&(_, start, limit)| site.address >= start && site.address < limit);
        let id = profile.address_location(in_binary.map(|m| m.0), site.address, true);
        location_of_site[pos] = Some(id);
        named.push((id, pos));
    }
    if let (Some(b), Some((id, _, _))) = (&binary, mapping) {
        symbolize::symbolize_mapping(&mut profile, id, b, &|addr| Some(addr.wrapping_sub(bias)));
    }
    // Names from the file itself where the binary gave none (or there is no
    // binary). A call site without a name stays an address, as mprof shows it.
    for (id, pos) in named {
        if !profile.locations[id as usize].lines.is_empty() {
            continue;
        }
        let site = &file.call_sites[pos];
        if let Some(raw) = file.name(site) {
            let name = addr2line::demangle_auto(raw.as_str().into(), None).into_owned();
            let function = profile.add_function(&name, &raw, "", 0);
            profile.set_location_lines(id, vec![Line { function, line: 0 }]);
        }
    }

    let mut stack: Vec<LocationId> = Vec::new();
    let mut positions = Vec::new();
    let mut labels = Vec::new();
    for (pos, site) in file.call_sites.iter().enumerate() {
        let Some(record) = file.record(site.record) else {
            continue;
        };
        file.stack_positions(pos, &mut positions);
        stack.clear();
        stack.extend(
            positions
                .iter()
                .filter_map(|&p| location_of_site.get(p).copied().flatten()),
        );
        if options.mpatrol.size_classes {
            for (k, class) in SIZE_CLASSES.iter().enumerate() {
                let values = record_values(&c, record, k..k + 1)?;
                if values[..4].iter().all(|&v| v == 0) {
                    continue;
                }
                labels.clear();
                labels.push(profile.label_str("size_class", class));
                if let Some(&bound) = file.bounds.get(k) {
                    let bound = value(
                        &c,
                        4 + (2 + k) * file.word_size,
                        u128::from(bound),
                        "an allocation bound",
                    )?;
                    labels.push(profile.label_num("size_class_max", bound, "bytes"));
                }
                profile.add_sample(&stack, &values, &labels);
            }
        } else {
            let values = record_values(&c, record, 0..4)?;
            profile.add_sample(&stack, &values, &[]);
        }
    }
    if options.mpatrol.size_classes {
        profile.group_by.push(GroupBy::Label("size_class".into()));
    }
    Ok(profile)
}

fn bounds_text(b: &[u64; 3]) -> String {
    format!(
        "small <= {} < medium <= {} < large <= {} < xlarge (bytes)",
        b[0], b[1], b[2]
    )
}

fn add_metadata(profile: &mut Profile, file: &MpatrolFile) {
    profile.add_metadata(
        "mpatrol version",
        format!("{} ({})", file.version_text(), file.version),
    );
    profile.add_metadata("word size", format!("{} bytes", file.word_size));
    profile.add_metadata("byte order", file.endian.name());
    profile.add_metadata("allocation bounds", bounds_text(&file.bounds));
    profile.add_metadata(
        "profiling file",
        format!(
            "{} profiling records, {} call sites, {} symbols",
            file.records.len(),
            file.call_sites.len(),
            file.symbol_addresses.len()
        ),
    );
    if let Some(bins) = &file.bins {
        let a = bins.alloc_totals();
        let f = bins.free_totals();
        let n = bins.alloc_counts.len();
        profile.add_metadata(
            "size bins",
            format!(
                "{n} bins: {} allocations ({} bytes), {} frees ({} bytes), {} unfreed ({} bytes); {} allocations of {n} bytes or more ({} bytes), {} such frees ({} bytes)",
                a.count,
                a.bytes,
                f.count,
                f.bytes,
                a.count as i128 - f.count as i128,
                a.bytes as i128 - f.bytes as i128,
                a.large_count,
                a.large_bytes,
                f.large_count,
                f.large_bytes
            ),
        );
    }
    profile
        .comments
        .push("mpatrol allocation profile: one sample per call stack that allocated; inuse = allocated - freed".into());
}

/// Reads one or more `mpatrol.out` files into one profile (summed).
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let mut out: Option<Profile> = None;
    for input in inputs {
        let (path, data) = (input.name(), input.bytes());
        let file = parse(path, data)?;
        let profile = to_profile(path, data, &file, options)?;
        match &mut out {
            None => out = Some(profile),
            Some(acc) => acc.merge(&profile)?,
        }
    }
    out.ok_or_else(|| Error::Usage("no input given".into()))
}

/// What `profconv info` prints for each file.
pub fn info(inputs: &[Input], _options: &ReadOptions) -> Result<String> {
    let mut out = String::new();
    for input in inputs {
        let path = input.name();
        let file = parse(path, input.bytes())?;
        describe(&mut out, path, &file);
    }
    Ok(out)
}

fn describe(out: &mut String, path: &Path, file: &MpatrolFile) {
    let _ = writeln!(
        out,
        "{}: mpatrol profiling file (mpatrol.out)",
        path.display()
    );
    let _ = writeln!(
        out,
        "  mpatrol version: {} ({})",
        file.version_text(),
        file.version
    );
    let _ = writeln!(out, "  word size: {} bytes", file.word_size);
    let _ = writeln!(out, "  byte order: {}", file.endian.name());
    let _ = writeln!(out, "  allocation bounds: {}", bounds_text(&file.bounds));
    let _ = writeln!(
        out,
        "  profiling records: {}, call sites: {}, symbols: {}, string table: {} bytes",
        file.records.len(),
        file.call_sites.len(),
        file.symbol_addresses.len(),
        file.strings.len()
    );
    let totals = file.class_totals();
    let sum = |i: usize| totals.iter().map(|t| t[i]).sum::<u128>();
    let _ = writeln!(out, "  totals of the profiling records:");
    let _ = writeln!(out, "    allocated: {} objects, {} bytes", sum(0), sum(1));
    let _ = writeln!(out, "    freed:     {} objects, {} bytes", sum(2), sum(3));
    let _ = writeln!(
        out,
        "    in use:    {} objects, {} bytes",
        sum(0) as i128 - sum(2) as i128,
        sum(1) as i128 - sum(3) as i128
    );
    for (class, t) in SIZE_CLASSES.iter().zip(totals) {
        let _ = writeln!(
            out,
            "    {class:<7} allocated {} objects, {} bytes; freed {} objects, {} bytes",
            t[0], t[1], t[2], t[3]
        );
    }
    let Some(bins) = &file.bins else {
        let _ = writeln!(out, "  size histogram: none (bin count 0)");
        return;
    };
    let n = bins.alloc_counts.len();
    let a = bins.alloc_totals();
    let f = bins.free_totals();
    let _ = writeln!(out, "  size histogram ({n} bins, whole program):");
    let _ = writeln!(out, "    allocated: {} objects, {} bytes", a.count, a.bytes);
    let _ = writeln!(out, "    freed:     {} objects, {} bytes", f.count, f.bytes);
    let _ = writeln!(
        out,
        "    unfreed:   {} objects, {} bytes",
        a.count as i128 - f.count as i128,
        a.bytes as i128 - f.bytes as i128
    );
    // The busiest bins (at most ten), shown in size order.
    let mut busiest: Vec<usize> = (0..n).filter(|&k| bins.alloc_counts[k] != 0).collect();
    busiest.sort_by_key(|&k| std::cmp::Reverse(bins.alloc_counts[k]));
    let shown = busiest.len().min(10);
    let mut top: Vec<usize> = busiest[..shown].to_vec();
    top.sort_unstable();
    if !top.is_empty() {
        let _ = writeln!(
            out,
            "    {:>8}  {:>10}  {:>10}  {:>12}",
            "size", "allocated", "freed", "bytes"
        );
        for k in top {
            let count = bins.alloc_counts[k];
            let freed = bins.free_counts.get(k).copied().unwrap_or(0);
            let (size, bytes) = if k + 1 == n {
                (format!(">={n}"), u128::from(bins.alloc_large_bytes))
            } else {
                ((k + 1).to_string(), u128::from(count) * (k as u128 + 1))
            };
            let _ = writeln!(out, "    {size:>8}  {count:>10}  {freed:>10}  {bytes:>12}");
        }
        if busiest.len() > shown {
            let _ = writeln!(
                out,
                "    ({} more non-empty bin{})",
                busiest.len() - shown,
                if busiest.len() - shown == 1 { "" } else { "s" }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_splits_major_minor_patch() {
        assert_eq!(version_text(10408), "1.4.8");
        assert_eq!(version_text(10300), "1.3.0");
        assert_eq!(version_text(10501), "1.5.1");
    }

    #[test]
    fn bin_totals_count_the_last_bin_by_its_bytes() {
        let bins = SizeBins {
            alloc_counts: vec![2, 0, 1, 3],
            alloc_large_bytes: 100,
            free_counts: vec![1, 0, 0, 0],
            free_large_bytes: 0,
        };
        let a = bins.alloc_totals();
        assert_eq!((a.count, a.bytes, a.large_count), (6, 2 + 3 + 100, 3));
        assert_eq!(bins.free_totals().bytes, 1);
    }
}
