//! Folded stacks: one line per distinct stack, frames root first joined by
//! `;`, a space, an integer count (inferno's and flamegraph.pl's input).

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::write::{chosen_sample_type, effective_group_by, named_stacks, WriteOptions};

/// A frame name made safe for the folded format: no `;`, no line breaks.
pub fn clean_frame(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// The folded lines of a profile for the chosen sample type.
pub fn lines(profile: &Profile, options: &WriteOptions) -> Result<Vec<String>> {
    let index = chosen_sample_type(profile, options)?;
    let stacks = named_stacks(profile, index, effective_group_by(profile, options));
    let mut merged: Vec<(String, i64)> = stacks
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(frames, v)| {
            let joined: Vec<String> = frames.iter().map(|f| clean_frame(f)).collect();
            (joined.join(";"), v)
        })
        .collect();
    // Cleaning can make two stacks equal: merge them again.
    merged.sort();
    merged.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.1 = a.1.saturating_add(b.1);
            true
        } else {
            false
        }
    });
    Ok(merged
        .into_iter()
        .map(|(s, v)| format!("{s} {v}"))
        .collect())
}

/// Writes the folded lines, one per distinct stack.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let io = |e| Error::io(std::path::Path::new("<output>"), e);
    for line in lines(profile, options)? {
        writeln!(out, "{line}").map_err(io)?;
    }
    Ok(())
}
