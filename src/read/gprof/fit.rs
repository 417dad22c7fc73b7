//! Whether `--binary` is the program that wrote the gmon.out (§3.4): a
//! gmon.out holds addresses only, so another build of the program, or
//! another program, gives a profile that looks right and is not. Three
//! facts of a real pair are checked: the byte order agrees, the histogram
//! covers the executable's code, and the arcs' callee addresses lie just
//! after function entries (where `mcount` is called). A pair that fails is
//! refused, saying what does not fit; `--skip-binary-check` converts it
//! anyway.

use super::data::GmonData;
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;
use crate::symbolize::Binary;

/// How far past a function's entry an arc's `self_pc` may lie: the
/// `mcount` call comes first in the prologue (x86-64 with `endbr64` and a
/// frame pointer: 9–13 bytes; ARM, PowerPC, MIPS: 8–24).
const MCOUNT_REACH: u64 = 64;

/// At least this many distinct callee addresses before they are judged.
const ARCS_TO_JUDGE: usize = 3;

/// Refuses `binary` for `data` (read from `inputs`) when they do not fit.
pub(super) fn check(data: &GmonData, binary: &Binary, inputs: &[Input]) -> Result<()> {
    let refuse = |why: String| {
        let names: Vec<String> = inputs
            .iter()
            .map(|i| format!("`{}`", i.name().display()))
            .collect();
        Err(Error::unsupported(
            &binary.path,
            format!(
                "this executable does not fit {}: {why}. Give the executable that wrote the profile (the same build), or --skip-binary-check to convert anyway",
                names.join(", ")
            ),
        ))
    };
    let big = data.endian == Endian::Big;
    if data.variant.records_byte_order() && big != binary.big_endian {
        let order = |b: bool| if b { "big-endian" } else { "little-endian" };
        return refuse(format!(
            "the profile is {}, the executable {}",
            order(big),
            order(binary.big_endian)
        ));
    }
    if let Some(why) = histogram_outside_code(data, binary) {
        return refuse(why);
    }
    if let Some(why) = arcs_off_entries(data, binary) {
        return refuse(why);
    }
    Ok(())
}

/// Why the histograms that hold ticks miss the executable's code, if they do.
fn histogram_outside_code(data: &GmonData, binary: &Binary) -> Option<String> {
    let (start, limit) = binary.text_range()?;
    let ticked = data.histograms.iter().filter(|h| h.total() > 0);
    let mut missing = ticked.filter(|h| h.high_pc <= start || h.low_pc >= limit);
    let h = missing.next()?;
    Some(format!(
        "its histogram covers {:#x}..{:#x}, the executable's code lies at {start:#x}..{limit:#x}",
        h.low_pc, h.high_pc
    ))
}

/// Why the arcs' callee addresses are not at function entries, if most of
/// them are not: a few examples, with how far into which function.
fn arcs_off_entries(data: &GmonData, binary: &Binary) -> Option<String> {
    let entries = binary.entries();
    let mut callees: Vec<u64> = data.arcs.iter().map(|a| a.self_pc).collect();
    callees.sort_unstable();
    callees.dedup();
    if callees.len() < ARCS_TO_JUDGE || entries.is_empty() {
        return None;
    }
    let mut off = Vec::new();
    for &pc in &callees {
        let below = entries.partition_point(|&e| e <= pc);
        let distance = below.checked_sub(1).map(|i| pc - entries[i]);
        if distance.is_none_or(|d| d > MCOUNT_REACH) {
            off.push((pc, distance));
        }
    }
    if off.len() * 2 <= callees.len() {
        return None;
    }
    let shown: Vec<String> = off
        .iter()
        .take(3)
        .map(|&(pc, distance)| match distance {
            Some(d) => format!("{pc:#x} is {d} bytes past the nearest function entry"),
            None => format!("{pc:#x} is below every function"),
        })
        .collect();
    Some(format!(
        "{} of its {} called addresses are not just after a function's entry, where mcount records them ({})",
        off.len(),
        callees.len(),
        shown.join("; ")
    ))
}
