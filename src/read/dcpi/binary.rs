//! The binary section of a pdb-0.06/0.07 profile (docs/formats/dcpi.md §2.3):
//! `<chunk>* <footer>`, little-endian `u32`s, where a chunk is
//! `offset number count×number` and the footer `total_offsets total_samples`.

use std::path::Path;

use super::super::cursor::{Cursor, Endian};
use super::counts::CountSink;
use crate::error::{Error, Result};

/// Size of the footer: `total_offsets` and `total_samples`.
pub const FOOTER_BYTES: usize = 8;

/// What the binary section of one file held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SectionStats {
    pub chunks: u64,
    /// Sum of the chunks' `number`s: instruction addresses covered.
    pub covered: u64,
    /// Addresses with at least one sample.
    pub nonzero: u64,
    /// Sum of all counts.
    pub samples: u64,
    /// One past the highest byte offset (from `tstart`) a chunk covers.
    pub end_offset: u64,
}

/// Reads the chunks and footer of `data` from `start`, adding the counts to
/// `counts` at `tstart + offset + insn·i`. Every rule of §2.3 is checked;
/// a footer `total_offsets` equal to the covered count (not the non-zero
/// count) is only a warning.
pub fn read_section(
    file: &Path,
    data: &[u8],
    start: usize,
    tstart: u64,
    insn: u32,
    counts: &mut (impl CountSink + ?Sized),
    warnings: &mut Vec<String>,
) -> Result<SectionStats> {
    let available = data.len().saturating_sub(start);
    if available < FOOTER_BYTES {
        return Err(Error::format(
            file,
            start as u64,
            format!("expected the binary section (chunks, then an 8-byte footer), found {available} bytes"),
        ));
    }
    let footer_at = data.len() - FOOTER_BYTES;
    let mut cursor = Cursor::new(
        file,
        data.get(..footer_at).unwrap_or_default(),
        Endian::Little,
        4,
    );
    cursor.seek(start)?;
    let mut stats = SectionStats::default();
    let mut previous: Option<(u64, u64)> = None;
    while !cursor.at_end() {
        let chunk = read_chunk(&mut cursor, footer_at, tstart, u64::from(insn), previous)?;
        let totals = counts.add_run_le(chunk.address, chunk.raw);
        stats.chunks += 1;
        stats.covered += chunk.number;
        stats.nonzero += totals.nonzero;
        stats.samples += totals.sum;
        stats.end_offset = stats.end_offset.max(chunk.end);
        previous = Some((chunk.offset, chunk.end));
    }
    check_footer(file, data, footer_at, &stats, warnings)?;
    Ok(stats)
}

/// One chunk of the binary section: where its counts go, and their bytes.
struct Chunk<'a> {
    /// Text offset of its first count.
    offset: u64,
    /// How many counts it holds.
    number: u64,
    /// One past the text offset it covers.
    end: u64,
    /// `tstart + offset`.
    address: u64,
    /// Its counts, little-endian `u32`s.
    raw: &'a [u8],
}

/// Reads the chunk at the cursor, checking that it fits before the footer,
/// lies above and apart from the `previous` chunk (offset, end) and stays
/// within the 64-bit address space.
fn read_chunk<'a>(
    cursor: &mut Cursor<'a>,
    footer_at: usize,
    tstart: u64,
    insn: u64,
    previous: Option<(u64, u64)>,
) -> Result<Chunk<'a>> {
    let file = cursor.file();
    let chunk_at = cursor.offset();
    if cursor.remaining() < 8 {
        return Err(cursor.error(format!(
            "{} bytes remain before the footer at byte {footer_at}, too few for a chunk header \
             (offset and number, 8 bytes): the chunks must end exactly where the footer begins",
            cursor.remaining()
        )));
    }
    let offset = u64::from(cursor.u32("chunk offset")?);
    let number = u64::from(cursor.u32("chunk number")?);
    let bytes = cursor.check_items(number, 4, "chunk counts").map_err(|_| {
        Error::format(
            file,
            chunk_at as u64,
            format!(
                "truncated chunk: the chunk at offset {offset:#x} holds {number} counts ({} bytes), \
                 but only {} bytes remain before the footer at byte {footer_at}",
                number * 4,
                footer_at - chunk_at - 8
            ),
        )
    })?;
    if let Some(previous) = previous {
        check_order(file, chunk_at, offset, previous)?;
    }
    let end = offset + number * insn;
    let address = tstart.checked_add(offset).ok_or_else(|| {
        Error::format(
            file,
            chunk_at as u64,
            format!("tstart {tstart:#x} + offset {offset:#x} overflows 64 bits"),
        )
    })?;
    if address.checked_add(number * insn).is_none() {
        return Err(Error::format(
            file,
            chunk_at as u64,
            format!(
                "the chunk at address {address:#x} runs past the end of the 64-bit address space"
            ),
        ));
    }
    let raw = cursor.bytes(bytes, "chunk counts")?;
    Ok(Chunk {
        offset,
        number,
        end,
        address,
        raw,
    })
}

/// Chunk offsets strictly increase and chunks do not overlap (§2.3).
fn check_order(file: &Path, chunk_at: usize, offset: u64, previous: (u64, u64)) -> Result<()> {
    let (previous_offset, previous_end) = previous;
    if offset <= previous_offset {
        return Err(Error::format(
            file,
            chunk_at as u64,
            format!(
                "chunk offset {offset:#x} is not above the previous chunk's offset {previous_offset:#x}: \
                 chunk offsets must strictly increase"
            ),
        ));
    }
    if offset < previous_end {
        return Err(Error::format(
            file,
            chunk_at as u64,
            format!(
                "the chunk at offset {offset:#x} overlaps the previous chunk, which covers offsets \
                 {previous_offset:#x}..{previous_end:#x}: chunks must not overlap"
            ),
        ));
    }
    Ok(())
}

/// Checks the footer at `footer_at` against what the chunks held: a
/// mismatch is an error, but for the two known slips (a sum modulo 2^32,
/// `total_offsets` counting every covered address), which are warnings.
fn check_footer(
    file: &Path,
    data: &[u8],
    footer_at: usize,
    stats: &SectionStats,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let footer = data.get(footer_at..).unwrap_or_default();
    let mut footer_cursor = Cursor::new(file, footer, Endian::Little, 4);
    let total_offsets = u64::from(footer_cursor.u32("footer total_offsets")?);
    let total_samples = u64::from(footer_cursor.u32("footer total_samples")?);
    if total_samples != stats.samples {
        if stats.samples > u64::from(u32::MAX) && stats.samples as u32 as u64 == total_samples {
            warnings.push(format!(
                "footer total_samples {total_samples} is the sum of the counts ({}) modulo 2^32",
                stats.samples
            ));
        } else {
            return Err(Error::format(
                file,
                (footer_at + 4) as u64,
                format!(
                    "footer mismatch: total_samples is {total_samples} but the chunks' counts sum to {}",
                    stats.samples
                ),
            ));
        }
    }
    if total_offsets != stats.nonzero {
        if total_offsets == stats.covered {
            warnings.push(format!(
                "footer total_offsets {total_offsets} counts every address the chunks cover, not only the {} with samples",
                stats.nonzero
            ));
        } else {
            return Err(Error::format(
                file,
                footer_at as u64,
                format!(
                    "footer mismatch: total_offsets is {total_offsets} but {} addresses have samples \
                     (the chunks cover {})",
                    stats.nonzero, stats.covered
                ),
            ));
        }
    }
    Ok(())
}
