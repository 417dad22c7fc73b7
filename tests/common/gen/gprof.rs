//! A builder for gmon.out files (docs/formats/gprof.md §1–§2): GNU tagged
//! records, 4.4BSD and 4.3BSD headers, in either byte order and word size.

/// Writes gmon.out files of every layout from a description.
#[derive(Clone, Copy)]
pub struct Layout {
    pub big: bool,
    pub word: usize,
}

impl Layout {
    pub fn u16(self, out: &mut Vec<u8>, v: u16) {
        out.extend(if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub fn u32(self, out: &mut Vec<u8>, v: u32) {
        out.extend(if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub fn word(self, out: &mut Vec<u8>, v: u64) {
        if self.word == 4 {
            self.u32(out, v as u32);
        } else {
            out.extend(if self.big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
    }
}

/// One histogram: its address range, clock rate and bins.
pub struct Hist {
    pub low: u64,
    pub high: u64,
    pub rate: u32,
    pub bins: Vec<u16>,
}

/// A GNU gmon.out: histograms, arcs `(from, self, count)` and basic blocks.
pub fn gnu(l: Layout, hists: &[Hist], arcs: &[(u64, u64, u32)], bbs: &[(u64, u64)]) -> Vec<u8> {
    let mut out = b"gmon".to_vec();
    l.u32(&mut out, 1);
    out.extend([0u8; 12]);
    for h in hists {
        out.push(0);
        l.word(&mut out, h.low);
        l.word(&mut out, h.high);
        l.u32(&mut out, h.bins.len() as u32);
        l.u32(&mut out, h.rate);
        let mut dimen = *b"seconds\0\0\0\0\0\0\0\0";
        dimen[14] = 0;
        out.extend(dimen);
        out.push(b's');
        for &b in &h.bins {
            l.u16(&mut out, b);
        }
    }
    for &(from, to, count) in arcs {
        out.push(1);
        l.word(&mut out, from);
        l.word(&mut out, to);
        l.u32(&mut out, count);
    }
    if !bbs.is_empty() {
        out.push(2);
        l.u32(&mut out, bbs.len() as u32);
        for &(addr, count) in bbs {
            l.word(&mut out, addr);
            l.word(&mut out, count);
        }
    }
    out
}

/// A 4.4BSD gmon.out (header with version and rate).
pub fn bsd44(l: Layout, h: &Hist, arcs: &[(u64, u64, i64)]) -> Vec<u8> {
    let header = if l.word == 8 { 40 } else { 32 };
    let mut out = Vec::new();
    l.word(&mut out, h.low);
    l.word(&mut out, h.high);
    l.u32(&mut out, (header + 2 * h.bins.len()) as u32);
    l.u32(&mut out, 0x0005_1879);
    l.u32(&mut out, h.rate);
    out.extend([0u8; 12]);
    bsd_body(l, out, header, h, arcs)
}

/// A 4.3BSD gmon.out (no rate: readers assume one).
pub fn bsd43(l: Layout, h: &Hist, arcs: &[(u64, u64, i64)]) -> Vec<u8> {
    let header = if l.word == 8 { 24 } else { 12 };
    let mut out = Vec::new();
    l.word(&mut out, h.low);
    l.word(&mut out, h.high);
    l.u32(&mut out, (header + 2 * h.bins.len()) as u32);
    bsd_body(l, out, header, h, arcs)
}

/// The rest of a BSD gmon.out after the fields of its header: padding to
/// `header` bytes, the bins, then the arcs (count in a word).
fn bsd_body(
    l: Layout,
    mut out: Vec<u8>,
    header: usize,
    h: &Hist,
    arcs: &[(u64, u64, i64)],
) -> Vec<u8> {
    while out.len() < header {
        out.push(0);
    }
    for &b in &h.bins {
        l.u16(&mut out, b);
    }
    for &(from, to, count) in arcs {
        l.word(&mut out, from);
        l.word(&mut out, to);
        l.word(&mut out, count as u64);
    }
    out
}
