//! Builders for DCPI profile files (docs/formats/dcpi.md): a binary
//! profile (ASCII header, chunks of per-instruction counts, footer) and a
//! small two-epoch database of them.

use std::path::{Path, PathBuf};

/// One binary profile file, as dcpiformat(4) lays it out.
#[derive(Debug, Clone)]
pub struct BinaryProfile {
    /// Header lines without their newlines, `samples` excluded.
    pub header: Vec<String>,
    /// `(byte offset from tstart, counts)`.
    pub chunks: Vec<(u32, Vec<u32>)>,
    /// Pad the `samples` line with spaces so the binary starts 4-aligned.
    pub pad: bool,
    /// Footer override `(total_offsets, total_samples)`; `None` = correct.
    pub footer: Option<(u32, u32)>,
}

impl BinaryProfile {
    pub fn new(header: Vec<String>, chunks: Vec<(u32, Vec<u32>)>) -> Self {
        BinaryProfile {
            header,
            chunks,
            pad: true,
            footer: None,
        }
    }

    pub fn nonzero(&self) -> u32 {
        self.chunks
            .iter()
            .flat_map(|(_, c)| c)
            .filter(|&&c| c != 0)
            .count() as u32
    }

    pub fn sum(&self) -> u32 {
        self.chunks.iter().flat_map(|(_, c)| c).sum()
    }

    /// Offset of the first byte of the binary section.
    pub fn binary_start(&self) -> usize {
        self.header_bytes().len()
    }

    pub fn header_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for line in &self.header {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"samples");
        if self.pad {
            while (out.len() + 1) % 4 != 0 {
                out.push(b' ');
            }
        }
        out.push(b'\n');
        out
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.header_bytes();
        for (offset, counts) in &self.chunks {
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&(counts.len() as u32).to_le_bytes());
            for c in counts {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        let (offsets, samples) = self.footer.unwrap_or((self.nonzero(), self.sum()));
        out.extend_from_slice(&offsets.to_le_bytes());
        out.extend_from_slice(&samples.to_le_bytes());
        out
    }
}

/// An image as the headers describe it.
#[derive(Debug, Clone, Copy)]
pub struct ImageSpec {
    pub id: &'static str,
    pub path: &'static str,
    pub tstart: u64,
    pub tsize: u64,
}

pub const APP: ImageSpec = ImageSpec {
    id: "19980519000000aaaaaa",
    path: "/usr/bin/app",
    tstart: 0x1_2000_0000,
    tsize: 0x1000,
};

pub const LIBC: ImageSpec = ImageSpec {
    id: "19970101000000bbbbbb",
    path: "/usr/shlib/libc.so",
    tstart: 0x3ff_8000_0000,
    tsize: 0x2000,
};

/// A complete pdb-0.07 header.
pub fn header(image: &ImageSpec, epoch: &str, event: &str, period: u64) -> Vec<String> {
    vec![
        "version pdb-0.07".into(),
        format!("image {}", image.id),
        format!("path {}", image.path),
        format!("epoch {epoch}"),
        "platform walnut".into(),
        format!("event {event}"),
        format!("period {period}"),
        format!("tstart {:x}", image.tstart),
        format!("tsize {}", image.tsize),
        "cpuspeed 500".into(),
        "cpuimplv 2".into(),
        "cpucount 4".into(),
    ]
}

pub fn write(path: &Path, bytes: &[u8]) -> PathBuf {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

/// One file of a generated database.
pub struct DbFile {
    pub epoch: &'static str,
    pub name: &'static str,
    pub image: ImageSpec,
    pub event: &'static str,
    pub period: u64,
    pub chunks: Vec<(u32, Vec<u32>)>,
}

pub fn db_files() -> Vec<DbFile> {
    vec![
        DbFile {
            epoch: "199805191724",
            name: "app.cyc",
            image: APP,
            event: "cycles",
            period: 63488,
            chunks: vec![(0x0, vec![10, 20]), (0x100, vec![5])],
        },
        DbFile {
            epoch: "199805191724",
            name: "app.imiss",
            image: APP,
            event: "imiss",
            period: 4096,
            chunks: vec![(0x4, vec![2, 0, 1])],
        },
        DbFile {
            epoch: "199805191724",
            name: "prof-17",
            image: LIBC,
            event: "cycles",
            period: 63488,
            chunks: vec![(0x800, vec![7, 7])],
        },
        DbFile {
            epoch: "199805201724",
            name: "app.cyc",
            image: APP,
            event: "cycles",
            period: 63488,
            chunks: vec![(0x0, vec![1]), (0x200, vec![40])],
        },
        DbFile {
            epoch: "199805201724",
            name: "x",
            image: LIBC,
            event: "imiss",
            period: 4096,
            chunks: vec![(0x800, vec![3]), (0x1ff0, vec![0, 0, 0, 9])],
        },
    ]
}

/// Writes the database under `root/<epoch>/walnut/`, with a log file that
/// is not a profile.
pub fn make_db(root: &Path) {
    for f in db_files() {
        let bytes = BinaryProfile::new(
            header(&f.image, f.epoch, f.event, f.period),
            f.chunks.clone(),
        )
        .bytes();
        write(&root.join(f.epoch).join("walnut").join(f.name), &bytes);
    }
    write(
        &root.join("dcpid-walnut.log"),
        b"dcpid: started\nepoch 199805191724\n",
    );
    write(
        &root.join("199805191724/walnut/notes.txt"),
        b"image notes\n",
    );
}
