//! The GNU tagged format (§1): the `gmon` magic, a version word that gives
//! the byte order, then histogram, arc and basic-block records.

use std::collections::BTreeMap;

use std::path::Path;

use super::data::{
    add_count, add_histogram, merge_arcs, Bins, CallArc, GmonData, Histogram, Ranges, Variant,
};
use crate::error::{Error, Result};
use crate::read::cursor::{Cursor, Endian};

pub(super) const GMON_MAGIC: &[u8; 4] = b"gmon";
pub(super) const TAG_TIME_HIST: u8 = 0;
pub(super) const TAG_CG_ARC: u8 = 1;
pub(super) const TAG_BB_COUNT: u8 = 2;
/// True for the GNU format (the `gmon` magic).
pub fn detect_gnu(head: &[u8]) -> bool {
    head.len() >= 20 && head.starts_with(GMON_MAGIC) && gnu_endian(head).is_some()
}

pub(super) fn gnu_endian(head: &[u8]) -> Option<Endian> {
    match head.get(4..8)? {
        [1, 0, 0, 0] => Some(Endian::Little),
        [0, 0, 0, 1] => Some(Endian::Big),
        _ => None,
    }
}

pub(super) fn parse_gnu(file: &Path, data: &[u8], pointer_size: Option<usize>) -> Result<GmonData> {
    let Some(endian) = gnu_endian(data) else {
        let mut c = Cursor::new(file, data, Endian::Little, 8);
        c.skip(4, "magic")?;
        let version = c.bytes(4, "the version")?;
        return Err(Error::format(
            file,
            4,
            format!("expected version 1 (01 00 00 00 or 00 00 00 01), found {version:02x?}"),
        ));
    };
    if let Some(size) = pointer_size {
        return parse_gnu_records(file, data, endian, size);
    }
    // The file does not say its address size: try 8, then 4 (§1).
    let wide = parse_gnu_records(file, data, endian, 8);
    let narrow = parse_gnu_records(file, data, endian, 4);
    match (wide, narrow) {
        (Ok(w), Err(_)) => Ok(w),
        (Err(_), Ok(n)) => Ok(n),
        (Ok(w), Ok(n)) if w == n => Ok(w),
        (Ok(_), Ok(_)) => Err(Error::format(
            file,
            20,
            "the records parse both with 4- and 8-byte addresses: say which with --gmon-pointer-size (or give --binary)",
        )),
        (Err(w), Err(n)) => Err(Error::format(
            file,
            gnu_error_offset(&w).max(gnu_error_offset(&n)),
            format!(
                "the records parse neither with 8-byte addresses ({}) nor with 4-byte ones ({})",
                short(&w),
                short(&n)
            ),
        )),
    }
}

pub(super) fn gnu_error_offset(e: &Error) -> u64 {
    match e {
        Error::Format { offset, .. } => *offset,
        _ => 0,
    }
}

pub(super) fn short(e: &Error) -> String {
    match e {
        Error::Format { offset, what, .. } => format!("at byte {offset}: {what}"),
        other => other.to_string(),
    }
}

pub(super) fn parse_gnu_records(
    file: &Path,
    data: &[u8],
    endian: Endian,
    word: usize,
) -> Result<GmonData> {
    let mut c = Cursor::new(file, data, endian, word);
    c.skip(20, "the 20-byte header")?;
    let mut out = GmonData {
        variant: Variant::Gnu,
        endian,
        pointer_size: word,
        histograms: Vec::new(),
        arcs: Vec::new(),
        basic_blocks: BTreeMap::new(),
        saturated_bins: 0,
        rate_assumed: false,
        histogram_records: 0,
        arc_records: 0,
        bb_records: 0,
    };
    let mut arcs = Vec::new();
    let mut ranges = Ranges::new();
    while !c.at_end() {
        let tag_at = c.offset();
        match c.u8("a record tag")? {
            TAG_TIME_HIST => {
                let histogram = read_histogram(&mut c, tag_at)?;
                out.saturated_bins += histogram.bins.nonzero().filter(|&(_, b)| b == 0xffff).count();
                out.histogram_records += 1;
                add_histogram(
                    file,
                    (tag_at, "earlier in this file"),
                    &mut out.histograms,
                    &mut ranges,
                    histogram,
                )?;
            }
            TAG_CG_ARC => {
                if arcs.capacity() == 0 {
                    // Room for as many arcs as the bytes left could hold
                    // (the arcs follow the histogram), so that the list is
                    // not copied as it grows: about the bytes left.
                    arcs.reserve(c.remaining() / (2 * word + 4) + 1);
                }
                // The whole record at once (one check of the bytes left);
                // field by field, naming the one cut short, at the end.
                let arc = match c.take(2 * word + 4) {
                    Some(record) => arc_of(record, endian, word),
                    None => CallArc {
                        from_pc: c.word("arc from_pc")?,
                        self_pc: c.word("arc self_pc")?,
                        count: c.u32("arc count")? as u64,
                    },
                };
                out.arc_records += 1;
                arcs.push(arc);
            }
            TAG_BB_COUNT => {
                read_basic_blocks(&mut c, &mut out.basic_blocks)?;
                out.bb_records += 1;
            }
            other => {
                return Err(c.error_at(
                    tag_at,
                    format!("expected a record tag 0 (histogram), 1 (arc) or 2 (basic blocks), found {other}"),
                ))
            }
        }
    }
    out.arcs = merge_arcs(arcs);
    Ok(out)
}

/// An arc record after its tag: from_pc and self_pc (`word` bytes each),
/// then a 32-bit count.
#[inline]
fn arc_of(record: &[u8], endian: Endian, word: usize) -> CallArc {
    let pc = |at: usize| match word {
        4 => u64::from(endian.u32(&record[at..])),
        _ => endian.u64(&record[at..]),
    };
    CallArc {
        from_pc: pc(0),
        self_pc: pc(word),
        count: u64::from(endian.u32(&record[2 * word..])),
    }
}

/// A histogram record after its tag (docs/formats/gprof.md §1): range,
/// bin count, rate, dimension, then the bins.
fn read_histogram(c: &mut Cursor<'_>, tag_at: usize) -> Result<Histogram> {
    let low_pc = c.word("histogram low_pc")?;
    let high_pc = c.word("histogram high_pc")?;
    let size_at = c.offset();
    let hist_size = c.u32("histogram hist_size")?;
    let prof_rate = c.u32("histogram prof_rate")?;
    let dimen = c.bytes(15, "histogram dimension")?;
    let abbrev = c.u8("histogram dimension abbreviation")?;
    if low_pc >= high_pc {
        return Err(c.error_at(
            tag_at + 1,
            format!("histogram low_pc {low_pc:#x} is not below high_pc {high_pc:#x}"),
        ));
    }
    if prof_rate == 0 {
        return Err(c.error_at(size_at + 4, "histogram prof_rate is 0"));
    }
    let bytes = c
        .check_items(hist_size as u64, 2, "histogram bins")
        .map_err(|_| {
            c.error_at(
                size_at,
                format!(
                    "histogram claims {hist_size} bins ({} bytes) but only {} bytes remain",
                    hist_size as u64 * 2,
                    c.remaining()
                ),
            )
        })?;
    let endian = c.endian;
    let raw = c.bytes(bytes, "histogram bins")?;
    let bins = u16_bins(raw, endian);
    let name = dimen.split(|&b| b == 0).next().unwrap_or(&[]);
    Ok(Histogram {
        low_pc,
        high_pc,
        prof_rate,
        dimension: String::from_utf8_lossy(name).into_owned(),
        dimension_abbrev: abbrev as char,
        bins,
    })
}

/// The bins of a histogram record's 16-bit counts. Most are zero: they are
/// skipped four at a time.
fn u16_bins(raw: &[u8], endian: Endian) -> Bins {
    let mut nonzero = Vec::new();
    for (q, quad) in raw.chunks(8).enumerate() {
        if quad.iter().all(|&b| b == 0) {
            continue;
        }
        for (k, bin) in quad.chunks_exact(2).enumerate() {
            let count = endian.u16(bin) as u64;
            if count != 0 {
                nonzero.push((4 * q + k, count));
            }
        }
    }
    Bins::from_nonzero(raw.len() / 2, nonzero)
}

/// A basic-block record after its tag: a count, then (address, count)
/// pairs, summed per address into `blocks`.
fn read_basic_blocks(c: &mut Cursor<'_>, blocks: &mut BTreeMap<u64, u64>) -> Result<()> {
    let ncounts = c.u32("basic-block ncounts")?;
    c.check_items(ncounts as u64, 2 * c.word_size, "basic-block records")?;
    for _ in 0..ncounts {
        let addr = c.word("basic-block address")?;
        let count = c.word("basic-block count")?;
        add_count(blocks.entry(addr).or_insert(0), count);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::u16_bins;
    use crate::read::cursor::Endian;

    #[test]
    fn u16_bins_are_the_counts_read_one_by_one() {
        let mut rng = crate::test_rng::XorShift(0x2545_f491_4f6c_dd1d);
        for len in [0, 1, 3, 4, 5, 8, 1001] {
            let raw: Vec<u8> = (0..2 * len)
                .map(|_| {
                    if rng.below(6) == 0 {
                        rng.next() as u8
                    } else {
                        0
                    }
                })
                .collect();
            for endian in [Endian::Little, Endian::Big] {
                let dense: Vec<u64> = raw.chunks_exact(2).map(|b| endian.u16(b) as u64).collect();
                assert_eq!(u16_bins(&raw, endian), dense, "{len} bins");
            }
        }
    }
}
