//! The C++ demangler against its reference, binutils' `c++filt`: the
//! committed names (`tests/fixtures/demangle/`, see its README) must print
//! exactly as `c++filt` printed them, with its default (verbose) flags and
//! with `-i` (the flags gprof and `nm -C` use, which profconv's names
//! follow); where `c++filt` is installed it is run again, on those names and
//! on every C++ symbol of the system's libstdc++; `nm -C` on the corpus's
//! C++ programs names every symbol as profconv does; and no input, random,
//! mutated or cut short, may panic.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use object::{Object, ObjectSymbol};
use profconv::symbolize::{demangle_cpp, demangle_cpp_verbose};

const NAMES: &str = "tests/fixtures/demangle/names.txt";
const LIBSTDCXX: &str = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";

/// The two ways binutils demangles: `c++filt`'s default, and gprof's.
#[derive(Clone, Copy, Debug)]
enum Flags {
    /// `c++filt` (`DMGL_VERBOSE`): `Ss` spelled out in full.
    Verbose,
    /// `c++filt -i`, gprof, `nm -C`: `Ss` as `std::string`.
    Gprof,
}

impl Flags {
    const BOTH: [Flags; 2] = [Flags::Verbose, Flags::Gprof];

    fn expected(self) -> &'static str {
        match self {
            Flags::Verbose => "tests/fixtures/demangle/names.cxxfilt.txt",
            Flags::Gprof => "tests/fixtures/demangle/names.cxxfilt-i.txt",
        }
    }

    fn cxxfilt_args(self) -> &'static [&'static str] {
        match self {
            Flags::Verbose => &[],
            Flags::Gprof => &["-i"],
        }
    }

    /// What profconv prints for `name`: the demangled name, or the name
    /// itself (as `c++filt` echoes what it cannot demangle).
    fn ours(self, name: &str) -> String {
        let demangled = match self {
            Flags::Verbose => demangle_cpp_verbose(name),
            Flags::Gprof => demangle_cpp(name),
        };
        demangled.unwrap_or_else(|| name.to_owned())
    }
}

fn lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `c++filt`'s output for `names` with `flags`, one line each, from one
/// run; `None` when it is not installed (an error under `CI=true`, where
/// it must be).
fn cxxfilt(names: &[String], flags: Flags) -> Option<Vec<String>> {
    let child = Command::new("c++filt")
        .args(flags.cxxfilt_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "c++filt (binutils) is needed under CI=true: {e}"
            );
            crate::skip_note!("c++filt is not installed ({e}); install binutils to compare");
            return None;
        }
    };
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = names.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("c++filt runs");
    writer
        .join()
        .expect("writer thread")
        .expect("c++filt reads");
    assert!(out.status.success(), "c++filt failed: {:?}", out.status);
    let text = String::from_utf8(out.stdout).expect("c++filt prints UTF-8");
    Some(text.lines().map(str::to_owned).collect())
}

/// The lines where ours differs from `expected`, at most 20, for a message.
fn differences(names: &[String], expected: &[String], flags: Flags) -> Vec<String> {
    assert_eq!(names.len(), expected.len(), "one output line per name");
    names
        .iter()
        .zip(expected)
        .filter(|(n, e)| flags.ours(n) != **e)
        .take(20)
        .map(|(n, e)| format!("{n}\n  c++filt ({flags:?}): {e}\n  ours: {}", flags.ours(n)))
        .collect()
}

#[test]
fn every_committed_name_demangles_as_cxxfilt_printed_it_with_both_flags() {
    let names = lines(NAMES);
    for flags in Flags::BOTH {
        let expected = lines(flags.expected());
        let diffs = differences(&names, &expected, flags);
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    }
    println!("{} names as c++filt and c++filt -i print them", names.len());
}

#[test]
fn committed_output_is_what_cxxfilt_prints_now() {
    let names = lines(NAMES);
    for flags in Flags::BOTH {
        let Some(now) = cxxfilt(&names, flags) else {
            return;
        };
        let expected = lines(flags.expected());
        let changed: Vec<_> = names
            .iter()
            .zip(now.iter().zip(&expected))
            .filter(|(_, (n, e))| n != e)
            .take(20)
            .map(|(m, (n, e))| format!("{m}\n  committed: {e}\n  c++filt:   {n}"))
            .collect();
        assert_eq!(
            now.len(),
            expected.len(),
            "c++filt printed one line per name"
        );
        assert!(
            changed.is_empty(),
            "this c++filt ({flags:?}) prints otherwise; regenerate (see the fixture README):\n{}",
            changed.join("\n")
        );
    }
}

/// The C++ symbols (`_Z...`) `path` defines or uses.
fn cpp_symbols(path: &Path) -> Vec<String> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*data).expect("an object file");
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .chain(file.symbols())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| n.starts_with("_Z"))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn libstdcxx_symbols_demangle_as_cxxfilt_does_with_both_flags() {
    let path = Path::new(LIBSTDCXX);
    if !path.exists() {
        crate::skip_note!("{LIBSTDCXX} is not on this machine");
        return;
    }
    let names = cpp_symbols(path);
    for flags in Flags::BOTH {
        let Some(expected) = cxxfilt(&names, flags) else {
            return;
        };
        let diffs = differences(&names, &expected, flags);
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    }
    println!(
        "{} libstdc++ symbols compared with c++filt and c++filt -i, all equal",
        names.len()
    );
}

/// `nm -p` (symbol table order) of `binary`, with `-C` when `demangled`:
/// the name column of each defined symbol.
fn nm(binary: &Path, demangled: bool) -> Option<Vec<String>> {
    let mut cmd = Command::new("nm");
    cmd.args(["-p", "--defined-only"]);
    if demangled {
        cmd.arg("-C");
    }
    let out = cmd.arg(binary).output().ok()?;
    assert!(out.status.success(), "nm {}: {:?}", binary.display(), out);
    let text = String::from_utf8(out.stdout).expect("nm prints UTF-8");
    // `ADDRESS TYPE NAME`; the name may hold spaces.
    Some(
        text.lines()
            .filter_map(|l| l.splitn(3, ' ').nth(2).map(str::to_owned))
            .collect(),
    )
}

#[test]
fn every_symbol_of_the_corpus_cpp_programs_is_named_as_nm_dash_c_names_it() {
    let mut compared = 0;
    let mut differ = Vec::new();
    for name in ["templates-o0", "templates-o2"] {
        let binary = Path::new("tests/fixtures/gprof-corpus").join(name);
        let (Some(raw), Some(demangled)) = (nm(&binary, false), nm(&binary, true)) else {
            assert!(!common::in_ci(), "nm (binutils) is needed under CI=true");
            crate::skip_note!("nm is not installed; install binutils to compare");
            return;
        };
        assert_eq!(raw.len(), demangled.len(), "{name}: one line per symbol");
        for (r, want) in raw.iter().zip(&demangled) {
            compared += 1;
            let ours = profconv::symbolize::demangle(r);
            if &ours != want {
                differ.push(format!("{r}\n  nm -C:    {want}\n  profconv: {ours}"));
            }
        }
    }
    assert!(compared >= 1000, "{compared} symbols");
    assert!(
        differ.is_empty(),
        "{} of {compared} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    println!("{compared} corpus symbols named as nm -C names them");
}

/// xorshift64*, so the robustness inputs are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_mutated_and_truncated_names_never_panic() {
    let names = lines(NAMES);
    let alphabet = b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.$";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for name in names.iter().take(800) {
        for cut in 0..=name.len() {
            let _ = demangle_cpp_verbose(name.get(..cut).unwrap_or(name));
        }
    }
    for _ in 0..60_000 {
        let mut bytes = names[rng.below(names.len())].as_bytes().to_vec();
        for _ in 0..=rng.below(3) {
            let at = rng.below(bytes.len() + 1);
            let c = alphabet[rng.below(alphabet.len())];
            match rng.below(3) {
                0 => bytes.insert(at, c),
                1 if at < bytes.len() => bytes[at] = c,
                _ => bytes.truncate(at.max(2)),
            }
        }
        let _ = demangle_cpp(&String::from_utf8_lossy(&bytes));
    }
    for _ in 0..20_000 {
        let len = rng.below(64);
        let body: String = (0..len)
            .map(|_| char::from(alphabet[rng.below(alphabet.len())]))
            .collect();
        let _ = demangle_cpp(&format!("_Z{body}"));
    }
}

#[test]
fn deeply_nested_and_self_referencing_names_return() {
    let pointers = format!("_Z1f{}i", "P".repeat(1000));
    let templates = format!("_Z1f{}iE", "I1A".repeat(300));
    let subs: String = (0..200).map(|i| format!("PS{i}_")).collect();
    let functions = format!("_Z1f{}vE", "PF".repeat(300));
    for name in [pointers, templates, format!("_Z1fPi{subs}"), functions] {
        let _ = demangle_cpp(&name);
    }
    assert_eq!(demangle_cpp("_Z1fS_"), None, "a substitution before any");
    assert_eq!(demangle_cpp("not mangled"), None);
}
