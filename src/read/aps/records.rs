//! One sample file opened (head, layout, tables) and its records (§3.2),
//! visited a few megabytes at a time, each chunk read into the same buffer
//! (`count.rs` counts them; `info.rs` tallies them).

use std::path::PathBuf;

use super::capture::cpu_from_file_name;
use super::head::{FileHead, FILE_HEAD_SIZE, RECORD_FIXED_SIZE};
use super::layout::{solve_layout, Layout};
use super::source::Source;
use super::tables::{parse_tables, ModuleEntry, VmaEntry};
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;
use crate::read::options::ReadOptions;

/// Bytes of records counted as one piece of work, read into memory at a
/// time.
pub(super) const CHUNK_BYTES: usize = 4 << 20;

/// One record, in the byte order of the file head.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    bytes: &'a [u8],
    endian: Endian,
}

impl Record<'_> {
    fn field(&self, offset: usize) -> u32 {
        self.bytes
            .get(offset..offset + 4)
            .map_or(0, |b| self.endian.u32(b))
    }
    /// True for a user-mode sample.
    pub fn user(&self) -> bool {
        self.field(0) != 0
    }
    /// Process id.
    pub fn pid(&self) -> i32 {
        self.field(4) as i32
    }
    /// Thread id.
    pub fn tid(&self) -> i32 {
        self.field(8) as i32
    }
    /// Caller addresses recorded, as written (may be out of range).
    pub fn cs_layer(&self) -> i32 {
        self.field(20) as i32
    }
    /// Event id (§5).
    pub fn event(&self) -> u32 {
        self.field(24)
    }
    /// Sampled program counter.
    pub fn pc(&self) -> u32 {
        self.field(32)
    }
    /// D of this record's layout.
    pub fn call_depth(&self) -> usize {
        (self.bytes.len().saturating_sub(RECORD_FIXED_SIZE as usize)) / 4
    }
    /// `cs_layer` clamped to [0, D] (§10; the reporter did not clamp).
    pub fn valid_layers(&self) -> usize {
        usize::try_from(self.cs_layer().max(0))
            .unwrap_or(0)
            .min(self.call_depth())
    }
    /// Appends the stack, leaf first: pc, then cs[0..cs_layer] up to the
    /// first 0 entry (§10).
    pub fn push_stack(&self, out: &mut Vec<u32>) {
        out.push(self.pc());
        for i in 0..self.valid_layers() {
            let address = self.field(RECORD_FIXED_SIZE as usize + 4 * i);
            if address == 0 {
                break;
            }
            out.push(address);
        }
    }
}

/// One sample file: its head, layout and tables.
pub struct ApsFile {
    /// The file's name.
    pub path: PathBuf,
    /// The CPU from the file name, when it follows the capture naming.
    pub cpu: Option<u32>,
    /// The file head.
    pub head: FileHead,
    /// The solved layout.
    pub layout: Layout,
    /// Module table entries, as read.
    pub modules: Vec<ModuleEntry>,
    /// Vma table entries, as read.
    pub vmas: Vec<VmaEntry>,
}

impl ApsFile {
    pub(super) fn open<'a>(
        input: &'a Input,
        options: &ReadOptions,
    ) -> Result<(ApsFile, Source<'a>)> {
        let path = input.name();
        let mut src = Source::new(input);
        let len = src.len();
        if len < FILE_HEAD_SIZE {
            return Err(Error::format(
                path,
                len,
                format!(
                    "the file has {len} bytes, fewer than the {FILE_HEAD_SIZE}-byte APS file head"
                ),
            ));
        }
        let mut head_bytes = [0u8; FILE_HEAD_SIZE as usize];
        src.read_at(0, &mut head_bytes)?;
        let head = FileHead::parse(path, &head_bytes)?;
        let layout = solve_layout(path, &mut src, &head, options)?;
        let (modules, vmas) = parse_tables(path, &mut src, &layout)?;
        let file = ApsFile {
            path: path.to_path_buf(),
            cpu: cpu_from_file_name(path),
            head,
            layout,
            modules,
            vmas,
        };
        Ok((file, src))
    }

    /// Calls `visit` on every record, a few megabytes at a time (each read
    /// into one buffer, reused). Reports each chunk to `options`' progress.
    pub(super) fn for_each_record(
        &self,
        src: &Source<'_>,
        options: &ReadOptions,
        mut visit: impl FnMut(Record<'_>),
    ) -> Result<()> {
        let size = self.layout.record_size();
        let total = u64::from(self.head.index);
        let per_chunk = (CHUNK_BYTES as u64 / size).clamp(1, total.max(1));
        let mut done = 0u64;
        let mut buf = Vec::new();
        while done < total {
            let n = per_chunk.min(total - done);
            let offset = FILE_HEAD_SIZE + done * size;
            // At most the records' bytes, which the layout put inside the file.
            let bytes = src.window(offset, (n * size) as usize, &mut buf)?;
            for record in bytes.chunks_exact(size as usize) {
                visit(Record {
                    bytes: record,
                    endian: self.head.endian,
                });
            }
            options.advance(bytes.len() as u64);
            done += n;
        }
        Ok(())
    }
}
