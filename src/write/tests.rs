//! Every writer on one hand-built profile, whose expected outputs are worked
//! out here from the profile itself: three functions of one mapping (`leaf`
//! inlined into `work`), three stacks, two sample types, a pid label.

use super::*;
use crate::profile::{GroupBy, Label, LabelValue, Line, Location, Mapping};

/// `main` → `work` → `leaf` (inlined into `work` at one address).
///
/// | stack (root first)              | samples | cpu (ns) | pid |
/// |---------------------------------|---------|----------|-----|
/// | main; work; work; leaf          | 5       | 50       | 7   |
/// | main; work                      | 2       | 20       | 7   |
/// | main                            | 1       | 10       | 8   |
fn hand_built() -> Profile {
    let mut p = Profile::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    let file = p.intern("/usr/bin/app");
    let build_id = p.intern("abcd");
    let m = p.add_mapping(Mapping::new(0x1000, 0x2000, 0, file, build_id));
    let main = p.add_function("main", "main", "app.c", 1);
    let work = p.add_function("work", "work", "app.c", 10);
    let leaf = p.add_function("leaf", "leaf", "app.c", 20);
    let at = |p: &mut Profile, address, lines: Vec<Line>| {
        p.add_location(Location {
            mapping: Some(m),
            address,
            is_return_address: address != 0x1210,
            lines: lines.into(),
        })
    };
    let l_main = at(
        &mut p,
        0x1010,
        vec![Line {
            function: main,
            line: 3,
        }],
    );
    let l_work = at(
        &mut p,
        0x1110,
        vec![Line {
            function: work,
            line: 12,
        }],
    );
    let l_inl = at(
        &mut p,
        0x1210,
        vec![
            Line {
                function: leaf,
                line: 21,
            },
            Line {
                function: work,
                line: 13,
            },
        ],
    );
    let pid7 = p.label_num("pid", 7, "");
    let pid8 = p.label_num("pid", 8, "");
    p.add_sample(
        &[l_inl, l_work, l_main],
        &[5, 50],
        std::slice::from_ref(&pid7),
    );
    p.add_sample(&[l_work, l_main], &[2, 20], &[pid7]);
    p.add_sample(&[l_main], &[1, 10], &[pid8]);
    assert_eq!(p.check(), Ok(()));
    p
}

fn options() -> WriteOptions {
    WriteOptions {
        title: "hand-built".into(),
        ..WriteOptions::default()
    }
}

fn output(format: OutputFormat, options: &WriteOptions) -> Vec<u8> {
    let mut out = Vec::new();
    write(&hand_built(), format, options, &mut out).unwrap();
    out
}

#[test]
fn folded_has_one_line_per_stack_root_first_with_inlined_frames_outer_first() {
    let text = String::from_utf8(output(OutputFormat::Folded, &options())).unwrap();
    assert_eq!(text, "main 1\nmain;work 2\nmain;work;work;leaf 5\n");
    let cpu = WriteOptions {
        sample_type: Some("cpu".into()),
        ..options()
    };
    let text = String::from_utf8(output(OutputFormat::Folded, &cpu)).unwrap();
    assert_eq!(text, "main 10\nmain;work 20\nmain;work;work;leaf 50\n");
}

#[test]
fn folded_groups_under_a_label_when_asked() {
    let by_pid = WriteOptions {
        group_by: Some(vec![GroupBy::Label("pid".into())]),
        ..options()
    };
    let text = String::from_utf8(output(OutputFormat::Folded, &by_pid)).unwrap();
    assert_eq!(
        text,
        "pid 7;main;work 2\npid 7;main;work;work;leaf 5\npid 8;main 1\n"
    );
}

#[test]
fn pprof_round_trips_samples_locations_lines_and_labels() {
    let decoded = pprof::decode(&output(OutputFormat::Pprof, &options())).unwrap();
    let s = |i: i64| decoded.string_table[i as usize].as_str();
    let types: Vec<(&str, &str)> = decoded
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(decoded.mapping.len(), 1);
    assert_eq!(s(decoded.mapping[0].filename), "/usr/bin/app");
    assert_eq!(s(decoded.mapping[0].build_id), "abcd");
    let function = |id: u64| {
        let f = decoded.function.iter().find(|f| f.id == id).unwrap();
        s(f.name)
    };
    // Each stack as the function names of its lines, leaf first.
    let mut stacks: Vec<(Vec<&str>, Vec<i64>, i64)> = decoded
        .sample
        .iter()
        .map(|sample| {
            let names = sample
                .location_id
                .iter()
                .flat_map(|&id| &decoded.location.iter().find(|l| l.id == id).unwrap().line)
                .map(|line| function(line.function_id))
                .collect();
            let pid = sample.label.iter().find(|l| s(l.key) == "pid").unwrap().num;
            (names, sample.value.clone(), pid)
        })
        .collect();
    stacks.sort();
    assert_eq!(
        stacks,
        [
            (vec!["leaf", "work", "work", "main"], vec![5, 50], 7),
            (vec!["main"], vec![1, 10], 8),
            (vec!["work", "main"], vec![2, 20], 7),
        ]
    );
    let raw = output(OutputFormat::PprofRaw, &options());
    assert_eq!(pprof::decode(&raw).unwrap(), decoded);
}

#[test]
fn speedscope_has_shared_frames_and_one_sampled_profile_per_type() {
    let doc = speedscope::to_json(&hand_built(), &options());
    let frames: Vec<&str> = doc["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let profiles = doc["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    for (profile, (unit, weights)) in profiles
        .iter()
        .zip([("none", [1, 2, 5]), ("nanoseconds", [10, 20, 50])])
    {
        assert_eq!(profile["type"], "sampled");
        assert_eq!(profile["unit"], unit);
        let stacks: Vec<String> = profile["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|stack| {
                let names: Vec<&str> = stack
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| frames[i.as_u64().unwrap() as usize])
                    .collect();
                names.join(";")
            })
            .collect();
        // Flame-chart order: root first, sorted.
        assert_eq!(stacks, ["main", "main;work", "main;work;work;leaf"]);
        let got: Vec<i64> = profile["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_i64().unwrap())
            .collect();
        assert_eq!(got, weights);
        assert_eq!(profile["endValue"], weights.iter().sum::<i64>());
    }
}

#[test]
fn svg_shows_each_function_with_its_count_and_the_title() {
    let svg = String::from_utf8(output(OutputFormat::Svg, &options())).unwrap();
    let xml = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&svg, xml).unwrap();
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    for expected in [
        "main (8 count, 100.00%)",
        "work (7 count, 87.50%)",
        "leaf (5 count, 62.50%)",
    ] {
        assert!(titles.contains(&expected), "{expected} in {titles:?}");
    }
    assert!(svg.contains("hand-built — samples (count)"), "title");
}

#[test]
fn callgrind_costs_match_the_samples() {
    let text = String::from_utf8(output(OutputFormat::Callgrind, &options())).unwrap();
    assert!(text.contains("events: samples cpu"), "{text}");
    assert!(text.contains("totals: 8 80"), "{text}");
    for name in ["main", "work", "leaf"] {
        assert!(
            text.contains(&format!(") {name}\n")),
            "{name} named: {text}"
        );
    }
}

#[test]
fn firefox_names_are_their_own_and_json_stays_speedscope() {
    let format = |name: &str| OutputFormat::from_path(std::path::Path::new(name));
    assert_eq!(format("p.firefox.json.gz"), Some(OutputFormat::Firefox));
    assert_eq!(format("P.Firefox.JSON"), Some(OutputFormat::FirefoxRaw));
    assert_eq!(format("p.json"), Some(OutputFormat::Speedscope));
    assert_eq!(format("p.speedscope.json"), Some(OutputFormat::Speedscope));
    for f in [OutputFormat::Firefox, OutputFormat::FirefoxRaw] {
        let name = format!("x.{}", f.extension());
        assert_eq!(format(&name), Some(f), "{name}");
    }
}

/// `profile` as an uncompressed Firefox document, parsed, and its length.
fn firefox_document(profile: &Profile) -> (serde_json::Value, usize) {
    let mut out = Vec::new();
    write(
        profile,
        OutputFormat::FirefoxRaw,
        &WriteOptions::default(),
        &mut out,
    )
    .unwrap();
    (serde_json::from_slice(&out).unwrap(), out.len())
}

#[test]
fn firefox_threads_are_one_per_pid_tid_and_sample_type_and_keep_every_total() {
    let (doc, _) = firefox_document(&hand_built());
    let threads = doc["threads"].as_array().unwrap();
    // Two pids (no tid), two sample types.
    assert_eq!(threads.len(), 4, "{threads:?}");
    let total: i64 = threads
        .iter()
        .flat_map(|t| t["samples"]["weight"].as_array().unwrap())
        .map(|w| w.as_i64().unwrap())
        .sum();
    assert_eq!(total, 5 + 2 + 1 + 50 + 20 + 10);
}

#[test]
fn firefox_splits_values_past_i32_exactly_and_stays_small_for_huge_ones() {
    let thread_samples = |values: &[i64]| {
        let mut p = Profile::new(&[("cpu", "nanoseconds")]);
        let key = p.intern("tid");
        for (i, &v) in values.iter().enumerate() {
            let f = p.add_function(&format!("f{i}"), "", "", 0);
            let l = p.add_location(Location {
                mapping: None,
                address: 0x1000 + i as u64,
                is_return_address: false,
                lines: vec![Line {
                    function: f,
                    line: 0,
                }]
                .into(),
            });
            let tid = p.intern(&i.to_string());
            let label = Label {
                key,
                value: LabelValue::Str(tid),
            };
            p.add_sample(&[l], &[v], &[label]);
        }
        let (doc, len) = firefox_document(&p);
        (doc["threads"].as_array().unwrap().clone(), len)
    };
    let weights = |t: &serde_json::Value| -> Vec<i64> {
        let w = t["samples"]["weight"].as_array().unwrap();
        w.iter().map(|w| w.as_i64().unwrap()).collect()
    };
    // 5 s and 9 s of CPU in nanoseconds: split into i32 weights, exactly.
    let (threads, _) = thread_samples(&[5_000_000_000, 9_000_000_000]);
    let totals: Vec<i64> = threads.iter().map(|t| weights(t).iter().sum()).collect();
    assert_eq!(totals, [5_000_000_000, 9_000_000_000]);
    assert!(threads
        .iter()
        .all(|t| !t["name"].as_str().unwrap().contains('÷')));
    // Values near 2^63 in many threads: the samples stay within the budget
    // (not a million per thread), scaled by a power of ten that each
    // thread's name shows, and the scaled totals are kept.
    let (threads, len) = thread_samples(&[i64::MAX / 2; 40]);
    let samples: usize = threads.iter().map(|t| weights(t).len()).sum();
    assert!(samples <= (1 << 16) + 8 * 40 + 40, "{samples} samples");
    assert!(len < 8 << 20, "{len} bytes");
    for t in &threads {
        let name = t["name"].as_str().unwrap();
        let divisor: i64 = name
            .split('÷')
            .nth(1)
            .and_then(|d| d.trim_end_matches(')').parse().ok())
            .unwrap_or_else(|| panic!("no divisor in {name}"));
        assert_eq!(
            weights(t).iter().sum::<i64>(),
            (i64::MAX / 2) / divisor,
            "{name}"
        );
    }
}

#[test]
fn firefox_gives_same_named_functions_of_two_images_their_own_library() {
    // `_init` in libA.so and libB.so, each under `main` of the program.
    let mut p = Profile::new(&[("cpu", "nanoseconds")]);
    let location = |p: &mut Profile, image: &str, start: u64, name: &str, file: &str| {
        let filename = p.intern(image);
        let build_id = p.intern("");
        let m = p.add_mapping(Mapping::new(start, start + 0x1000, 0, filename, build_id));
        let function = p.add_function(name, name, file, 1);
        p.add_location(Location {
            mapping: Some(m),
            address: start + 0x10,
            is_return_address: false,
            lines: vec![Line { function, line: 2 }].into(),
        })
    };
    let main = location(&mut p, "/bin/prog", 0x1000, "main", "prog.c");
    let init_a = location(&mut p, "/lib/libA.so", 0x10000, "_init", "a.c");
    let init_b = location(&mut p, "/lib/libB.so", 0x20000, "_init", "b.c");
    p.add_sample(&[init_a, main], &[3], &[]);
    p.add_sample(&[init_b, main], &[4], &[]);
    let (doc, _) = firefox_document(&p);
    let libs: Vec<&str> = doc["libs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    let thread = &doc["threads"][0];
    let strings = thread["stringArray"].as_array().unwrap();
    let string = |v: &serde_json::Value| strings[v.as_u64().unwrap() as usize].as_str().unwrap();
    let funcs = &thread["funcTable"];
    let resources = &thread["resourceTable"];
    // Each function: its name, its library (through its resource), its file.
    let mut seen: Vec<(&str, &str, &str)> = (0..funcs["length"].as_u64().unwrap() as usize)
        .map(|f| {
            let resource = funcs["resource"][f].as_u64().unwrap() as usize;
            let lib = resources["lib"][resource].as_u64().unwrap() as usize;
            let file = string(&funcs["fileName"][f]);
            (string(&funcs["name"][f]), libs[lib], file)
        })
        .collect();
    seen.sort();
    let expected = [
        ("_init", "libA.so", "a.c"),
        ("_init", "libB.so", "b.c"),
        ("main", "prog", "prog.c"),
    ];
    assert_eq!(seen, expected);
    // Every frame's function is one of them, and no function is unused.
    let frame_funcs = thread["frameTable"]["func"].as_array().unwrap();
    let mut used: Vec<u64> = frame_funcs.iter().map(|f| f.as_u64().unwrap()).collect();
    used.sort();
    used.dedup();
    assert_eq!(used, [0, 1, 2]);
}
