//! Frame names made safe for each output's syntax (docs/formats/outputs.md):
//! names come from the inputs (an mpatrol string table, an APS module
//! path, an ELF symbol) and may hold any character, while XML 1.0 forbids
//! most control characters and the folded and callgrind formats are
//! line-based. Each writer passes every name through the step of its
//! syntax; a character that cannot stand is written as a visible escape
//! (`\x1b`, `\u{fffe}`), so the name stays readable and distinct. Text
//! for a terminal (messages, `profconv info`) takes the same escapes.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `name` as XML character data (SVG `<title>` and `<text>`): the
/// characters XML 1.0 forbids (C0 controls other than tab, newline and
/// carriage return; U+FFFE, U+FFFF) escaped. The markup characters
/// (`<&>"'`) are left to the XML writer.
pub(crate) fn xml_text(name: &str) -> Cow<'_, str> {
    escape(
        name,
        |c| matches!(c, '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'),
    )
}

/// `name` as one frame of a folded line (`root;…;leaf COUNT`): the frame
/// separator `;` becomes `:`, and line breaks and other control characters
/// are escaped, so a name never splits a frame or a line. Also safe as XML
/// character data, since folded lines are what the flamegraph is drawn from.
pub(crate) fn folded_frame(name: &str) -> Cow<'_, str> {
    let escaped = escape(name, |c| {
        c.is_control() || matches!(c, '\u{fffe}' | '\u{ffff}')
    });
    if escaped.contains(';') {
        Cow::Owned(escaped.replace(';', ":"))
    } else {
        escaped
    }
}

/// Makes a folded line's stack (frames of [`folded_frame`]) end in a name,
/// never in what reads as a count: when the leaf ends in a space and a
/// number (`worker 12`), that space becomes a no-break space (U+00A0).
/// inferno and flamegraph.pl take a line's last two numbers after ASCII
/// spaces as a differential profile's counts, so the number would leave
/// the name and become a count. inferno trims the whitespace that then
/// ends the line before it looks for the second number, so a leaf that
/// ends in whitespace (`worker 12 `) is looked at without it.
pub(crate) fn end_folded_stack(stack: &mut String) {
    let leaf = stack.rfind(';').map_or(0, |i| i + 1);
    let end = stack.trim_end().len().max(leaf);
    if let Some(space) = stack[leaf..end].rfind(' ').map(|i| leaf + i) {
        if reads_as_count(&stack[space + 1..end]) {
            stack.replace_range(space..space + 1, "\u{a0}");
        }
    }
}

/// Whether inferno reads `text` (what follows a line's last space) as a
/// count: digits, with at most one `.` among them.
fn reads_as_count(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|&b| b == b'.').count() <= 1
}

/// `name` on a callgrind `fn=`/`fl=`/`ob=` line: line breaks and other
/// control characters escaped (the format is line-based).
pub(crate) fn callgrind_name(name: &str) -> Cow<'_, str> {
    escape(name, |c| c.is_control())
}

/// `text` as shown on a terminal: every control character (C0, DEL, C1)
/// but the line break written as a visible escape (`\x1b`, `\u{9b}`), so
/// that a file or module name cannot move the cursor, recolour or retitle
/// the terminal. Line breaks stay: they are the lines of a message.
pub fn terminal_text(text: &str) -> Cow<'_, str> {
    escape(text, |c| c.is_control() && c != '\n')
}

/// `name` with every character `bad` picks written as `\xNN` (below
/// U+0080) or `\u{NNNN}`.
fn escape(name: &str, bad: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !name.chars().any(&bad) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if !bad(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every C0 control, DEL, the two non-characters and a few ordinary
    /// characters, in one name.
    fn hostile() -> String {
        let mut s: String = (0u8..0x20).map(char::from).collect();
        s.push('\u{7f}');
        s.push_str("a;b <&> \u{fffe}\u{ffff}é");
        s
    }

    /// XML 1.0's `Char` production.
    fn xml_char(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
    }

    #[test]
    fn xml_text_holds_only_characters_xml_allows() {
        let name = hostile();
        let out = xml_text(&name);
        assert!(out.chars().all(xml_char), "{out:?}");
        assert!(out.contains("\\x1b") && out.contains("\\u{fffe}") && out.contains('é'));
        assert_eq!(xml_text("plain <name>"), "plain <name>");
    }

    #[test]
    fn folded_frames_hold_no_separator_and_no_line_break() {
        let name = hostile();
        let out = folded_frame(&name);
        assert!(!out.contains(';') && !out.contains('\n') && !out.contains('\r'));
        assert!(out.chars().all(xml_char), "{out:?}");
        assert!(out.contains("a:b <&>"));
        assert!(matches!(folded_frame("main"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_folded_stack_never_ends_in_what_inferno_reads_as_a_count() {
        for (stack, want) in [
            ("pid 7;worker 12", "pid 7;worker\u{a0}12"),
            ("f 1.5", "f\u{a0}1.5"),
            ("a 1 2", "a 1\u{a0}2"),
            (
                "pid 7;operator new(unsigned long)",
                "pid 7;operator new(unsigned long)",
            ),
            ("v 1.2.3", "v 1.2.3"),
            ("pid 7;12", "pid 7;12"),
            // inferno trims the line before the second count.
            ("f 7886392057103692812 ", "f\u{a0}7886392057103692812 "),
            ("f 12\u{2003}\u{a0}", "f\u{a0}12\u{2003}\u{a0}"),
            ("x 5; ", "x 5; "),
            ("5 ", "5 "),
        ] {
            let mut line = stack.to_owned();
            end_folded_stack(&mut line);
            assert_eq!(line, want);
        }
    }

    #[test]
    fn callgrind_names_hold_no_line_break() {
        let name = hostile();
        let out = callgrind_name(&name);
        assert!(!out.chars().any(char::is_control), "{out:?}");
        assert!(out.contains("a;b"), "callgrind keeps the semicolon");
    }

    #[test]
    fn terminal_text_keeps_line_breaks_and_escapes_every_other_control() {
        let name = format!("{}\u{9b}31m", hostile());
        let out = terminal_text(&name);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(out.contains("\\x1b") && out.contains("\\x7f") && out.contains("\\u{9b}31m"));
        assert_eq!(out.matches('\n').count(), 1);
        assert!(matches!(terminal_text("plain\nlines"), Cow::Borrowed(_)));
    }

    #[test]
    fn distinct_hostile_names_stay_distinct() {
        assert_ne!(xml_text("a\u{1}"), xml_text("a\u{2}"));
        assert_ne!(folded_frame("a\n"), folded_frame("a\r"));
    }
}
