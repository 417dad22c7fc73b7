//! What `profconv info` shows: each reader describes its inputs as a
//! [`Summary`], a small tree of facts, and this module renders every summary
//! the same way (two spaces of indent per level, aligned keys where a block
//! asks for them, right-aligned tables).

use std::fmt;

/// What one reader found in its inputs, without converting them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// As [`Entry::Block`]'s `align`, for the top-level fields.
    pub align: Option<usize>,
    /// The top-level entries, in order.
    pub entries: Vec<Entry>,
}

/// One fact of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// `key: value`.
    Field {
        /// What the value is.
        key: String,
        /// The value, as text.
        value: String,
    },
    /// A line shown as it is.
    Line(String),
    /// A line (`title`), with entries indented beneath it.
    Block {
        /// The block's own line, as shown (usually ending in `:`).
        title: String,
        /// With `Some(width)`, each field's `key:` is padded to `width`
        /// characters (at least one space after it), so that the values
        /// start in one column.
        align: Option<usize>,
        /// The entries beneath it.
        entries: Vec<Entry>,
    },
    /// Entries one level deeper than the one before them, without a line
    /// of their own (the details of the field above).
    Indented(Vec<Entry>),
    /// Columns of text, each right-aligned to at least its width.
    Table {
        /// The header row.
        header: Vec<String>,
        /// The least width of each column.
        widths: Vec<usize>,
        /// The rows.
        rows: Vec<Vec<String>>,
    },
}

impl Entry {
    /// A `key: value` field.
    pub(crate) fn field(key: impl Into<String>, value: impl fmt::Display) -> Entry {
        Entry::Field {
            key: key.into(),
            value: value.to_string(),
        }
    }

    /// A line shown as it is.
    pub(crate) fn line(text: impl Into<String>) -> Entry {
        Entry::Line(text.into())
    }

    /// A block of entries under `title`, fields not aligned.
    pub(crate) fn block(title: impl Into<String>, entries: Vec<Entry>) -> Entry {
        Entry::Block {
            title: title.into(),
            align: None,
            entries,
        }
    }

    /// A block whose fields' values start `width` characters in (see
    /// [`Entry::Block`]).
    pub(crate) fn aligned(title: impl Into<String>, width: usize, entries: Vec<Entry>) -> Entry {
        Entry::Block {
            title: title.into(),
            align: Some(width),
            entries,
        }
    }
}

impl Summary {
    /// Appends an entry.
    pub(crate) fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render(f, &self.entries, 0, self.align)
    }
}

/// Writes `entries` at `depth` levels of indent; `align` as in [`Entry::Block`].
fn render(
    f: &mut fmt::Formatter<'_>,
    entries: &[Entry],
    depth: usize,
    align: Option<usize>,
) -> fmt::Result {
    let indent = "  ".repeat(depth);
    for entry in entries {
        match entry {
            Entry::Field { key, value } => {
                let key = format!("{key}:");
                let w = align.unwrap_or(0).max(key.chars().count() + 1);
                writeln!(f, "{indent}{key:<w$}{value}")?
            }
            Entry::Indented(entries) => render(f, entries, depth + 1, None)?,
            Entry::Line(text) => writeln!(f, "{indent}{text}")?,
            Entry::Block {
                title,
                align,
                entries,
            } => {
                writeln!(f, "{indent}{title}")?;
                render(f, entries, depth + 1, *align)?;
            }
            Entry::Table {
                header,
                widths,
                rows,
            } => {
                for row in std::iter::once(header).chain(rows) {
                    table_row(f, &indent, widths, row)?;
                }
            }
        }
    }
    Ok(())
}

/// One table row: cells right-aligned, two spaces apart.
fn table_row(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    widths: &[usize],
    row: &[String],
) -> fmt::Result {
    write!(f, "{indent}")?;
    for (i, cell) in row.iter().enumerate() {
        let w = widths.get(i).copied().unwrap_or(0);
        let sep = if i == 0 { "" } else { "  " };
        write!(f, "{sep}{cell:>w$}")?;
    }
    writeln!(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nested_blocks_aligned_fields_and_tables() {
        let summary = Summary {
            align: None,
            entries: vec![Entry::aligned(
                "in.gmon:",
                15,
                vec![
                    Entry::field("format", "gprof"),
                    Entry::field("pointer size", "8 bytes"),
                    Entry::block(
                        "bins:",
                        vec![
                            Entry::field("allocated", 3),
                            Entry::Table {
                                header: vec!["size".into(), "count".into()],
                                widths: vec![6, 5],
                                rows: vec![vec!["16".into(), "120000".into()]],
                            },
                        ],
                    ),
                ],
            )],
        };
        let expected = "in.gmon:\n  format:        gprof\n  pointer size:  8 bytes\n  bins:\n    allocated: 3\n      size  count\n        16  120000\n";
        assert_eq!(summary.to_string(), expected);
    }
}
