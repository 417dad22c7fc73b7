//! A DCPI profile database builder for scale tests (dcpiformat(4) §2.3,
//! the layout of `benches/dcpi_gen.py`): `DB/<epoch>/host/libNNN.so.<event>`,
//! one pdb-0.07 profile per image, epoch and event, every image's text
//! covered by back-to-back chunks, a fraction of the instructions sampled.
//! Seeded: the same database every time. It records what the files'
//! footers say, the truth the tests check conversions against.

use std::path::Path;

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

/// xorshift64*: small, seeded, good enough to scatter counts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub const TSTART: u64 = 0x3ff_0000_0000;
pub const IMAGE_STRIDE: u64 = 0x100_0000;

fn header(image: usize, epoch: &str, event: &str, period: u64, insns: u32) -> Vec<u8> {
    let mut text = format!(
        "version pdb-0.07\nimage 20261122{image:06}{:06x}\npath /usr/bench/lib{image:03}.so\n\
         epoch {epoch}\nplatform testhost\nevent {event}\nperiod {period}\ntstart {:x}\n\
         tsize {}\ncpuspeed 667\nsamples",
        0xabc000 + image,
        TSTART + image as u64 * IMAGE_STRIDE,
        u64::from(insns) * 4
    );
    while (text.len() + 1) % 4 != 0 {
        text.push(' ');
    }
    text.push('\n');
    text.into_bytes()
}

/// Builds the database under `root`; returns its footers' totals.
pub fn build(root: &Path, spec: &DbSpec) -> DbTotals {
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
                let mut data = header(image, &name, event, *period, spec.insns);
                let (mut nonzero, mut sum) = (0u32, 0u32);
                let mut insn = 0u32;
                while insn < spec.insns {
                    let n = (32 + rng.below(993) as u32).min(spec.insns - insn);
                    data.extend_from_slice(&(insn * 4).to_le_bytes());
                    data.extend_from_slice(&n.to_le_bytes());
                    for i in insn..insn + n {
                        let count = if rng.below(1000) < u64::from(spec.sampled_per_mille) {
                            1 + rng.below(50) as u32
                        } else {
                            0
                        };
                        if count != 0 {
                            nonzero += 1;
                            sampled[i as usize] = true;
                        }
                        sum = sum.wrapping_add(count);
                        data.extend_from_slice(&count.to_le_bytes());
                    }
                    insn += n;
                }
                data.extend_from_slice(&nonzero.to_le_bytes());
                data.extend_from_slice(&sum.to_le_bytes());
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
