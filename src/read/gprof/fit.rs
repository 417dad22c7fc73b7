//! Whether `--binary` is the program that wrote the gmon.out (§3.4): a
//! gmon.out holds addresses only, so another build of the program, or
//! another program, gives a profile that looks right and is not. The facts
//! of a real pair are checked: the byte order agrees, the executable has
//! symbols, the histogram spans exactly the text its profiling runtime
//! records (to `etext`), a call of `mcount` in a prologue ends at every
//! arc's callee address and a call within every arc's call-site bucket. A
//! pair that fails is refused, saying what does not fit;
//! `--skip-binary-check` converts it anyway. Reads the executable's bytes
//! at the arcs' addresses only; keeps the distinct arc addresses.

use super::data::GmonData;
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;
use crate::symbolize::Binary;

/// The histogram's unit: its range is rounded to whole counters of
/// `HISTFRACTION` (2) × `sizeof(HISTCOUNTER)` (2) bytes by glibc's, MinGW's
/// and the BSDs' `monstartup` (§3.4).
const HIST_UNIT: u64 = 4;

/// How far into its function (from the nearest code symbol before it) a
/// callee's `mcount` call may end: the prologue's, 9 to 22 bytes on
/// x86-64, up to 80 on MIPS (§3.4).
const PROLOGUE_BYTES: u64 = 128;

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
                "this executable does not fit {}: {why}. Give the executable that wrote the profile (the same build, not stripped), or --skip-binary-check to convert anyway",
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
    if !binary.gmon_text.has_symbols {
        return refuse(
            "it has no symbols (it was stripped; gprof refuses it too: \"has no symbols\")".into(),
        );
    }
    let why = histogram_off_text(data, binary)
        .or_else(|| callees_off_mcount(data, binary))
        .or_else(|| callers_off_calls(data, binary));
    match why {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// Why the histograms' range is not the one this executable's profiling
/// runtime gives, if it is not: `lowpc` is the start of its text
/// (`__executable_start`, `eprol` or `.text`) rounded down to the
/// histogram's unit, `highpc` its `etext` rounded up (§3.4). A
/// 1-instruction difference in the program moves `etext`.
fn histogram_off_text(data: &GmonData, binary: &Binary) -> Option<String> {
    let text = &binary.gmon_text;
    let end = text.end?;
    let low = data.histograms.iter().map(|h| h.low_pc).min()?;
    let high = data.histograms.iter().map(|h| h.high_pc).max()?;
    let want_high = end.checked_next_multiple_of(HIST_UNIT)?;
    let lows: Vec<u64> = text.starts.iter().map(|s| s - s % HIST_UNIT).collect();
    if high == want_high && lows.contains(&low) {
        return None;
    }
    let want_low = lows
        .iter()
        .copied()
        .min_by_key(|&l| l.abs_diff(low))
        .unwrap_or(0);
    Some(format!(
        "its histogram covers {low:#x}..{high:#x}, but this executable's profiling runtime records {want_low:#x}..{want_high:#x} (its text up to {} at {end:#x}, in the histogram's {HIST_UNIT}-byte unit)",
        text.end_name
    ))
}

/// Whether every arc's callee address is a code symbol, as in a file
/// `gprof -s` wrote (it rewrites both ends of every arc to symbols).
fn summed_by_gprof(data: &GmonData, binary: &Binary) -> bool {
    let entries = binary.entries();
    !data.arcs.is_empty()
        && data
            .arcs
            .iter()
            .all(|a| entries.binary_search(&a.self_pc).is_ok())
}

/// The distinct values of `key` over the arcs, sorted.
fn distinct(data: &GmonData, key: fn(&super::data::CallArc) -> u64) -> Vec<u64> {
    let mut out: Vec<u64> = data.arcs.iter().map(key).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Why the arcs' callee addresses are not where `mcount` records them,
/// if any is not: `self_pc` is the return address of the call of `mcount`
/// in the callee's prologue, so a call of `mcount` (or of its PLT stub)
/// ends there, a few bytes after a code symbol; in a file `gprof -s`
/// wrote, every `self_pc` is a function's entry. Instruction sets not
/// known here are not judged.
fn callees_off_mcount(data: &GmonData, binary: &Binary) -> Option<String> {
    if summed_by_gprof(data, binary) {
        return None;
    }
    let entries = binary.entries();
    let mut off = Vec::new();
    let callees = distinct(data, |a| a.self_pc);
    for &pc in &callees {
        let call = call_ending_at(binary, pc)?;
        let in_prologue = |start: u64| {
            let before = entries.partition_point(|&e| e <= start);
            before > 0 && start - entries[before - 1] <= PROLOGUE_BYTES
        };
        let fits = call.is_some_and(|(start, target)| {
            in_prologue(start) && target.is_none_or(|t| calls_mcount(binary, t))
        });
        if !fits {
            off.push(pc);
        }
    }
    listed(
        &off,
        callees.len(),
        "called addresses",
        "follow no call of mcount in a function's prologue in it, where mcount records them",
    )
}

/// Whether a direct call to `target` calls `mcount`: one of the runtime's
/// symbols or a PLT stub; any code when the executable names neither.
fn calls_mcount(binary: &Binary, target: u64) -> bool {
    let text = &binary.gmon_text;
    (text.mcount.is_empty() && text.plt.is_empty()) || text.calls_mcount(target)
}

/// Why the arcs' caller addresses are not return addresses of calls, if
/// any is not. glibc's `mcount` keeps an arc's return address only to its
/// hash bucket, `HASHFRACTION` (2) × `sizeof(ARCINDEX)` (a pointer) bytes
/// counted from the histogram's `lowpc`, and writes the bucket's start
/// (§5), so a call ends within the bucket; a file `gprof -s` wrote holds
/// symbols and source lines instead, and is not judged.
fn callers_off_calls(data: &GmonData, binary: &Binary) -> Option<String> {
    if summed_by_gprof(data, binary) {
        return None;
    }
    let bucket = 2 * data.pointer_size as u64;
    let callers = distinct(data, |a| a.from_pc);
    let mut off = Vec::new();
    for &pc in &callers {
        let mut found = false;
        for ret in pc..pc.saturating_add(bucket) {
            if call_ending_at(binary, ret)?.is_some() {
                found = true;
                break;
            }
        }
        if !found {
            off.push(pc);
        }
    }
    listed(
        &off,
        callers.len(),
        "call sites",
        &format!("hold no call instruction ending within their {bucket} bytes in it"),
    )
}

/// "`off.len()` of its `of` `what` (a, b, c, ...) `why`", or `None` when
/// `off` is empty.
fn listed(off: &[u64], of: usize, what: &str, why: &str) -> Option<String> {
    if off.is_empty() {
        return None;
    }
    let shown: Vec<String> = off.iter().take(3).map(|pc| format!("{pc:#x}")).collect();
    Some(format!(
        "{} of its {of} {what} ({}{}) {why}",
        off.len(),
        shown.join(", "),
        if off.len() > 3 { ", ..." } else { "" }
    ))
}

/// A call instruction found ending at an address: where it starts, and
/// where it goes when the instruction says (a direct call).
type Call = (u64, Option<u64>);

/// A test of an x86 `ff /2` call's ModRM byte (its addressing form).
type ModRm = fn(u8) -> bool;

/// The x86 call that ends at `pc`, if one does: `call rel32` (`e8`), or
/// an indirect `call` (`ff /2`) through a register, `disp8(reg)`,
/// `disp32(reg)` or `disp32(%rip)`, as `-pg` code calls `mcount` directly,
/// through the GOT (`*mcount@GOTPCREL(%rip)`, i386 PIC's
/// `*mcount@GOT(%ebx)`) or a register.
fn x86_call_ending_at(binary: &Binary, pc: u64) -> Option<Call> {
    // The bytes before `pc` read once, as many of the 6 the longest form
    // takes as its segment holds: each form is the end of them. (Four reads,
    // one per form, were half of a 20 000-function check.)
    let (held, bytes) = [6u64, 5, 3, 2].into_iter().find_map(|n| {
        let at = pc.checked_sub(n)?;
        Some((n, binary.bytes_at(at, n as usize)?))
    })?;
    let before = |n: u64| {
        let tail = bytes.get(usize::try_from(held.checked_sub(n)?).ok()?..)?;
        Some((pc - n, tail))
    };
    let indirect = |b: &[u8], modrm: ModRm| b[0] == 0xff && modrm(b[1]);
    if let Some((at, b)) = before(5).filter(|(_, b)| b[0] == 0xe8) {
        let rel = i32::from_le_bytes([b[1], b[2], b[3], b[4]]) as i64 as u64;
        let mut target = pc.wrapping_add(rel);
        if binary.pointer_size == 4 {
            target &= 0xffff_ffff;
        }
        return Some((at, Some(target)));
    }
    let forms: [(u64, ModRm); 3] = [
        (6, |m| m == 0x15 || m & 0xf8 == 0x90),
        (3, |m| m & 0xf8 == 0x50),
        (2, |m| m & 0xf8 == 0xd0),
    ];
    forms.iter().find_map(|&(n, modrm)| {
        let (at, b) = before(n)?;
        indirect(b, modrm).then_some((at, None))
    })
}

/// The call instruction that ends at `pc` in `binary`'s code, if one does
/// (`None` outside for an instruction set not known here). The `mcount`
/// call of each target's `-pg` prologue: x86's ([`x86_call_ending_at`]);
/// ARM `bl`/`blx` (Thumb or ARM); AArch64 `bl`/`blr`; PowerPC `bl`; MIPS
/// `jal`/`jalr`/`bal` followed by its delay slot.
fn call_ending_at(binary: &Binary, pc: u64) -> Option<Option<Call>> {
    use object::Architecture as A;
    let word = |at: u64| -> Option<u32> {
        let b: [u8; 4] = binary.bytes_at(at, 4)?.try_into().ok()?;
        Some(if binary.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    // A sign-extended field of `bits` bits, in bytes (`shift` bits up).
    let offset = |w: u32, bits: u32, shift: u32| -> u64 {
        let field = (w & ((1 << bits) - 1)) as i64;
        (((field << (64 - bits)) >> (64 - bits)) << shift) as u64
    };
    let found = match binary.architecture {
        A::I386 | A::X86_64 | A::X86_64_X32 => x86_call_ending_at(binary, pc),
        A::Arm => {
            let pc = pc & !1;
            let at = pc.checked_sub(4);
            let thumb = at.and_then(|at| binary.bytes_at(at, 4));
            let thumb_bl = thumb.is_some_and(|b| {
                let (hw1, hw2) = (
                    u16::from_le_bytes([b[0], b[1]]),
                    u16::from_le_bytes([b[2], b[3]]),
                );
                hw1 >> 11 == 0b11110 && hw2 >> 14 == 0b11
            });
            let arm = at.and_then(|at| Some((at, word(at)?)));
            match arm {
                Some((at, w)) if (w >> 25) & 0b111 == 0b101 && (w >> 24) & 1 == 1 => {
                    // `bl` (cond ≠ 1111) or `blx imm` (its H bit ignored here).
                    let target = at.wrapping_add(8).wrapping_add(offset(w, 24, 2));
                    Some((at, (w >> 28 != 0xf).then_some(target & 0xffff_ffff)))
                }
                _ => at.filter(|_| thumb_bl).map(|at| (at, None)),
            }
        }
        A::Aarch64 => {
            let at = pc.checked_sub(4);
            at.and_then(|at| Some((at, word(at)?)))
                .and_then(|(at, w)| match w {
                    w if w >> 26 == 0b100101 => Some((at, Some(at.wrapping_add(offset(w, 26, 2))))),
                    w if w & 0xffff_fc1f == 0xd63f_0000 => Some((at, None)),
                    _ => None,
                })
        }
        A::PowerPc | A::PowerPc64 => {
            let at = pc.checked_sub(4);
            at.and_then(|at| Some((at, word(at)?)))
                .filter(|&(_, w)| w >> 26 == 18 && w & 1 == 1)
                .map(|(at, w)| {
                    let base = if w & 2 != 0 { 0 } else { at };
                    let mut target = base.wrapping_add(offset(w >> 2, 24, 2));
                    if binary.pointer_size == 4 {
                        target &= 0xffff_ffff;
                    }
                    (at, Some(target))
                })
        }
        A::Mips | A::Mips64 => {
            let at = pc.checked_sub(8);
            at.and_then(|at| Some((at, word(at)?))).and_then(|(at, w)| {
                let (op, funct, rt) = (w >> 26, w & 0x3f, (w >> 16) & 0x1f);
                let region = at.wrapping_add(4) & !0x0fff_ffff;
                match (op, funct, rt) {
                    (3, _, _) => Some((at, Some(region | u64::from(w & 0x03ff_ffff) << 2))),
                    (0, 9, _) | (1, _, 17) => Some((at, None)),
                    _ => None,
                }
            })
        }
        _ => return None,
    };
    Some(found)
}
