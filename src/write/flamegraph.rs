//! Flamegraph SVG, rendered by inferno from the folded lines.

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::{count_shift, Profile};
use crate::write::runs::FoldedRuns;
use crate::write::{chosen_sample_type, folded, WriteOptions};

/// Writes the flamegraph SVG of the chosen sample type.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let index = chosen_sample_type(profile, options)?;
    let (kind, unit) = profile.sample_type_name(index);
    // inferno adds the counts up in a u64: past that they are drawn in
    // units of 2^shift, and its factor shows the numbers scaled back.
    let positive = profile.samples().iter().map(|s| {
        let v = s.values.get(index).copied().unwrap_or(0);
        i128::from(v.max(0))
    });
    let shift = count_shift(positive.sum());
    let lines = folded::lines(profile, options, shift)?;
    let fg = inferno_options(kind, unit, options)?;
    draw(fg, shift, &lines, out)
}

/// [`write`] from the folded lines of a profile spilled in runs
/// ([`FoldedRuns`]); `head` is the profile's tables (its sample types).
/// Frames inferno would leave out as narrower than its minimum width are
/// folded away before it sees them ([`Narrow`]), so that millions of
/// stacks of one-instruction frames are drawn in memory of what is drawn.
pub(crate) fn write_runs(
    head: &Profile,
    runs: &mut FoldedRuns,
    options: &WriteOptions,
    out: &mut dyn Write,
) -> Result<()> {
    let index = chosen_sample_type(head, options)?;
    let (kind, unit) = head.sample_type_name(index);
    let shift = count_shift(runs.positive());
    let fg = inferno_options(kind, unit, options)?;
    let prunable = shift == 0 && !fg.flame_chart && !fg.reverse_stack_order && fg.base.is_empty();
    let mut lines = Vec::new();
    if prunable && runs.total() > 0 {
        // inferno's test, with its numbers: a frame narrower than
        // `min_width` per cent of the total is not drawn.
        let minimum = fg.min_width / (100.0 / runs.total() as f64);
        let mut narrow = Narrow::new(minimum);
        runs.merge(|stack, count| {
            narrow.line(stack, count as u64);
            Ok(())
        })?;
        lines = narrow.finish();
    } else {
        runs.merge(|stack, count| {
            lines.push(format!("{stack} {}", shifted(count, shift)));
            Ok(())
        })?;
    }
    draw(fg, shift, &lines, out)
}

/// A count divided by 2^`shift`, rounded to the nearest.
fn shifted(count: i64, shift: u32) -> i64 {
    match shift {
        0 => count,
        _ => ((i128::from(count) + (1 << (shift - 1))) >> shift) as i64,
    }
}

/// Draws `lines` (counts in units of 2^`shift`) with inferno.
fn draw(
    mut fg: inferno::flamegraph::Options<'static>,
    shift: u32,
    lines: &[String],
    out: &mut dyn Write,
) -> Result<()> {
    fg.factor = 2f64.powi(shift as i32);
    if lines.is_empty() {
        // inferno refuses an empty input; draw an explicit empty graph instead.
        fg.subtitle = Some("no samples of this type".to_owned());
        let empty = ["(no samples) 1".to_owned()];
        return inferno::flamegraph::from_lines(&mut fg, empty.iter().map(String::as_str), out)
            .map_err(render_error);
    }
    inferno::flamegraph::from_lines(&mut fg, lines.iter().map(String::as_str), out)
        .map_err(render_error)
}

/// Folded lines, sorted, with every frame narrower than `minimum` folded
/// away: what inferno draws of them is unchanged. A frame's width is the
/// counts of the lines through it; a narrow frame is not drawn, and
/// neither is anything above it. Narrow siblings next to each other become
/// one line named by the first of them, as long as together they stay
/// narrow: the line keeps their place and width, so every frame that is
/// drawn starts where it did, and the frame it makes is narrow and not
/// drawn either. What is kept is then about the frames drawn: at most
/// twice 100 / `min_width` lines per depth, whatever the number of stacks.
struct Narrow {
    minimum: f64,
    /// The frames of the last line, root first, as they are being merged.
    open: Vec<Open>,
    /// The lines kept at the root level.
    top: Level,
}

/// A frame of the stack being walked.
struct Open {
    /// The stack up to this frame.
    path: String,
    /// The counts of the lines through it.
    width: u64,
    level: Level,
}

/// The lines kept under a frame, and the narrow siblings being gathered.
#[derive(Default)]
struct Level {
    lines: Vec<(String, u64)>,
    narrow: Option<(String, u64)>,
}

impl Level {
    /// Adds a narrow frame's lines as one, gathered with its narrow
    /// neighbours while they stay narrow together.
    fn add_narrow(&mut self, path: String, width: u64, minimum: f64) {
        match &mut self.narrow {
            Some((_, w)) if ((*w + width) as f64) < minimum => *w += width,
            _ => {
                self.flush();
                self.narrow = Some((path, width));
            }
        }
    }

    fn flush(&mut self) {
        self.lines.extend(self.narrow.take());
    }
}

impl Narrow {
    fn new(minimum: f64) -> Narrow {
        Narrow {
            minimum,
            open: Vec::new(),
            top: Level::default(),
        }
    }

    /// Takes the next line (in sorted order).
    fn line(&mut self, stack: &str, count: u64) {
        let frames: Vec<&str> = stack.split(';').collect();
        let mut same = 0;
        while same < self.open.len() && same < frames.len() {
            let open = &self.open[same].path;
            let name_at = open.rfind(';').map_or(0, |i| i + 1);
            if open[name_at..] != *frames[same] {
                break;
            }
            same += 1;
        }
        while self.open.len() > same {
            self.close();
        }
        for depth in same..frames.len() {
            let path = frames[..=depth].join(";");
            self.open.push(Open {
                path,
                width: 0,
                level: Level::default(),
            });
        }
        for open in &mut self.open {
            open.width = open.width.saturating_add(count);
        }
        if let Some(leaf) = self.open.last_mut() {
            leaf.level.lines.push((stack.to_owned(), count));
        }
    }

    /// Closes the innermost open frame: drawn, its lines go to its parent;
    /// narrow, it joins its parent's narrow siblings.
    fn close(&mut self) {
        let Some(mut frame) = self.open.pop() else {
            return;
        };
        let minimum = self.minimum;
        let parent = match self.open.last_mut() {
            Some(p) => &mut p.level,
            None => &mut self.top,
        };
        if (frame.width as f64) < minimum {
            parent.add_narrow(frame.path, frame.width, minimum);
        } else {
            parent.flush();
            frame.level.flush();
            parent.lines.append(&mut frame.level.lines);
        }
    }

    /// The lines kept, as `STACK COUNT`.
    fn finish(mut self) -> Vec<String> {
        while !self.open.is_empty() {
            self.close();
        }
        self.top.flush();
        let lines = self.top.lines.into_iter();
        lines
            .map(|(stack, count)| format!("{stack} {count}"))
            .collect()
    }
}

/// inferno's options for a sample type `kind (unit)`: the defaults by type
/// (see [`crate::write::FlamegraphOptions`]), then what the user asked for.
fn inferno_options(
    kind: &str,
    unit: &str,
    options: &WriteOptions,
) -> Result<inferno::flamegraph::Options<'static>> {
    let asked = &options.flamegraph;
    let mut fg = inferno::flamegraph::Options::default();
    let title = match &asked.title {
        Some(t) => t.clone(),
        None if options.title.is_empty() => format!("{kind} ({unit})"),
        None => format!("{} — {kind} ({unit})", options.title),
    };
    fg.title = super::names::xml_text(&title).into_owned();
    fg.subtitle = asked
        .subtitle
        .as_deref()
        .map(|s| super::names::xml_text(s).into_owned());
    let (palette, count_name) = defaults_by_type(kind, unit);
    let palette = asked.colors.as_deref().unwrap_or(palette);
    fg.colors = palette.parse().map_err(|_| {
        Error::Usage(format!(
            "no flamegraph palette {palette:?}; the palettes: {}",
            inferno::flamegraph::color::Palette::VARIANTS.join(", ")
        ))
    })?;
    // The count name is text of every frame's tooltip: a user's control
    // bytes (or an input's unit) would make the SVG invalid XML.
    let count_name = asked.count_name.as_deref().unwrap_or(&count_name);
    fg.count_name = super::names::xml_text(count_name).into_owned();
    fg.name_type = "Function:".to_owned();
    // Colours from a hash of the frame name, not random: the same input gives
    // the same SVG, and a function keeps its colour across graphs.
    fg.hash = true;
    fg.deterministic = true;
    if asked.inverted {
        fg.direction = inferno::flamegraph::Direction::Inverted;
    }
    fg.reverse_stack_order = asked.reverse;
    fg.flame_chart = asked.flame_chart;
    if let Some(w) = asked.min_width {
        fg.min_width = w;
    }
    fg.image_width = asked.width;
    Ok(fg)
}

/// The palette and count name a sample type calls for: heap profiles
/// (mpatrol's `alloc_space`, `inuse_objects`, …) are drawn in `mem` and
/// count bytes or objects.
fn defaults_by_type(kind: &str, unit: &str) -> (&'static str, String) {
    if kind.ends_with("_objects") {
        ("mem", "objects".to_owned())
    } else if kind.ends_with("_space") || unit == "bytes" {
        ("mem", "bytes".to_owned())
    } else {
        ("hot", unit.to_owned())
    }
}

/// An error of inferno's: writing the SVG (a full disk, a closed pipe) is
/// an output error like any writer's, not a usage error.
fn render_error(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    // inferno reports quick_xml's error, which holds the io::Error: keep its
    // kind (a closed pipe is told apart) and the system's message.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            let same = match io.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(io.kind(), io.to_string()),
            };
            return Error::unnamed_output(same);
        }
        cause = c.source();
    }
    Error::unnamed_output(std::io::Error::other(e))
}

#[cfg(test)]
mod tests {
    use super::{draw, inferno_options, Narrow};
    use crate::write::WriteOptions;

    /// Draws `lines` with the default options.
    fn svg(lines: &[String]) -> Vec<u8> {
        let fg = inferno_options("samples", "count", &WriteOptions::default()).unwrap();
        let mut out = Vec::new();
        draw(fg, 0, lines, &mut out).unwrap();
        out
    }

    #[test]
    fn narrow_frames_fold_away_and_the_drawing_stays_the_same() {
        // 100 000 one-sample frames between wide ones, under two roots,
        // some with narrow callees of their own.
        let mut lines = Vec::new();
        for root in ["a", "b"] {
            lines.push(format!("{root} 7"));
            for i in 0..100_000 {
                if i % 25_000 == 0 {
                    lines.push(format!("{root};wide{i:06} 50000"));
                    lines.push(format!("{root};wide{i:06};callee 30000"));
                }
                lines.push(format!("{root};narrow{i:06} 1"));
                if i % 3 == 0 {
                    lines.push(format!("{root};narrow{i:06};deeper 2"));
                }
            }
        }
        lines.sort();
        let total: u64 = lines
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        let fg = inferno_options("samples", "count", &WriteOptions::default()).unwrap();
        let mut narrow = Narrow::new(fg.min_width / (100.0 / total as f64));
        for line in &lines {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            narrow.line(stack, count.parse().unwrap());
        }
        let kept = narrow.finish();
        // Narrow siblings gather into lines of under 0.01 % of the total
        // each: about 2 × 1 400 of them here, against 266 686 lines.
        assert!(
            kept.len() < lines.len() / 50,
            "{} lines kept of {}",
            kept.len(),
            lines.len()
        );
        assert!(svg(&kept) == svg(&lines), "the same drawing");
    }
}
