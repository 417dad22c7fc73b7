//! The bytes of one sample file, with the bounded reads the layout search
//! needs. Plain files are read a window at a time (the records a few
//! megabytes at a time, never the whole file); gzip-compressed ones were
//! decompressed into memory when the input was opened.

use super::head::{magic_order, TABLE_HEAD_SIZE};
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;

/// The bytes of one input, with the reads the layout search needs.
pub(super) struct Source<'a> {
    input: &'a Input,
    /// The window the small reads of the layout search go through.
    buf: Vec<u8>,
}

impl<'a> Source<'a> {
    pub(super) fn new(input: &'a Input) -> Source<'a> {
        Source {
            input,
            buf: Vec::new(),
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.input.len()
    }

    /// `len` bytes from `offset`, which the caller has checked are in the
    /// file: borrowed when the input is in memory, else read into `buf`. An
    /// error when the file got shorter since it was opened.
    pub(super) fn window<'b>(
        &'b self,
        offset: u64,
        len: usize,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        self.input.window(offset, len, buf)
    }

    /// Fills `buf` from `offset`; the caller has checked that it is in the file.
    pub(super) fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut window = std::mem::take(&mut self.buf);
        let read = self
            .input
            .window(offset, buf.len(), &mut window)
            .map(|bytes| buf.copy_from_slice(bytes));
        self.buf = window;
        read
    }

    /// The u32 at `offset` in `endian`, or `None` past the end.
    pub(super) fn u32_at(&mut self, offset: u64, endian: Endian) -> Result<Option<u32>> {
        if offset.checked_add(4).is_none_or(|end| end > self.len()) {
            return Ok(None);
        }
        let mut b = [0u8; 4];
        self.read_at(offset, &mut b)?;
        Ok(Some(endian.u32(&b)))
    }

    /// The table head (magic order, count) at `offset`, or `None` when the
    /// head does not fit or its magic matches neither byte order.
    pub(super) fn table_head(&mut self, offset: u64, magic: u32) -> Result<Option<(Endian, u32)>> {
        if offset
            .checked_add(TABLE_HEAD_SIZE)
            .is_none_or(|end| end > self.len())
        {
            return Ok(None);
        }
        let mut b = [0u8; 8];
        self.read_at(offset, &mut b)?;
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
