//! A builder for mpatrol profiling files (docs/formats/mpatrol.md §2): the
//! raw rows in any byte order and word size, and a program description
//! (functions, allocating stacks, size classes) that becomes those rows the
//! way mpatrol's `__mp_writeprofile` lays them out.

use std::collections::BTreeMap;

/// The rows of spec §2 as numbers, written in any byte order and word size.
#[derive(Debug, Clone)]
pub struct Raw {
    pub version: u64,
    pub bounds: [u64; 3],
    /// acount[B], large allocation total, dcount[B], large deallocation total.
    pub bins: Option<(Vec<u64>, u64, Vec<u64>, u64)>,
    /// index, acount[4], atotal[4], dcount[4], dtotal[4].
    pub records: Vec<[u64; 17]>,
    /// index, parent, address, symbol index, name offset, record index.
    pub sites: Vec<[u64; 6]>,
    pub symbols: Vec<u64>,
    pub strings: Vec<u8>,
}

/// Which header words to write: the current layout has both.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub marker: bool,
    pub version: bool,
}
pub const CURRENT: Header = Header {
    marker: true,
    version: true,
};

pub struct Writer {
    pub word: usize,
    pub big: bool,
    pub out: Vec<u8>,
}

impl Writer {
    pub fn word(&mut self, v: u64) {
        match (self.word, self.big) {
            (4, false) => self.out.extend_from_slice(&(v as u32).to_le_bytes()),
            (4, true) => self.out.extend_from_slice(&(v as u32).to_be_bytes()),
            (_, false) => self.out.extend_from_slice(&v.to_le_bytes()),
            (_, true) => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }
}

pub fn encode_with(raw: &Raw, word: usize, big: bool, header: Header) -> Vec<u8> {
    let mut w = Writer {
        word,
        big,
        out: b"MPTL".to_vec(),
    };
    if header.marker {
        w.word(1);
    }
    if header.version {
        w.word(raw.version);
    }
    for b in raw.bounds {
        w.word(b);
    }
    match &raw.bins {
        Some((a, at, d, dt)) => {
            w.word(a.len() as u64);
            a.iter().for_each(|&v| w.word(v));
            w.word(*at);
            d.iter().for_each(|&v| w.word(v));
            w.word(*dt);
        }
        None => w.word(0),
    }
    w.word(raw.records.len() as u64);
    raw.records.iter().flatten().for_each(|&v| w.word(v));
    w.word(raw.sites.len() as u64);
    raw.sites.iter().flatten().for_each(|&v| w.word(v));
    w.word(raw.symbols.len() as u64);
    raw.symbols.iter().for_each(|&v| w.word(v));
    w.word(raw.strings.len() as u64);
    w.out.extend_from_slice(&raw.strings);
    w.out.extend_from_slice(b"MPTL");
    w.out
}

pub fn encode(raw: &Raw, word: usize, big: bool) -> Vec<u8> {
    encode_with(raw, word, big, CURRENT)
}

/// A function of the described program: name (None = no symbol) and start.
#[derive(Debug, Clone, Copy)]
pub struct Func {
    pub name: Option<&'static str>,
    pub start: u64,
}

/// One allocating call stack: frames leaf first as (function, offset of the
/// return address in it), and per size class [acount, atotal, dcount, dtotal].
#[derive(Debug, Clone)]
pub struct Alloc {
    pub frames: Vec<(usize, u64)>,
    pub classes: [[u64; 4]; 4],
}

#[derive(Debug, Clone)]
pub struct Program {
    pub funcs: Vec<Func>,
    pub allocs: Vec<Alloc>,
    pub bounds: [u64; 3],
    pub bin_count: usize,
}

impl Alloc {
    pub fn sum(&self, what: usize) -> i64 {
        self.classes.iter().map(|c| c[what] as i64).sum()
    }
    /// The six values, in the order of the sample types.
    pub fn values(&self) -> [i64; 6] {
        let (ac, ab, fc, fb) = (self.sum(0), self.sum(1), self.sum(2), self.sum(3));
        [ac, ab, fc, fb, ac - fc, ab - fb]
    }
}

/// Where code is loaded for each word size: above 4 GiB for 64-bit files so
/// that a 4-byte read of an address would show.
pub fn base(word: usize) -> u64 {
    if word == 8 {
        0x5555_5555_0000
    } else {
        0x0804_8000
    }
}

impl Program {
    pub fn address(&self, word: usize, (f, off): (usize, u64)) -> u64 {
        base(word) + self.funcs[f].start + off
    }

    /// Frame names of an allocation, leaf first, as outputs show them.
    pub fn names(&self, word: usize, a: &Alloc) -> Vec<String> {
        a.frames
            .iter()
            .map(|&fr| match self.funcs[fr.0].name {
                Some(n) => n.to_owned(),
                None => format!("{:#x}", self.address(word, fr)),
            })
            .collect()
    }

    /// The file mpatrol would write: call sites created root first in
    /// allocation order, written sorted by address; symbols and names
    /// numbered in that order (as `__mp_writeprofile` does).
    pub fn raw(&self, word: usize) -> Raw {
        let tree = self.call_site_tree(word);
        let (sites, symbols, strings) = self.site_rows(word, &tree);
        let (bins, large) = self.histogram();
        Raw {
            version: 10408,
            bounds: self.bounds,
            bins: (self.bin_count > 0).then_some((
                bins[0].clone(),
                large[0],
                bins[1].clone(),
                large[1],
            )),
            records: self.record_rows(),
            sites,
            symbols,
            strings,
        }
    }

    /// The call sites in creation order: each allocation's frames root
    /// first, shared by (address, parent); the allocation's record hangs
    /// on its leaf site.
    fn call_site_tree(&self, word: usize) -> SiteTree {
        let mut tree = SiteTree::default();
        let mut index: std::collections::HashMap<(u64, u64), usize> = Default::default();
        for (r, a) in self.allocs.iter().enumerate() {
            let mut parent = 0u64;
            for &fr in a.frames.iter().rev() {
                let addr = self.address(word, fr);
                parent = match index.get(&(addr, parent)) {
                    Some(&i) => i as u64 + 1,
                    None => {
                        index.insert((addr, parent), tree.sites.len());
                        tree.sites.push((addr, parent, fr.0));
                        tree.record.push(0);
                        tree.sites.len() as u64
                    }
                };
            }
            tree.record[parent as usize - 1] = r as u64 + 1;
        }
        tree
    }

    /// The call-site rows sorted by address, with the symbol table and the
    /// string table they number as they go.
    fn site_rows(&self, word: usize, tree: &SiteTree) -> (Vec<[u64; 6]>, Vec<u64>, Vec<u8>) {
        let mut order: Vec<usize> = (0..tree.sites.len()).collect();
        order.sort_by_key(|&i| (tree.sites[i].0, i));
        let mut symbol_of_func: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        let mut symbols = Vec::new();
        let mut strings = vec![0u8];
        let mut rows = Vec::new();
        for &i in &order {
            let (addr, parent, func) = tree.sites[i];
            let (sym, name) = match self.funcs[func].name {
                None => (0, 0),
                Some(n) => *symbol_of_func.entry(func).or_insert_with(|| {
                    symbols.push(base(word) + self.funcs[func].start);
                    let off = strings.len() as u64;
                    strings.extend_from_slice(n.as_bytes());
                    strings.push(0);
                    (symbols.len() as u64, off)
                }),
            };
            rows.push([i as u64 + 1, parent, addr, sym, name, tree.record[i]]);
        }
        (rows, symbols, strings)
    }

    /// One profiling record per allocation: index, then the four arrays of
    /// four (counts and bytes allocated and freed per size class).
    fn record_rows(&self) -> Vec<[u64; 17]> {
        let row = |(i, a): (usize, &Alloc)| {
            let mut r = [0u64; 17];
            r[0] = i as u64 + 1;
            for k in 0..4 {
                r[1 + k] = a.classes[k][0];
                r[5 + k] = a.classes[k][1];
                r[9 + k] = a.classes[k][2];
                r[13 + k] = a.classes[k][3];
            }
            r
        };
        self.allocs.iter().enumerate().map(row).collect()
    }

    /// A histogram consistent with the records: every block in the bin of
    /// its mean size (what matters is that it is carried through).
    /// `([allocation bins, free bins], [large bytes allocated, freed])`.
    fn histogram(&self) -> ([Vec<u64>; 2], [u64; 2]) {
        let b = self.bin_count.max(1);
        let mut bins = [vec![0u64; b], vec![0u64; b]];
        let mut large = [0u64; 2];
        for c in self.allocs.iter().flat_map(|a| a.classes) {
            for (side, (count, bytes)) in [(c[0], c[1]), (c[2], c[3])].into_iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let size = (bytes / count) as usize;
                if size >= b {
                    bins[side][b - 1] += count;
                    large[side] = large[side].wrapping_add(bytes); // dropped when bin_count is 0
                } else {
                    bins[side][size - 1] += count;
                }
            }
        }
        (bins, large)
    }
}

/// The call sites of a program in creation order: `(address, parent index
/// (1-based, 0 = root), function)`, and the record each carries (0 = none).
#[derive(Default)]
struct SiteTree {
    sites: Vec<(u64, u64, usize)>,
    record: Vec<u64>,
}

/// The example program: two call sites in `new_pair` (one freed, one
/// leaked, as in the mpatrol manual), a table builder with medium, large and
/// extra-large blocks, a call site of a function without a symbol, and a
/// recursive function (the same function twice in one stack).
pub fn example() -> Program {
    let funcs = vec![
        Func {
            name: Some("_start"),
            start: 0x100,
        }, // 0
        Func {
            name: Some("main"),
            start: 0x200,
        }, // 1
        Func {
            name: Some("new_pair"),
            start: 0x400,
        }, // 2
        Func {
            name: Some("make_table"),
            start: 0x600,
        }, // 3
        Func {
            name: None,
            start: 0x900,
        }, // 4: no symbol
        Func {
            name: Some("walk_tree"),
            start: 0xa00,
        }, // 5
    ];
    let small = |ac, ab, dc, db| [[ac, ab, dc, db], [0; 4], [0; 4], [0; 4]];
    let allocs = vec![
        Alloc {
            frames: vec![(2, 0x14), (1, 0x78), (0, 0x64)],
            classes: small(256, 2048, 256, 2048),
        },
        Alloc {
            frames: vec![(2, 0x8c), (1, 0x78), (0, 0x64)],
            classes: small(256, 922, 0, 0),
        },
        Alloc {
            frames: vec![(3, 0x20), (1, 0x40), (0, 0x64)],
            classes: [
                [0; 4],
                [3, 600, 1, 200],
                [1, 1500, 0, 0],
                [2, 10_000, 1, 5000],
            ],
        },
        Alloc {
            frames: vec![(4, 0x10), (1, 0x50), (0, 0x64)],
            classes: small(1, 16, 0, 0),
        },
        Alloc {
            frames: vec![(5, 0x30), (5, 0x44), (1, 0x60), (0, 0x64)],
            classes: [[4, 40, 4, 40], [1, 100, 0, 0], [0; 4], [0; 4]],
        },
    ];
    Program {
        funcs,
        allocs,
        bounds: [32, 256, 2048],
        bin_count: 1024,
    }
}

pub const COMBINATIONS: [(usize, bool); 4] = [(4, false), (4, true), (8, false), (8, true)];
