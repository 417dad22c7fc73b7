//! What an executable says about the gmon.out its profiling runtime writes
//! (docs/formats/gprof.md §3.4): where the histogram starts and ends (the
//! runtime's `monstartup(lowpc, highpc)` arguments are link-time symbols)
//! and where `mcount` is, so that a gmon.out can be checked against the
//! executable it is given with. Read once when the executable is opened;
//! holds a few addresses.

use object::{Object, ObjectSection, ObjectSymbol, SectionKind};

/// The addresses of an executable that its gmon.out repeats.
#[derive(Debug, Clone, Default)]
pub(crate) struct GmonText {
    /// True when the executable has a symbol table (gprof refuses one
    /// without: "has no symbols").
    pub has_symbols: bool,
    /// Where the histogram may start, before rounding down to its unit:
    /// `__executable_start` or the first loadable segment (glibc), `eprol`
    /// (MinGW and the BSDs' `gcrt0`), the start of `.text`.
    pub starts: Vec<u64>,
    /// Where the histogram ends, before rounding up to its unit: `etext`
    /// (`_etext`, `__etext`), else the end of the last code section.
    pub end: Option<u64>,
    /// The name `end` was taken from, for messages.
    pub end_name: &'static str,
    /// Addresses a `-pg` prologue calls: symbols named like `mcount`,
    /// `_mcount`, `__fentry__`, `_mcount_private`, sorted.
    pub mcount: Vec<u64>,
    /// True when the runtime's arc count is a 4-byte `long` in an 8-byte
    /// slot (64-bit PE, whose C `long` is 32 bits: MinGW-w64), the slot's
    /// other half padding that holds stack garbage.
    pub padded_counts: bool,
    /// Procedure linkage tables (`[start, end)`), where a dynamic
    /// executable's `mcount` call goes.
    pub plt: Vec<(u64, u64)>,
}

/// How the runtimes name the start of the text they profile.
const START_NAMES: &[&str] = &[
    "__executable_start",
    "eprol",
    "_eprol",
    "__eprol",
    "___eprol",
];

/// How the runtimes name the end of the text they profile.
const END_NAMES: &[&str] = &["etext", "_etext", "__etext", "___etext"];

/// What `file` says about its gmon.out; `first_segment` is its first
/// loadable segment's address (glibc's `__executable_start` when the
/// symbol is gone).
pub(crate) fn gmon_text(file: &object::File<'_>, first_segment: Option<u64>) -> GmonText {
    let mut text = GmonText {
        has_symbols: file.symbols().next().is_some(),
        padded_counts: file.format() == object::BinaryFormat::Pe && file.is_64(),
        end_name: "etext",
        ..GmonText::default()
    };
    text.starts.extend(first_segment);
    text.starts
        .extend(file.section_by_name(".text").map(|s| s.address()));
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if START_NAMES.contains(&name) {
            text.starts.push(sym.address());
        } else if END_NAMES.contains(&name) && text.end.is_none() {
            text.end = Some(sym.address());
        } else if is_mcount(name) && !sym.is_undefined() && sym.address() != 0 {
            text.mcount.push(sym.address());
        }
    }
    if text.end.is_none() {
        text.end = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| s.address().saturating_add(s.size()))
            .max();
        text.end_name = "the end of its code";
    }
    text.plt = file
        .sections()
        .filter(|s| {
            s.name()
                .is_ok_and(|n| n.starts_with(".plt") || n == ".iplt")
        })
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    text.starts.sort_unstable();
    text.starts.dedup();
    text.mcount.sort_unstable();
    text.mcount.dedup();
    text
}

/// Whether a symbol is the profiling runtime's entry a `-pg` prologue
/// calls (or a linker stub to it, as PowerPC's `*.plt_pic32._mcount`).
fn is_mcount(name: &str) -> bool {
    name.ends_with("mcount") || name.contains("_mcount") || name.contains("__fentry__")
}

impl GmonText {
    /// Whether a direct call to `target` is a call of `mcount` (or of a
    /// PLT stub, which names no symbol).
    pub fn calls_mcount(&self, target: u64) -> bool {
        self.mcount.binary_search(&target).is_ok()
            || self.plt.iter().any(|&(s, e)| target >= s && target < e)
    }
}
