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

/// Inputs of fewer bytes are parsed after the binary is opened, on one thread.
const PARALLEL_INPUT_BYTES: u64 = 1 << 16;

/// The binary (when given) and the summed inputs. When the binary's header
/// tells its pointer size (ELF) and a core is to spare beside this thread
/// and the line tables' ([`crate::cores_beyond`]), the inputs are parsed on
/// another thread while it is opened (that thread reads the header: ≈ 40 µs
/// of opening and reading a file off this one); otherwise after it, with
/// the pointer size it was opened with. Its error, if any, comes first
/// either way.
fn open_and_load(
    inputs: &[Input],
    options: &ReadOptions,
) -> Result<(Option<Rc<Binary>>, GmonData)> {
    let Some(path) = options.binary.as_deref() else {
        return Ok((None, load(inputs, options, None)?));
    };
    // A small input parses faster than a thread starts.
    let small = inputs.iter().map(Input::len).sum::<u64>() < PARALLEL_INPUT_BYTES;
    let (loaded, binary) = if small || !crate::cores_beyond(2) {
        (None, Binary::open_cached(path, SymbolRules::Gprof))
    } else {
        // `Binary::open_cached` keeps the binary for this thread (an `Rc`):
        // it is opened here, the inputs parsed on a scoped thread.
        std::thread::scope(|scope| {
            let loaded = scope
                .spawn(|| elf_pointer_size(path).map(|size| load(inputs, options, Some(size))));
            let binary = Binary::open_cached(path, SymbolRules::Gprof);
            let loaded = loaded
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (loaded, binary)
        })
    };
    let binary = binary?;
    let loaded = match loaded {
        Some(loaded) => loaded,
        None => load(inputs, options, Some(binary.pointer_size)),
    };
    match loaded {
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

/// The pointer size an ELF file's identification bytes declare (what
/// [`Binary::open`] finds), or `None` for anything else.
fn elf_pointer_size(path: &Path) -> Option<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None; // refused by Binary::open
    }
    let mut ident = [0u8; 5];
    file.read_exact(&mut ident).ok()?;
    match ident {
        [0x7f, b'E', b'L', b'F', 1] => Some(4),
        [0x7f, b'E', b'L', b'F', 2] => Some(8),
        _ => None,
    }
}

/// Reads and sums gmon.out inputs into one profile.
///
/// With a binary, its line tables are read on another thread from the
/// start ([`Binary::line_tables_of`]: most of the work of looking the
/// addresses up, and independent of them), while the binary's symbols and
/// the inputs are read and the addresses worked out. Whether the binary
/// fits the inputs ([`fit::check`]) is worked out on this thread while
/// another makes the ticks' samples: a binary that does not fit is refused
/// once the profile is built.
pub fn read(inputs: &[Input], options: &ReadOptions) -> Result<Profile> {
    std::thread::scope(|scope| {
        let tables = options
            .binary
            .as_deref()
            .map(|path| scope.spawn(move || Binary::line_tables_of(path)));
        let (binary, data) = open_and_load(inputs, options)?;
        let check = !options.gprof.skip_binary_check;
        let mut fits = None;
        let lines = |binary: &Binary, addresses: &[u64]| {
            if check {
                fits = Some(fit::check(&data, binary, inputs));
            }
            // A panic there is a table that did not read: read again here.
            match tables.and_then(|t| t.join().ok().flatten()) {
                Some((file, tables)) if binary.line_tables_file() == Some(&file) => {
                    Some(tables.claim(addresses))
                }
                _ => binary.sorted_lines(addresses),
            }
        };
        let stacks = options.gprof.stacks;
        let mut profile = profile::to_profile(&data, binary.as_deref(), stacks, lines);
        match (fits, binary.as_deref()) {
            (Some(fits), _) => fits?,
            (None, Some(binary)) if check => fit::check(&data, binary, inputs)?,
            _ => {}
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
    })
}

#[cfg(test)]
mod tests;
