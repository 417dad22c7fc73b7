//! Helpers shared by the integration tests: running the binary, decoding
//! pprof, asking the real consumers (`go tool pprof`, speedscope's schema,
//! an XML parser for SVG) whether they accept what profconv wrote.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod gprof_program;
pub mod gprof_report;

pub mod gen;
pub mod golden;
pub mod rng;

#[allow(unused_imports)]
pub use golden::assert_golden;
pub use profconv::pb;

/// True when running under CI, where missing consumers fail the test.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

pub fn profconv_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_profconv"))
}

/// Runs profconv with `args`; returns its output whatever the exit code.
pub fn profconv(args: &[&str]) -> Output {
    Command::new(profconv_bin())
        .args(args)
        .output()
        .expect("profconv runs")
}

/// Runs profconv and asserts that it succeeded.
pub fn profconv_ok(args: &[&str]) -> Output {
    let out = profconv(args);
    assert!(
        out.status.success(),
        "profconv {args:?} failed with {:?}:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(rel: &str) -> PathBuf {
    manifest_dir().join("tests/fixtures").join(rel)
}

/// A fresh temporary directory for one test's outputs.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

pub fn decode_pprof(path: &Path) -> pb::Profile {
    let bytes = std::fs::read(path).expect("pprof output exists");
    profconv::write::pprof::decode(&bytes).expect("pprof output decodes")
}

/// The string at index `i` of a decoded profile's table.
pub fn s(p: &pb::Profile, i: i64) -> &str {
    &p.string_table[i as usize]
}

/// Checks the invariants `go tool pprof` relies on.
pub fn check_pprof_invariants(p: &pb::Profile) {
    assert_eq!(
        p.string_table.first().map(String::as_str),
        Some(""),
        "string_table[0] must be empty"
    );
    let n = p.sample_type.len();
    assert!(n > 0, "no sample types");
    for sample in &p.sample {
        assert_eq!(
            sample.value.len(),
            n,
            "value count must equal sample-type count"
        );
        for id in &sample.location_id {
            assert!(
                p.location.iter().any(|l| l.id == *id),
                "sample refers to missing location {id}"
            );
        }
    }
    let mut ids: Vec<u64> = p.location.iter().map(|l| l.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), p.location.len(), "location ids unique");
    assert!(!ids.contains(&0), "location id 0");
    for l in &p.location {
        if l.mapping_id != 0 {
            assert!(
                p.mapping.iter().any(|m| m.id == l.mapping_id),
                "location refers to missing mapping"
            );
        }
        for line in &l.line {
            assert!(
                p.function.iter().any(|f| f.id == line.function_id),
                "line refers to missing function"
            );
        }
    }
    assert!(p.function.iter().all(|f| f.id != 0));
    assert!(p.mapping.iter().all(|m| m.id != 0));
    let len = p.string_table.len() as i64;
    for f in &p.function {
        assert!(f.name < len && f.system_name < len && f.filename < len);
    }
}

/// Per-function flat totals of sample type `type_name` (leaf function of each sample).
pub fn pprof_flat(p: &pb::Profile, type_name: &str) -> BTreeMap<String, i64> {
    let t = p
        .sample_type
        .iter()
        .position(|vt| s(p, vt.r#type) == type_name)
        .unwrap_or_else(|| panic!("no sample type {type_name}"));
    let mut out = BTreeMap::new();
    for sample in &p.sample {
        let Some(&leaf) = sample.location_id.first() else {
            continue;
        };
        let name = location_leaf_name(p, leaf);
        *out.entry(name).or_insert(0) += sample.value[t];
    }
    out.retain(|_, v| *v != 0);
    out
}

/// The innermost function name of a location, or `0xADDR` when unsymbolized.
pub fn location_leaf_name(p: &pb::Profile, id: u64) -> String {
    let loc = p.location.iter().find(|l| l.id == id).expect("location");
    match loc.line.first() {
        Some(line) => {
            let f = p
                .function
                .iter()
                .find(|f| f.id == line.function_id)
                .expect("function");
            s(p, f.name).to_owned()
        }
        None => format!("{:#x}", loc.address),
    }
}

/// The `go` command, or `None` when it is not installed outside CI. In CI a
/// missing `go` fails the test: the consumer check must run there.
pub fn go_command() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "go is not installed: .ci/run must install golang-go"
        );
        eprintln!("skipping go tool pprof check: go is not installed");
    }
    found
}

/// Runs `go tool pprof ARGS`; `None` when go is missing outside CI.
pub fn go_pprof(args: &[&str]) -> Option<String> {
    let go = go_command()?;
    let home = std::env::temp_dir().join("profconv-go-home");
    let _ = std::fs::create_dir_all(&home);
    let out = Command::new(go)
        .arg("tool")
        .arg("pprof")
        .args(args)
        .env("HOME", &home)
        .env("PPROF_TMPDIR", &home)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go tool pprof runs");
    assert!(
        out.status.success(),
        "go tool pprof {args:?} rejected the file:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// speedscope's own file-format schema, from the `speedscope` npm package
/// (`SPEEDSCOPE_SCHEMA` names the file, else it is fetched once with
/// `npm pack` into target/test-deps). `None` outside CI when npm is missing.
pub fn speedscope_schema() -> Option<serde_json::Value> {
    let path = match std::env::var_os("SPEEDSCOPE_SCHEMA") {
        Some(p) => PathBuf::from(p),
        None => {
            let deps = manifest_dir().join("target/test-deps");
            let schema = deps.join("package/dist/release/file-format-schema.json");
            if !schema.is_file() {
                let _lock = fetch_lock();
                if !schema.is_file() {
                    std::fs::create_dir_all(&deps).expect("target/test-deps");
                    let packed = Command::new("npm")
                        .args(["pack", "speedscope", "--silent", "--pack-destination"])
                        .arg(&deps)
                        .output();
                    match packed {
                        Ok(o) if o.status.success() => {
                            let name = String::from_utf8_lossy(&o.stdout)
                                .trim()
                                .lines()
                                .last()
                                .unwrap_or("")
                                .to_owned();
                            let ok = Command::new("tar")
                                .arg("xzf")
                                .arg(deps.join(&name))
                                .arg("-C")
                                .arg(&deps)
                                .status()
                                .is_ok_and(|s| s.success());
                            assert!(ok, "could not unpack {name}");
                        }
                        _ => {
                            assert!(!in_ci(), "npm pack speedscope failed: .ci/run must make the schema available");
                            eprintln!(
                                "skipping speedscope schema check: npm pack speedscope failed"
                            );
                            return None;
                        }
                    }
                }
            }
            schema
        }
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(serde_json::from_str(&text).expect("schema is JSON"))
}

fn fetch_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Validates a speedscope document against speedscope's schema and checks
/// the frame references.
pub fn validate_speedscope(doc: &serde_json::Value) {
    if let Some(schema) = speedscope_schema() {
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(doc)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "speedscope schema violations: {errors:#?}"
        );
    }
    let frames = doc["shared"]["frames"].as_array().expect("frames").len() as u64;
    for profile in doc["profiles"].as_array().expect("profiles") {
        let samples = profile["samples"].as_array().expect("samples");
        let weights = profile["weights"].as_array().expect("weights");
        assert_eq!(samples.len(), weights.len());
        for sample in samples {
            for f in sample.as_array().expect("sample") {
                assert!(f.as_u64().expect("frame index") < frames);
            }
        }
        let total: f64 = weights.iter().map(|w| w.as_f64().unwrap()).sum();
        let span = profile["endValue"].as_f64().unwrap() - profile["startValue"].as_f64().unwrap();
        assert!(
            (total - span).abs() < 1e-6,
            "weights must add up to endValue - startValue"
        );
    }
}

/// Per-leaf-frame totals of one speedscope profile (by its name prefix, e.g. "cpu").
pub fn speedscope_flat(doc: &serde_json::Value, type_name: &str) -> BTreeMap<String, f64> {
    let frames = doc["shared"]["frames"].as_array().unwrap();
    let profile = doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{type_name} ("))
        })
        .unwrap_or_else(|| panic!("no speedscope profile for {type_name}"));
    let mut out = BTreeMap::new();
    for (sample, w) in profile["samples"]
        .as_array()
        .unwrap()
        .iter()
        .zip(profile["weights"].as_array().unwrap())
    {
        let leaf = sample.as_array().unwrap().last().unwrap().as_u64().unwrap() as usize;
        let name = frames[leaf]["name"].as_str().unwrap().to_owned();
        *out.entry(name).or_insert(0.0) += w.as_f64().unwrap();
    }
    out
}

/// Parses folded text into (stack, count), checking the line syntax.
pub fn parse_folded(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, count) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad folded line {line:?}"));
        let count: i64 = count
            .parse()
            .unwrap_or_else(|_| panic!("bad count in {line:?}"));
        assert!(!stack.is_empty() && !stack.contains('\n'));
        *out.entry(stack.to_owned()).or_insert(0) += count;
    }
    out
}

/// Per-leaf totals of folded stacks.
pub fn folded_flat(folded: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (stack, v) in folded {
        let leaf = stack.rsplit(';').next().unwrap().to_owned();
        *out.entry(leaf).or_insert(0) += v;
    }
    out
}

/// Checks an SVG is well-formed XML and holds every name in `names`.
pub fn check_svg(path: &Path, names: &[&str]) {
    let text = std::fs::read_to_string(path).expect("svg exists");
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, options)
        .unwrap_or_else(|e| panic!("SVG is not well-formed XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    for name in names {
        assert!(text.contains(name), "SVG lacks frame {name:?}");
    }
}

/// Runs valgrind's `callgrind_annotate ARGS`; returns its stdout, and checks
/// that it warned about no line. `None` when it is not installed outside CI
/// (in CI a missing one fails: .ci/run installs valgrind).
pub fn callgrind_annotate(args: &[&str]) -> Option<String> {
    let out = match Command::new("callgrind_annotate").args(args).output() {
        Ok(out) => out,
        Err(e) => {
            assert!(
                !in_ci(),
                "callgrind_annotate cannot run ({e}): .ci/run must install valgrind"
            );
            eprintln!("skipping callgrind_annotate check: {e} (apt-get install valgrind)");
            return None;
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("WARNING"),
        "callgrind_annotate {args:?} rejected the file:\n{stderr}"
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// callgrind_annotate's table for one event: (program total, function → cost).
/// Functions are printed as `file:function [object]`.
pub fn annotate(file: &str, event: &str, inclusive: bool) -> Option<(i64, BTreeMap<String, i64>)> {
    let show = format!("--show={event}");
    let inclusive = format!("--inclusive={}", if inclusive { "yes" } else { "no" });
    let text = callgrind_annotate(&[&inclusive, "--auto=no", "--threshold=100", &show, file])?;
    let mut total = None;
    let mut per_function = BTreeMap::new();
    for line in text.lines() {
        let Some((number, rest)) = line.trim_start().split_once(" (") else {
            continue;
        };
        let Ok(value) = number.replace(',', "").parse::<i64>() else {
            continue;
        };
        let Some((_, name)) = rest.split_once(")  ") else {
            continue;
        };
        if name.trim() == "PROGRAM TOTALS" {
            total = Some(value);
            continue;
        }
        let name = name.rsplit_once(" [").map_or(name, |(n, _)| n);
        let function = name.split_once(':').map_or(name, |(_, f)| f);
        *per_function.entry(function.to_owned()).or_insert(0) += value;
    }
    per_function.retain(|_, v| *v != 0);
    Some((
        total.expect("callgrind_annotate prints PROGRAM TOTALS"),
        per_function,
    ))
}

/// A small APS sample file (spec aps.md §3): little-endian, call depth 5,
/// paths of 256 bytes; `/usr/bin/app` in pid 100 and vmlinux. The user
/// samples are at `app+0x10` (4, called from `app+0x200`) and `app+0x20` (1);
/// the kernel ones (2) at vmlinux's start.
pub fn small_aps_file() -> Vec<u8> {
    aps_file(4)
}

/// [`small_aps_file`] with `hot` samples at `app+0x10` (56 bytes each).
pub fn aps_file(hot: usize) -> Vec<u8> {
    use gen::aps::{kernel, user, vma, Aps};
    let mut records = vec![user(100, 100, 17, 0x8010, &[0x8200]); hot];
    records.push(user(100, 100, 17, 0x8020, &[]));
    records.extend(vec![kernel(0, 0, 17, 0xc000_8000, &[]); 2]);
    Aps {
        records,
        modules: vec![(0xc000_8000, 0xc03f_ffff, "vmlinux".into())],
        vmas: vec![vma(100, 0x8000, 0x17fff, "/usr/bin/app")],
        begin: (1_437_051_740, 0),
        end: (1_437_051_752, 0),
        ..Aps::default()
    }
    .bytes()
}

/// The gzip members of a `.pb.gz`, each as its header's XFL byte (4 for
/// zlib-rs's fastest level) and its decoded bytes.
pub fn gzip_members(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let (mut rest, mut members) = (bytes, Vec::new());
    while !rest.is_empty() {
        let xfl = rest[8];
        // A bufread decoder stops at its member's end.
        let mut member = flate2::bufread::GzDecoder::new(rest);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut back).unwrap();
        members.push((xfl, back));
        rest = member.into_inner();
    }
    members
}
