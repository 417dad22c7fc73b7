//! GNU gprof `gmon.out` reader: the GNU tagged format (both byte orders, 4-
//! and 8-byte addresses), 4.4BSD and 4.3BSD headers (docs/formats/gprof.md §1–§2), and
//! the mapping to the IR the way gprof reasons about it (§3–§4).

mod bsd;
mod callgraph;
mod data;
mod fit;
mod gnu;
mod info;
mod locate;
mod profile;
mod ticks;

pub use data::{sum, GmonData};
pub use gnu::detect_gnu;
pub use info::info;

use std::path::Path;
use std::rc::Rc;

use super::input::{Detection, Input};
use super::options::ReadOptions;
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::symbolize::{Binary, SymbolRules};
use bsd::bsd_layout;
use bsd::parse_bsd;
use gnu::parse_gnu;
use gnu::GMON_MAGIC;

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

/// Reads and sums every input; `elf_pointer_size` is the binary's.
fn load(
    inputs: &[Input],
    options: &ReadOptions,
    elf_pointer_size: Option<usize>,
) -> Result<GmonData> {
    let mut total: Option<GmonData> = None;
    for (i, input) in inputs.iter().enumerate() {
        let path = input.name();
        options.advance(input.len());
        let parsed = parse(path, input.bytes()?, options, elf_pointer_size)?;
        total = Some(match total {
            None => parsed,
            Some(acc) => sum(path, &earlier_files(&inputs[..i]), acc, parsed)?,
        });
    }
    total.ok_or_else(|| Error::Usage("no gmon.out given".into()))
}

/// The names of the files summed so far, for an error about the next.
fn earlier_files(inputs: &[Input]) -> String {
    let names: Vec<String> = inputs
        .iter()
        .map(|i| format!("`{}`", i.name().display()))
        .collect();
    names.join(", ")
}

/// The binary (when given), then the summed inputs, read with the pointer
/// size the binary says; the binary's error, if any, comes first.
fn open_and_load(
    inputs: &[Input],
    options: &ReadOptions,
) -> Result<(Option<Rc<Binary>>, GmonData)> {
    let Some(path) = options.binary.as_deref() else {
        return Ok((None, load(inputs, options, None)?));
    };
    let binary = Binary::open_cached(path, SymbolRules::Gprof, options.gprof.inline_frames)?;
    match load(inputs, options, Some(binary.pointer_size)) {
        Ok(loaded) => Ok((Some(binary), loaded)),
        Err(e) => Err(other_pointer_size(inputs, options, &binary).unwrap_or(e)),
    }
}

/// When the inputs do not parse with the executable's address size but do
/// with the other one, the error that says so (a 32-bit program's gmon.out
/// with a 64-bit executable, or the reverse) instead of a parse error at
/// the wrong offsets.
fn other_pointer_size(inputs: &[Input], options: &ReadOptions, binary: &Binary) -> Option<Error> {
    if options.gprof.pointer_size.is_some() {
        return None;
    }
    let other = if binary.pointer_size == 8 { 4 } else { 8 };
    load(inputs, options, Some(other)).ok()?;
    Some(Error::unsupported(
        &binary.path,
        format!(
            "this executable is a {}-bit program, but the profile has {}-byte addresses (a {}-bit program wrote it): give the executable that wrote the profile, or --gmon-pointer-size {} to read it as it is",
            8 * binary.pointer_size,
            other,
            8 * other,
            binary.pointer_size
        ),
    ))
}

/// Reads and sums gmon.out inputs into one profile. With a binary, a binary
/// that does not fit the inputs ([`fit::check`]) is refused before the
/// profile is built.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    let (binary, mut data) = open_and_load(inputs, options)?;
    let padded = binary
        .as_deref()
        .is_some_and(|b| unpad_counts(&mut data, b));
    if let (false, Some(binary)) = (options.gprof.skip_binary_check, binary.as_deref()) {
        fit::check(&data, binary, inputs)?;
    }
    let lines = |binary: &Binary, addresses: &[u64]| binary.sorted_lines(addresses);
    let stacks = options.gprof.stacks;
    let mut profile = profile::to_profile(&data, binary.as_deref(), stacks, lines);
    if padded {
        profile.add_comment(PADDED_COUNTS);
    }
    if let Some(t) = inputs.first().and_then(Input::modified) {
        if let Ok(d) = t.duration_since(std::time::UNIX_EPOCH) {
            profile.time_nanos = d.as_nanos() as i64;
            profile.add_comment(
                "time: modification time of the gmon.out (written when the program exited)",
            );
        }
    }
    Ok(profile)
}

/// The comment of a profile whose arc counts were read from padded slots.
const PADDED_COUNTS: &str = "calls: each arc count is the 4-byte `long` of its 8-byte slot (64-bit MinGW-w64); gprof reads the whole slot and prints the padding too, as 4294967296 × its garbage + the count";

/// Keeps the 4-byte count of each arc when `binary`'s runtime writes it in
/// an 8-byte slot (a 64-bit BSD-layout file of a 64-bit PE, §5): the other
/// half is padding. Summed counts keep their low 32 bits, the sum of the
/// counts while that stays below 2³². True when it applied.
fn unpad_counts(data: &mut GmonData, binary: &Binary) -> bool {
    let padded = binary.gmon_text.padded_counts
        && data.pointer_size == 8
        && !data.variant.records_byte_order();
    if padded {
        for arc in &mut data.arcs {
            arc.count &= 0xffff_ffff;
        }
    }
    padded
}

#[cfg(test)]
mod tests;
