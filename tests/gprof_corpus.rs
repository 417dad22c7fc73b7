//! The corpus of real gmon.out files (tests/fixtures/gprof-corpus, made by
//! its regenerate.sh with real toolchains: several optimization levels, C
//! and C++, static and PIE, 32-bit, big-endian ARM/PowerPC/MIPS under
//! qemu-user, MinGW under wine) converted and compared with what GNU gprof
//! printed for the same files, every function: self time within half of
//! gprof's printed hundredth, calls exactly.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::gprof_program::{build_and_run, Shape};
use common::gprof_report::*;
use common::*;

/// One line of cases.tsv.
#[derive(Debug, Clone)]
struct CorpusCase {
    name: String,
    binary: String,
    gmon: String,
    gprof: String,
}

fn corpus_dir() -> PathBuf {
    fixture("gprof-corpus")
}

fn cases() -> Vec<CorpusCase> {
    let text = std::fs::read_to_string(corpus_dir().join("cases.tsv")).unwrap();
    let cases: Vec<CorpusCase> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            CorpusCase {
                name: f[0].into(),
                binary: f[1].into(),
                gmon: f[2].into(),
                gprof: f[3].into(),
            }
        })
        .collect();
    assert!(cases.len() >= 10, "the corpus lists its cases");
    cases
}

fn report(case: &CorpusCase, kind: &str) -> String {
    let path = corpus_dir().join(format!("{}.{kind}.txt", case.name));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// profconv's pprof of one case.
fn convert(case: &CorpusCase, dir: &Path) -> pb::Profile {
    let out = dir.join(format!("{}.pb.gz", case.name));
    let (gmon, binary) = (
        corpus_dir().join(&case.gmon),
        corpus_dir().join(&case.binary),
    );
    profconv_ok(&[
        gmon.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    decode_pprof(&out)
}

/// The differences between profconv's profile of `case` and gprof's
/// reports of it, one line each.
fn differences(case: &CorpusCase, p: &pb::Profile) -> Vec<String> {
    differences_from(&case.name, p, &report(case, "flat"), &report(case, "graph"))
}

/// The differences between a profile and gprof's flat profile and call
/// graph, one line each, headed `name`.
fn differences_from(case: &str, p: &pb::Profile, flat: &str, graph: &str) -> Vec<String> {
    let (flat, called) = (parse_flat(flat), parse_called(graph));
    let (flat, called) = as_read_from_slots(p, flat, called);
    let (self_s, calls) = flat_from_pprof(p);
    let mut out = Vec::new();
    let mut diff = |function: &str, what: &str, ours: String, gprof: String| {
        out.push(format!(
            "{case:<16} {function:<40} {what:<6} {ours:>14} {gprof:>14}"
        ))
    };
    assert!(!flat.is_empty(), "{case}: gprof's flat profile is empty");
    for (name, row) in &flat {
        let ours = self_s.get(name).copied().unwrap_or(0.0);
        // gprof prints hundredths: agreement is within half of one.
        if (ours - row.self_seconds).abs() > 0.005 + 1e-9 {
            let (o, g) = (format!("{ours:.4}"), format!("{:.2}", row.self_seconds));
            diff(name, "self", o, g);
        }
        let ours = calls.get(name).copied();
        if ours != row.calls {
            diff(
                name,
                "calls",
                format!("{ours:?}"),
                format!("{:?}", row.calls),
            );
        }
    }
    for (name, (others, _own)) in &called {
        let ours = calls.get(name).copied().unwrap_or(0);
        if ours != *others {
            diff(name, "called", ours.to_string(), others.to_string());
        }
    }
    // What gprof leaves out of its profile carries no time in ours, but
    // for the frames of time gprof credits to no function.
    for (name, secs) in &self_s {
        if !flat.contains_key(name) && !name.starts_with('[') && *secs >= 0.005 {
            diff(name, "self", format!("{secs:.4}"), "(absent)".into());
        }
    }
    out
}

/// gprof's counts as profconv reads them: where the profile says each
/// count is the 4-byte `long` of an 8-byte slot (64-bit MinGW-w64, whose
/// padding gprof reads and prints: 8589935592 calls for 1000), the low 32
/// bits of gprof's, the program's count (a sum of padded counts keeps the
/// sum of the counts there); gprof's own otherwise.
fn as_read_from_slots(
    p: &pb::Profile,
    mut flat: BTreeMap<String, FlatRow>,
    mut called: BTreeMap<String, (u64, u64)>,
) -> (BTreeMap<String, FlatRow>, BTreeMap<String, (u64, u64)>) {
    let slots = p
        .comment
        .iter()
        .any(|&c| p.string_table[c as usize].contains("of its 8-byte slot"));
    if slots {
        let low = |n: u64| n & 0xffff_ffff;
        for row in flat.values_mut() {
            row.calls = row.calls.map(low);
        }
        for (others, own) in called.values_mut() {
            (*others, *own) = (low(*others), low(*own));
        }
    }
    (flat, called)
}

#[test]
fn every_function_of_every_real_file_agrees_with_gprof() {
    let dir = tempdir();
    let mut table = Vec::new();
    let mut functions = 0;
    for case in cases() {
        let p = convert(&case, dir.path());
        check_pprof_invariants(&p);
        functions += parse_flat(&report(&case, "flat")).len();
        table.extend(differences(&case, &p));
    }
    assert_no_differences(&table, functions);
}

/// The rows of `go tool pprof -top` (its default view: no `-noinlines`)
/// that differ from gprof's flat profile of `case`: self time to half a
/// tick, calls (`-sample_index=calls`, which leaves out a function's calls
/// of itself as gprof's flat profile does) exactly, the name character for
/// character.
fn top_differences(case: &CorpusCase, pprof: &Path) -> Option<Vec<String>> {
    let path = pprof.to_str().unwrap();
    let top = pprof_top(&[
        "-top",
        "-nodecount=1000000",
        "-nodefraction=0",
        "-unit=ms",
        path,
    ])?;
    let calls = pprof_top(&[
        "-top",
        "-nodecount=1000000",
        "-nodefraction=0",
        "-sample_index=calls",
        path,
    ])?;
    let flat = parse_flat(&report(case, "flat"));
    let called = parse_called(&report(case, "graph"));
    let p = decode_pprof(pprof);
    let (flat, _) = as_read_from_slots(&p, flat, called);
    let mut out = Vec::new();
    let mut diff = |function: &str, what: &str, ours: String, gprof: String| {
        let name = &case.name;
        out.push(format!(
            "{name:<16} {function:<40} {what:<6} {ours:>14} {gprof:>14}"
        ))
    };
    for (name, row) in &flat {
        let ms = top.get(name).copied().unwrap_or(0.0);
        if (ms / 1000.0 - row.self_seconds).abs() > 0.005 + 1e-9 {
            diff(
                name,
                "self",
                format!("{ms}ms"),
                format!("{:.2}", row.self_seconds),
            );
        }
        let ours = calls.get(name).map(|&c| c as u64).filter(|&c| c > 0);
        if row.calls.is_some() && ours != row.calls {
            diff(
                name,
                "calls",
                format!("{ours:?}"),
                format!("{:?}", row.calls),
            );
        }
    }
    for (name, ms) in &top {
        if !flat.contains_key(name) && !name.starts_with('[') && *ms >= 5.0 {
            diff(name, "self", format!("{ms}ms"), "(absent)".into());
        }
    }
    Some(out)
}

#[test]
fn go_tool_pprof_top_shows_gprofs_flat_profile_by_default() {
    let dir = tempdir();
    let mut table = Vec::new();
    let mut functions = 0;
    for case in cases() {
        convert(&case, dir.path());
        let pprof = dir.path().join(format!("{}.pb.gz", case.name));
        let Some(diffs) = top_differences(&case, &pprof) else {
            return; // go is not installed: go_pprof said so
        };
        functions += parse_flat(&report(&case, "flat")).len();
        table.extend(diffs);
    }
    assert_no_differences(&table, functions);
    println!("{functions} functions: go tool pprof -top rows equal gprof's flat rows");
}

/// Fails with a table of the differences, if any.
fn assert_no_differences(table: &[String], functions: usize) {
    let mut shown = String::new();
    for line in table {
        writeln!(shown, "{line}").unwrap();
    }
    assert!(
        table.is_empty(),
        "{} differences from gprof (of {functions} functions):\n{:<16} {:<40} {:<6} {:>14} {:>14}\n{shown}",
        table.len(),
        "case",
        "function",
        "what",
        "profconv",
        "gprof"
    );
}

#[test]
fn the_profile_total_is_the_files_ticks_whatever_gprof_credits() {
    let dir = tempdir();
    for case in cases() {
        let p = convert(&case, dir.path());
        let samples = type_index(&p, "samples");
        let cpu = type_index(&p, "cpu");
        let ticks: i64 = p.sample.iter().map(|s| s.value[samples]).sum();
        let nanos: i64 = p.sample.iter().map(|s| s.value[cpu]).sum();
        let period = p.period;
        // Every bin's count is kept in whole ticks, and its time is within
        // rounding of the ticks' (gprof's arithmetic may credit a little
        // more than a bin holds, never less once [uncredited by gprof] is
        // counted).
        assert!(ticks > 0, "{}: ticks", case.name);
        let expected = ticks * period;
        assert!(
            nanos >= expected - period && nanos <= expected + expected / 50,
            "{}: {nanos} ns for {ticks} ticks of {period} ns",
            case.name
        );
    }
}

/// Whether `tool` runs here.
fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_committed_reports_are_what_gprof_prints_for_the_committed_files() {
    let mut missing = Vec::new();
    for case in cases() {
        if !have(&case.gprof) {
            missing.push(case.gprof.clone());
            continue;
        }
        for (kind, flag) in [("flat", "-p"), ("graph", "-q")] {
            let out = Command::new(&case.gprof)
                .args(["-b", flag, &case.binary, &case.gmon])
                .current_dir(corpus_dir())
                .env("LC_ALL", "C")
                .output()
                .unwrap();
            assert!(out.status.success(), "{} {}", case.gprof, case.name);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                report(&case, kind),
                "{}: {} -b {flag} prints something else than {}.{kind}.txt",
                case.name,
                case.gprof,
                case.name
            );
        }
    }
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        let msg = format!(
            "reports not re-checked: {} not installed",
            missing.join(", ")
        );
        assert!(!in_ci(), "{msg}");
        crate::skip_note!("{msg}");
    }
}

/// Runs profconv, expecting it to fail; its standard error.
fn refused(args: &[&str]) -> String {
    let out = profconv(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should be refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_binary_that_did_not_write_the_profile_is_refused_with_the_reason() {
    let dir = tempdir();
    let d = corpus_dir();
    let out = dir.path().join("x.pb.gz");
    let cases = cases();
    let by_name: BTreeMap<&str, &CorpusCase> = cases.iter().map(|c| (c.name.as_str(), c)).collect();
    // Other builds of one program, and another program.
    for (gmon_of, binary_of) in [
        ("clones-o2", "clones-o3"),
        ("clones-o3", "clones-o2"),
        ("hashtab-static", "clones-o2"),
    ] {
        let (g, b) = (by_name[gmon_of], by_name[binary_of]);
        let gmon = d.join(&g.gmon);
        let binary = d.join(&b.binary);
        let args = pair_args(&gmon, &binary, &out);
        let err = refused(&args);
        assert!(
            err.contains("does not fit") && err.contains(&g.gmon),
            "{gmon_of} with {binary_of}: {err}"
        );
        assert!(!out.exists(), "nothing written");
        // Converted anyway on request.
        let mut forced = args.to_vec();
        forced.push("--skip-binary-check");
        profconv_ok(&forced);
        assert!(out.exists());
        std::fs::remove_file(&out).unwrap();
    }
    // A big-endian profile with a little-endian executable, and a 32-bit
    // program's with a 64-bit executable.
    for (gmon_of, binary_of, says) in [
        (
            "bigend-ppc",
            "asm-i686",
            "the profile is big-endian, the executable little-endian",
        ),
        (
            "bigend-ppc",
            "clones-o2",
            "64-bit program, but the profile has 4-byte addresses",
        ),
    ] {
        let gmon = d.join(&by_name[gmon_of].gmon);
        let binary = d.join(&by_name[binary_of].binary);
        let err = refused(&pair_args(&gmon, &binary, &out));
        assert!(err.contains(says), "{gmon_of} with {binary_of}: {err}");
    }
}

/// The arguments converting `gmon` with `binary` to `out`.
fn pair_args<'a>(gmon: &'a Path, binary: &'a Path, out: &'a Path) -> [&'a str; 5] {
    [
        gmon.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]
}

/// Every corpus profile with every other program's executable (other
/// builds of one program, other compilers, other architectures, PE for
/// ELF) is refused; each with its own converts.
#[test]
fn every_corpus_profile_is_refused_with_every_other_executable() {
    let dir = tempdir();
    let d = corpus_dir();
    let out = dir.path().join("x.pb.gz");
    let cases = cases();
    let mut binaries: Vec<&str> = cases.iter().map(|c| c.binary.as_str()).collect();
    binaries.sort();
    binaries.dedup();
    let (mut refusals, mut accepted) = (0, Vec::new());
    for case in &cases {
        let gmon = d.join(&case.gmon);
        for binary in binaries.iter().filter(|&&b| b != case.binary) {
            let run = profconv(&pair_args(&gmon, &d.join(binary), &out));
            if run.status.success() {
                accepted.push(format!("{} with {binary}", case.gmon));
            } else {
                let err = String::from_utf8_lossy(&run.stderr);
                assert!(err.contains(binary), "names the executable: {err}");
                refusals += 1;
            }
        }
    }
    println!(
        "{refusals} wrong pairs refused, {} accepted",
        accepted.len()
    );
    assert!(accepted.is_empty(), "wrong pairs accepted: {accepted:?}");
    assert!(refusals >= 300, "{refusals} pairs");
}

/// A small program of the measurement below: `main` spins, then calls
/// `calls` of `helpers` functions, each spinning its own loop (`variant`
/// changes the loops' bodies, so no two programs' code is the same).
fn small_program(helpers: usize, calls: &[(usize, usize)], variant: usize) -> String {
    let mut c = String::from("volatile unsigned long sink;\n");
    for h in 0..helpers {
        c.push_str(&format!(
            "__attribute__((noinline)) void h{h}(void) {{ for (unsigned long k = 0; k < 3000000UL; k++) sink += k * {}; }}\n",
            h + 3 + variant
        ));
    }
    c.push_str("int main(void) {\n");
    c.push_str(&format!(
        "    for (unsigned long k = 0; k < 20000000UL; k++) sink ^= k + {variant};\n"
    ));
    for &(h, times) in calls {
        c.push_str(&format!("    for (int i = 0; i < {times}; i++) h{h}();\n"));
    }
    c.push_str("    return 0;\n}\n");
    c
}

/// A small program: its helpers, the calls of them `main` makes (helper,
/// times), its variant (see [`small_program`]), and whether it is PIE.
type SmallProgram = (usize, &'static [(usize, usize)], usize, bool);

/// For generated pairs of similar programs (one compiler, one template,
/// PIE and not; no arcs, one, a few), every profile with every other
/// program's executable is refused or converts exactly as with its own
/// (when the two lay out everything the gmon.out holds alike, nothing in it
/// tells them apart), and with its own accepted; a stripped copy of its own
/// executable is refused too.
#[test]
fn every_generated_profile_fits_its_own_executable_only() {
    let programs: &[SmallProgram] = &[
        (0, &[], 0, true),
        (0, &[], 1, true),
        (1, &[], 0, true),
        (1, &[(0, 1)], 0, true),
        (1, &[(0, 2)], 1, true),
        (2, &[(0, 1), (1, 3)], 0, true),
        (2, &[(1, 1)], 2, true),
        (0, &[], 0, false),
        (1, &[(0, 1)], 0, false),
        (2, &[(0, 1), (1, 3)], 0, false),
    ];
    let dir = tempdir();
    let mut built = Vec::new();
    for (i, &(helpers, calls, variant, pie)) in programs.iter().enumerate() {
        let at = dir.path().join(format!("p{i}"));
        std::fs::create_dir(&at).unwrap();
        std::fs::write(at.join("p.c"), small_program(helpers, calls, variant)).unwrap();
        let pic: &[&str] = if pie {
            &["-fPIE", "-pie"]
        } else {
            &["-fno-pie", "-no-pie"]
        };
        let status = Command::new("gcc")
            .args(["-O1", "-pg", "-o", "p", "p.c"])
            .args(pic)
            .current_dir(&at)
            .status();
        let Ok(status) = status else {
            assert!(!in_ci(), "gcc is needed");
            crate::skip_note!("gcc not available");
            return;
        };
        assert!(status.success(), "gcc p{i}");
        let run = Command::new(at.join("p"))
            .current_dir(&at)
            .status()
            .unwrap();
        assert!(run.success() && at.join("gmon.out").is_file(), "p{i} ran");
        built.push(at);
    }
    let out = dir.path().join("x.pb.gz");
    let folded = |gmon: &Path, exe: &Path, name: &str| -> Option<String> {
        let out = dir.path().join(name);
        let ok = profconv(&pair_args(gmon, exe, &out)).status.success();
        ok.then(|| std::fs::read_to_string(&out).unwrap())
    };
    let (mut refusals, mut same_output, mut accepted, mut wrong) = (0, 0, 0, Vec::new());
    for (i, gmon_dir) in built.iter().enumerate() {
        let gmon = gmon_dir.join("gmon.out");
        let own = folded(&gmon, &gmon_dir.join("p"), "own.folded");
        accepted += usize::from(own.is_some());
        for (j, exe_dir) in built.iter().enumerate().filter(|&(j, _)| j != i) {
            match folded(&gmon, &exe_dir.join("p"), "other.folded") {
                None => refusals += 1,
                // The executables lay the profile's addresses out alike (one
                // text extent, the functions the ticks and arcs hit at the
                // same addresses): the gmon.out cannot tell them apart, and
                // the conversion is the right one.
                Some(other) if Some(&other) == own.as_ref() => same_output += 1,
                Some(_) => wrong.push(format!("p{i}'s profile with p{j}")),
            }
        }
    }
    let n = built.len();
    println!(
        "{n} programs: {refusals} of {} wrong pairs refused, {same_output} converted alike with either executable, {} converted wrongly; {accepted} of {n} right pairs accepted",
        n * (n - 1),
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "converted with the wrong executable: {wrong:?}"
    );
    assert_eq!(
        accepted, n,
        "every profile converts with its own executable"
    );
    assert!(refusals * 10 >= n * (n - 1) * 9, "{refusals} refused");
    // A stripped copy of its own executable: gprof says "has no symbols".
    let stripped = dir.path().join("p3-stripped");
    let strip = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(built[3].join("p"))
        .status();
    if strip.is_ok_and(|s| s.success()) {
        let err = refused(&pair_args(&built[3].join("gmon.out"), &stripped, &out));
        assert!(err.contains("has no symbols"), "{err}");
    }
}

#[test]
fn gmon_files_of_different_programs_are_not_summed() {
    let dir = tempdir();
    let d = corpus_dir();
    let out = dir.path().join("x.pb.gz");
    let cases = cases();
    let by_name: BTreeMap<&str, &CorpusCase> = cases.iter().map(|c| (c.name.as_str(), c)).collect();
    let (a, b) = (by_name["clones-o2"], by_name["clones-o3"]);
    let (ga, gb) = (d.join(&a.gmon), d.join(&b.gmon));
    let binary = d.join(&a.binary);
    let err = refused(&[
        ga.to_str().unwrap(),
        gb.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains(&a.gmon) && err.contains(&b.gmon),
        "names both files: {err}"
    );
    assert!(!out.exists());
}

#[test]
fn mingw_pe_executables_symbolize_their_profiles() {
    let dir = tempdir();
    let mut seen = 0;
    for case in cases().iter().filter(|c| c.binary.ends_with(".exe")) {
        let p = convert(case, dir.path());
        let (self_s, _) = flat_from_pprof(&p);
        let flat = parse_flat(&report(case, "flat"));
        let named = flat.keys().filter(|n| self_s.contains_key(*n)).count();
        assert!(
            named >= 5,
            "{}: {named} of gprof's functions named",
            case.name
        );
        seen += 1;
    }
    assert!(seen >= 2, "32- and 64-bit MinGW cases");
}

/// Every C++ symbol of the corpus binaries, demangled by profconv, against
/// binutils' `c++filt` (NAME.cxxfilt.txt, written by regenerate.sh).
#[test]
fn cpp_names_are_demangled_as_binutils_does() {
    let mut differ = Vec::new();
    let mut total = 0;
    for case in cases() {
        let dir = corpus_dir();
        let Ok(symbols) = std::fs::read_to_string(dir.join(format!("{}.symbols.txt", case.name)))
        else {
            continue;
        };
        let filtered =
            std::fs::read_to_string(dir.join(format!("{}.cxxfilt.txt", case.name))).unwrap();
        for (raw, want) in symbols.lines().zip(filtered.lines()) {
            total += 1;
            let ours = profconv::symbolize::demangle(raw);
            if ours != want {
                differ.push(format!("{raw}\n  profconv:   {ours}\n  c++filt -i: {want}"));
            }
        }
    }
    assert!(total >= 100, "{total} C++ symbols in the corpus");
    assert!(
        differ.is_empty(),
        "{} of {total} names differ from c++filt -i (gprof's flags):\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn the_committed_cxxfilt_lists_are_what_cxxfilt_prints() {
    if !have("c++filt") {
        let msg = "c++filt not installed";
        assert!(!in_ci(), "{msg}");
        crate::skip_note!("{msg}");
        return;
    }
    for case in cases() {
        let dir = corpus_dir();
        let Ok(symbols) = std::fs::read_to_string(dir.join(format!("{}.symbols.txt", case.name)))
        else {
            continue;
        };
        let out = Command::new("c++filt")
            .arg("-i")
            .stdin(std::fs::File::open(dir.join(format!("{}.symbols.txt", case.name))).unwrap())
            .output()
            .unwrap();
        let want = std::fs::read_to_string(dir.join(format!("{}.cxxfilt.txt", case.name))).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{}", case.name);
        assert_eq!(symbols.lines().count(), want.lines().count());
    }
}

/// Runs `gprof -b FLAG` on a program and its gmon.out.
fn gprof(flag: &str, exe: &Path, gmon: &Path) -> Option<String> {
    let out = match Command::new("gprof")
        .args(["-b", flag])
        .arg(exe)
        .arg(gmon)
        .env("LC_ALL", "C")
        .output()
    {
        Ok(out) => out,
        Err(_) => {
            assert!(!in_ci(), "GNU gprof is needed: .ci/run installs binutils");
            crate::skip_note!("gprof not installed");
            return None;
        }
    };
    assert!(out.status.success(), "gprof {flag} failed");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Programs of real size built here (thousands of functions, packed at odd
/// addresses, position-independent, -O2), run, and compared with the
/// installed gprof function by function.
#[test]
fn generated_programs_of_real_size_agree_with_gprof() {
    let mut shape = Shape::new(2500);
    shape.seed = 0x0dd_a11e;
    shape.iterations = 2e9;
    shape.cflags = vec!["-O2", "-falign-functions=1", "-fPIE", "-pie"];
    let dir = tempdir();
    let Some((_, exe)) = build_and_run(&shape, dir.path()) else {
        return;
    };
    let gmon = dir.path().join("gmon.out");
    let (Some(flat), Some(graph)) = (gprof("-p", &exe, &gmon), gprof("-q", &exe, &gmon)) else {
        return;
    };
    let out = dir.path().join("out.pb.gz");
    profconv_ok(&[
        gmon.to_str().unwrap(),
        "--binary",
        exe.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let p = decode_pprof(&out);
    let functions = parse_flat(&flat).len();
    assert!(
        functions > 500,
        "{functions} functions in gprof's flat profile"
    );
    assert_no_differences(&differences_from("generated", &p, &flat, &graph), functions);
}
