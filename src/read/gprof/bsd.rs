//! The 4.4BSD and 4.3BSD formats (§2): a header with no magic, recognised by
//! its sizes, then the histogram bins and the arcs.

use std::collections::BTreeMap;
use std::path::Path;

use super::data::{merge_arcs, Bins, CallArc, GmonData, Histogram, Variant};
use crate::error::{Error, Result};
use crate::read::cursor::{Cursor, Endian};

pub(super) const BSD44_VERSION: u32 = 0x0005_1879;
/// The clock rate assumed for 4.3BSD files, which do not record one.
pub(super) const DEFAULT_RATE: u32 = 100;

/// A BSD header layout that fits: (variant, endian, word size, header size, counter bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct BsdLayout {
    pub(super) variant: Variant,
    pub(super) endian: Endian,
    pub(super) word: usize,
    pub(super) header: usize,
    pub(super) counter_bytes: usize,
    pub(super) counter_signed: bool,
    pub(super) lpc: u64,
    pub(super) hpc: u64,
    pub(super) ncnt: u64,
    pub(super) rate: u32,
}

/// The first BSD header layout that fits the file: 4.4BSD before 4.3BSD,
/// the pointer size if known (else 8 before 4), little- before big-endian.
pub(super) fn bsd_layout(
    head: &[u8],
    file_len: u64,
    pointer_size: Option<usize>,
) -> Option<BsdLayout> {
    let words: &[usize] = match pointer_size {
        Some(4) => &[4],
        Some(8) => &[8],
        _ => &[8, 4],
    };
    let mut version_seen = false;
    for variant in [Variant::Bsd44, Variant::Bsd43] {
        // A header with the 4.4BSD version word is never read as 4.3BSD,
        // whose layout would take the version and rate words for
        // histogram counters (GNU gprof decides on that word alone, §2).
        if variant == Variant::Bsd43 && version_seen {
            return None;
        }
        for &word in words {
            for endian in [Endian::Little, Endian::Big] {
                version_seen |= variant == Variant::Bsd44 && has_bsd44_version(head, word, endian);
                if let Some(layout) = try_layout(head, file_len, variant, word, endian) {
                    return Some(layout);
                }
            }
        }
    }
    None
}

/// True when the word after `lpc`, `hpc` and `ncnt` is the 4.4BSD version.
fn has_bsd44_version(head: &[u8], word: usize, endian: Endian) -> bool {
    let mut c = Cursor::new(Path::new(""), head, endian, word);
    let version = c.word("").and(c.word("")).and(c.i32("")).and(c.u32(""));
    version.is_ok_and(|v| v == BSD44_VERSION)
}

/// The layout if the header read as `variant`, `word` and `endian` is
/// consistent with the file's length and plausible.
fn try_layout(
    head: &[u8],
    file_len: u64,
    variant: Variant,
    word: usize,
    endian: Endian,
) -> Option<BsdLayout> {
    let mut c = Cursor::new(Path::new(""), head, endian, word);
    let (Ok(lpc), Ok(hpc), Ok(ncnt)) = (c.word(""), c.word(""), c.i32("")) else {
        return None;
    };
    let (header, rate, counter_bytes, counter_signed) = if variant == Variant::Bsd44 {
        let (Ok(version), Ok(rate), Ok(spare0)) = (c.u32(""), c.u32(""), c.i32("")) else {
            return None;
        };
        // A rate of 0 is still 4.4BSD (the version says so); parse_bsd asks
        // for --gmon-rate rather than reading the file as 4.3BSD at other
        // offsets.
        if version != BSD44_VERSION {
            return None;
        }
        // FreeBSD's counter width where spare[0] names one that fits the
        // file; else the classic 16 bits (MinGW leaves spare[] as garbage).
        let header = align(2 * word + 6 * 4, word);
        let (bytes, signed) = counter_kind(spare0)
            .filter(|&(bytes, _)| {
                u64::try_from(ncnt)
                    .is_ok_and(|n| n >= header as u64 && (n - header as u64) % bytes as u64 == 0)
            })
            .unwrap_or((2, false));
        // lpc, hpc, ncnt, version, profrate, spare[3]; word-aligned.
        (header, rate, bytes, signed)
    } else {
        (align(2 * word + 4, word), 0, 2, false)
    };
    let ncnt = u64::try_from(ncnt).ok()?;
    let arc_size = 3 * word as u64;
    if lpc >= hpc
        || ncnt < header as u64
        || ncnt > file_len
        || (ncnt - header as u64) % counter_bytes as u64 != 0
        || (file_len - ncnt) % arc_size != 0
    {
        return None;
    }
    let counters = (ncnt - header as u64) / counter_bytes as u64;
    // Plausibility: each counter covers between 1 and 1024 bytes of text.
    if counters == 0 || (hpc - lpc) / counters > 1024 || (hpc - lpc) < counters {
        return None;
    }
    Some(BsdLayout {
        variant,
        endian,
        word,
        header,
        counter_bytes,
        counter_signed,
        lpc,
        hpc,
        ncnt,
        rate,
    })
}

/// FreeBSD's histcounter_type in the first spare word: the counter width in
/// bits, negative when signed; 0 is the classic unsigned 16 bits.
fn counter_kind(spare0: i32) -> Option<(usize, bool)> {
    match spare0 {
        0 => Some((2, false)),
        8 | 16 | 32 | 64 => Some((spare0 as usize / 8, false)),
        -8 | -16 | -32 | -64 => Some(((-spare0) as usize / 8, true)),
        _ => None,
    }
}

/// The histogram counters after the header, and how many of 16-bit ones
/// are saturated.
fn read_counters(c: &mut Cursor<'_>, l: &BsdLayout) -> Result<(Bins, usize)> {
    let counters = ((l.ncnt - l.header as u64) / l.counter_bytes as u64) as usize;
    c.check_items(counters as u64, l.counter_bytes, "histogram counters")?;
    let mut bins = Vec::new();
    let mut saturated = 0;
    for bins_read in 0..counters {
        let v: u64 = match (l.counter_bytes, l.counter_signed) {
            (1, false) => c.u8("a counter")? as u64,
            (1, true) => (c.u8("a counter")? as i8).max(0) as u64,
            (2, false) => c.u16("a counter")? as u64,
            (2, true) => (c.u16("a counter")? as i16).max(0) as u64,
            (4, false) => c.u32("a counter")? as u64,
            (4, true) => c.i32("a counter")?.max(0) as u64,
            (_, false) => c.u64("a counter")?,
            (_, true) => (c.u64("a counter")? as i64).max(0) as u64,
        };
        if l.counter_bytes == 2 && v == 0xffff {
            saturated += 1;
        }
        if v != 0 {
            bins.push((bins_read, v));
        }
    }
    Ok((Bins::from_nonzero(counters, bins), saturated))
}

/// The clock rate: 4.3BSD records none (`--gmon-rate` or 100 Hz); a 4.4BSD
/// header's 0 needs `--gmon-rate`.
fn clock_rate(file: &Path, l: &BsdLayout, given: Option<u32>) -> Result<u32> {
    match (l.variant, l.rate, given) {
        (Variant::Bsd43, _, given) => Ok(given.unwrap_or(DEFAULT_RATE)),
        (_, 0, Some(given)) => Ok(given),
        (_, 0, None) => Err(Error::format(
            file,
            2 * l.word as u64 + 8,
            "the 4.4BSD header's clock rate (profrate) is 0: give the rate the program ran at with --gmon-rate HZ",
        )),
        (_, recorded, _) => Ok(recorded),
    }
}

/// The arc records up to the end of the file, equal arcs summed and
/// sorted; and how many records there were.
fn read_arcs(c: &mut Cursor<'_>) -> Result<(Vec<CallArc>, usize)> {
    let mut arcs = Vec::new();
    let mut arc_records = 0;
    while !c.at_end() {
        let from_pc = c.word("rawarc frompc")?;
        let self_pc = c.word("rawarc selfpc")?;
        let count = c.sword("rawarc count")?.max(0) as u64;
        arc_records += 1;
        arcs.push(CallArc {
            from_pc,
            self_pc,
            count,
        });
    }
    Ok((merge_arcs(arcs), arc_records))
}

pub(super) fn align(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

pub(super) fn parse_bsd(
    file: &Path,
    data: &[u8],
    l: BsdLayout,
    rate: Option<u32>,
) -> Result<GmonData> {
    let mut c = Cursor::new(file, data, l.endian, l.word);
    c.seek(l.header)?;
    let (bins, saturated) = read_counters(&mut c, &l)?;
    let rate_assumed = l.variant == Variant::Bsd43 || l.rate == 0;
    let prof_rate = clock_rate(file, &l, rate)?;
    let (arcs, arc_records) = read_arcs(&mut c)?;
    Ok(GmonData {
        variant: l.variant,
        endian: l.endian,
        pointer_size: l.word,
        histograms: vec![Histogram {
            low_pc: l.lpc,
            high_pc: l.hpc,
            prof_rate,
            dimension: "seconds".into(),
            dimension_abbrev: 's',
            bins,
        }],
        arcs,
        basic_blocks: BTreeMap::new(),
        saturated_bins: saturated,
        rate_assumed,
        histogram_records: 1,
        arc_records,
        bb_records: 0,
    })
}
