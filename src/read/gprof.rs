//! GNU gprof `gmon.out` reader: the GNU tagged format (both byte orders, 4-
//! and 8-byte addresses), 4.4BSD and 4.3BSD headers (spec gprof.md §1–§2), and
//! the mapping to the IR the way gprof reasons about it (§3–§4).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;
use std::path::Path;

use super::input::Detection;
use super::input::Input;
use super::options::{GprofStacks, ReadOptions};
use crate::error::{Error, Result};
use crate::profile::{apportion, Line, LocationId, Mapping, MappingId, Profile};
use crate::read::cursor::{Cursor, Endian};
use crate::symbolize::Binary;

const GMON_MAGIC: &[u8; 4] = b"gmon";
const TAG_TIME_HIST: u8 = 0;
const TAG_CG_ARC: u8 = 1;
const TAG_BB_COUNT: u8 = 2;
const BSD44_VERSION: u32 = 0x0005_1879;
/// The clock rate assumed for 4.3BSD files, which do not record one.
const DEFAULT_RATE: u32 = 100;

/// Which layout a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Gnu,
    Bsd44,
    Bsd43,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Gnu => "GNU gmon.out (tagged records)",
            Variant::Bsd44 => "4.4BSD gmon.out",
            Variant::Bsd43 => "4.2/4.3BSD gmon.out",
        }
    }
}

/// A PC histogram: `bins[i]` counts ticks in `[low_pc + i·w, low_pc + (i+1)·w)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub low_pc: u64,
    pub high_pc: u64,
    pub prof_rate: u32,
    pub dimension: String,
    pub dimension_abbrev: char,
    /// Counts (summed over records and files, so wider than the file's u16).
    pub bins: Vec<u64>,
}

impl Histogram {
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// Bytes of text per bin.
    pub fn scale(&self) -> f64 {
        (self.high_pc - self.low_pc) as f64 / self.bins.len().max(1) as f64
    }
}

/// A call-graph arc: `from_pc` is an address in the caller, `self_pc` an
/// address in the callee. The spec calls `from_pc` a return address, but
/// glibc writes the start of the 16-byte hash bucket the return address fell
/// in (and `gprof -s` writes the caller's first byte), so it is looked up
/// as is, like gprof does, not at `from_pc − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallArc {
    pub from_pc: u64,
    pub self_pc: u64,
    pub count: u64,
}

/// What one or more gmon.out files hold.
#[derive(Debug, Clone, PartialEq)]
pub struct GmonData {
    pub variant: Variant,
    pub endian: Endian,
    pub pointer_size: usize,
    pub histograms: Vec<Histogram>,
    /// Summed per (from_pc, self_pc), sorted.
    pub arcs: Vec<CallArc>,
    /// Basic-block execution counts per address, summed.
    pub basic_blocks: BTreeMap<u64, u64>,
    /// Bins at 65535, the u16 ceiling: the counts there are lower bounds.
    pub saturated_bins: usize,
    /// True when the clock rate was not in the file (4.3BSD).
    pub rate_assumed: bool,
    /// Histogram and arc records read (before summing).
    pub histogram_records: usize,
    pub arc_records: usize,
    pub bb_records: usize,
}

/// True for the GNU format (the `gmon` magic).
pub fn detect_gnu(head: &[u8]) -> bool {
    head.len() >= 20 && head.starts_with(GMON_MAGIC) && gnu_endian(head).is_some()
}

fn gnu_endian(head: &[u8]) -> Option<Endian> {
    match head.get(4..8)? {
        [1, 0, 0, 0] => Some(Endian::Little),
        [0, 0, 0, 1] => Some(Endian::Big),
        _ => None,
    }
}

/// The GNU format by its magic, the BSD formats by their header's sizes.
pub fn detect_input(head: &[u8], file_len: u64) -> Detection {
    if detect_gnu(head) {
        Detection::Magic
    } else if bsd_layout(head, file_len, None).is_some() {
        Detection::Likely
    } else {
        Detection::No
    }
}

/// True for the BSD formats, recognised by their header's sizes (§2).
pub fn detect(head: &[u8], file_len: u64) -> bool {
    detect_gnu(head) || bsd_layout(head, file_len, None).is_some()
}

/// A BSD header layout that fits: (variant, endian, word size, header size, counter bytes).
#[derive(Debug, Clone, Copy)]
struct BsdLayout {
    variant: Variant,
    endian: Endian,
    word: usize,
    header: usize,
    counter_bytes: usize,
    counter_signed: bool,
    lpc: u64,
    hpc: u64,
    ncnt: u64,
    rate: u32,
}

fn bsd_layout(head: &[u8], file_len: u64, pointer_size: Option<usize>) -> Option<BsdLayout> {
    let words: &[usize] = match pointer_size {
        Some(4) => &[4],
        Some(8) => &[8],
        _ => &[8, 4],
    };
    let path = Path::new("");
    for variant in [Variant::Bsd44, Variant::Bsd43] {
        for &word in words {
            for endian in [Endian::Little, Endian::Big] {
                let mut c = Cursor::new(path, head, endian, word);
                let (Ok(lpc), Ok(hpc), Ok(ncnt)) = (c.word(""), c.word(""), c.i32("")) else {
                    continue;
                };
                let (header, rate, counter_bytes, counter_signed) = if variant == Variant::Bsd44 {
                    let (Ok(version), Ok(rate), Ok(spare0)) = (c.u32(""), c.u32(""), c.i32(""))
                    else {
                        continue;
                    };
                    // A rate of 0 is still 4.4BSD (the version says so);
                    // parse_bsd asks for --gmon-rate rather than reading the
                    // file as 4.3BSD at other offsets.
                    if version != BSD44_VERSION {
                        continue;
                    }
                    // FreeBSD's histcounter_type: counter width in bits, negative = signed.
                    let (bytes, signed) = match spare0 {
                        0 => (2, false),
                        8 | 16 | 32 | 64 => (spare0 as usize / 8, false),
                        -8 | -16 | -32 | -64 => ((-spare0) as usize / 8, true),
                        _ => continue,
                    };
                    // lpc, hpc, ncnt, version, profrate, spare[3]; word-aligned.
                    (align(2 * word + 6 * 4, word), rate, bytes, signed)
                } else {
                    (align(2 * word + 4, word), 0, 2, false)
                };
                if ncnt < 0 {
                    continue;
                }
                let ncnt = ncnt as u64;
                let arc_size = 3 * word as u64;
                if lpc >= hpc
                    || ncnt < header as u64
                    || ncnt > file_len
                    || (ncnt - header as u64) % counter_bytes as u64 != 0
                    || (file_len - ncnt) % arc_size != 0
                {
                    continue;
                }
                let counters = (ncnt - header as u64) / counter_bytes as u64;
                // Plausibility: each counter covers between 1 and 1024 bytes of text.
                if counters == 0 || (hpc - lpc) / counters > 1024 || (hpc - lpc) < counters {
                    continue;
                }
                return Some(BsdLayout {
                    variant,
                    endian,
                    word,
                    header,
                    counter_bytes,
                    counter_signed,
                    lpc,
                    hpc,
                    ncnt,
                    rate,
                });
            }
        }
    }
    None
}

fn align(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Parses one gmon.out file.
pub fn parse(
    file: &Path,
    data: &[u8],
    options: &ReadOptions,
    elf_pointer_size: Option<usize>,
) -> Result<GmonData> {
    let pointer_size = options.gprof.pointer_size.or(elf_pointer_size);
    if data.starts_with(GMON_MAGIC) {
        return parse_gnu(file, data, pointer_size);
    }
    let Some(layout) = bsd_layout(data, data.len() as u64, pointer_size) else {
        return Err(Error::format(
            file,
            0,
            "expected a gmon.out: the GNU magic `gmon`, or a 4.4BSD/4.3BSD header whose histogram and arc sizes fit the file",
        ));
    };
    parse_bsd(file, data, layout, options.gprof.rate)
}

fn parse_gnu(file: &Path, data: &[u8], pointer_size: Option<usize>) -> Result<GmonData> {
    let Some(endian) = gnu_endian(data) else {
        let mut c = Cursor::new(file, data, Endian::Little, 8);
        c.skip(4, "magic")?;
        let version = c.bytes(4, "the version")?;
        return Err(Error::format(
            file,
            4,
            format!("expected version 1 (01 00 00 00 or 00 00 00 01), found {version:02x?}"),
        ));
    };
    if let Some(size) = pointer_size {
        return parse_gnu_records(file, data, endian, size);
    }
    // The file does not say its address size: try 8, then 4 (§1).
    let wide = parse_gnu_records(file, data, endian, 8);
    let narrow = parse_gnu_records(file, data, endian, 4);
    match (wide, narrow) {
        (Ok(w), Err(_)) => Ok(w),
        (Err(_), Ok(n)) => Ok(n),
        (Ok(w), Ok(n)) if w == n => Ok(w),
        (Ok(_), Ok(_)) => Err(Error::format(
            file,
            20,
            "the records parse both with 4- and 8-byte addresses: say which with --gmon-pointer-size (or give --binary)",
        )),
        (Err(w), Err(n)) => Err(Error::format(
            file,
            gnu_error_offset(&w).max(gnu_error_offset(&n)),
            format!(
                "the records parse neither with 8-byte addresses ({}) nor with 4-byte ones ({})",
                short(&w),
                short(&n)
            ),
        )),
    }
}

fn gnu_error_offset(e: &Error) -> u64 {
    match e {
        Error::Format { offset, .. } => *offset,
        _ => 0,
    }
}

fn short(e: &Error) -> String {
    match e {
        Error::Format { offset, what, .. } => format!("at byte {offset}: {what}"),
        other => other.to_string(),
    }
}

fn parse_gnu_records(file: &Path, data: &[u8], endian: Endian, word: usize) -> Result<GmonData> {
    let mut c = Cursor::new(file, data, endian, word);
    c.skip(20, "the 20-byte header")?;
    let mut out = GmonData {
        variant: Variant::Gnu,
        endian,
        pointer_size: word,
        histograms: Vec::new(),
        arcs: Vec::new(),
        basic_blocks: BTreeMap::new(),
        saturated_bins: 0,
        rate_assumed: false,
        histogram_records: 0,
        arc_records: 0,
        bb_records: 0,
    };
    let mut arcs: HashMap<(u64, u64), u64> = HashMap::default();
    let mut ranges = HashMap::default();
    while !c.at_end() {
        let tag_at = c.offset();
        match c.u8("a record tag")? {
            TAG_TIME_HIST => {
                let low_pc = c.word("histogram low_pc")?;
                let high_pc = c.word("histogram high_pc")?;
                let size_at = c.offset();
                let hist_size = c.u32("histogram hist_size")?;
                let prof_rate = c.u32("histogram prof_rate")?;
                let dimen = c.bytes(15, "histogram dimension")?;
                let abbrev = c.u8("histogram dimension abbreviation")?;
                if low_pc >= high_pc {
                    return Err(c.error_at(
                        tag_at + 1,
                        format!("histogram low_pc {low_pc:#x} is not below high_pc {high_pc:#x}"),
                    ));
                }
                if prof_rate == 0 {
                    return Err(c.error_at(size_at + 4, "histogram prof_rate is 0"));
                }
                let bytes = c.check_items(hist_size as u64, 2, "histogram bins").map_err(|_| {
                    c.error_at(
                        size_at,
                        format!(
                            "histogram claims {hist_size} bins ({} bytes) but only {} bytes remain",
                            hist_size as u64 * 2,
                            c.remaining()
                        ),
                    )
                })?;
                let raw = c.bytes(bytes, "histogram bins")?;
                let bins: Vec<u64> = raw.chunks_exact(2).map(|b| endian.u16(b) as u64).collect();
                out.saturated_bins += bins.iter().filter(|&&b| b == 0xffff).count();
                let dimension = String::from_utf8_lossy(dimen.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
                out.histogram_records += 1;
                add_histogram(
                    file,
                    tag_at,
                    &mut out.histograms,
                    &mut ranges,
                    Histogram {
                        low_pc,
                        high_pc,
                        prof_rate,
                        dimension,
                        dimension_abbrev: abbrev as char,
                        bins,
                    },
                )?;
            }
            TAG_CG_ARC => {
                let from_pc = c.word("arc from_pc")?;
                let self_pc = c.word("arc self_pc")?;
                let count = c.u32("arc count")? as u64;
                out.arc_records += 1;
                *arcs.entry((from_pc, self_pc)).or_insert(0) += count;
            }
            TAG_BB_COUNT => {
                let ncounts = c.u32("basic-block ncounts")?;
                c.check_items(ncounts as u64, 2 * word, "basic-block records")?;
                for _ in 0..ncounts {
                    let addr = c.word("basic-block address")?;
                    let count = c.word("basic-block count")?;
                    *out.basic_blocks.entry(addr).or_insert(0) += count;
                }
                out.bb_records += 1;
            }
            other => {
                return Err(c.error_at(
                    tag_at,
                    format!("expected a record tag 0 (histogram), 1 (arc) or 2 (basic blocks), found {other}"),
                ))
            }
        }
    }
    out.arcs = sorted_arcs(arcs);
    Ok(out)
}

/// Arcs summed per (from_pc, self_pc), as a sorted list.
fn sorted_arcs(arcs: HashMap<(u64, u64), u64>) -> Vec<CallArc> {
    let mut out: Vec<CallArc> = arcs
        .into_iter()
        .map(|((from_pc, self_pc), count)| CallArc {
            from_pc,
            self_pc,
            count,
        })
        .collect();
    out.sort();
    out
}

/// Adds a histogram record: equal ranges are summed bin by bin, others kept
/// apart; a different rate or dimension cannot be combined (§1). `index`
/// finds a range among `hists` (filled from them when empty).
fn add_histogram(
    file: &Path,
    offset: usize,
    hists: &mut Vec<Histogram>,
    index: &mut HashMap<(u64, u64, usize), usize>,
    h: Histogram,
) -> Result<()> {
    if let Some(first) = hists.first() {
        if first.prof_rate != h.prof_rate || first.dimension != h.dimension {
            return Err(Error::format(
                file,
                offset as u64,
                format!(
                    "histogram at {} {} cannot be combined with one at {} {}",
                    h.prof_rate, h.dimension, first.prof_rate, first.dimension
                ),
            ));
        }
    }
    let key = (h.low_pc, h.high_pc, h.bins.len());
    if index.is_empty() && !hists.is_empty() {
        index.extend(
            hists
                .iter()
                .enumerate()
                .map(|(i, o)| ((o.low_pc, o.high_pc, o.bins.len()), i)),
        );
    }
    if let Some(same) = index.get(&key).and_then(|&i| hists.get_mut(i)) {
        for (a, b) in same.bins.iter_mut().zip(&h.bins) {
            *a += b;
        }
    } else {
        index.insert(key, hists.len());
        hists.push(h);
    }
    Ok(())
}

fn parse_bsd(file: &Path, data: &[u8], l: BsdLayout, rate: Option<u32>) -> Result<GmonData> {
    let mut c = Cursor::new(file, data, l.endian, l.word);
    c.seek(l.header)?;
    let counters = ((l.ncnt - l.header as u64) / l.counter_bytes as u64) as usize;
    c.check_items(counters as u64, l.counter_bytes, "histogram counters")?;
    let mut bins = Vec::with_capacity(counters);
    let mut saturated = 0;
    for _ in 0..counters {
        let v: u64 = match (l.counter_bytes, l.counter_signed) {
            (1, false) => c.u8("a counter")? as u64,
            (1, true) => (c.u8("a counter")? as i8).max(0) as u64,
            (2, false) => c.u16("a counter")? as u64,
            (2, true) => (c.u16("a counter")? as i16).max(0) as u64,
            (4, false) => c.u32("a counter")? as u64,
            (4, true) => c.i32("a counter")?.max(0) as u64,
            (_, false) => c.u64("a counter")?,
            (_, true) => (c.u64("a counter")? as i64).max(0) as u64,
        };
        if l.counter_bytes == 2 && v == 0xffff {
            saturated += 1;
        }
        bins.push(v);
    }
    let rate_assumed = l.variant == Variant::Bsd43 || l.rate == 0;
    let prof_rate = match (l.variant, l.rate, rate) {
        (Variant::Bsd43, _, given) => given.unwrap_or(DEFAULT_RATE),
        (_, 0, Some(given)) => given,
        (_, 0, None) => {
            return Err(Error::format(
                file,
                2 * l.word as u64 + 8,
                "the 4.4BSD header's clock rate (profrate) is 0: give the rate the program ran at with --gmon-rate HZ",
            ))
        }
        (_, recorded, _) => recorded,
    };
    let mut arcs: HashMap<(u64, u64), u64> = HashMap::default();
    let mut arc_records = 0;
    while !c.at_end() {
        let from_pc = c.word("rawarc frompc")?;
        let self_pc = c.word("rawarc selfpc")?;
        let count = c.sword("rawarc count")?.max(0) as u64;
        arc_records += 1;
        *arcs.entry((from_pc, self_pc)).or_insert(0) += count;
    }
    let arcs = sorted_arcs(arcs);
    Ok(GmonData {
        variant: l.variant,
        endian: l.endian,
        pointer_size: l.word,
        histograms: vec![Histogram {
            low_pc: l.lpc,
            high_pc: l.hpc,
            prof_rate,
            dimension: "seconds".into(),
            dimension_abbrev: 's',
            bins,
        }],
        arcs,
        basic_blocks: BTreeMap::new(),
        saturated_bins: saturated,
        rate_assumed,
        histogram_records: 1,
        arc_records,
        bb_records: 0,
    })
}

/// Sums the data of several files of one program (like `gprof -s`).
pub fn sum(file: &Path, mut a: GmonData, b: GmonData) -> Result<GmonData> {
    let mut ranges = HashMap::default();
    for h in b.histograms {
        add_histogram(file, 0, &mut a.histograms, &mut ranges, h)?;
    }
    let mut arcs: HashMap<(u64, u64), u64> = a
        .arcs
        .iter()
        .map(|x| ((x.from_pc, x.self_pc), x.count))
        .collect();
    for x in b.arcs {
        *arcs.entry((x.from_pc, x.self_pc)).or_insert(0) += x.count;
    }
    a.arcs = sorted_arcs(arcs);
    for (addr, n) in b.basic_blocks {
        *a.basic_blocks.entry(addr).or_insert(0) += n;
    }
    a.saturated_bins += b.saturated_bins;
    a.rate_assumed |= b.rate_assumed;
    a.histogram_records += b.histogram_records;
    a.arc_records += b.arc_records;
    a.bb_records += b.bb_records;
    Ok(a)
}

/// Reads and sums every input.
fn load(inputs: &[Input], options: &ReadOptions, binary: Option<&Binary>) -> Result<GmonData> {
    let mut total: Option<GmonData> = None;
    for input in inputs {
        let path = input.name();
        options.advance(input.len());
        let parsed = parse(path, input.bytes(), options, binary.map(|b| b.pointer_size))?;
        total = Some(match total {
            None => parsed,
            Some(acc) => sum(path, acc, parsed)?,
        });
    }
    total.ok_or_else(|| Error::Usage("no gmon.out given".into()))
}

/// Reads and sums gmon.out inputs into one profile.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let binary = options
        .binary
        .as_deref()
        .map(Binary::open_cached)
        .transpose()?;
    let data = load(inputs, options, binary.as_deref())?;
    let mut profile = to_profile(&data, binary.as_deref(), options.gprof.stacks);
    {
        if let Some(t) = inputs.first().and_then(Input::modified) {
            if let Ok(d) = t.duration_since(std::time::UNIX_EPOCH) {
                profile.time_nanos = d.as_nanos() as i64;
                profile.comments.push(
                    "time: modification time of the gmon.out (written when the program exited)"
                        .into(),
                );
            }
        }
    }
    Ok(profile)
}

/// A function of the executable as gprof sees it: `[start, end)` runs to the
/// next symbol (§3).
#[derive(Debug, Clone)]
struct Func<'b> {
    start: u64,
    end: u64,
    name: &'b str,
    system_name: &'b str,
}

fn gprof_functions(binary: &Binary) -> Vec<Func<'_>> {
    let syms = binary.symbols();
    syms.iter()
        .enumerate()
        .map(|(i, s)| Func {
            start: s.address,
            end: syms.get(i + 1).map_or(
                if s.size > 0 {
                    s.address + s.size
                } else {
                    u64::MAX
                },
                |n| n.address,
            ),
            name: &s.name,
            system_name: &s.system_name,
        })
        .collect()
}

fn function_at(funcs: &[Func<'_>], addr: u64) -> Option<usize> {
    let i = funcs.partition_point(|f| f.start <= addr).checked_sub(1)?;
    (addr < funcs[i].end).then_some(i)
}

/// Builds locations, symbolized through the binary, with a cache per address.
struct Locator<'a, 'b> {
    binary: Option<&'a Binary>,
    funcs: &'a [Func<'b>],
    mapping: MappingId,
    cache: HashMap<u64, LocationId>,
    any_file: bool,
    any_line: bool,
    any_inline: bool,
}

impl Locator<'_, '_> {
    fn location(&mut self, profile: &mut Profile, address: u64) -> LocationId {
        if let Some(&id) = self.cache.get(&address) {
            return id;
        }
        let mut lines = Vec::new();
        if let Some(binary) = self.binary {
            let home = function_at(self.funcs, address);
            let mut depth = 0;
            binary.for_each_frame(address, |f| {
                self.any_file |= !f.file.is_empty();
                self.any_line |= f.line > 0;
                let function = profile.add_function(f.function, f.system_name, f.file, 0);
                lines.push(Line {
                    function,
                    line: f.line,
                });
                depth += 1;
            });
            self.any_inline |= depth > 1;
            if lines.is_empty() && !self.funcs.is_empty() {
                // Padding between functions: gprof credits it to the symbol
                // before it; outside every symbol it is `[unknown]`.
                let (name, system) = home.map_or(("[unknown]", ""), |i| {
                    (self.funcs[i].name, self.funcs[i].system_name)
                });
                let function = profile.add_function(name, system, "", 0);
                lines.push(Line { function, line: 0 });
            }
        }
        let id = profile.add_location(crate::profile::Location {
            mapping: Some(self.mapping),
            address,
            is_return_address: false,
            lines,
        });
        self.cache.insert(address, id);
        id
    }
}

/// One piece of histogram time: ticks credited to a function at an address.
#[derive(Debug, Clone, Copy)]
struct Tick {
    func: Option<usize>,
    address: u64,
    samples: i64,
    nanos: i64,
}

/// Splits every non-empty bin over the functions it overlaps, in proportion
/// to the overlap, as gprof's `hist_assign_samples` does (§3). The integer
/// parts are apportioned so that every bin's total is kept exactly.
///
/// A bin that covers many whole functions (never in files `gcc -pg` writes,
/// whose bins are a few bytes wide, but possible in a crafted file) hands
/// those functions their share through [`Spread`], so the work stays linear
/// in bins + functions instead of bins × functions.
fn assign_ticks(data: &GmonData, funcs: &[Func<'_>], period_ns: f64) -> Vec<Tick> {
    let mut out = Vec::new();
    let mut spread = Spread::new(funcs.len());
    for h in &data.histograms {
        let scale = h.scale();
        for (i, &count) in h.bins.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let lo = h.low_pc + (scale * i as f64) as u64;
            let hi = (h.low_pc + (scale * (i + 1) as f64) as u64).max(lo + 1);
            let pieces = bin_pieces(funcs, lo, hi);
            let weights: Vec<f64> = pieces.iter().map(|p| p.len() as f64).collect();
            // Whole ticks are apportioned; time is gprof's credit,
            // overlap × count / scale, which need not add up to the count
            // when the bin width is not a whole number of bytes.
            let samples = apportion(count as i64, &weights);
            for (k, piece) in pieces.iter().enumerate() {
                let nanos = (weights[k] * count as f64 / scale * period_ns).round() as i64;
                match *piece {
                    Piece::Span { func, start, .. } if samples[k] != 0 || nanos != 0 => {
                        out.push(Tick {
                            func,
                            address: start,
                            samples: samples[k],
                            nanos,
                        })
                    }
                    Piece::Span { .. } => {}
                    Piece::Whole { first, end, len } => spread.add(
                        first,
                        end,
                        samples[k],
                        weights[k] * count as f64 / scale / len as f64 * period_ns,
                        len,
                    ),
                }
            }
        }
    }
    out.extend(spread.ticks(funcs));
    out
}

/// A part of a histogram bin: a stretch of one function (or of no function:
/// a gap), or many whole functions `first..end` in one piece.
#[derive(Debug, Clone, Copy)]
enum Piece {
    Span {
        func: Option<usize>,
        start: u64,
        len: u64,
    },
    Whole {
        first: usize,
        end: usize,
        len: u64,
    },
}

impl Piece {
    fn len(&self) -> u64 {
        match *self {
            Piece::Span { len, .. } | Piece::Whole { len, .. } => len,
        }
    }
}

/// How many whole functions a bin may cover before they become one piece.
const WHOLE_FUNCTIONS_APART: usize = 16;

/// The pieces of the bin `[lo, hi)`.
fn bin_pieces(funcs: &[Func<'_>], lo: u64, hi: u64) -> Vec<Piece> {
    let mut pieces = Vec::new();
    // Functions starting inside the bin: a..b.
    let a = funcs.partition_point(|f| f.start <= lo);
    let b = funcs.partition_point(|f| f.start < hi);
    let mut end = b;
    while end > a && funcs[end - 1].end > hi {
        end -= 1;
    }
    // Functions run to the next symbol (gprof_functions), so a..end tile
    // funcs[a].start..funcs[end - 1].end.
    if end > a && end - a > WHOLE_FUNCTIONS_APART {
        let (s, e) = (funcs[a].start, funcs[end - 1].end);
        spans(funcs, lo, s, &mut pieces);
        pieces.push(Piece::Whole {
            first: a,
            end,
            len: e - s,
        });
        spans(funcs, e, hi, &mut pieces);
    } else {
        spans(funcs, lo, hi, &mut pieces);
    }
    pieces
}

/// The function (or gap) stretches of `[lo, hi)`, one by one.
fn spans(funcs: &[Func<'_>], lo: u64, hi: u64, pieces: &mut Vec<Piece>) {
    let mut at = lo;
    while at < hi {
        let (func, next) = match function_at(funcs, at) {
            Some(f) => (Some(f), funcs[f].end.min(hi)),
            None => {
                let next = funcs
                    .get(funcs.partition_point(|f| f.start <= at))
                    .map_or(hi, |f| f.start.min(hi));
                (None, next)
            }
        };
        pieces.push(Piece::Span {
            func,
            start: at,
            len: next - at,
        });
        at = next;
    }
}

/// Time spread evenly over runs of whole functions, kept as per-byte
/// densities in difference arrays over the function index and turned into
/// one tick per function at the end (at the function's start address).
struct Spread {
    /// Whole ticks given to all runs together: apportioned at the end.
    samples: i64,
    sample_density: Vec<f64>,
    nanos_density: Vec<f64>,
}

impl Spread {
    fn new(n: usize) -> Spread {
        Spread {
            samples: 0,
            sample_density: vec![0.0; n + 1],
            nanos_density: vec![0.0; n + 1],
        }
    }

    /// `samples` ticks and `nanos_per_byte` over the functions `first..end`,
    /// which are `len` bytes long together.
    fn add(&mut self, first: usize, end: usize, samples: i64, nanos_per_byte: f64, len: u64) {
        let per_byte = samples as f64 / len as f64;
        self.samples += samples;
        self.sample_density[first] += per_byte;
        self.sample_density[end] -= per_byte;
        self.nanos_density[first] += nanos_per_byte;
        self.nanos_density[end] -= nanos_per_byte;
    }

    fn ticks(&self, funcs: &[Func<'_>]) -> Vec<Tick> {
        if self.samples == 0 && self.nanos_density.iter().all(|&d| d == 0.0) {
            return Vec::new();
        }
        let (mut s, mut n) = (0.0, 0.0);
        let mut weights = Vec::with_capacity(funcs.len());
        let mut nanos = Vec::with_capacity(funcs.len());
        for (f, func) in funcs.iter().enumerate() {
            s += self.sample_density[f];
            n += self.nanos_density[f];
            let len = func.end.saturating_sub(func.start) as f64;
            weights.push((s * len).max(0.0));
            nanos.push((n * len).max(0.0).round() as i64);
        }
        let samples = apportion(self.samples, &weights);
        (0..funcs.len())
            .filter(|&f| samples[f] != 0 || nanos[f] != 0)
            .map(|f| Tick {
                func: Some(f),
                address: funcs[f].start,
                samples: samples[f],
                nanos: nanos[f],
            })
            .collect()
    }
}

/// How many nodes of [`CallGraph::search_down`] trees are kept at most
/// (about 30 MB).
const MAX_KEPT_TREE_NODES: usize = 1 << 20;

/// Member → (its caller on a shortest chain from an entry member, call site).
type InnerTree = HashMap<usize, (usize, u64)>;

/// A caller of a function: the calling function and the call site.
#[derive(Debug, Clone, Copy)]
struct Caller {
    func: usize,
    from_pc: u64,
    count: u64,
}

/// One synthesized stack of a function's self time: the call sites from the
/// function up to a root of the call graph (innermost first) and the
/// nanoseconds of its self time that the stack carries.
#[derive(Debug, Clone, PartialEq)]
struct SynthPath {
    sites: Vec<u64>,
    nanos: i64,
}

/// The call graph between functions, with its cycles (strongly connected
/// components) collapsed the way gprof collapses them before it hands time
/// to callers.
struct CallGraph {
    /// Arcs into each function from other functions.
    callers: Vec<Vec<Caller>>,
    /// The component of each function. Tarjan's algorithm over the caller
    /// lists numbers a caller's component below its callees' (reverse
    /// topological order of the caller edges).
    component: Vec<usize>,
    /// Arcs into each component from outside it: (entry member, caller).
    entering: Vec<Vec<(usize, Caller)>>,
    /// Where a stack starts inside a root component: the component itself
    /// when it is one function; for a cycle no outside function calls, the
    /// member called from outside the executable (`main` from libc), else
    /// its first member.
    root_entry: Vec<usize>,
    /// Arcs from each function to the members of its own component: (callee,
    /// call site).
    inner_callees: Vec<Vec<(usize, u64)>>,
    /// [`CallGraph::search_down`] of each entry member asked for so far.
    inner_trees: std::cell::RefCell<HashMap<usize, InnerTree>>,
}

impl CallGraph {
    /// `spontaneous[f]`: `f` is called from outside the executable's symbols
    /// (the arcs gprof drops, shown as `<spontaneous>`).
    fn new(callers: Vec<Vec<Caller>>, spontaneous: &[bool]) -> Self {
        let component = strongly_connected_components(&callers);
        let ncomp = component.iter().map(|c| c + 1).max().unwrap_or(0);
        let mut entering = vec![Vec::new(); ncomp];
        for (f, list) in callers.iter().enumerate() {
            for c in list {
                if component[c.func] != component[f] && c.count > 0 {
                    entering[component[f]].push((f, *c));
                }
            }
        }
        let mut root_entry = vec![usize::MAX; ncomp];
        for (f, &comp) in component.iter().enumerate() {
            let chosen = root_entry[comp];
            if chosen == usize::MAX
                || (spontaneous.get(f) == Some(&true) && spontaneous.get(chosen) != Some(&true))
            {
                root_entry[comp] = f;
            }
        }
        let mut inner_callees = vec![Vec::new(); callers.len()];
        for (f, list) in callers.iter().enumerate() {
            for c in list {
                if component[c.func] == component[f] {
                    inner_callees[c.func].push((f, c.from_pc));
                }
            }
        }
        CallGraph {
            callers,
            component,
            entering,
            root_entry,
            inner_callees,
            inner_trees: Default::default(),
        }
    }

    /// Appends to `sites` the call sites (innermost first) of a shortest
    /// chain of calls inside one component from `entry` down to `target`.
    /// One breadth-first search per entry member, over the component's own
    /// arcs, serves every target (a cycle has few entries, many targets).
    fn inner_path(&self, entry: usize, target: usize, sites: &mut Vec<u64>) {
        if entry == target {
            return;
        }
        let mut trees = self.inner_trees.borrow_mut();
        if !trees.contains_key(&entry) {
            // Bounded memory for cycles of thousands of functions entered
            // in many places: forget the trees kept so far past a limit.
            let kept: usize = trees.values().map(HashMap::len).sum();
            if kept > MAX_KEPT_TREE_NODES {
                trees.clear();
            }
            trees.insert(entry, self.search_down(entry));
        }
        let tree = &trees[&entry];
        let mut at = target;
        while at != entry {
            let Some(&(caller, from_pc)) = tree.get(&at) else {
                break;
            };
            sites.push(from_pc);
            at = caller;
        }
    }

    /// For every member of `entry`'s component reachable from it inside the
    /// component, its caller on a shortest chain of calls and the call site.
    fn search_down(&self, entry: usize) -> InnerTree {
        let mut via: HashMap<usize, (usize, u64)> = HashMap::default();
        let mut queue = std::collections::VecDeque::from([entry]);
        while let Some(f) = queue.pop_front() {
            for &(callee, from_pc) in &self.inner_callees[f] {
                if callee != entry && !via.contains_key(&callee) {
                    via.insert(callee, (f, from_pc));
                    queue.push_back(callee);
                }
            }
        }
        via
    }

    /// gprof's propagation (§4): every component's inclusive time (its
    /// members' self time plus what its callees hand it) is handed to the
    /// arcs entering it in proportion to their call counts. Returns the time
    /// of each entering arc, per component, in integer nanoseconds that add
    /// up exactly to the component's inclusive time; a component nobody
    /// calls keeps its time: it is a root.
    fn arc_times(&self, self_ns: &[i64]) -> Vec<Vec<i64>> {
        let mut inclusive = vec![0i64; self.entering.len()];
        for (f, &ns) in self_ns.iter().enumerate() {
            let c = self.component[f];
            inclusive[c] = inclusive[c].saturating_add(ns);
        }
        let mut times = vec![Vec::new(); self.entering.len()];
        // Callees before callers: components in decreasing number.
        for comp in (0..self.entering.len()).rev() {
            let counts: Vec<f64> = self.entering[comp]
                .iter()
                .map(|(_, c)| c.count as f64)
                .collect();
            let shares = apportion(inclusive[comp], &counts);
            for ((_, caller), &share) in self.entering[comp].iter().zip(&shares) {
                let parent = self.component[caller.func];
                debug_assert!(parent < comp, "a caller's component comes first");
                inclusive[parent] = inclusive[parent].saturating_add(share);
            }
            times[comp] = shares;
        }
        times
    }

    /// Stacks for every function's self time, each from a root of the call
    /// graph down to the function, such that every function outside a cycle
    /// gets exactly gprof's inclusive time (self + children) and every arc
    /// between components exactly the time gprof propagates along it.
    ///
    /// The arc times form a flow from the roots down to the functions' self
    /// time, conserved at every component; it decomposes into paths
    /// (flow decomposition): from a function with self time left, climb
    /// through any entering arc with flow left up to a root, and take the
    /// smallest amount left on the way. Each path empties an arc or a
    /// function's self time, so there are at most `arcs + functions` of them,
    /// however many paths the graph has (exponentially many in general).
    fn stacks(&self, self_ns: &[i64]) -> Vec<Vec<SynthPath>> {
        let mut flow = self.arc_times(self_ns);
        // Arcs only lose flow, so each component's first arc with flow left
        // only moves forward: finding it costs O(arcs) over the whole run.
        let mut first = vec![0usize; flow.len()];
        let mut out = vec![Vec::new(); self_ns.len()];
        for (f, &ns) in self_ns.iter().enumerate() {
            let mut left = ns;
            while left > 0 {
                let path = self.climb(f, left, &mut flow, &mut first);
                left -= path.nanos;
                out[f].push(path);
            }
        }
        out
    }

    /// One path of [`CallGraph::stacks`]: from `func` up to a root through
    /// arcs with flow left, carrying at most `left` nanoseconds.
    fn climb(
        &self,
        func: usize,
        left: i64,
        flow: &mut [Vec<i64>],
        first: &mut [usize],
    ) -> SynthPath {
        let mut sites = Vec::new();
        let mut used = Vec::new();
        let mut nanos = left;
        let mut at = func;
        loop {
            let comp = self.component[at];
            let arcs = &flow[comp];
            let mut i = first[comp];
            while arcs.get(i) == Some(&0) {
                i += 1;
            }
            first[comp] = i;
            let Some(&carried) = arcs.get(i) else {
                // A root. (Flow is conserved, so a component with callers
                // always has an arc with flow left when a path reaches it.)
                debug_assert!(self.entering[comp].is_empty(), "flow not conserved");
                self.inner_path(self.root_entry[comp], at, &mut sites);
                break;
            };
            let (entry, caller) = self.entering[comp][i];
            self.inner_path(entry, at, &mut sites);
            sites.push(caller.from_pc);
            nanos = nanos.min(carried);
            used.push((comp, i));
            at = caller.func;
        }
        for (comp, i) in used {
            flow[comp][i] -= nanos;
        }
        SynthPath { sites, nanos }
    }
}

/// Tarjan's algorithm, iterative; the graph is given as caller lists (the
/// components are the same whichever way the arcs point).
fn strongly_connected_components(callers: &[Vec<Caller>]) -> Vec<usize> {
    let n = callers.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![usize::MAX; n];
    let (mut next_index, mut ncomp) = (0, 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(c) = callers[v].get(*i) {
                *i += 1;
                let w = c.func;
                if index[w] == usize::MAX {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = ncomp;
                    if w == v {
                        break;
                    }
                }
                ncomp += 1;
            }
        }
    }
    component
}

/// Adds a `calls` sample per arc (callee under caller) and returns the call
/// graph between the executable's functions. gprof drops arcs whose caller
/// or callee is outside every symbol (e.g. `main` called from libc): the
/// callee of such an arc is `<spontaneous>` in gprof's call graph. Without a
/// binary every arc is kept as a sample and the graph is empty.
fn add_arcs(
    profile: &mut Profile,
    data: &GmonData,
    funcs: &[Func<'_>],
    locator: &mut Locator<'_, '_>,
) -> CallGraph {
    let mut callers: Vec<Vec<Caller>> = vec![Vec::new(); funcs.len()];
    let mut spontaneous = vec![false; funcs.len()];
    let mut dropped_arcs = 0u64;
    let mut calls = vec![0i64; profile.sample_types.len()];
    for arc in &data.arcs {
        if locator.binary.is_some() {
            let parent = function_at(funcs, arc.from_pc);
            let Some(child) = function_at(funcs, arc.self_pc) else {
                dropped_arcs += arc.count;
                continue;
            };
            let Some(parent) = parent else {
                spontaneous[child] = true;
                dropped_arcs += arc.count;
                continue;
            };
            if parent != child {
                callers[child].push(Caller {
                    func: parent,
                    from_pc: arc.from_pc,
                    count: arc.count,
                });
            }
        }
        let callee = locator.location(profile, arc.self_pc);
        let caller = locator.location(profile, arc.from_pc);
        calls[2] = arc.count as i64;
        profile.add_sample(&[callee, caller], &calls, &[]);
    }
    if dropped_arcs > 0 {
        profile.comments.push(format!(
            "{dropped_arcs} calls from or to addresses outside the executable's symbols are not counted, as gprof does (e.g. main called from libc)"
        ));
    }
    CallGraph::new(callers, &spontaneous)
}

/// Puts every function's ticks on the stacks [`CallGraph::stacks`]
/// synthesizes for it (§4). A function's ticks (one per address) and its
/// stacks are matched in order, each piece taking what is left of the
/// smaller, so each stack gets exactly its time, each address keeps its
/// ticks, and the pieces number at most ticks + stacks.
fn add_synthesized_ticks(
    profile: &mut Profile,
    ticks: &[Tick],
    graph: &CallGraph,
    locator: &mut Locator<'_, '_>,
) {
    let mut per_func: Vec<Vec<Tick>> = vec![Vec::new(); graph.callers.len()];
    let mut unknown = Vec::new();
    for t in ticks {
        match t.func {
            Some(f) => per_func[f].push(*t),
            None => unknown.push(*t),
        }
    }
    let self_ns: Vec<i64> = per_func
        .iter()
        .map(|ts| ts.iter().map(|t| t.nanos.max(0)).sum())
        .collect();
    let stacks = graph.stacks(&self_ns);
    let mut values = vec![0i64; profile.sample_types.len()];
    let mut stack = Vec::new();
    let mut add = |profile: &mut Profile, t: &Tick, sites: &[u64], samples: i64, nanos: i64| {
        stack.clear();
        stack.push(locator.location(profile, t.address));
        for &pc in sites {
            stack.push(locator.location(profile, pc));
        }
        values[0] = samples;
        values[1] = nanos;
        profile.add_sample(&stack, &values, &[]);
    };
    for t in &unknown {
        add(profile, t, &[], t.samples, t.nanos);
    }
    for (fticks, paths) in per_func.iter().zip(&stacks) {
        let mut p = 0;
        let mut path_left = paths.first().map_or(0, |p| p.nanos);
        for t in fticks {
            // (path index, nanoseconds) pieces of this tick
            let mut pieces = Vec::new();
            let mut tick_left = t.nanos.max(0);
            while tick_left > 0 && p < paths.len() {
                let take = tick_left.min(path_left);
                pieces.push((p, take));
                tick_left -= take;
                path_left -= take;
                if path_left == 0 {
                    p += 1;
                    path_left = paths.get(p).map_or(0, |p| p.nanos);
                }
            }
            if pieces.is_empty() {
                // Ticks without time (a sliver of a bin): on the stack of
                // the time around them.
                pieces.push((p.min(paths.len().saturating_sub(1)), 0));
            }
            let weights: Vec<f64> = pieces.iter().map(|&(_, ns)| ns.max(1) as f64).collect();
            let samples = apportion(t.samples, &weights);
            for (&(k, nanos), samples) in pieces.iter().zip(samples) {
                let sites = paths.get(k).map_or(&[][..], |p| &p.sites[..]);
                add(profile, t, sites, samples, nanos);
            }
        }
    }
}

/// The profile gprof's data stands for (§4).
pub fn to_profile(data: &GmonData, binary: Option<&Binary>, stacks: GprofStacks) -> Profile {
    let mut profile = Profile::new(&[
        ("samples", "count"),
        ("cpu", "nanoseconds"),
        ("calls", "count"),
    ]);
    profile.default_sample_type = Some(1);
    // The arcs below are `calls` samples [callee, caller]: exact counts.
    profile.call_count_type = Some(2);
    let rate = data
        .histograms
        .first()
        .map_or(DEFAULT_RATE, |h| h.prof_rate)
        .max(1);
    let period_ns = 1e9 / rate as f64;
    profile.set_period("cpu", "nanoseconds", period_ns.round() as i64);
    let bb_type =
        (!data.basic_blocks.is_empty()).then(|| profile.add_sample_type("bb_executions", "count"));

    profile.add_metadata("format", data.variant.name());
    profile.add_metadata("byte order", data.endian.name());
    profile.add_metadata("pointer size", data.pointer_size.to_string());
    profile.add_metadata("prof_rate", format!("{rate} Hz"));
    if data.rate_assumed {
        profile.comments.push(format!(
            "warning: the file records no clock rate; {rate} Hz assumed (--gmon-rate)"
        ));
    }
    if let Some(h) = data.histograms.first() {
        if h.dimension != "seconds" {
            profile.comments.push(format!(
                "warning: histogram dimension is {:?}, converted as if seconds",
                h.dimension
            ));
        }
    }
    if data.saturated_bins > 0 {
        profile.comments.push(format!(
            "warning: {} histogram bins are at 65535, the counter ceiling: their time is a lower bound",
            data.saturated_bins
        ));
    }

    // The image mapping: the executable's text when known, else the span of
    // every address the file mentions.
    let (start, limit, offset) = match binary.and_then(|b| b.text_segment()) {
        Some(seg) => (seg.vaddr, seg.vaddr + seg.memsz, seg.offset),
        // gmon.out addresses are link-time addresses (§1, PIE included): a
        // mapping from 0 to the end of the address space with offset 0 is
        // pprof's way of saying "no relocation", so `go tool pprof BINARY
        // out.pb.gz` symbolizes it later for PIE and non-PIE alike.
        None => (0, u64::MAX, 0),
    };
    let filename = binary.map_or(String::new(), |b| b.path.display().to_string());
    let build_id = binary.map_or(String::new(), |b| b.build_id.clone());
    let filename = profile.intern(&filename);
    let build_id = profile.intern(&build_id);
    let mapping = profile.add_mapping(Mapping::new(start, limit, offset, filename, build_id));

    let funcs = binary.map(gprof_functions).unwrap_or_default();
    let mut locator = Locator {
        binary,
        funcs: &funcs,
        mapping,
        cache: HashMap::default(),
        any_file: false,
        any_line: false,
        any_inline: false,
    };
    let ticks = assign_ticks(data, &funcs, period_ns);

    let graph = add_arcs(&mut profile, data, &funcs, &mut locator);
    let synthesize = binary.is_some() && stacks == GprofStacks::Synthesized;
    profile.comments.push(
        match (binary.is_some(), stacks) {
            (true, GprofStacks::Synthesized) => "stacks: synthesized from the call-graph arcs by flow decomposition: gprof's call-graph times (self time handed to callers in proportion to call counts, cycles collapsed) split into at most arcs + functions stacks, each from a root of the call graph; every function outside a cycle gets gprof's self + children and every arc gprof's propagated time",
            (true, GprofStacks::Flat) => "stacks: flat (--gprof-stacks=flat): one frame per sampled function",
            (false, _) => "stacks: flat, unsymbolized: no --binary was given, so functions and the call graph are unknown",
        }
        .to_owned(),
    );
    if synthesize {
        add_synthesized_ticks(&mut profile, &ticks, &graph, &mut locator);
    } else {
        let mut values = vec![0i64; profile.sample_types.len()];
        for t in &ticks {
            let leaf = locator.location(&mut profile, t.address);
            values[0] = t.samples;
            values[1] = t.nanos;
            profile.add_sample(&[leaf], &values, &[]);
        }
    }
    if let Some(bt) = bb_type {
        let mut values = vec![0i64; profile.sample_types.len()];
        for (&addr, &count) in &data.basic_blocks {
            let loc = locator.location(&mut profile, addr);
            values[bt] = count as i64;
            profile.add_sample(&[loc], &values, &[]);
        }
    }
    let (any_file, any_line, any_inline) = (locator.any_file, locator.any_line, locator.any_inline);
    if let Some(m) = profile.mappings.get_mut(mapping as usize) {
        m.has_functions = !funcs.is_empty();
        m.has_filenames = any_file;
        m.has_line_numbers = any_line;
        m.has_inline_frames = any_inline;
    }
    let ticks_total: u64 = data.histograms.iter().map(Histogram::total).sum();
    profile.duration_nanos = (ticks_total as f64 * period_ns).round() as i64;
    profile
}

/// What `profconv info` prints for gmon.out files.
pub fn info(inputs: &[Input], options: &ReadOptions) -> Result<String> {
    let binary = options.binary.as_deref().map(Binary::open).transpose()?;
    let mut out = String::new();
    for input in inputs {
        let path = input.name();
        let d = parse(
            path,
            input.bytes(),
            options,
            binary.as_ref().map(|b| b.pointer_size),
        )?;
        let _ = writeln!(out, "{}:", path.display());
        let _ = writeln!(out, "  format:        gprof, {}", d.variant.name());
        let _ = writeln!(out, "  byte order:    {}", d.endian.name());
        let _ = writeln!(out, "  pointer size:  {} bytes", d.pointer_size);
        let _ = writeln!(
            out,
            "  records:       {} histogram, {} arc, {} basic-block",
            d.histogram_records, d.arc_records, d.bb_records
        );
        for (i, h) in d.histograms.iter().enumerate() {
            let total = h.total();
            let _ = writeln!(
                out,
                "  histogram {i}:   {:#x}..{:#x}, {} bins of {:.2} bytes, {} Hz, {} ticks = {:.2} {}{}",
                h.low_pc,
                h.high_pc,
                h.bins.len(),
                h.scale(),
                h.prof_rate,
                total,
                total as f64 / h.prof_rate as f64,
                h.dimension,
                if d.rate_assumed { " (rate assumed)" } else { "" }
            );
        }
        let calls: u64 = d.arcs.iter().map(|a| a.count).sum();
        let _ = writeln!(
            out,
            "  arcs:          {} distinct, {} calls",
            d.arcs.len(),
            calls
        );
        if !d.basic_blocks.is_empty() {
            let _ = writeln!(out, "  basic blocks:  {}", d.basic_blocks.len());
        }
        if d.saturated_bins > 0 {
            let _ = writeln!(
                out,
                "  warning:       {} bins saturated at 65535",
                d.saturated_bins
            );
        }
        if let Some(b) = &binary {
            let funcs = gprof_functions(b);
            let hit: std::collections::BTreeSet<usize> = assign_ticks(&d, &funcs, 1.0)
                .iter()
                .filter_map(|t| t.func)
                .collect();
            let _ = writeln!(
                out,
                "  executable:    {} ({} functions, {} with samples)",
                b.path.display(),
                funcs.len(),
                hit.len()
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_with_bins(low_pc: u64, high_pc: u64, bins: Vec<u64>) -> GmonData {
        GmonData {
            variant: Variant::Gnu,
            endian: Endian::Little,
            pointer_size: 8,
            histograms: vec![Histogram {
                low_pc,
                high_pc,
                prof_rate: 100,
                dimension: "seconds".into(),
                dimension_abbrev: 's',
                bins,
            }],
            arcs: Vec::new(),
            basic_blocks: BTreeMap::new(),
            saturated_bins: 0,
            rate_assumed: false,
            histogram_records: 1,
            arc_records: 0,
            bb_records: 0,
        }
    }

    #[test]
    fn a_bin_over_many_whole_functions_shares_its_time_by_size_in_one_pass() {
        // 100 functions of 16 bytes from 0x1000 (and a 64-byte one after),
        // one bin over 0x1008..0x1648: half of the first, all of 2..99,
        // part of the last.
        let names: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
        let funcs: Vec<Func<'_>> = (0..101)
            .map(|i| Func {
                start: 0x1000 + 16 * i as u64,
                end: 0x1000 + 16 * i as u64 + if i == 100 { 64 } else { 16 },
                name: &names[i],
                system_name: &names[i],
            })
            .collect();
        let (lo, hi) = (0x1008, 0x1648);
        let pieces = bin_pieces(&funcs, lo, hi);
        assert!(pieces.len() <= 3, "{pieces:?}");
        let count = 3001;
        let data = data_with_bins(lo, hi, vec![count]);
        let ticks = assign_ticks(&data, &funcs, 1e7);
        let samples: i64 = ticks.iter().map(|t| t.samples).sum();
        assert_eq!(samples, count as i64, "every tick kept");
        let width = (hi - lo) as f64;
        for (f, func) in funcs.iter().enumerate() {
            let overlap = (func.end.min(hi)).saturating_sub(func.start.max(lo)) as f64;
            let want_ns = overlap * count as f64 / width * 1e7;
            let got: Vec<&Tick> = ticks.iter().filter(|t| t.func == Some(f)).collect();
            let ns: i64 = got.iter().map(|t| t.nanos).sum();
            let n: i64 = got.iter().map(|t| t.samples).sum();
            assert!(
                (ns as f64 - want_ns).abs() <= 1.0,
                "f{f}: {ns} ns, want {want_ns}"
            );
            assert!(
                (n as f64 - overlap * count as f64 / width).abs() < 1.0,
                "f{f}: {n} ticks"
            );
        }
    }

    fn site(parent: usize, child: usize) -> u64 {
        ((parent as u64) << 20) | child as u64
    }

    fn graph(arcs: &[(usize, usize, u64)], n: usize, spontaneous: &[usize]) -> CallGraph {
        let mut callers = vec![Vec::new(); n];
        for &(parent, child, count) in arcs {
            callers[child].push(Caller {
                func: parent,
                from_pc: site(parent, child),
                count,
            });
        }
        let spont: Vec<bool> = (0..n).map(|f| spontaneous.contains(&f)).collect();
        CallGraph::new(callers, &spont)
    }

    /// The functions of a synthesized stack of `leaf`, leaf first.
    fn frames(leaf: usize, sites: &[u64]) -> Vec<usize> {
        let mut out = vec![leaf];
        out.extend(sites.iter().map(|s| (s >> 20) as usize));
        out
    }

    /// gprof's inclusive time of every function of an acyclic graph, in f64.
    fn gprof_inclusive(arcs: &[(usize, usize, u64)], self_ns: &[i64]) -> Vec<f64> {
        let n = self_ns.len();
        let mut ncalls = vec![0u64; n];
        for &(_, c, k) in arcs {
            ncalls[c] += k;
        }
        let mut memo: Vec<Option<f64>> = vec![None; n];
        fn inc(
            f: usize,
            arcs: &[(usize, usize, u64)],
            self_ns: &[i64],
            ncalls: &[u64],
            memo: &mut Vec<Option<f64>>,
        ) -> f64 {
            if let Some(v) = memo[f] {
                return v;
            }
            let mut v = self_ns[f] as f64;
            for &(p, c, k) in arcs {
                if p == f {
                    v += inc(c, arcs, self_ns, ncalls, memo) * k as f64 / ncalls[c] as f64;
                }
            }
            memo[f] = Some(v);
            v
        }
        (0..n)
            .map(|f| inc(f, arcs, self_ns, &ncalls, &mut memo))
            .collect()
    }

    /// Each function's inclusive time over all synthesized stacks.
    fn synthesized_inclusive(stacks: &[Vec<SynthPath>], n: usize) -> Vec<i64> {
        let mut cum = vec![0i64; n];
        for (leaf, paths) in stacks.iter().enumerate() {
            for p in paths {
                let mut seen = frames(leaf, &p.sites);
                seen.sort();
                seen.dedup();
                for f in seen {
                    cum[f] += p.nanos;
                }
            }
        }
        cum
    }

    #[test]
    fn self_time_is_handed_to_callers_in_proportion_to_calls() {
        // 0 → 2 (1 call), 1 → 2 (3 calls), 3 → 0, 3 → 1
        let g = graph(&[(0, 2, 1), (1, 2, 3), (3, 0, 1), (3, 1, 1)], 4, &[]);
        let stacks = g.stacks(&[0, 0, 1000, 0]);
        let mut paths = stacks[2].clone();
        paths.sort_by_key(|p| p.nanos);
        assert_eq!(
            paths,
            vec![
                SynthPath {
                    sites: vec![site(0, 2), site(3, 0)],
                    nanos: 250
                },
                SynthPath {
                    sites: vec![site(1, 2), site(3, 1)],
                    nanos: 750
                },
            ]
        );
    }

    #[test]
    fn a_cycle_hands_its_time_to_callers_outside_it() {
        // 0 ↔ 1 mutual recursion entered from 2 only; 3 → 2.
        let g = graph(&[(0, 1, 500), (1, 0, 499), (2, 0, 1), (3, 2, 1)], 4, &[]);
        assert_eq!(g.component[0], g.component[1]);
        let stacks = g.stacks(&[300, 700, 0, 0]);
        assert_eq!(
            stacks[1],
            vec![SynthPath {
                sites: vec![site(0, 1), site(2, 0), site(3, 2)],
                nanos: 700
            }]
        );
        assert_eq!(
            stacks[0],
            vec![SynthPath {
                sites: vec![site(2, 0), site(3, 2)],
                nanos: 300
            }]
        );
    }

    #[test]
    fn a_cycle_nobody_calls_starts_at_the_member_called_from_outside() {
        // 0 ↔ 1, 1 → 2; 1 is `main`, called from libc (spontaneous).
        let g = graph(&[(0, 1, 5), (1, 0, 5), (1, 2, 1)], 3, &[1]);
        let stacks = g.stacks(&[10, 0, 20]);
        assert_eq!(stacks[0][0].sites, vec![site(1, 0)]);
        assert_eq!(stacks[2][0].sites, vec![site(1, 2)]);
    }

    #[test]
    fn exponentially_many_paths_give_few_rooted_stacks_with_exact_times() {
        // A root over 40 levels of two functions, each called by both
        // functions of the level above: 2^40 paths to the bottom.
        let levels = 40;
        let n = 1 + 2 * levels;
        let mut arcs = vec![(0, 1, 3), (0, 2, 5)];
        for l in 1..levels {
            for a in [2 * l - 1, 2 * l] {
                for (k, b) in [2 * l + 1, 2 * l + 2].into_iter().enumerate() {
                    arcs.push((a, b, (a as u64 % 7) + 2 * k as u64 + 1));
                }
            }
        }
        let self_ns: Vec<i64> = (0..n).map(|f| 1_000_000 + 7919 * f as i64).collect();
        let g = graph(&arcs, n, &[]);
        let stacks = g.stacks(&self_ns);

        let count: usize = stacks.iter().map(Vec::len).sum();
        assert!(count <= arcs.len() + n, "{count} stacks");
        for (leaf, paths) in stacks.iter().enumerate() {
            let total: i64 = paths.iter().map(|p| p.nanos).sum();
            assert_eq!(total, self_ns[leaf], "self time of {leaf} kept");
            for p in paths {
                assert_eq!(*frames(leaf, &p.sites).last().unwrap(), 0, "rooted");
            }
        }
        let want = gprof_inclusive(&arcs, &self_ns);
        let got = synthesized_inclusive(&stacks, n);
        for f in 0..n {
            // Whole nanoseconds are handed down each arc: a rounding of at
            // most one per level.
            assert!(
                (got[f] as f64 - want[f]).abs() <= levels as f64,
                "function {f}: {} vs gprof's {}",
                got[f],
                want[f]
            );
        }
        // Every arc carries gprof's propagated time.
        let mut ncalls = vec![0u64; n];
        for &(_, c, k) in &arcs {
            ncalls[c] += k;
        }
        let mut edge: HashMap<(usize, usize), i64> = HashMap::default();
        for (leaf, paths) in stacks.iter().enumerate() {
            for p in paths {
                for w in frames(leaf, &p.sites).windows(2) {
                    *edge.entry((w[1], w[0])).or_default() += p.nanos;
                }
            }
        }
        for &(p, c, k) in &arcs {
            let want = want[c] * k as f64 / ncalls[c] as f64;
            let got = edge.get(&(p, c)).copied().unwrap_or(0) as f64;
            assert!(
                (got - want).abs() <= levels as f64,
                "arc {p}→{c}: {got} vs {want}"
            );
        }
    }
}
