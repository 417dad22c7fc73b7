//! Inputs, each opened once: a name and its bytes.
//!
//! A regular file is mapped into memory; standard input (`-`), FIFOs
//! (`<(...)`, `/dev/fd/N`) and anything else that cannot be mapped are read
//! once into a buffer, up to a bound ([`stream_cap`], `--max-input-size`) so
//! that `/dev/zero` or an endless pipe fails quickly instead of exhausting
//! memory. A gzip-compressed input is decompressed into a buffer, up to a
//! bound ([`decompression_cap`]) so that a small hostile file cannot exhaust
//! memory. Detection and the reader share the same [`Input`], so a
//! pipe is read exactly once. A directory (a DCPI database, an APS capture)
//! is an input with no bytes; its reader lists it.

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How many leading bytes of an input detection looks at.
pub(crate) const DETECT_BYTES: usize = 4096;

/// The name that means standard input on the command line.
pub(crate) const STDIN: &str = "-";

/// The smallest bound on a decompressed input (256 MiB).
pub(crate) const MIN_DECOMPRESSED_CAP: u64 = 256 << 20;

/// The bound on a decompressed input, as a multiple of its compressed size.
pub(crate) const DECOMPRESSION_RATIO_CAP: u64 = 64;

/// The first two bytes of a gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

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
    Mapped(memmap2::Mmap),
    Buffer(Vec<u8>),
    Directory,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.data {
            Data::Mapped(_) => "mapped",
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

/// The most bytes read from an input that is not a mapped regular file
/// (standard input, a FIFO, a character device): `given`, or 256 MiB.
pub(crate) fn stream_cap(given: Option<u64>) -> u64 {
    given.unwrap_or(MIN_DECOMPRESSED_CAP)
}

/// Reads all of `from` (a pipe, a device) into memory, refusing to go past
/// [`stream_cap`].
fn read_bounded(name: &Path, from: impl Read, max_size: Option<u64>) -> Result<Vec<u8>> {
    let cap = stream_cap(max_size);
    let mut raw = Vec::new();
    from.take(cap.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(|e| Error::io(name, e))?;
    if raw.len() as u64 > cap {
        let how = match max_size {
            Some(_) => "the limit given with --max-input-size".to_owned(),
            None => format!("the default limit, {} MiB", MIN_DECOMPRESSED_CAP >> 20),
        };
        return Err(Error::unsupported(
            name,
            format!(
                "not a regular file, and longer than {cap} bytes ({how}): pipes, devices and standard input are read into memory; raise the limit with --max-input-size BYTES"
            ),
        ));
    }
    Ok(raw)
}

impl Input {
    /// Opens `path` (`-` = standard input): maps a regular file, reads
    /// anything else once within `max_size` (by default 256 MiB), and
    /// decompresses gzip within `max_size` (by default 64 times the
    /// compressed size, at least 256 MiB). A directory gives an input
    /// without bytes.
    pub fn open(path: &Path, max_size: Option<u64>) -> Result<Input> {
        if path == Path::new(STDIN) {
            let raw = read_bounded(path, std::io::stdin().lock(), max_size)?;
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
            let map = crate::mmap::map(&file).map_err(|e| Error::io(path, e))?;
            if !map.starts_with(&GZIP_MAGIC) {
                return Ok(Input {
                    name: path.to_path_buf(),
                    data: Data::Mapped(map),
                    modified: meta.modified().ok(),
                });
            }
            let bytes = gunzip(path, &map, max_size)?;
            let mut input = Input::from_bytes(path, bytes);
            input.modified = meta.modified().ok();
            return Ok(input);
        }
        // FIFOs, character devices, empty files (some of /proc): read once.
        let raw = read_bounded(path, file, max_size)?;
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

    /// The whole (decompressed) content; empty for a directory.
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(map) => map,
            Data::Buffer(bytes) => bytes,
            Data::Directory => &[],
        }
    }

    /// The first [`DETECT_BYTES`] bytes (fewer when the input is shorter).
    pub(crate) fn head(&self) -> &[u8] {
        let bytes = self.bytes();
        bytes.get(..DETECT_BYTES).unwrap_or(bytes)
    }

    /// The length of the content in bytes.
    pub fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// True when the content is empty (or the input is a directory).
    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }

    /// True for a directory input.
    pub fn is_dir(&self) -> bool {
        matches!(self.data, Data::Directory)
    }

    /// Says that the bytes in `range` will not be read again, so that a
    /// streaming reader's memory stays bounded on a mapped file (the pages
    /// are dropped; reading them again would fetch them from the file).
    pub(crate) fn release(&self, range: Range<usize>) {
        #[cfg(unix)]
        if let Data::Mapped(map) = &self.data {
            const PAGE: usize = 4096;
            let start = range.start.div_ceil(PAGE) * PAGE;
            let end = (range.end.min(map.len()) / PAGE) * PAGE;
            if end > start {
                // SAFETY: the mapping is private and read-only: dropped pages
                // read back as the file's bytes, which no one writes.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
        #[cfg(not(unix))]
        let _ = range;
    }
}

/// Decompresses a gzip input (all members), refusing to go past the cap.
fn gunzip(name: &Path, raw: &[u8], max_size: Option<u64>) -> Result<Vec<u8>> {
    let cap = decompression_cap(raw.len() as u64, max_size);
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| {
            Error::format(
                name,
                0,
                format!("gzip-compressed input does not decompress: {e}"),
            )
        })?;
    if out.len() as u64 > cap {
        let how = match max_size {
            Some(_) => "the limit given with --max-input-size".to_owned(),
            None => format!(
                "the limit: {DECOMPRESSION_RATIO_CAP} × its {} compressed bytes, at least {} MiB",
                raw.len(),
                MIN_DECOMPRESSED_CAP >> 20
            ),
        };
        return Err(Error::unsupported(
            name,
            format!(
                "gzip-compressed input decompresses to more than {cap} bytes ({how}); raise it with --max-input-size BYTES"
            ),
        ));
    }
    Ok(out)
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
    fn an_endless_device_is_read_up_to_the_limit_only() {
        let e = read_bounded(Path::new("/dev/zero"), std::io::repeat(0), Some(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1048576 bytes") && e.contains("--max-input-size"),
            "{e}"
        );
        let ok = read_bounded(Path::new("-"), &[1u8, 2, 3][..], Some(3)).unwrap();
        assert_eq!(ok, [1, 2, 3]);
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
}
