//! Building the profile: one sample per call stack that allocated, with the
//! allocated, freed and in-use counts and bytes, symbolized from the file's
//! own names or from `--binary`.

use std::collections::HashMap;
use std::path::Path;

use super::file::{MpatrolFile, ProfilingRecord, MAX_STACK_FRAMES, SIZE_CLASSES};
use crate::error::{Error, Result};
use crate::profile::{FunctionId, GroupBy, Line, LocationId, Mapping, MappingId, Profile};
use crate::read::cursor::Cursor;
use crate::read::options::ReadOptions;
use crate::symbolize::{self, Binary, Relocation};

/// The sample types, in this order (docs/formats/mpatrol.md §3).
pub(super) const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("free_objects", "count"),
    ("free_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];
pub(super) const DEFAULT_SAMPLE_TYPE: usize = 5;

/// `v` as a pprof value, or an error naming where it came from.
pub(super) fn value(c: &Cursor<'_>, offset: usize, v: u128, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        c.error_at(
            offset,
            format!("{what} {v} is too large for a profile value"),
        )
    })
}

/// The six sample values of a record, over the size classes in `classes`.
pub(super) fn record_values(
    c: &Cursor<'_>,
    r: &ProfilingRecord,
    classes: std::ops::Range<usize>,
) -> Result<[i64; 6]> {
    let sum = |a: &[u64; 4]| {
        a[classes.clone()]
            .iter()
            .map(|&v| u128::from(v))
            .sum::<u128>()
    };
    let ac = value(c, r.offset, sum(&r.alloc_count), "an allocation count")?;
    let ab = value(c, r.offset, sum(&r.alloc_bytes), "an allocation total")?;
    let fc = value(c, r.offset, sum(&r.free_count), "a deallocation count")?;
    let fb = value(c, r.offset, sum(&r.free_bytes), "a deallocation total")?;
    Ok([ac, ab, fc, fb, ac.saturating_sub(fc), ab.saturating_sub(fb)])
}

/// The load bias of the profiled program relative to `binary`'s link-time
/// addresses: the file names functions and gives their runtime start
/// addresses, the binary gives their link-time ones; the most common
/// difference wins (0 when no name matches, as for a non-PIE executable).
pub(super) fn load_bias(file: &MpatrolFile, binary: &Binary) -> u64 {
    let mut by_name: HashMap<&str, u64> = HashMap::new();
    // Symbols that share a name share its string: each is hashed once.
    let mut seen = std::collections::HashSet::new();
    for s in binary.symbols() {
        by_name.entry(&*s.system_name).or_insert(s.address);
        if seen.insert(s.name.as_ptr()) {
            by_name.entry(&*s.name).or_insert(s.address);
        }
    }
    let mut votes: HashMap<u64, usize> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for site in &file.call_sites {
        if !seen.insert(site.symbol) {
            continue;
        }
        let (Some(name), Some(runtime)) = (file.name(site), file.symbol_address(site)) else {
            continue;
        };
        if let Some(&linked) = by_name.get(name.as_str()) {
            *votes.entry(runtime.wrapping_sub(linked)).or_insert(0) += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(bias, n)| (n, std::cmp::Reverse(bias)))
        .map_or(0, |(bias, _)| bias)
}

/// The mapping for `--binary`: its executable segment moved by the load bias.
pub(super) fn binary_mapping(
    profile: &mut Profile,
    binary: &Binary,
    bias: u64,
) -> Option<(MappingId, u64, u64)> {
    let text = binary.text_segment()?;
    let (start, limit) = binary.text_range()?;
    let filename = profile.intern(&binary.path.to_string_lossy());
    let build_id = profile.intern(&binary.build_id);
    let start = start.wrapping_add(bias);
    let limit = limit.wrapping_add(bias);
    let id = profile.add_mapping(Mapping::new(start, limit, text.offset, filename, build_id));
    Some((id, start, limit))
}

/// Turns a parsed file into a heap profile (docs/formats/mpatrol.md §3).
pub fn to_profile(
    path: &Path,
    data: &[u8],
    file: &MpatrolFile,
    options: &ReadOptions,
) -> Result<Profile> {
    let c = Cursor::new(path, data, file.endian, file.word_size);
    check_frame_limit(path, file, options)?;
    let mut profile = Profile::new(&SAMPLE_TYPES);
    profile.default_sample_type = Some(DEFAULT_SAMPLE_TYPE);
    profile.set_period("space", "bytes", 1);
    add_metadata(&mut profile, file);

    let binary = match &options.binary {
        Some(b) => Some(Binary::open(b)?),
        None => None,
    };
    let location_of_site = site_locations(&mut profile, file, binary.as_ref());
    let mut stack: Vec<LocationId> = Vec::new();
    let mut positions = Vec::new();
    for (pos, site) in file.call_sites.iter().enumerate() {
        let Some(record) = file.record(site.record) else {
            continue;
        };
        file.stack_positions(pos, &mut positions);
        stack.clear();
        stack.extend(positions.iter().filter_map(|&p| location_of_site.get(p)));
        if options.mpatrol.size_classes {
            add_class_samples(&mut profile, &c, file, record, &stack)?;
        } else {
            let values = record_values(&c, record, 0..4)?;
            profile.add_sample(&stack, &values, &[]);
        }
    }
    if options.mpatrol.size_classes {
        profile.add_group_by(GroupBy::Label("size_class".into()));
    }
    Ok(profile)
}

/// Refuses a file whose stacks, all together, would hold more frames than
/// profconv keeps (a small hostile file can make them grow quadratically).
fn check_frame_limit(path: &Path, file: &MpatrolFile, options: &ReadOptions) -> Result<()> {
    let copies = if options.mpatrol.size_classes { 4 } else { 1 };
    let frames = file.stack_frames.saturating_mul(copies);
    if frames <= MAX_STACK_FRAMES {
        return Ok(());
    }
    Err(Error::unsupported(
        path,
        format!(
            "the stacks of the {} profiling records hold {frames} frames in all, more than profconv's limit of {MAX_STACK_FRAMES}",
            file.records.len(),
        ),
    ))
}

/// One location per call site (equal addresses share one), symbolized from
/// the binary when there is one, else named from the file itself.
fn site_locations(
    profile: &mut Profile,
    file: &MpatrolFile,
    binary: Option<&Binary>,
) -> Vec<LocationId> {
    let bias = binary.map_or(0, |b| load_bias(file, b));
    let mapping = binary.and_then(|b| binary_mapping(profile, b, bias));
    let location_of_site: Vec<LocationId> = file
        .call_sites
        .iter()
        .map(|site| {
            let in_binary =
                mapping.filter(|&(_, start, limit)| site.address >= start && site.address < limit);
            profile.address_location(in_binary.map(|m| m.0), site.address, true)
        })
        .collect();
    if let (Some(b), Some((id, _, _))) = (binary, mapping) {
        symbolize::symbolize_mapping(profile, id, b, Relocation::Bias(bias));
    }
    // Names from the file itself where the binary gave none (or there is no
    // binary). A call site without a name stays an address, as mprof shows it.
    // Each distinct name is demangled and interned once, however many call
    // sites name it (a C++ name can demangle to a megabyte).
    let mut function_of_name: HashMap<String, FunctionId> = HashMap::new();
    for (site, &id) in file.call_sites.iter().zip(&location_of_site) {
        if !profile.locations()[id.index()].lines.is_empty() {
            continue;
        }
        if let Some(raw) = file.name(site) {
            let function = match function_of_name.get(&raw) {
                Some(&function) => function,
                None => {
                    let name = symbolize::demangle(&raw);
                    let function = profile.add_function(&name, &raw, "", 0);
                    function_of_name.insert(raw, function);
                    function
                }
            };
            profile.set_location_lines(id, vec![Line { function, line: 0 }]);
        }
    }
    location_of_site
}

/// One sample per size class that has any count, labelled with the class and
/// its upper bound.
fn add_class_samples(
    profile: &mut Profile,
    c: &Cursor<'_>,
    file: &MpatrolFile,
    record: &ProfilingRecord,
    stack: &[LocationId],
) -> Result<()> {
    let mut labels = Vec::new();
    for (k, class) in SIZE_CLASSES.iter().enumerate() {
        let values = record_values(c, record, k..k + 1)?;
        if values[..4].iter().all(|&v| v == 0) {
            continue;
        }
        labels.clear();
        labels.push(profile.label_str("size_class", class));
        if let Some(&bound) = file.bounds.get(k) {
            let bound = value(
                c,
                4 + (2 + k) * file.word_size,
                u128::from(bound),
                "an allocation bound",
            )?;
            labels.push(profile.label_num("size_class_max", bound, "bytes"));
        }
        profile.add_sample(stack, &values, &labels);
    }
    Ok(())
}

pub(super) fn bounds_text(b: &[u64; 3]) -> String {
    format!(
        "small <= {} < medium <= {} < large <= {} < xlarge (bytes)",
        b[0], b[1], b[2]
    )
}

pub(super) fn add_metadata(profile: &mut Profile, file: &MpatrolFile) {
    profile.add_metadata(
        "mpatrol version",
        format!("{} ({})", file.version_text(), file.version),
    );
    profile.add_metadata("word size", format!("{} bytes", file.word_size));
    profile.add_metadata("byte order", file.endian.name());
    profile.add_metadata("allocation bounds", bounds_text(&file.bounds));
    profile.add_metadata(
        "profiling file",
        format!(
            "{} profiling records, {} call sites, {} symbols",
            file.records.len(),
            file.call_sites.len(),
            file.symbol_addresses.len()
        ),
    );
    if let Some(bins) = &file.bins {
        let a = bins.alloc_totals();
        let f = bins.free_totals();
        let n = bins.alloc_counts.len();
        profile.add_metadata(
            "size bins",
            format!(
                "{n} bins: {} allocations ({} bytes), {} frees ({} bytes), {} unfreed ({} bytes); {} allocations of {n} bytes or more ({} bytes), {} such frees ({} bytes)",
                a.count,
                a.bytes,
                f.count,
                f.bytes,
                a.count as i128 - f.count as i128,
                a.bytes as i128 - f.bytes as i128,
                a.large_count,
                a.large_bytes,
                f.large_count,
                f.large_bytes
            ),
        );
    }
    profile
        .add_comment("mpatrol allocation profile: one sample per call stack that allocated; inuse = allocated - freed");
}
