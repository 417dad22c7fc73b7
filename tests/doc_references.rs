//! The code cites sections of the format notes as `§N.M`: a reader's
//! folder cites its own format's note (`src/read/aps/` → docs/formats/aps.md),
//! other code names the note (`docs/formats/dcpi.md §6.7`). Every cited
//! section must be a heading of that note.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The section numbers of a note's headings (`## 3.` / `### 3.1 …`).
fn sections(note: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(note).unwrap();
    text.lines()
        .filter_map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| l.starts_with('#'))
        })
        .filter_map(|title| {
            let number: String = title
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.');
            (!number.is_empty()).then(|| number.to_owned())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(note, section)` for each `§` in `text`; the note is the one named just
/// before the sign, else `default`. References to outside standards (the
/// DWARF standard, the Itanium C++ ABI) are skipped.
fn references(text: &str, default: Option<&str>) -> Vec<(Option<String>, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices('§') {
        let number: String = text[at + '§'.len_utf8()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let number = number.trim_end_matches('.').to_owned();
        let mut start = at.saturating_sub(40);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let before = &text[start..at];
        if before.contains("DWARF") || before.contains("Itanium") {
            continue;
        }
        let named = before
            .rsplit_once("docs/formats/")
            .and_then(|(_, rest)| rest.split_once(".md"))
            .map(|(name, _)| name.to_owned());
        found.push((named.or(default.map(str::to_owned)), number));
    }
    found
}

#[test]
fn every_cited_section_of_a_format_note_exists() {
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("src"), &mut files);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let relative = file
            .strip_prefix(ROOT)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let folder = relative
            .strip_prefix("src/read/")
            .and_then(|r| r.split_once('/'))
            .map(|(format, _)| format);
        for (note, section) in references(&text, folder) {
            let Some(note) = note else {
                wrong.push(format!("{relative}: §{section} names no format note"));
                continue;
            };
            let path = Path::new(ROOT)
                .join("docs/formats")
                .join(format!("{note}.md"));
            if !path.is_file() || !sections(&path).contains(&section) {
                wrong.push(format!(
                    "{relative}: §{section} is not a section of {note}.md"
                ));
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        checked > 50,
        "only {checked} references found: is the scan broken?"
    );
}

#[test]
fn the_scan_sees_a_missing_section() {
    let refs = references(
        "see docs/formats/aps.md §99.1, §3 and DWARF 5 §7.5.3",
        Some("x"),
    );
    assert_eq!(
        refs,
        vec![
            (Some("aps".to_owned()), "99.1".to_owned()),
            (Some("aps".to_owned()), "3".to_owned()),
        ]
    );
    let aps = sections(&Path::new(ROOT).join("docs/formats/aps.md"));
    assert!(aps.contains("3.1") && aps.contains("10") && !aps.contains("99.1"));
}
