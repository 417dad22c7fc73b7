//! Building the profile from the counted records of every file: sample
//! types per event, labels, metadata and comments.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::count::FileCounts;
use super::head::event_name;
use super::mapping::{main_executables, FileMaps, Image, Mapper};
use super::pid_info::PidInfo;
use super::records::ApsFile;
use crate::error::{Error, Result};
use crate::profile::{too_many_values, Label, Profile};

/// The profile of the counted records, and the image of each mapping.
pub(super) fn build_profile(
    files: &[ApsFile],
    counts: Vec<FileCounts>,
    pid_info: Option<&PidInfo>,
    pid_info_path: Option<&Path>,
) -> Result<(Profile, Vec<Image>)> {
    let mut profile = Profile::new(&[("samples", "count")]);
    let events = event_totals(&counts);
    let stacks: usize = counts.iter().map(FileCounts::len).sum();
    // Each stack has its samples and the events of its one event id.
    let nonzero = 2 * stacks as u64;
    if let Some(why) = too_many_values(events.len() + 1, stacks as u64, nonzero) {
        let path = files
            .first()
            .map_or(Path::new("<aps>"), |f| f.path.as_path());
        return Err(Error::unsupported(path, why));
    }
    let event_type = add_sample_types(&mut profile, files, &events);
    add_time_range(&mut profile, files);
    add_metadata(&mut profile, files, pid_info_path);
    add_comments(&mut profile, files, &counts);

    let mut mapper = Mapper {
        ids: HashMap::new(),
        images: Vec::new(),
    };
    let context = SampleContext {
        pid_info,
        executables: main_executables(files),
        event_type,
    };
    profile.reserve(frames(&counts), stacks, 0);
    for (file, file_counts) in files.iter().zip(&counts) {
        add_file(&mut profile, &mut mapper, &context, file, file_counts);
    }
    Ok((profile, mapper.images))
}

/// Frames of every key: at most this many distinct locations.
fn frames(counts: &[FileCounts]) -> usize {
    let keys = counts.iter().flat_map(FileCounts::iter);
    keys.map(|(key, _)| key.len().saturating_sub(4)).sum()
}

/// Samples per event id, to name the sample types and the period.
fn event_totals(counts: &[FileCounts]) -> BTreeMap<u32, u64> {
    let mut events: BTreeMap<u32, u64> = BTreeMap::new();
    for (key, n) in counts.iter().flat_map(FileCounts::iter) {
        if let Some(&event) = key.get(3) {
            let slot = events.entry(event).or_insert(0);
            *slot = slot.saturating_add(n);
        }
    }
    events
}

/// One sample type per event id, and the period; returns the sample type
/// of each event id.
fn add_sample_types(
    profile: &mut Profile,
    files: &[ApsFile],
    events: &BTreeMap<u32, u64>,
) -> HashMap<u32, usize> {
    let mut event_type = HashMap::new();
    for &event in events.keys() {
        event_type.insert(event, profile.add_sample_type(&event_name(event), "events"));
    }
    // pprof has one period: reset_value, in the most sampled event.
    let main_event = events
        .iter()
        .max_by_key(|&(id, n)| (*n, std::cmp::Reverse(*id)))
        .map(|(&id, _)| event_name(id));
    if let (Some(name), Some(file)) = (main_event, files.first()) {
        profile.set_period(
            &name,
            "events",
            i64::try_from(file.head.reset_value).unwrap_or(i64::MAX),
        );
    }
    event_type
}

/// Time range: the earliest begin to the latest end.
fn add_time_range(profile: &mut Profile, files: &[ApsFile]) {
    if let Some(begin) = files.iter().map(|f| f.head.begin_nanos()).min() {
        let end = files
            .iter()
            .map(|f| f.head.end_nanos())
            .max()
            .unwrap_or(begin);
        profile.time_nanos = begin;
        profile.duration_nanos = end.saturating_sub(begin).max(0);
    }
}

/// The head fields and layout of every file (prefixed with the file's name
/// when there are several), and the pid_info file.
fn add_metadata(profile: &mut Profile, files: &[ApsFile], pid_info_path: Option<&Path>) {
    let several = files.len() > 1;
    profile.add_metadata("format", "APS sample file");
    for file in files {
        let prefix = match file.path.file_name() {
            Some(name) if several => format!("{} ", name.to_string_lossy()),
            _ if several => " ".to_owned(),
            _ => String::new(),
        };
        let h = &file.head;
        let l = &file.layout;
        if let Some(cpu) = file.cpu {
            profile.add_metadata(format!("{prefix}cpu"), cpu.to_string());
        }
        profile.add_metadata(format!("{prefix}byte order"), h.endian.name());
        profile.add_metadata(
            format!("{prefix}call depth"),
            format!("{} ({})", l.call_depth, l.call_depth_origin.describe()),
        );
        profile.add_metadata(
            format!("{prefix}path length"),
            format!("{} ({})", l.path_len, l.path_len_origin.describe()),
        );
        profile.add_metadata(format!("{prefix}reset_value"), h.reset_value.to_string());
        profile.add_metadata(format!("{prefix}stBeginTime"), h.st_begin_time.to_string());
        profile.add_metadata(format!("{prefix}stEndTime"), h.st_end_time.to_string());
        profile.add_metadata(format!("{prefix}cputype"), h.cputype.to_string());
    }
    if let Some(p) = pid_info_path {
        profile.add_metadata("pid_info", p.display().to_string());
    }
}

/// How stacks are read, the idle samples left out and the SRE images.
fn add_comments(profile: &mut Profile, files: &[ApsFile], counts: &[FileCounts]) {
    profile.add_comment(
        "APS: stacks are pc then cs[0..cs_layer], leaf first; events = samples x reset_value",
    );
    let dropped: u64 = counts.iter().map(|c| c.dropped_idle).sum();
    if dropped > 0 {
        profile.add_comment(format!("APS: {dropped} samples of pid 0 (idle) left out"));
    }
    let sre: BTreeSet<(i32, &str)> = files
        .iter()
        .flat_map(|f| &f.vmas)
        .filter(|v| v.is_sre)
        .map(|v| (v.pid, v.file.as_str()))
        .collect();
    for (pid, file) in sre {
        profile.add_comment(format!("APS: pid {pid}: {file} is an SRE image"));
    }
}

/// What every sample's values and labels are made from.
struct SampleContext<'a> {
    pid_info: Option<&'a PidInfo>,
    executables: HashMap<i32, String>,
    event_type: HashMap<u32, usize>,
}

/// Adds the counted records of one file as samples (§10): the stack's
/// locations, the labels and the values.
fn add_file(
    profile: &mut Profile,
    mapper: &mut Mapper,
    context: &SampleContext<'_>,
    file: &ApsFile,
    counts: &FileCounts,
) {
    let mut maps = FileMaps::new(file);
    let reset = i64::try_from(file.head.reset_value).unwrap_or(i64::MAX);
    let mut stack = Vec::new();
    let mut values = vec![0i64; profile.sample_types().len()];
    // Labels depend on (user, pid, tid) only, and the keys are sorted by it.
    let mut labels: Vec<Label> = Vec::new();
    let mut labelled = None;
    for (key, count) in counts.iter() {
        let [user, pid, tid, event, frames @ ..] = key else {
            continue;
        };
        let (user, pid, tid) = (*user != 0, *pid as i32, *tid as i32);
        stack.clear();
        for (i, &address) in frames.iter().enumerate() {
            let mapping = maps.find(profile, mapper, user, pid, address);
            stack.push(profile.address_location(mapping, u64::from(address), i > 0));
        }
        if labelled != Some((user, pid, tid)) {
            sample_labels(profile, context, file, (user, pid, tid), &mut labels);
            labelled = Some((user, pid, tid));
        }
        values.fill(0);
        let samples = i64::try_from(count).unwrap_or(i64::MAX);
        if let Some(v) = values.first_mut() {
            *v = samples;
        }
        if let Some(v) = context
            .event_type
            .get(event)
            .and_then(|&t| values.get_mut(t))
        {
            *v = samples.saturating_mul(reset);
        }
        profile.add_sample(&stack, &values, &labels);
    }
}

/// The labels of the samples of one (user, pid, tid), into `labels`.
fn sample_labels(
    profile: &mut Profile,
    context: &SampleContext<'_>,
    file: &ApsFile,
    (user, pid, tid): (bool, i32, i32),
    labels: &mut Vec<Label>,
) {
    labels.clear();
    labels.push(profile.label_num("pid", i64::from(pid), ""));
    labels.push(profile.label_num("tid", i64::from(tid), ""));
    if let Some(cpu) = file.cpu {
        labels.push(profile.label_num("cpu", i64::from(cpu), ""));
    }
    labels.push(profile.label_str("mode", if user { "user" } else { "kernel" }));
    let pid_info = context.pid_info;
    let process = pid_info
        .and_then(|p| p.process_name(i64::from(pid)))
        .or_else(|| context.executables.get(&pid).map(String::as_str));
    if let Some(name) = process {
        labels.push(profile.label_str("process_name", name));
    }
    if let Some(name) = pid_info.and_then(|p| p.thread_name(i64::from(pid), i64::from(tid))) {
        labels.push(profile.label_str("thread_name", name));
    }
    // Sorted once here, as the IR keeps labels.
    labels.sort();
}
