//! Flamegraph SVG, rendered by inferno from the folded lines.

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::{count_shift, Profile};
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
    let mut fg = inferno_options(kind, unit, options)?;
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
