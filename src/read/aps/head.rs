//! The file head (§3.1), the section magics and the sizes of the layout (§2, §3).

use std::path::Path;

use crate::error::{Error, Result};
use crate::read::cursor::{Cursor, Endian};

/// `FILE_HEAD_MAGIC` (§2).
pub const FILE_HEAD_MAGIC: u32 = 0x1234_4321;
/// `MODULE_HEAD_MAGIC` (§2).
pub const MODULE_HEAD_MAGIC: u32 = 0x8746_abcd;
/// `VMA_HEAD_MAGIC` (§2).
pub const VMA_HEAD_MAGIC: u32 = 0xbcdf_9283;
/// `MAX_CALL_DEPTH` of the published reporter.
pub const DEFAULT_CALL_DEPTH: usize = 5;
/// `MAX_PATH_LENGTH` of the published reporter.
pub const DEFAULT_PATH_LEN: usize = 256;
/// Size of `file_head` (§3.1).
pub const FILE_HEAD_SIZE: u64 = 56;
/// Size of a record without its call stack (§3.2).
pub const RECORD_FIXED_SIZE: u64 = 36;
/// Size of `module_head` and `vma_head` (§3.3, §3.4).
pub(super) const TABLE_HEAD_SIZE: u64 = 8;
/// The ARMv7 PMU common event numbers the last reporter names (§5).
pub fn event_name(id: u32) -> String {
    match id {
        0x03 => "L1D_CACHE_REFILL".to_owned(),
        0x05 => "L1D_TLB_REFILL".to_owned(),
        0x11 => "CPU_CYCLES".to_owned(),
        other => format!("event@{other}"),
    }
}

/// The byte order in which `bytes` hold `magic`, if either.
pub(super) fn magic_order(bytes: &[u8], magic: u32) -> Option<Endian> {
    let word: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    if u32::from_le_bytes(word) == magic {
        Some(Endian::Little)
    } else if u32::from_be_bytes(word) == magic {
        Some(Endian::Big)
    } else {
        None
    }
}

/// `file_head` (§3.1), in the byte order of its magic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHead {
    /// Byte order of the head and the records.
    pub endian: Endian,
    /// Number of records.
    pub index: u32,
    /// Start of the capture, seconds (Unix time).
    pub begin_sec: i32,
    /// Microseconds of the start.
    pub begin_usec: i32,
    /// End of the capture, seconds.
    pub end_sec: i32,
    /// Microseconds of the end.
    pub end_usec: i32,
    /// "start time: tick", unit unknown (§5).
    pub st_begin_time: u64,
    /// Board tick counter at the end (unit unknown).
    pub st_end_time: u64,
    /// Events between two samples.
    pub reset_value: u64,
    /// The CPU type code.
    pub cputype: u32,
}

impl FileHead {
    pub(super) fn parse(path: &Path, bytes: &[u8]) -> Result<FileHead> {
        let Some(endian) = magic_order(bytes, FILE_HEAD_MAGIC) else {
            let found = bytes
                .get(..4)
                .map(|b| format!("{b:02x?}"))
                .unwrap_or_default();
            return Err(Error::format(
                path,
                0,
                format!("expected the APS file magic {FILE_HEAD_MAGIC:#010x} in either byte order, found {found}"),
            ));
        };
        let mut c = Cursor::new(path, bytes, endian, 4);
        c.skip(4, "file magic")?;
        Ok(FileHead {
            endian,
            index: c.u32("record count (index)")?,
            begin_sec: c.i32("begintime.tv_sec")?,
            begin_usec: c.i32("begintime.tv_usec")?,
            end_sec: c.i32("endtime.tv_sec")?,
            end_usec: c.i32("endtime.tv_usec")?,
            st_begin_time: c.u64("stBeginTime")?,
            st_end_time: c.u64("stEndTime")?,
            reset_value: c.u64("reset_value")?,
            cputype: c.u32("cputype")?,
        })
    }

    /// begintime in nanoseconds since the Unix epoch.
    pub fn begin_nanos(&self) -> i64 {
        i64::from(self.begin_sec) * 1_000_000_000 + i64::from(self.begin_usec) * 1000
    }

    /// endtime in nanoseconds since the Unix epoch.
    pub fn end_nanos(&self) -> i64 {
        i64::from(self.end_sec) * 1_000_000_000 + i64::from(self.end_usec) * 1000
    }
}
