//! What a unit's outputs are made from, and the stamp that keeps it.
//!
//! An archive run redoes an output exactly when what it would be made from
//! ([`MadeFrom`]: the input's size, modification time and content hash; the
//! executable's, with its build id; the options that change outputs; the
//! profconv version) differs from what the output on disk was made from.
//! That is kept per unit in a stamp, `OUT_DIR/.profconv/<output stem>.stamp`
//! (JSON), written through a temporary file after the unit's outputs are in
//! place: a stamp never names an output that is not whole, and one missing
//! (a run killed between the two) makes the next run redo the unit.
//!
//! Hashes are 64-bit FxHash (`rustc-hash`) over the bytes: change detection,
//! not cryptographic. A file is hashed as it is read (already mapped for a
//! file unit; 64 KiB at a time for the files of a folder unit); executables
//! are hashed once per run (one found beside gmon.out files, once per
//! folder).

use std::collections::HashMap;
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::read::ReadOptions;
use crate::write::{self, WriteOptions};

/// The folder of the stamps, under the output folder.
pub(crate) const STAMP_DIR: &str = ".profconv";

/// What a unit's outputs are made from; two equal values make equal outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MadeFrom {
    /// The input (for a folder unit, all its files).
    pub input: Fingerprint,
    /// The executable used to symbolize, if any.
    pub binary: Option<BinaryFingerprint>,
    /// The hash of the options text (the report's `options`): the options
    /// that change outputs and the profconv version.
    pub options: String,
}

/// A file's (or a folder's files') size, time and content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Bytes on disk (for a folder, of all its files).
    pub bytes: u64,
    /// Last modification, `SECONDS.NANOSECONDS` since 1970 (for a folder,
    /// its newest file's); `null` when the system does not tell.
    pub mtime: Option<String>,
    /// FxHash-64 of the content (for a folder, of each file's relative name
    /// and content in name order), 16 hex digits; not cryptographic.
    pub hash: String,
}

/// The executable a unit was symbolized with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryFingerprint {
    /// Its path, as given or found.
    pub path: String,
    /// Its GNU build id in hex, when it has one.
    pub build_id: Option<String>,
    /// Its size, time and content; `null` when it cannot be read.
    pub file: Option<Fingerprint>,
}

/// The options that change an archive's outputs, as text: the readers' and
/// writers' options (less what is per unit: the binary, the title, the
/// progress; and the threads, which change no output) and the profconv
/// version. The output formats are not in it: each output is listed in the
/// stamp by name.
pub(crate) fn options_text(read: &ReadOptions, write: &WriteOptions) -> String {
    let read = ReadOptions {
        binary: None,
        progress: None,
        threads: 1,
        ..read.clone()
    };
    let write = WriteOptions {
        title: String::new(),
        ..write.clone()
    };
    format!(
        "profconv {}; read {read:?}; write {write:?}",
        env!("CARGO_PKG_VERSION")
    )
}

/// FxHash-64 of `bytes`, in hex.
pub(crate) fn hash_hex(bytes: &[u8]) -> String {
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    format!("{:016x}", h.finish())
}

fn mtime_text(meta: &std::fs::Metadata) -> Option<String> {
    let t = meta.modified().ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!("{}.{:09}", d.as_secs(), d.subsec_nanos()))
}

/// The fingerprint of a file unit whose content (as read) is `content`.
pub(crate) fn of_file(path: &Path, content: &[u8]) -> Result<Fingerprint> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok(Fingerprint {
        bytes: meta.len(),
        mtime: mtime_text(&meta),
        hash: hash_hex(content),
    })
}

/// The fingerprint of a file unit read as `input` (a gzip input's
/// decompressed bytes): its content hashed a megabyte at a time, so that a
/// large input is never held whole for it.
pub(crate) fn of_input(path: &Path, input: &crate::read::Input) -> Result<Fingerprint> {
    const STEP: u64 = 1 << 20;
    let mut h = rustc_hash::FxHasher::default();
    let mut buf = Vec::new();
    let mut offset = 0;
    while offset < input.len() {
        let len = (input.len() - offset).min(STEP) as usize;
        h.write(input.window(offset, len, &mut buf)?);
        offset += len as u64;
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok(Fingerprint {
        bytes: meta.len(),
        mtime: mtime_text(&meta),
        hash: format!("{:016x}", h.finish()),
    })
}

/// The fingerprint of a folder unit: its regular files below it (at most
/// `max_depth` levels), in name order.
pub(crate) fn of_folder(dir: &Path, max_depth: usize) -> Result<Fingerprint> {
    let mut files = Vec::new();
    list_files(dir, dir, 0, max_depth, &mut files)?;
    files.sort();
    let mut h = rustc_hash::FxHasher::default();
    let (mut bytes, mut newest) = (0u64, None::<String>);
    let mut buf = vec![0u8; 64 * 1024];
    for (rel, path) in files {
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        bytes += meta.len();
        // Same-length texts of one format compare as their times do.
        newest = newest.max(mtime_text(&meta));
        h.write(rel.as_bytes());
        h.write_u8(0);
        let mut file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        loop {
            let n = fill(&mut file, &mut buf).map_err(|e| Error::io(&path, e))?;
            h.write(&buf[..n]);
            if n < buf.len() {
                break;
            }
        }
    }
    Ok(Fingerprint {
        bytes,
        mtime: newest,
        hash: format!("{:016x}", h.finish()),
    })
}

/// Reads until `buf` is full or the file ends, so that the blocks hashed
/// are the same whatever sizes the system's reads return.
fn fill(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn list_files(
    root: &Path,
    dir: &Path,
    depth: usize,
    max_depth: usize,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<()> {
    for e in std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
    {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && depth < max_depth => {
                list_files(root, &path, depth + 1, max_depth, out)?
            }
            Ok(t) if t.is_file() => {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push((rel.to_string_lossy().into_owned(), path));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The fingerprints of the executables given for every input (`--binary`,
/// `--binary-map`), each made once per run.
#[derive(Default)]
pub(crate) struct Binaries(Mutex<HashMap<PathBuf, BinaryFingerprint>>);

impl Binaries {
    /// The fingerprint of the executable at `path`.
    pub(crate) fn of(&self, path: &Path) -> BinaryFingerprint {
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(path) {
            return known.clone();
        }
        let made = fingerprint_binary(path);
        lock().insert(path.to_path_buf(), made.clone());
        made
    }
}

/// The fingerprint of the executable at `path`, read whole.
pub(crate) fn fingerprint_binary(path: &Path) -> BinaryFingerprint {
    let bytes = std::fs::read(path).ok();
    let build_id = bytes.as_deref().and_then(crate::symbolize::build_id_of);
    let file = bytes.as_deref().and_then(|b| of_file(path, b).ok());
    BinaryFingerprint {
        path: path.display().to_string(),
        build_id,
        file,
    }
}

/// What the last run that converted a unit wrote, kept beside its outputs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stamp {
    /// What the outputs were made from.
    pub made_from: MadeFrom,
    /// The outputs made from it, relative to the output folder.
    pub outputs: Vec<String>,
    /// The record's fields that describe these outputs.
    pub binary: Option<String>,
    pub unsymbolized: Option<String>,
    pub warnings: Vec<String>,
}

/// Where the stamp of the unit whose outputs are `out_stem.*` lies.
pub(crate) fn stamp_path(out_dir: &Path, out_stem: &Path) -> PathBuf {
    let mut name = out_dir.join(STAMP_DIR).join(out_stem).into_os_string();
    name.push(".stamp");
    PathBuf::from(name)
}

impl Stamp {
    /// The stamp at `path`; `None` when missing or unreadable (the unit is
    /// then redone).
    pub(crate) fn load(path: &Path) -> Option<Stamp> {
        let text = std::fs::read(path).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Writes the stamp to `path`, inside `out_dir`, through a temporary.
    pub(crate) fn save(&self, out_dir: &Path, path: &Path) -> Result<()> {
        write::target::within(out_dir, path, true)?;
        write::write_atomically(path, |out| {
            serde_json::to_writer(&mut *out, self).map_err(|e| Error::io(path, e.into()))
        })
    }
}
