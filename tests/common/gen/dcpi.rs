//! Builders for DCPI profile files (docs/formats/dcpi.md): a binary
//! profile (ASCII header, chunks of per-instruction counts, footer), a
//! small two-epoch database of them, and seeded databases of a real size
//! (the layout of `benches/dcpi_gen.py`) for the scale tests.

use std::path::{Path, PathBuf};

use super::super::rng::Rng;

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
        header_bytes(&self.header, self.pad)
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.header_bytes();
        for (offset, counts) in &self.chunks {
            push_chunk(&mut out, *offset, counts);
        }
        let (offsets, samples) = self.footer.unwrap_or((self.nonzero(), self.sum()));
        push_footer(&mut out, offsets, samples);
        out
    }
}

/// Header lines (without `samples`), then `samples` and its newline; with
/// `pad`, spaces before that newline so the binary part starts 4-aligned.
pub fn header_bytes(lines: &[String], pad: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"samples");
    if pad {
        while (out.len() + 1) % 4 != 0 {
            out.push(b' ');
        }
    }
    out.push(b'\n');
    out
}

/// One chunk: byte offset from tstart, count of instructions, the counts.
pub fn push_chunk(out: &mut Vec<u8>, offset: u32, counts: &[u32]) {
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&(counts.len() as u32).to_le_bytes());
    for c in counts {
        out.extend_from_slice(&c.to_le_bytes());
    }
}

/// The footer: how many instructions have samples, and their sum.
pub fn push_footer(out: &mut Vec<u8>, nonzero: u32, sum: u32) {
    out.extend_from_slice(&nonzero.to_le_bytes());
    out.extend_from_slice(&sum.to_le_bytes());
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

// A database of a real size.

/// The database to build.
#[derive(Debug, Clone)]
pub struct DbSpec {
    pub images: usize,
    /// Instructions of text per image.
    pub insns: u32,
    /// Per mille of the instructions that have samples.
    pub sampled_per_mille: u32,
    pub epochs: usize,
    /// `(event, period)` of each file of an image.
    pub events: Vec<(String, u64)>,
    /// Each image has one event only: image `i` the `i`-th (modulo).
    pub one_event_each: bool,
    pub seed: u64,
}

impl DbSpec {
    /// One epoch of `images` images of `insns` instructions, one event
    /// (cycles), `per_mille` of the instructions sampled, seed 42.
    pub fn sparse(images: usize, insns: u32, per_mille: u32) -> DbSpec {
        DbSpec {
            images,
            insns,
            sampled_per_mille: per_mille,
            epochs: 1,
            events: vec![("cycles".into(), 63488)],
            one_event_each: false,
            seed: 42,
        }
    }
}

/// What the footers of a built database add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbTotals {
    /// Bytes written, all files.
    pub bytes: u64,
    pub files: usize,
    /// Sum of `total_samples` per event name.
    pub samples: std::collections::BTreeMap<String, u64>,
    /// Distinct sampled (image, address) pairs over all epochs and events.
    pub addresses: u64,
}

pub const TSTART: u64 = 0x3ff_0000_0000;
pub const IMAGE_STRIDE: u64 = 0x100_0000;

/// The header of image `image`'s file in a scale database.
fn scale_header(image: usize, epoch: &str, event: &str, period: u64, insns: u32) -> Vec<u8> {
    let lines = [
        "version pdb-0.07".to_owned(),
        format!("image 20261122{image:06}{:06x}", 0xabc000 + image),
        format!("path /usr/bench/lib{image:03}.so"),
        format!("epoch {epoch}"),
        "platform testhost".to_owned(),
        format!("event {event}"),
        format!("period {period}"),
        format!("tstart {:x}", TSTART + image as u64 * IMAGE_STRIDE),
        format!("tsize {}", u64::from(insns) * 4),
        "cpuspeed 667".to_owned(),
    ];
    header_bytes(&lines, true)
}

/// Builds a scale database under `root`: `<epoch>/host/libNNN.so.<event>`,
/// one pdb-0.07 profile per image, epoch and event, every image's text
/// covered by back-to-back chunks, a fraction of the instructions sampled.
/// Seeded: the same database every time. Returns what its footers say, the
/// truth the tests check conversions against.
pub fn build_db(root: &Path, spec: &DbSpec) -> DbTotals {
    let mut rng = Rng(spec.seed | 1);
    let mut totals = DbTotals::default();
    let mut sampled = vec![false; spec.insns as usize];
    for image in 0..spec.images {
        sampled.iter_mut().for_each(|s| *s = false);
        for epoch in 0..spec.epochs {
            let name = format!("2026010100{epoch:02}");
            let dir = root.join(&name).join("host");
            std::fs::create_dir_all(&dir).unwrap();
            let events = if spec.one_event_each {
                let i = image % spec.events.len();
                &spec.events[i..=i]
            } else {
                &spec.events[..]
            };
            for (event, period) in events {
                let mut data = scale_header(image, &name, event, *period, spec.insns);
                let (mut nonzero, mut sum) = (0u32, 0u32);
                let mut insn = 0u32;
                while insn < spec.insns {
                    let n = (32 + rng.below(993) as u32).min(spec.insns - insn);
                    let counts: Vec<u32> = (insn..insn + n)
                        .map(|i| {
                            if rng.below(1000) >= u64::from(spec.sampled_per_mille) {
                                return 0;
                            }
                            nonzero += 1;
                            sampled[i as usize] = true;
                            1 + rng.below(50) as u32
                        })
                        .collect();
                    sum = counts.iter().fold(sum, |s, &c| s.wrapping_add(c));
                    push_chunk(&mut data, insn * 4, &counts);
                    insn += n;
                }
                push_footer(&mut data, nonzero, sum);
                *totals.samples.entry(event.clone()).or_default() += u64::from(sum);
                totals.bytes += data.len() as u64;
                totals.files += 1;
                let file = dir.join(format!("lib{image:03}.so.{event}"));
                std::fs::write(file, &data).unwrap();
            }
        }
        totals.addresses += sampled.iter().filter(|&&s| s).count() as u64;
    }
    totals
}
