//! Folded stacks: one line per distinct stack, frames root first joined by
//! `;`, a space, an integer count (inferno's and flamegraph.pl's input).

use std::borrow::Cow;
use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::{Granularity, Profile};
use crate::write::frames::Frames;
use crate::write::{chosen_sample_type, effective_group_by, WriteOptions};

/// A frame name made safe for the folded format ([`super::names::folded_frame`]):
/// no `;`, no line breaks or other control characters, and so also safe in
/// the flamegraph drawn from the lines.
pub fn clean_frame(name: &str) -> String {
    super::names::folded_frame(name).into_owned()
}

/// The folded lines of a profile for the chosen sample type, each count
/// divided by 2^`shift` (rounded to the nearest): counts a consumer that
/// adds them up in 64 bits (inferno) can sum ([`crate::profile::count_shift`]).
pub fn lines(profile: &Profile, options: &WriteOptions, shift: u32) -> Result<Vec<String>> {
    let mut out = Vec::new();
    each_line(profile, options, |stack, count| {
        let count = match shift {
            0 => count,
            _ => ((i128::from(count) + (1 << (shift - 1))) >> shift) as i64,
        };
        out.push(format!("{stack} {count}"));
        Ok(())
    })?;
    Ok(out)
}

/// Writes the folded lines, one per distinct stack.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let io = Error::unnamed_output;
    each_line(profile, options, |stack, count| {
        writeln!(out, "{stack} {count}").map_err(io)
    })
}

/// Calls `emit` with each folded line's stack and count, sorted: stacks
/// merged by frame names, those with a positive total kept, then merged
/// again where cleaning the names made two equal (sums capped at
/// `i64::MAX`, which [`Profile::warn_unrepresentable_totals`] says).
/// Stacks are walked by frame id ([`Frames`]), so only one line is built at
/// a time.
fn each_line(
    profile: &Profile,
    options: &WriteOptions,
    mut emit: impl FnMut(&str, i64) -> Result<()>,
) -> Result<()> {
    let index = chosen_sample_type(profile, options)?;
    // A frame per source line only when asked (`--granularity lines`),
    // named `function file:line` as pprof names a line.
    let by_line = options.granularity == Some(Granularity::Lines);
    let table = Frames::new(
        profile,
        effective_group_by(profile, options),
        by_line,
        by_line,
    );
    let value = |i: usize| profile.samples()[i].values.get(index).copied().unwrap_or(0);
    let stack = |i: usize| table.stack(profile, i);
    let mut order: Vec<usize> = (0..profile.samples().len())
        .filter(|&i| value(i) != 0)
        .collect();
    order.sort_by(|&a, &b| stack(a).cmp(stack(b)));
    let mut stacks: Vec<(usize, i64)> = Vec::new();
    for i in order {
        match stacks.last_mut() {
            Some((first, v)) if stack(*first).eq(stack(i)) => *v = v.saturating_add(value(i)),
            _ => stacks.push((i, value(i))),
        }
    }
    stacks.retain(|&(_, v)| v > 0);

    // Cleaning can make two stacks equal: sort by the line and merge again.
    // A name that needs no cleaning is borrowed, not copied.
    let cleaned: Vec<Cow<'_, str>> = table
        .frames
        .iter()
        .map(|f| match (f.line, f.file) {
            (0, _) => super::names::folded_frame(&f.name),
            (line, Some(file)) => clean_frame(&format!("{} {file}:{line}", f.name)).into(),
            (line, None) => clean_frame(&format!("{}:{line}", f.name)).into(),
        })
        .collect();
    let joined = |i: usize| {
        stack(i)
            .enumerate()
            .flat_map(|(k, id)| {
                let sep: &[u8] = if k > 0 { b";" } else { b"" };
                sep.iter().chain(cleaned[id as usize].as_bytes())
            })
            .copied()
    };
    stacks.sort_by(|&(a, va), &(b, vb)| joined(a).cmp(joined(b)).then(va.cmp(&vb)));
    let mut line = String::new();
    let mut k = 0;
    while k < stacks.len() {
        let (first, mut total) = stacks[k];
        k += 1;
        while k < stacks.len() && joined(first).eq(joined(stacks[k].0)) {
            total = total.saturating_add(stacks[k].1);
            k += 1;
        }
        line.clear();
        for (n, id) in stack(first).enumerate() {
            if n > 0 {
                line.push(';');
            }
            line.push_str(&cleaned[id as usize]);
        }
        super::names::end_folded_stack(&mut line);
        emit(&line, total)?;
    }
    Ok(())
}
