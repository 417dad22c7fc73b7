//! Whether `--binary` is the program that wrote the gmon.out (§3.4): a
//! gmon.out holds addresses only, so another build of the program, or
//! another program, gives a profile that looks right and is not. Three
//! facts of a real pair are checked: the byte order agrees, the histogram
//! covers the executable's code, and a call instruction (the prologue's
//! call of `mcount`) ends at each arc's callee address. A pair that fails is
//! refused, saying what does not fit; `--skip-binary-check` converts it
//! anyway.

use super::data::GmonData;
use crate::error::{Error, Result};
use crate::read::cursor::Endian;
use crate::read::input::Input;
use crate::symbolize::Binary;

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
    if let Some(why) = arcs_off_calls(data, binary) {
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

/// Why the arcs' callee addresses are not where `mcount` records them,
/// if most of them are not: `self_pc` is the return address of the call
/// to `mcount` in the callee's prologue, so a call instruction ends there
/// (or, in a file `gprof -s` wrote, `self_pc` is a function's entry).
/// Instruction sets not known here are not judged.
fn arcs_off_calls(data: &GmonData, binary: &Binary) -> Option<String> {
    let entries = binary.entries();
    let mut callees: Vec<u64> = data.arcs.iter().map(|a| a.self_pc).collect();
    crate::radix::sort_by_key(&mut callees, |&a| a);
    callees.dedup();
    if callees.len() < ARCS_TO_JUDGE {
        return None;
    }
    let mut off = Vec::new();
    for &pc in &callees {
        let fits = entries.binary_search(&pc).is_ok() || call_ends_at(binary, pc)?;
        if !fits {
            off.push(pc);
        }
    }
    if off.len() * 2 <= callees.len() {
        return None;
    }
    let shown: Vec<String> = off.iter().take(3).map(|pc| format!("{pc:#x}")).collect();
    Some(format!(
        "{} of its {} called addresses ({}{}) follow no call instruction in it, where mcount records them",
        off.len(),
        callees.len(),
        shown.join(", "),
        if off.len() > 3 { ", ..." } else { "" }
    ))
}

/// Whether an x86 call ends at `pc`: `call rel32` (`e8`), or an indirect
/// `call` (`ff /2`) through a register, `disp8(reg)`, `disp32(reg)` or
/// `disp32(%rip)`, as `-pg` code calls `mcount` directly, through the GOT
/// (`*mcount@GOTPCREL(%rip)`, i386 PIC's `*mcount@GOT(%ebx)`) or a register.
fn x86_call_ends_at(binary: &Binary, pc: u64) -> bool {
    let before = |n: u64| {
        pc.checked_sub(n)
            .and_then(|at| binary.bytes_at(at, n as usize))
    };
    let indirect = |b: &[u8], modrm: fn(u8) -> bool| b[0] == 0xff && modrm(b[1]);
    before(5).is_some_and(|b| b[0] == 0xe8)
        || before(6).is_some_and(|b| indirect(b, |m| m == 0x15 || m & 0xf8 == 0x90))
        || before(3).is_some_and(|b| indirect(b, |m| m & 0xf8 == 0x50))
        || before(2).is_some_and(|b| indirect(b, |m| m & 0xf8 == 0xd0))
}

/// Whether a call instruction ends at `pc` in `binary`'s code (`None`
/// for an instruction set not known here). The `mcount` call of each
/// target's `-pg` prologue: x86's ([`x86_call_ends_at`]); ARM `bl`/`blx`
/// (Thumb or ARM); PowerPC `bl`; MIPS `jal`/`jalr`/`bal` followed by its
/// delay slot.
fn call_ends_at(binary: &Binary, pc: u64) -> Option<bool> {
    use object::Architecture as A;
    let word = |at: u64| -> Option<u32> {
        let b: [u8; 4] = binary.bytes_at(at, 4)?.try_into().ok()?;
        Some(if binary.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    let found = match binary.architecture {
        A::I386 | A::X86_64 | A::X86_64_X32 => x86_call_ends_at(binary, pc),
        A::Arm => {
            let pc = pc & !1;
            let thumb = pc.checked_sub(4).and_then(|at| binary.bytes_at(at, 4));
            let thumb_bl = thumb.is_some_and(|b| {
                let (hw1, hw2) = (
                    u16::from_le_bytes([b[0], b[1]]),
                    u16::from_le_bytes([b[2], b[3]]),
                );
                hw1 >> 11 == 0b11110 && hw2 >> 14 == 0b11
            });
            let arm_bl = pc
                .checked_sub(4)
                .and_then(word)
                .is_some_and(|w| (w >> 25) & 0b111 == 0b101 && (w >> 24) & 1 == 1);
            thumb_bl || arm_bl
        }
        A::PowerPc | A::PowerPc64 => pc
            .checked_sub(4)
            .and_then(word)
            .is_some_and(|w| w >> 26 == 18 && w & 1 == 1),
        A::Mips | A::Mips64 => pc.checked_sub(8).and_then(word).is_some_and(|w| {
            let (op, funct, rt) = (w >> 26, w & 0x3f, (w >> 16) & 0x1f);
            op == 3 || (op == 0 && funct == 9) || (op == 1 && rt == 17)
        }),
        _ => return None,
    };
    Some(found)
}
