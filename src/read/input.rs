//! Inputs, each opened once: a name and its bytes.
//!
//! A regular file is read with checked positional reads ([`crate::file`]):
//! detection reads its first bytes, a reader either the whole file or, when
//! it streams (APS), windows of a few megabytes at a time. A file that
//! turns out shorter than it was when opened, or changes while read whole,
//! fails that input with its name and offset; nothing is memory-mapped.
//! Standard input (`-`), FIFOs (`<(...)`, `/dev/fd/N`) and anything else
//! that is not a regular file are read once into a buffer, up to a bound
//! (`--max-input-size`, by default 256 MiB) so that `/dev/zero` or an
//! endless pipe fails quickly instead of exhausting memory. A
//! gzip-compressed input is decompressed into a buffer, up to a bound
//! ([`decompression_cap`]) so that a small hostile file cannot exhaust
//! memory. Detection and the reader share the same [`Input`], so a pipe is
//! read exactly once. A directory (a DCPI database, an APS capture) is an
//! input with no bytes; its reader lists it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::file::{read_bounded, Limit, RegularFile};

/// How many leading bytes of an input detection looks at.
pub(crate) const DETECT_BYTES: usize = 4096;

/// The name that means standard input on the command line.
pub(crate) const STDIN: &str = "-";

/// The smallest bound on a decompressed input (256 MiB).
pub(crate) const MIN_DECOMPRESSED_CAP: u64 = crate::file::DEFAULT_LIMIT;

/// The bound on a decompressed input, as a multiple of its compressed size.
pub(crate) const DECOMPRESSION_RATIO_CAP: u64 = 64;

/// The first two bytes of a gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What reading an input that is not a regular file means, for messages.
const NOT_REGULAR: &str =
    "not a regular file (pipes, devices and standard input are read into memory)";

/// How sure a reader is that an input is in its format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Detection {
    /// Not this format.
    No,
    /// The sizes or text look right, without a magic number to prove it.
    Likely,
    /// A magic number says so.
    Magic,
}

/// One input: its name (for messages) and its whole content.
pub struct Input {
    name: PathBuf,
    data: Data,
    modified: Option<std::time::SystemTime>,
}

enum Data {
    /// A regular file, read when asked: `head` at open, `whole` once a
    /// reader asks for all of it.
    File {
        file: RegularFile,
        head: Vec<u8>,
        whole: OnceLock<Vec<u8>>,
    },
    Buffer(Vec<u8>),
    Directory,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.data {
            Data::File { .. } => "file",
            Data::Buffer(_) => "buffer",
            Data::Directory => "directory",
        };
        f.debug_struct("Input")
            .field("name", &self.name)
            .field("kind", &kind)
            .field("len", &self.len())
            .finish()
    }
}

/// The most bytes a gzip input of `compressed` bytes may decompress to:
/// `max(64 × compressed, 256 MiB)`, or `given` when the user set one.
pub(crate) fn decompression_cap(compressed: u64, given: Option<u64>) -> u64 {
    given.unwrap_or_else(|| {
        compressed
            .saturating_mul(DECOMPRESSION_RATIO_CAP)
            .max(MIN_DECOMPRESSED_CAP)
    })
}

impl Input {
    /// Opens `path` (`-` = standard input): reads the first bytes of a
    /// regular file (the rest when a reader asks), reads anything else once
    /// within `max_size` (by default 256 MiB), and decompresses gzip within
    /// `max_size` (by default 64 times the compressed size, at least
    /// 256 MiB). A directory gives an input without bytes.
    pub fn open(path: &Path, max_size: Option<u64>) -> Result<Input> {
        let limit = Limit::max_input_size(max_size);
        if path == Path::new(STDIN) {
            let raw = read_bounded(path, std::io::stdin().lock(), limit, NOT_REGULAR)?;
            return Input::from_file_bytes(path, raw, max_size);
        }
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            return Ok(Input {
                name: path.to_path_buf(),
                data: Data::Directory,
                modified: meta.modified().ok(),
            });
        }
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        if meta.is_file() && meta.len() > 0 {
            let file = RegularFile::new(file, &meta);
            let mut head = vec![0u8; file.len().min(DETECT_BYTES as u64) as usize];
            file.read_at(path, 0, &mut head)?;
            if !head.starts_with(&GZIP_MAGIC) {
                return Ok(Input {
                    name: path.to_path_buf(),
                    data: Data::File {
                        file,
                        head,
                        whole: OnceLock::new(),
                    },
                    modified: meta.modified().ok(),
                });
            }
            let bytes = gunzip(path, &file.read_all(path)?, max_size)?;
            let mut input = Input::from_bytes(path, bytes);
            input.modified = meta.modified().ok();
            return Ok(input);
        }
        // FIFOs, character devices, empty files (some of /proc): read once.
        let raw = read_bounded(path, file, limit, NOT_REGULAR)?;
        let mut input = Input::from_file_bytes(path, raw, max_size)?;
        if meta.is_file() {
            input.modified = meta.modified().ok();
        }
        Ok(input)
    }

    /// An input of `bytes` as they are (no decompression), named `name`.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Input {
        Input {
            name: name.into(),
            data: Data::Buffer(bytes),
            modified: None,
        }
    }

    /// An input of a file's bytes as [`Input::open`] reads them: gzip is
    /// decompressed (within `max_size`, as [`Input::open`] says), anything
    /// else kept as it is. For callers that already hold the bytes (fuzzing).
    pub fn from_file_bytes(name: &Path, raw: Vec<u8>, max_size: Option<u64>) -> Result<Input> {
        let bytes = if raw.starts_with(&GZIP_MAGIC) {
            gunzip(name, &raw, max_size)?
        } else {
            raw
        };
        Ok(Input::from_bytes(name, bytes))
    }

    /// The name given on the command line (`-` for standard input).
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// When a regular file (or directory) was last modified; `None` for
    /// standard input, pipes and inputs made from bytes.
    pub(crate) fn modified(&self) -> Option<std::time::SystemTime> {
        self.modified
    }

    /// The whole (decompressed) content; empty for a directory. A regular
    /// file is read on the first call (and kept): an error names it when it
    /// turned out shorter than when it was opened, or changed while read.
    pub fn bytes(&self) -> Result<&[u8]> {
        match &self.data {
            Data::File { file, whole, .. } => {
                if let Some(bytes) = whole.get() {
                    return Ok(bytes);
                }
                let bytes = file.read_all(&self.name)?;
                Ok(whole.get_or_init(|| bytes))
            }
            Data::Buffer(bytes) => Ok(bytes),
            Data::Directory => Ok(&[]),
        }
    }

    /// The first [`DETECT_BYTES`] bytes (fewer when the input is shorter).
    pub(crate) fn head(&self) -> &[u8] {
        let bytes = match &self.data {
            Data::File { head, .. } => head,
            Data::Buffer(bytes) => bytes,
            Data::Directory => &[][..],
        };
        bytes.get(..DETECT_BYTES).unwrap_or(bytes)
    }

    /// The length of the content in bytes (of a regular file, when it was
    /// opened).
    pub fn len(&self) -> u64 {
        match &self.data {
            Data::File { file, .. } => file.len(),
            Data::Buffer(bytes) => bytes.len() as u64,
            Data::Directory => 0,
        }
    }

    /// True when the content is empty (or the input is a directory).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True for a directory input.
    pub fn is_dir(&self) -> bool {
        matches!(self.data, Data::Directory)
    }

    /// The `len` bytes at `offset`, for a reader that streams a large input
    /// a window at a time: borrowed when the content is in memory, else read
    /// into `buf` (whose memory the caller reuses for the next window). An
    /// error when the window is not inside the input, or the file ended
    /// before it (it got shorter since it was opened).
    pub(crate) fn window<'a>(
        &'a self,
        offset: u64,
        len: usize,
        buf: &'a mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        let past_end = || {
            Error::format(
                &self.name,
                offset,
                format!(
                    "expected {len} bytes here, past the end of the input's {} bytes",
                    self.len()
                ),
            )
        };
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.len())
            .ok_or_else(past_end)?;
        let in_memory = match &self.data {
            Data::File { file, whole, .. } => match whole.get() {
                Some(bytes) => bytes.as_slice(),
                None => {
                    // Only what the buffer grows by is zeroed (the read
                    // overwrites every byte): a reused buffer costs no memset.
                    // It grows to the window exactly, not to twice its
                    // capacity: its memory is the largest window read.
                    buf.reserve_exact(len.saturating_sub(buf.len()));
                    buf.resize(len, 0);
                    file.read_at(&self.name, offset, buf)?;
                    return Ok(buf);
                }
            },
            Data::Buffer(bytes) => bytes.as_slice(),
            Data::Directory => &[][..],
        };
        let (Ok(start), Ok(end)) = (usize::try_from(offset), usize::try_from(end)) else {
            return Err(past_end());
        };
        in_memory.get(start..end).ok_or_else(past_end)
    }
}

/// Decompresses a gzip input (all members), refusing to go past the cap.
/// Zero bytes after the last member (a tape or block device's padding,
/// which `gzip -d` accepts) end the input; anything else there is an error
/// at its offset.
fn gunzip(name: &Path, raw: &[u8], max_size: Option<u64>) -> Result<Vec<u8>> {
    let cap = decompression_cap(raw.len() as u64, max_size);
    let mut out = Vec::new();
    let mut rest = raw;
    loop {
        let at = (raw.len() - rest.len()) as u64;
        let mut member = flate2::bufread::GzDecoder::new(rest);
        let room = cap.saturating_add(1).saturating_sub(out.len() as u64);
        (&mut member)
            .take(room)
            .read_to_end(&mut out)
            .map_err(|e| {
                Error::format(
                    name,
                    at,
                    format!("gzip-compressed input does not decompress: {e}"),
                )
            })?;
        if out.len() as u64 > cap {
            return Err(past_cap(name, raw, cap, max_size));
        }
        rest = member.into_inner();
        if rest.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        if !rest.starts_with(&GZIP_MAGIC) {
            let at = (raw.len() - rest.len()) as u64;
            return Err(Error::format(
                name,
                at,
                format!(
                    "expected another gzip member (1f 8b) or zero padding after the last member, found {} bytes of something else",
                    rest.len()
                ),
            ));
        }
    }
}

/// The error of a gzip input that decompresses to more than `cap` bytes.
fn past_cap(name: &Path, raw: &[u8], cap: u64, max_size: Option<u64>) -> Error {
    let how = match max_size {
        Some(_) => "the limit given with --max-input-size".to_owned(),
        None => format!(
            "the limit: {DECOMPRESSION_RATIO_CAP} × its {} compressed bytes, at least {} MiB",
            raw.len(),
            MIN_DECOMPRESSED_CAP >> 20
        ),
    };
    Error::unsupported(
        name,
        format!(
            "gzip-compressed input decompresses to more than {cap} bytes ({how}); raise it with --max-input-size BYTES"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_64_times_the_compressed_size_and_at_least_256_mib() {
        assert_eq!(decompression_cap(1, None), 256 << 20);
        assert_eq!(decompression_cap(10 << 20, None), 640 << 20);
        assert_eq!(decompression_cap(10 << 20, Some(5)), 5);
    }

    #[test]
    fn a_gzip_bomb_past_the_cap_is_refused_with_the_limit_named() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut enc, &[0u8; 100_000]).unwrap();
        let gz = enc.finish().unwrap();
        let e = gunzip(Path::new("bomb.gz"), &gz, Some(1000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("more than 1000 bytes") && e.contains("--max-input-size"),
            "{e}"
        );
        assert_eq!(
            gunzip(Path::new("ok.gz"), &gz, None).unwrap().len(),
            100_000
        );
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn zero_padding_after_the_last_gzip_member_is_accepted_as_gzip_d_does() {
        let mut padded = gzip(b"first ");
        padded.extend(gzip(b"second"));
        padded.resize(padded.len().next_multiple_of(512) + 512, 0);
        let out = gunzip(Path::new("tape.gz"), &padded, None).unwrap();
        assert_eq!(out, b"first second");
    }

    #[test]
    fn garbage_after_the_last_gzip_member_is_refused_at_its_offset() {
        let member = gzip(b"data");
        for tail in [&b"junk"[..], b"\0\0\0junk", b"\x1f"] {
            let mut bytes = member.clone();
            bytes.extend_from_slice(tail);
            let e = gunzip(Path::new("x.gz"), &bytes, None).unwrap_err();
            match e {
                Error::Format { offset, .. } => assert_eq!(offset, member.len() as u64),
                other => panic!("expected a format error, got {other:?}"),
            }
        }
    }
}
