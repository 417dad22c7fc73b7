//! The bytes of one sample file, with the bounded reads the layout search
//! needs. Plain files are mapped and their records streamed; gzip-compressed
//! ones were decompressed into memory when the input was opened.

use std::path::Path;

use super::head::{magic_order, TABLE_HEAD_SIZE};
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;

/// The bytes of one input, with the reads the layout search needs.
pub(super) struct Source<'a> {
    input: &'a Input,
}

impl<'a> Source<'a> {
    pub(super) fn new(input: &'a Input) -> Source<'a> {
        Source { input }
    }

    pub(super) fn len(&self) -> u64 {
        self.input.len()
    }

    /// `len` bytes from `offset`; the caller has checked that they are in the file.
    pub(super) fn slice(&self, path: &Path, offset: u64, len: usize) -> Result<&'a [u8]> {
        let short = || {
            Error::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the file got shorter while it was read",
                ),
            )
        };
        let start = usize::try_from(offset).map_err(|_| short())?;
        start
            .checked_add(len)
            .and_then(|end| self.input.bytes().get(start..end))
            .ok_or_else(short)
    }

    /// Says that the `len` bytes from `offset` will not be read again: a
    /// mapped file's pages are dropped from memory (see [`Input::release`]).
    /// The range is widened to whole pages: a page shared with the next
    /// chunk is read again from the page cache if needed, while one left
    /// mapped at each chunk's edge keeps much more than itself mapped (on
    /// Linux 6.18, about 1.3 MB per 4 MiB chunk: the page cache's large
    /// folios stay mapped around it).
    pub(super) fn release(&self, offset: usize, len: usize) {
        const PAGE: usize = 4096;
        let start = offset / PAGE * PAGE;
        let end = offset.saturating_add(len).div_ceil(PAGE) * PAGE;
        self.input.release(start..end);
    }

    /// Fills `buf` from `offset`; the caller has checked that it is in the file.
    pub(super) fn read_at(&mut self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
        buf.copy_from_slice(self.slice(path, offset, buf.len())?);
        Ok(())
    }

    /// The u32 at `offset` in `endian`, or `None` past the end.
    pub(super) fn u32_at(
        &mut self,
        path: &Path,
        offset: u64,
        endian: Endian,
    ) -> Result<Option<u32>> {
        if offset.checked_add(4).is_none_or(|end| end > self.len()) {
            return Ok(None);
        }
        let mut b = [0u8; 4];
        self.read_at(path, offset, &mut b)?;
        Ok(Some(endian.u32(&b)))
    }

    /// The table head (magic order, count) at `offset`, or `None` when the
    /// head does not fit or its magic matches neither byte order.
    pub(super) fn table_head(
        &mut self,
        path: &Path,
        offset: u64,
        magic: u32,
    ) -> Result<Option<(Endian, u32)>> {
        if offset
            .checked_add(TABLE_HEAD_SIZE)
            .is_none_or(|end| end > self.len())
        {
            return Ok(None);
        }
        let mut b = [0u8; 8];
        self.read_at(path, offset, &mut b)?;
        Ok(magic_order(&b, magic).map(|endian| (endian, endian.u32(&b[4..]))))
    }
}

/// Moves the offset of a format error found in a buffer read from `base`.
pub(super) fn rebase(error: Error, base: u64) -> Error {
    match error {
        Error::Format { file, offset, what } => Error::Format {
            file,
            offset: offset + base,
            what,
        },
        other => other,
    }
}

// The file head and the layout (§3, §10).
