//! Flamegraph SVG, rendered by inferno from the folded lines.

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::write::{chosen_sample_type, folded, WriteOptions};

/// Writes the flamegraph SVG of the chosen sample type.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let index = chosen_sample_type(profile, options)?;
    let (kind, unit) = profile.sample_type_name(index);
    let lines = folded::lines(profile, options)?;
    let mut fg = inferno::flamegraph::Options::default();
    let title = if options.title.is_empty() {
        format!("{kind} ({unit})")
    } else {
        format!("{} — {kind} ({unit})", options.title)
    };
    fg.title = super::names::xml_text(&title).into_owned();
    fg.count_name = unit.to_owned();
    fg.name_type = "Function:".to_owned();
    // Colours from a hash of the frame name, not random: the same input gives
    // the same SVG, and a function keeps its colour across graphs.
    fg.hash = true;
    fg.deterministic = true;
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
