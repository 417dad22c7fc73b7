//! A builder for APS sample files (docs/formats/aps.md): a head, records of
//! a given call depth, the module table and the per-process vma table, each
//! section in its own byte order, with overrides for hostile counts.

use std::path::{Path, PathBuf};

/// One sample record: user or kernel, pid/tid, event, pc and call sites.
#[derive(Clone, Debug)]
pub struct Rec {
    pub user: bool,
    pub pid: i32,
    pub tid: i32,
    pub event: u32,
    pub pc: u32,
    pub cs_layer: i32,
    pub cs: Vec<u32>,
}

/// A user-mode record whose `cs_layer` is the number of call sites given.
pub fn user(pid: i32, tid: i32, event: u32, pc: u32, cs: &[u32]) -> Rec {
    Rec {
        user: true,
        pid,
        tid,
        event,
        pc,
        cs_layer: cs.len() as i32,
        cs: cs.to_vec(),
    }
}

/// A kernel-mode record, as [`user`].
pub fn kernel(pid: i32, tid: i32, event: u32, pc: u32, cs: &[u32]) -> Rec {
    Rec {
        user: false,
        ..user(pid, tid, event, pc, cs)
    }
}

/// One entry of the per-process vma table.
#[derive(Clone, Debug)]
pub struct Vma {
    pub pid: i32,
    pub sre: bool,
    pub start: u32,
    pub end: u32,
    pub file: String,
}

/// A vma of `pid` mapping `file` at `start..=end`.
pub fn vma(pid: i32, start: u32, end: u32, file: &str) -> Vma {
    Vma {
        pid,
        sre: false,
        start,
        end,
        file: file.to_owned(),
    }
}

/// A description of one APS sample file.
#[derive(Clone, Debug)]
pub struct Aps {
    /// Byte order of the head and records, of the module table, of the vma table.
    pub big: bool,
    pub module_big: bool,
    pub vma_big: bool,
    pub depth: usize,
    pub path_len: usize,
    pub begin: (i32, i32),
    pub end: (i32, i32),
    pub st_begin: u64,
    pub st_end: u64,
    pub reset: u64,
    pub cputype: u32,
    pub records: Vec<Rec>,
    pub modules: Vec<(u32, u32, String)>,
    pub vmas: Vec<Vma>,
    /// Counts written instead of the real ones (hostile files).
    pub index_override: Option<u32>,
    pub module_count_override: Option<u32>,
    pub vma_count_override: Option<u32>,
}

impl Default for Aps {
    fn default() -> Self {
        Aps {
            big: false,
            module_big: false,
            vma_big: false,
            depth: 5,
            path_len: 256,
            begin: (1_437_051_740, 250_000),
            end: (1_437_051_752, 750_000),
            st_begin: 0x1_0000_0001,
            st_end: 0x2_0000_0002,
            reset: 1000,
            cputype: 7,
            records: Vec::new(),
            modules: Vec::new(),
            vmas: Vec::new(),
            index_override: None,
            module_count_override: None,
            vma_count_override: None,
        }
    }
}

/// `v` in the chosen byte order.
pub fn u32b(big: bool, v: u32) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// `v` in the chosen byte order.
pub fn u64b(big: bool, v: u64) -> [u8; 8] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// A fixed `len`-byte C string buffer: the name, a NUL, then junk (the
/// writer does not zero its buffers, §3.5).
pub fn path_buffer(name: &str, len: usize) -> Vec<u8> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    while b.len() < len {
        b.push(b'J');
    }
    b.truncate(len);
    b
}

impl Aps {
    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let big = self.big;
        let mut out = Vec::new();
        out.extend(u32b(big, 0x1234_4321));
        out.extend(u32b(
            big,
            self.index_override.unwrap_or(self.records.len() as u32),
        ));
        out.extend(u32b(big, self.begin.0 as u32));
        out.extend(u32b(big, self.begin.1 as u32));
        out.extend(u32b(big, self.end.0 as u32));
        out.extend(u32b(big, self.end.1 as u32));
        out.extend(u64b(big, self.st_begin));
        out.extend(u64b(big, self.st_end));
        out.extend(u64b(big, self.reset));
        out.extend(u32b(big, self.cputype));
        out.extend(u32b(big, 0xdead_beef));
        assert_eq!(out.len(), 56);
        for r in &self.records {
            out.extend(u32b(big, u32::from(r.user)));
            out.extend(u32b(big, r.pid as u32));
            out.extend(u32b(big, r.tid as u32));
            out.extend(u32b(big, 3)); // time_diff
            out.extend(u32b(big, 1)); // pmc_index
            out.extend(u32b(big, r.cs_layer as u32));
            out.extend(u32b(big, r.event));
            out.extend(u32b(big, 0)); // unitmask
            out.extend(u32b(big, r.pc));
            for i in 0..self.depth {
                // Slots past the given entries hold junk a reader must not use.
                out.extend(u32b(big, r.cs.get(i).copied().unwrap_or(0x0bad_0bad)));
            }
        }
        let mb = self.module_big;
        out.extend(u32b(mb, 0x8746_abcd));
        out.extend(u32b(
            mb,
            self.module_count_override
                .unwrap_or(self.modules.len() as u32),
        ));
        for (start, end, name) in &self.modules {
            out.extend(u32b(mb, *start));
            out.extend(u32b(mb, *end));
            out.extend(path_buffer(name, self.path_len));
        }
        let vb = self.vma_big;
        out.extend(u32b(vb, 0xbcdf_9283));
        out.extend(u32b(
            vb,
            self.vma_count_override.unwrap_or(self.vmas.len() as u32),
        ));
        for v in &self.vmas {
            out.extend(u32b(vb, v.pid as u32));
            out.extend(u32b(vb, u32::from(v.sre)));
            out.extend(u32b(vb, v.start));
            out.extend(u32b(vb, v.end));
            out.extend(path_buffer(&v.file, self.path_len));
        }
        out
    }

    /// Writes the file as `dir/name`.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.bytes()).unwrap();
        path
    }

    /// Every section big-endian.
    pub fn all_big(mut self) -> Self {
        self.big = true;
        self.module_big = true;
        self.vma_big = true;
        self
    }
}
