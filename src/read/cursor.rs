//! A bounds-checked reader over a borrowed byte slice that knows the byte
//! order and word size of the data and reports the offset of every failure.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder, LittleEndian};

use crate::error::{Error, Result};

/// Byte order of the data being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian {
    /// `little-endian` or `big-endian`.
    pub fn name(self) -> &'static str {
        match self {
            Endian::Little => "little-endian",
            Endian::Big => "big-endian",
        }
    }

    /// The u16 in the first two bytes of `b`.
    pub fn u16(self, b: &[u8]) -> u16 {
        match self {
            Endian::Little => LittleEndian::read_u16(b),
            Endian::Big => BigEndian::read_u16(b),
        }
    }

    /// The u32 in the first four bytes of `b`.
    pub fn u32(self, b: &[u8]) -> u32 {
        match self {
            Endian::Little => LittleEndian::read_u32(b),
            Endian::Big => BigEndian::read_u32(b),
        }
    }

    /// The u64 in the first eight bytes of `b`.
    pub fn u64(self, b: &[u8]) -> u64 {
        match self {
            Endian::Little => LittleEndian::read_u64(b),
            Endian::Big => BigEndian::read_u64(b),
        }
    }
}

/// A position in a byte slice, with the file name for error messages.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// Byte order of multi-byte integers.
    pub endian: Endian,
    /// Size of a "word" (address, `long`) in bytes: 4 or 8.
    pub word_size: usize,
    file: &'a Path,
}

impl<'a> Cursor<'a> {
    /// A cursor at offset 0 of `data`, read from `file`.
    pub fn new(file: &'a Path, data: &'a [u8], endian: Endian, word_size: usize) -> Self {
        Cursor {
            data,
            pos: 0,
            endian,
            word_size,
            file,
        }
    }

    /// The file errors name.
    pub fn file(&self) -> &'a Path {
        self.file
    }

    /// Current offset from the start of the data.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes after the current offset.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// True when nothing remains.
    pub fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Moves to absolute offset `pos` (at most the end of the data).
    pub fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(self.error_at(
                self.pos,
                format!(
                    "offset {pos} past the end of the file ({} bytes)",
                    self.data.len()
                ),
            ));
        }
        self.pos = pos;
        Ok(())
    }

    /// An error at the current offset.
    pub fn error(&self, what: impl Into<String>) -> Error {
        self.error_at(self.pos, what)
    }

    /// An error at `offset`.
    pub fn error_at(&self, offset: usize, what: impl Into<String>) -> Error {
        Error::format(self.file, offset as u64, what)
    }

    /// Checks that `count` items of `size` bytes each fit in what remains,
    /// before anything is allocated for them. Returns the byte length.
    pub fn check_items(&self, count: u64, size: usize, what: &str) -> Result<usize> {
        let bytes = count.checked_mul(size as u64);
        match bytes {
            Some(b) if b <= self.remaining() as u64 => Ok(b as usize),
            _ => Err(self.error(format!(
                "{what}: {count} × {size} bytes do not fit in the {} bytes that remain",
                self.remaining()
            ))),
        }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "expected {what} ({n} bytes), found only {} bytes before the end of the file",
                self.remaining()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next `n` bytes, or `None` (and the cursor unmoved) when fewer
    /// remain: for a record read whole, then field by field from the slice
    /// ([`Cursor::bytes`] names what was missing).
    #[inline]
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.data.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(out)
    }

    /// Skips `n` bytes of the named field.
    pub fn skip(&mut self, n: usize, what: &str) -> Result<()> {
        self.bytes(n, what).map(|_| ())
    }

    /// The next byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    /// The next u16 in the cursor's byte order.
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        let e = self.endian;
        Ok(e.u16(self.bytes(2, what)?))
    }

    /// The next u32 in the cursor's byte order.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        let e = self.endian;
        Ok(e.u32(self.bytes(4, what)?))
    }

    /// The next i32 in the cursor's byte order.
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(self.u32(what)? as i32)
    }

    /// The next u64 in the cursor's byte order.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        let e = self.endian;
        Ok(e.u64(self.bytes(8, what)?))
    }

    /// An unsigned word of `word_size` bytes (an address, a `long`).
    pub fn word(&mut self, what: &str) -> Result<u64> {
        match self.word_size {
            4 => self.u32(what).map(u64::from),
            _ => self.u64(what),
        }
    }

    /// A signed word of `word_size` bytes.
    pub fn sword(&mut self, what: &str) -> Result<i64> {
        match self.word_size {
            4 => self.u32(what).map(|v| v as i32 as i64),
            _ => self.u64(what).map(|v| v as i64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_byte_orders_and_word_sizes() {
        let data = [1, 0, 0, 0, 0, 0, 0, 2];
        let p = Path::new("x");
        let mut c = Cursor::new(p, &data, Endian::Little, 4);
        assert_eq!(c.word("w").unwrap(), 1);
        assert_eq!(c.u32("w").unwrap(), 0x0200_0000);
        let mut c = Cursor::new(p, &data, Endian::Big, 8);
        assert_eq!(c.word("w").unwrap(), 0x0100_0000_0000_0002);
    }

    #[test]
    fn short_read_names_offset_and_what() {
        let data = [1, 2, 3];
        let p = Path::new("f.bin");
        let mut c = Cursor::new(p, &data, Endian::Little, 4);
        c.u8("a").unwrap();
        let e = c.u32("the count").unwrap_err().to_string();
        assert!(e.contains("f.bin"), "{e}");
        assert!(e.contains("at byte 1"), "{e}");
        assert!(e.contains("the count"), "{e}");
    }

    #[test]
    fn check_items_refuses_huge_counts_without_overflow() {
        let data = [0u8; 100];
        let p = Path::new("x");
        let c = Cursor::new(p, &data, Endian::Little, 4);
        assert!(c.check_items(u64::MAX, 16, "bins").is_err());
        assert!(c.check_items(0xffff_ffff, 2, "bins").is_err());
        assert_eq!(c.check_items(50, 2, "bins").unwrap(), 100);
    }
}
