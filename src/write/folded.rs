//! Folded stacks: one line per distinct stack, frames root first joined by
//! `;`, a space, an integer count (inferno's and flamegraph.pl's input).

use std::borrow::Cow;
use std::collections::HashMap;
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
pub(crate) fn each_line(
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
    // A name that needs no cleaning is borrowed, not copied. The leaf is
    // compared as it is written ([`super::names::end_folded_stack`]), so the
    // lines come sorted and distinct as they are written: runs of lines
    // merge into the same output ([`super::runs`]).
    let cleaned: Vec<Cow<'_, str>> = table
        .frames
        .iter()
        .map(|f| match (f.line, f.file) {
            (0, _) => super::names::folded_frame(&f.name),
            (line, Some(file)) => clean_frame(&format!("{} {file}:{line}", f.name)).into(),
            (line, None) => clean_frame(&format!("{}:{line}", f.name)).into(),
        })
        .collect();
    let as_leaf: HashMap<u32, String> = stacks
        .iter()
        .filter_map(|&(i, _)| stack(i).last())
        .filter_map(|id| {
            let mut leaf = cleaned[id as usize].to_string();
            super::names::end_folded_stack(&mut leaf);
            (leaf != cleaned[id as usize]).then_some((id, leaf))
        })
        .collect();
    let name = |id: u32, leaf: bool| -> &str {
        match leaf && !as_leaf.is_empty() {
            true => as_leaf
                .get(&id)
                .map_or(&*cleaned[id as usize], String::as_str),
            false => &cleaned[id as usize],
        }
    };
    // A stack's line as pieces (names and separators), compared a piece
    // at a time as the bytes they join into.
    let joined = |i: usize| {
        let depth = stack(i).count();
        stack(i).enumerate().flat_map(move |(k, id)| {
            let sep: &[u8] = if k > 0 { b";" } else { b"" };
            [sep, name(id, k + 1 == depth).as_bytes()]
        })
    };
    let order = |a: usize, b: usize| compare_pieces(joined(a), joined(b));
    stacks.sort_by(|&(a, va), &(b, vb)| order(a, b).then(va.cmp(&vb)));
    let mut line = String::new();
    let mut k = 0;
    while k < stacks.len() {
        let (first, mut total) = stacks[k];
        k += 1;
        while k < stacks.len() && order(first, stacks[k].0).is_eq() {
            total = total.saturating_add(stacks[k].1);
            k += 1;
        }
        line.clear();
        let depth = stack(first).count();
        for (n, id) in stack(first).enumerate() {
            if n > 0 {
                line.push(';');
            }
            line.push_str(name(id, n + 1 == depth));
        }
        emit(&line, total)?;
    }
    Ok(())
}

/// Compares the byte strings that two sequences of pieces join into,
/// a slice at a time.
fn compare_pieces<'a>(
    mut a: impl Iterator<Item = &'a [u8]>,
    mut b: impl Iterator<Item = &'a [u8]>,
) -> std::cmp::Ordering {
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        while x.is_empty() {
            match a.next() {
                Some(piece) => x = piece,
                None => break,
            }
        }
        while y.is_empty() {
            match b.next() {
                Some(piece) => y = piece,
                None => break,
            }
        }
        if x.is_empty() || y.is_empty() {
            return x.len().cmp(&y.len());
        }
        let n = x.len().min(y.len());
        match x[..n].cmp(&y[..n]) {
            std::cmp::Ordering::Equal => (x, y) = (&x[n..], &y[n..]),
            unequal => return unequal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::compare_pieces;

    #[test]
    fn pieces_compare_as_the_bytes_they_join_into() {
        let cases: [(&[&str], &[&str]); 6] = [
            (&["a", ";", "b"], &["a;", "b"]),
            (&["ab"], &["a", ";", "b"]),
            (&["a", " x"], &["a", ";", "x"]),
            (&["", "f"], &["f", ""]),
            (&["f"], &["f", ";", "g"]),
            (&["lib+0x10"], &["lib+0x1", "0"]),
        ];
        for (a, b) in cases {
            let (ja, jb) = (a.concat(), b.concat());
            let pieces = |p: &'static [&'static str]| p.iter().map(|s| s.as_bytes());
            assert_eq!(
                compare_pieces(pieces(a), pieces(b)),
                ja.cmp(&jb),
                "{a:?} {b:?}"
            );
            assert_eq!(
                compare_pieces(pieces(b), pieces(a)),
                jb.cmp(&ja),
                "{b:?} {a:?}"
            );
        }
    }
}
