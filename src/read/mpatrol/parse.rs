//! Parsing a whole profiling file (§2): the word size and byte order are
//! found from the marker after the magic; older layouts are named and refused.

use std::path::Path;

use super::check::check_references;
use super::file::{
    version_text, CallSite, MpatrolFile, ProfilingRecord, SizeBins, CALL_SITE_WORDS,
    FIRST_VERSIONED, MAGIC, RECORD_WORDS, VERSION_LIMIT,
};
use crate::error::{Error, Result};
use crate::read::cursor::{Cursor, Endian};

/// The (word size, byte order) combinations, in the order §2 tries them.
pub(super) const LAYOUTS: [(usize, Endian); 4] = [
    (8, Endian::Little),
    (8, Endian::Big),
    (4, Endian::Little),
    (4, Endian::Big),
];

/// Parses and checks a whole profiling file (docs/formats/mpatrol.md §2).
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
        let version = match check_version(&mut c) {
            Ok(v) => v,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
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

/// Reads the library version word after the marker; an error unless it
/// holds a version profconv reads.
fn check_version(c: &mut Cursor<'_>) -> Result<u64> {
    let version_at = c.offset();
    let version = c.word("the library version number")?;
    if !(FIRST_VERSIONED..VERSION_LIMIT).contains(&version) {
        return Err(c.error_at(
            version_at,
            format!(
                "the version word holds {version}, not an mpatrol version number ({FIRST_VERSIONED} for 1.3.0 up to {})",
                VERSION_LIMIT - 1
            ),
        ));
    }
    Ok(version)
}

/// Names the layouts profconv knows of but does not read, when `data` is one.
pub(super) fn older_layout(path: &Path, data: &[u8], any_marker: bool) -> Option<Error> {
    // 64-bit Windows (LLP64): an 8-byte `size_t` marker, then a 4-byte
    // `unsigned long` version (docs/formats/mpatrol.md §5).
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

pub(super) fn show_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "the end of the file".into();
    }
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("bytes {}", hex.join(" "))
}

/// Reads `n` words after checking that they fit.
pub(super) fn words(c: &mut Cursor<'_>, n: u64, what: &str) -> Result<Vec<u64>> {
    c.check_items(n, c.word_size, what)?;
    (0..n).map(|_| c.word(what)).collect()
}

pub(super) fn word_array4(c: &mut Cursor<'_>, what: &str) -> Result<[u64; 4]> {
    Ok([c.word(what)?, c.word(what)?, c.word(what)?, c.word(what)?])
}

/// Everything after the version word, through the trailing magic.
pub(super) fn parse_body(mut c: Cursor<'_>, version: u64) -> Result<MpatrolFile> {
    let bounds = [
        c.word("the small allocation bound")?,
        c.word("the medium allocation bound")?,
        c.word("the large allocation bound")?,
    ];
    let bins = parse_bins(&mut c)?;
    let records = parse_records(&mut c)?;
    let call_sites = parse_call_sites(&mut c)?;
    let symbol_count = c.word("the number of symbols")?;
    let symbol_addresses = words(&mut c, symbol_count, "symbol addresses")?;
    let strings_len = c.word("the string table size")?;
    let strings_len = c.check_items(strings_len, 1, "the string table")?;
    let strings = c.bytes(strings_len, "the string table")?.to_vec();
    expect_trailer(&mut c)?;

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

/// The whole-program size histogram, if the file has one (a bin count of 0
/// means none).
fn parse_bins(c: &mut Cursor<'_>) -> Result<Option<SizeBins>> {
    let bin_count = c.word("the allocation bin count")?;
    if bin_count == 0 {
        return Ok(None);
    }
    // Two arrays of B words and two totals.
    c.check_items(
        bin_count,
        2 * c.word_size,
        "allocation and deallocation bins",
    )?;
    let alloc_counts = words(c, bin_count, "allocation bins")?;
    let alloc_large_bytes = c.word("the large allocation total")?;
    let free_counts = words(c, bin_count, "deallocation bins")?;
    let free_large_bytes = c.word("the large deallocation total")?;
    Ok(Some(SizeBins {
        alloc_counts,
        alloc_large_bytes,
        free_counts,
        free_large_bytes,
    }))
}

/// The profiling records: counted, and checked to fit before any is read.
fn parse_records(c: &mut Cursor<'_>) -> Result<Vec<ProfilingRecord>> {
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
            alloc_count: word_array4(c, "allocation counts")?,
            alloc_bytes: word_array4(c, "allocation totals")?,
            free_count: word_array4(c, "deallocation counts")?,
            free_bytes: word_array4(c, "deallocation totals")?,
        });
    }
    Ok(records)
}

/// The call sites: counted, and checked to fit before any is read.
fn parse_call_sites(c: &mut Cursor<'_>) -> Result<Vec<CallSite>> {
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
    Ok(call_sites)
}

/// The trailing magic, which must end the file.
fn expect_trailer(c: &mut Cursor<'_>) -> Result<()> {
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
    Ok(())
}
