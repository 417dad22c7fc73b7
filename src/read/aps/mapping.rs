//! Mappings (§5, §10): one per merged kernel module range and one per
//! (process, vma), made when a frame first falls in them.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::records::ApsFile;
use super::tables::{merged_modules, module_file_name, VmaEntry};
use crate::profile::{basename, Mapping, MappingId, Profile, StrId};

/// What a mapping stands for, to find and symbolize its image.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Image {
    /// A merged kernel module range (or vmlinux).
    Kernel { name: String, start: u32 },
    /// A process vma.
    User {
        file: String,
        start: u32,
        is_sre: bool,
    },
}

/// A mapping key: one per merged module range, one per (pid, vma).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum MappingKey {
    Kernel { name: String, start: u32, end: u32 },
    User { pid: i32, vma: VmaEntry },
}

/// Address ranges (inclusive ends) sorted by start, with the running maximum
/// of the ends, so that a lookup only walks back over ranges that overlap.
/// Each range carries an index; where ranges overlap the lowest index wins
/// (the reporter keeps the first inserted entry).
#[derive(Default)]
pub(super) struct RangeIndex {
    ranges: Vec<(u32, u32, usize)>,
    max_end: Vec<u32>,
}

impl RangeIndex {
    pub(super) fn new(mut ranges: Vec<(u32, u32, usize)>) -> RangeIndex {
        ranges.sort_unstable();
        let mut max_end = Vec::with_capacity(ranges.len());
        let mut m = 0;
        for r in &ranges {
            m = m.max(r.1);
            max_end.push(m);
        }
        RangeIndex { ranges, max_end }
    }

    pub(super) fn find(&self, address: u32) -> Option<usize> {
        let mut i = self.ranges.partition_point(|r| r.0 <= address);
        let mut best: Option<usize> = None;
        while i > 0 {
            i -= 1;
            if self.max_end.get(i).is_none_or(|&m| m < address) {
                break;
            }
            if let Some(&(_, end, index)) = self.ranges.get(i) {
                if end >= address && best.is_none_or(|b| index < b) {
                    best = Some(index);
                }
            }
        }
        best
    }
}

/// Builds mappings and locations across files.
pub(super) struct Mapper {
    pub(super) ids: HashMap<MappingKey, MappingId>,
    pub(super) images: Vec<Image>,
}

impl Mapper {
    fn mapping(&mut self, profile: &mut Profile, key: MappingKey) -> MappingId {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let (start, end, filename, image) = match &key {
            MappingKey::Kernel { name, start, end } => (
                *start,
                *end,
                module_file_name(name),
                Image::Kernel {
                    name: name.clone(),
                    start: *start,
                },
            ),
            MappingKey::User { vma, .. } => (
                vma.start,
                vma.end,
                vma.file.clone(),
                Image::User {
                    file: vma.file.clone(),
                    start: vma.start,
                    is_sre: vma.is_sre,
                },
            ),
        };
        // Distinct, not shared: equal ranges of two processes stay two
        // mappings (pprof mappings are global, processes overlap, §10).
        let filename = profile.intern(&filename);
        let id = profile.add_mapping(Mapping::new(
            u64::from(start),
            u64::from(end) + 1,
            0,
            filename,
            StrId::EMPTY,
        ));
        self.ids.insert(key, id);
        self.images.push(image);
        id
    }
}

/// The mapping lookups of one file. Mappings are made when a frame first
/// falls in them, so processes and modules without samples add nothing.
pub(super) struct FileMaps {
    keys: Vec<MappingKey>,
    ids: Vec<Option<MappingId>>,
    kernel: RangeIndex,
    /// FxHash: looked up once per frame of a distinct stack.
    user: FxHashMap<i32, RangeIndex>,
}

impl FileMaps {
    pub(super) fn new(file: &ApsFile) -> FileMaps {
        let mut keys = Vec::new();
        let mut kernel = Vec::new();
        for m in merged_modules(&file.modules) {
            kernel.push((m.start, m.end, keys.len()));
            keys.push(MappingKey::Kernel {
                start: m.start,
                end: m.end,
                name: m.name,
            });
        }
        let mut user: HashMap<i32, Vec<(u32, u32, usize)>> = HashMap::new();
        for vma in &file.vmas {
            user.entry(vma.pid)
                .or_default()
                .push((vma.start, vma.end, keys.len()));
            keys.push(MappingKey::User {
                pid: vma.pid,
                vma: vma.clone(),
            });
        }
        FileMaps {
            ids: vec![None; keys.len()],
            keys,
            kernel: RangeIndex::new(kernel),
            user: user
                .into_iter()
                .map(|(pid, r)| (pid, RangeIndex::new(r)))
                .collect(),
        }
    }

    /// The mapping of a frame: by (pid, address) for user frames, by address
    /// among the kernel's module ranges for kernel frames.
    pub(super) fn find(
        &mut self,
        profile: &mut Profile,
        mapper: &mut Mapper,
        user: bool,
        pid: i32,
        address: u32,
    ) -> Option<MappingId> {
        let index = if user {
            self.user.get(&pid)?.find(address)?
        } else {
            self.kernel.find(address)?
        };
        let slot = self.ids.get_mut(index)?;
        if slot.is_none() {
            let key = self.keys.get(index)?.clone();
            *slot = Some(mapper.mapping(profile, key));
        }
        *slot
    }
}

/// The process name of a pid from its vmas: the basename of its
/// lowest-addressed one, the reporter's main executable (§5).
pub(super) fn main_executables(files: &[ApsFile]) -> HashMap<i32, String> {
    let mut lowest: HashMap<i32, (u32, &str)> = HashMap::new();
    for vma in files.iter().flat_map(|f| &f.vmas) {
        let slot = lowest.entry(vma.pid).or_insert((vma.start, &vma.file));
        if vma.start < slot.0 {
            *slot = (vma.start, &vma.file);
        }
    }
    lowest
        .into_iter()
        .filter(|(_, (_, file))| !file.is_empty())
        .map(|(pid, (_, file))| (pid, basename(file).to_owned()))
        .collect()
}
