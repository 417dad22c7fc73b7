//! speedscope JSON: shared frames and one `sampled` profile per sample type,
//! following `file-format-schema.json` of the speedscope package.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::write::{effective_group_by, sample_frames, WriteOptions};

/// The schema speedscope documents its file format with.
pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

/// speedscope's unit for a pprof unit; units outside its enum become `none`.
pub fn unit(pprof_unit: &str) -> &'static str {
    match pprof_unit {
        "nanoseconds" => "nanoseconds",
        "microseconds" => "microseconds",
        "milliseconds" => "milliseconds",
        "seconds" => "seconds",
        "bytes" => "bytes",
        _ => "none",
    }
}

/// The speedscope document of a profile: one sampled profile per sample type.
pub fn to_json(profile: &Profile, options: &WriteOptions) -> Value {
    let group_by = effective_group_by(profile, options);
    // Frames are shared by function (name and file), not by line, so that a
    // function sampled at many addresses is one box.
    let mut frame_index: HashMap<(String, Option<String>), usize> = HashMap::new();
    let mut frames: Vec<Value> = Vec::new();
    let stacks: Vec<Vec<usize>> = profile
        .samples
        .iter()
        .map(|sample| {
            sample_frames(profile, sample, group_by)
                .into_iter()
                .map(|f| {
                    let key = (f.name.into_owned(), f.file.map(str::to_owned));
                    let next = frames.len();
                    *frame_index.entry(key.clone()).or_insert_with(|| {
                        let mut frame = Map::new();
                        frame.insert("name".into(), Value::String(key.0.clone()));
                        if let Some(file) = &key.1 {
                            frame.insert("file".into(), Value::String(file.clone()));
                        }
                        frames.push(Value::Object(frame));
                        next
                    })
                })
                .collect()
        })
        .collect();

    // Flame-chart order: stacks sorted root first, so that every stack
    // prefix is one contiguous run of samples and speedscope's time-ordered
    // view draws each call once instead of interleaving unrelated stacks.
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_by(|&a, &b| stacks[a].cmp(&stacks[b]));

    let mut profiles = Vec::new();
    for t in 0..profile.sample_types.len() {
        let (kind, pprof_unit) = profile.sample_type_name(t);
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        let mut total: i64 = 0;
        for &i in &order {
            let (sample, stack) = (&profile.samples[i], &stacks[i]);
            let v = sample.values.get(t).copied().unwrap_or(0);
            if v <= 0 {
                continue;
            }
            samples.push(json!(stack));
            weights.push(json!(v));
            total = total.saturating_add(v);
        }
        profiles.push(json!({
            "type": "sampled",
            "name": format!("{kind} ({pprof_unit})"),
            "unit": unit(pprof_unit),
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }));
    }
    let active = profile.default_sample_type.unwrap_or(0);
    let metadata: Map<String, Value> = profile
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "$schema": SCHEMA_URL,
        "name": options.title,
        "exporter": format!("profconv {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": active,
        "shared": { "frames": frames },
        "profiles": profiles,
        "metadata": metadata,
        "comments": profile.comments,
    })
}

/// Writes the speedscope JSON document.
pub fn write(profile: &Profile, options: &WriteOptions, out: &mut dyn Write) -> Result<()> {
    let value = to_json(profile, options);
    serde_json::to_writer(&mut *out, &value)
        .map_err(|e| Error::io(std::path::Path::new("<output>"), e.into()))?;
    out.write_all(b"\n")
        .map_err(|e| Error::io(std::path::Path::new("<output>"), e))
}
