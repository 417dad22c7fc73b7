//! Merging profiles, one table at a time (google/pprof's `merge.go`):
//! sample types by name and unit, then the header, mappings, functions,
//! locations and samples, each translating the ids of the tables before it;
//! and merging with the locations folded to a [`Granularity`] on the way.

use rustc_hash::FxHashMap as HashMap;

use super::{basename, Function, FunctionId, Label, LabelValue, Line, Lines, Location};
use super::{LocationId, MappingId, Profile, StrId};
use crate::error::{Error, Result};

/// How finely frames are told apart, in pprof's words (its
/// `-granularity`): locations that differ only below it are one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Granularity {
    /// Every location as read: an instruction address, with its inlined
    /// frames and their lines.
    #[default]
    Addresses,
    /// Source lines: the addresses of one line of one function (in one
    /// image) are one location.
    Lines,
    /// Functions: every address of a function is one location (inlined
    /// frames stay frames of their own).
    Functions,
    /// Source files: a frame per file, named by its path.
    Files,
}

impl Granularity {
    /// The word the command line takes (`--granularity`).
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Addresses => "addresses",
            Granularity::Lines => "lines",
            Granularity::Functions => "functions",
            Granularity::Files => "files",
        }
    }
}

impl Profile {
    /// Adds every sample of `other` into `self` (e.g. several gmon.out files of
    /// one program, like `gprof -s`). Sample types are matched by name and
    /// unit; types only `other` has are added. A type with the same name and a
    /// different unit is an error.
    pub fn merge(&mut self, other: &Profile) -> Result<()> {
        self.merge_folded(other, Granularity::Addresses)
    }

    /// [`Profile::merge`], each location of `other` folded to `granularity`
    /// first: above [`Granularity::Addresses`], a symbolized location loses
    /// its address (and, coarser, its lines or functions), and an
    /// unsymbolized one in a named image becomes that image's one frame,
    /// `[name]` (an address of no known image stays as it is). Equal folded
    /// locations and samples are one, so the result is as large as the
    /// distinct folded stacks, however many addresses `other` has.
    pub(crate) fn merge_folded(&mut self, other: &Profile, granularity: Granularity) -> Result<()> {
        let mut merger = Merger::new(self, other);
        merger.granularity = granularity;
        merger.map_sample_types()?;
        merger.map_header();
        merger.map_mappings();
        merger.map_functions();
        merger.map_locations();
        merger.map_samples();
        Ok(())
    }

    /// Merges everything of `other` but its locations and samples (sample
    /// types, header, mappings, functions and the strings they name) into
    /// `self`, in the order [`Profile::merge`] would, and says where each
    /// entry went. A streaming writer uses it to translate a part's ids
    /// while it encodes the part's locations and samples itself.
    pub(crate) fn merge_tables(&mut self, other: &Profile) -> Result<TableMap> {
        let mut merger = Merger::new(self, other);
        merger.map_sample_types()?;
        merger.map_header();
        merger.map_mappings();
        merger.map_functions();
        Ok(TableMap {
            types: merger.types,
            mappings: merger.mappings,
            functions: merger.functions,
        })
    }
}

/// Where the sample types, mappings and functions of a profile went when
/// [`Profile::merge_tables`] merged it into another: entry `i` of each is
/// the new index of entry `i` of the merged profile.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableMap {
    /// Sample type indexes.
    pub types: Vec<usize>,
    /// Mapping ids.
    pub mappings: Vec<MappingId>,
    /// Function ids.
    pub functions: Vec<FunctionId>,
}

/// adds a table of `src` to `dst` and remembers where each entry went, so
/// that the next tables can translate their ids (google/pprof's merge.go).
struct Merger<'a> {
    dst: &'a mut Profile,
    src: &'a Profile,
    types: Vec<usize>,
    mappings: Vec<MappingId>,
    functions: Vec<FunctionId>,
    locations: Vec<LocationId>,
    granularity: Granularity,
    /// The frame of an image's unsymbolized addresses, by mapping in `dst`.
    images: HashMap<MappingId, Option<FunctionId>>,
    /// The frame of a source file, by its name in `dst`.
    files: HashMap<StrId, FunctionId>,
}

impl<'a> Merger<'a> {
    fn new(dst: &'a mut Profile, src: &'a Profile) -> Self {
        Merger {
            dst,
            src,
            types: Vec::new(),
            mappings: Vec::new(),
            functions: Vec::new(),
            locations: Vec::new(),
            granularity: Granularity::Addresses,
            images: HashMap::default(),
            files: HashMap::default(),
        }
    }

    /// The id in `dst` of the string `id` of `src`.
    fn str(&mut self, id: StrId) -> StrId {
        self.dst.intern(self.src.str(id))
    }

    /// Sample types by name and unit; a name in two units cannot be summed.
    fn map_sample_types(&mut self) -> Result<()> {
        for i in 0..self.src.sample_types.len() {
            let (kind, unit) = self.src.sample_type_name(i);
            let index = match self.dst.sample_type_index(kind) {
                Some(j) => {
                    let (_, own_unit) = self.dst.sample_type_name(j);
                    if own_unit != unit {
                        return Err(Error::ConflictingUnits {
                            sample_type: kind.to_string(),
                            first: own_unit.to_string(),
                            second: unit.to_string(),
                        });
                    }
                    j
                }
                None => self.dst.add_sample_type(kind, unit),
            };
            self.types.push(index);
        }
        Ok(())
    }

    /// Period, default type, time range, comments, metadata and groupings.
    fn map_header(&mut self) {
        let (dst, src) = (&mut *self.dst, self.src);
        if dst.period_type.is_none() {
            if let Some(pt) = src.period_type {
                dst.set_period(src.str(pt.kind), src.str(pt.unit), src.period);
            }
        }
        if dst.default_sample_type.is_none() {
            dst.default_sample_type = src.default_sample_type.map(|i| self.types[i]);
        }
        if dst.call_count_type.is_none() {
            dst.call_count_type = src.call_count_type.map(|i| self.types[i]);
        }
        if src.time_nanos != 0 {
            if dst.time_nanos == 0 {
                dst.time_nanos = src.time_nanos;
                dst.duration_nanos = src.duration_nanos;
            } else {
                let start = dst.time_nanos.min(src.time_nanos);
                let end =
                    (dst.time_nanos + dst.duration_nanos).max(src.time_nanos + src.duration_nanos);
                dst.time_nanos = start;
                dst.duration_nanos = end - start;
            }
        }
        for c in &src.comments {
            if !dst.comments.contains(c) {
                dst.comments.push(c.clone());
            }
        }
        for kv in &src.metadata {
            if !dst.metadata.contains(kv) {
                dst.metadata.push(kv.clone());
            }
        }
        for g in &src.group_by {
            if !dst.group_by.contains(g) {
                dst.group_by.push(g.clone());
            }
        }
    }

    /// Mappings, each an equal one of `dst` if there is one (as pprof's
    /// merge.go does): several gmon.out of one program have one executable.
    fn map_mappings(&mut self) {
        for m in &self.src.mappings {
            let mut m = m.clone();
            m.filename = self.str(m.filename);
            m.build_id = self.str(m.build_id);
            let id = match self.dst.mappings.iter().position(|d| *d == m) {
                Some(i) => MappingId::from_index(i),
                None => self.dst.add_mapping(m),
            };
            self.mappings.push(id);
        }
    }

    fn map_functions(&mut self) {
        for f in &self.src.functions {
            let f = Function {
                name: self.str(f.name),
                system_name: self.str(f.system_name),
                filename: self.str(f.filename),
                start_line: f.start_line,
            };
            let id = self.dst.intern_function(f);
            self.functions.push(id);
        }
    }

    fn map_locations(&mut self) {
        for l in &self.src.locations {
            let l = self.fold(l);
            let id = self.dst.add_location(l);
            self.locations.push(id);
        }
    }

    /// A location of `src` in `dst`'s ids, folded to the granularity.
    fn fold(&mut self, l: &Location) -> Location {
        let mapping = l.mapping.map(|m| self.mappings[m.index()]);
        let as_read = |lines| Location {
            mapping,
            address: l.address,
            is_return_address: l.is_return_address,
            lines,
        };
        let folded = |lines| Location {
            mapping,
            address: 0,
            is_return_address: false,
            lines,
        };
        let line = |functions: &[FunctionId], line: &Line| Line {
            function: functions[line.function.index()],
            line: line.line,
        };
        if self.granularity == Granularity::Addresses {
            return as_read(l.lines.iter().map(|l| line(&self.functions, l)).collect());
        }
        if l.lines.is_empty() {
            return match self.image_frame(mapping) {
                Some(function) => folded(Lines::from_elem(Line { function, line: 0 }, 1)),
                None => as_read(Lines::new()),
            };
        }
        let mut lines = Lines::with_capacity(l.lines.len());
        for read in &l.lines {
            let mut line = line(&self.functions, read);
            match self.granularity {
                Granularity::Addresses | Granularity::Lines => {}
                Granularity::Functions => line.line = 0,
                Granularity::Files => {
                    line = Line {
                        function: self.file_frame(line.function),
                        line: 0,
                    }
                }
            }
            // A file's inlined frames in a row are one frame of that file.
            if lines.last() != Some(&line) || self.granularity != Granularity::Files {
                lines.push(line);
            }
        }
        folded(lines)
    }

    /// The one frame, `[name]`, of the unsymbolized addresses of the image
    /// of `mapping` (of `dst`); `None` for an image with no name.
    fn image_frame(&mut self, mapping: Option<MappingId>) -> Option<FunctionId> {
        let mapping = mapping?;
        if let Some(&known) = self.images.get(&mapping) {
            return known;
        }
        let file = self.dst.str(self.dst.mappings[mapping.index()].filename);
        let name = (!file.is_empty()).then(|| format!("[{}]", basename(file)));
        let frame = name.map(|name| self.dst.add_function(&name, &name, "", 0));
        self.images.insert(mapping, frame);
        frame
    }

    /// The frame of the source file of `function` (of `dst`), named by the
    /// file's path; the function itself when its file is unknown.
    fn file_frame(&mut self, function: FunctionId) -> FunctionId {
        let file = self.dst.functions[function.index()].filename;
        if self.dst.str(file).is_empty() {
            return function;
        }
        if let Some(&known) = self.files.get(&file) {
            return known;
        }
        let path = self.dst.str(file).to_owned();
        let frame = self.dst.add_function(&path, &path, &path, 0);
        self.files.insert(file, frame);
        frame
    }

    fn map_label(&mut self, l: &Label) -> Label {
        Label {
            key: self.str(l.key),
            value: match l.value {
                LabelValue::Str(v) => LabelValue::Str(self.str(v)),
                LabelValue::Num { num, unit } => LabelValue::Num {
                    num,
                    unit: self.str(unit),
                },
            },
        }
    }

    fn map_samples(&mut self) {
        let mut values = vec![0i64; self.dst.sample_types.len()];
        for s in &self.src.samples {
            let stack: Vec<LocationId> =
                s.stack.iter().map(|&l| self.locations[l.index()]).collect();
            values.iter_mut().for_each(|v| *v = 0);
            for (i, v) in s.values.iter().enumerate() {
                values[self.types[i]] = *v;
            }
            let labels: Vec<Label> = s.labels.iter().map(|l| self.map_label(l)).collect();
            self.dst.add_sample(&stack, &values, &labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sums_values_and_adds_missing_types() {
        let mut a = Profile::new(&[("samples", "count")]);
        let la = a.address_location(None, 0x10, false);
        a.add_sample(&[la], &[2], &[]);
        let mut b = Profile::new(&[("calls", "count"), ("samples", "count")]);
        let lb = b.address_location(None, 0x10, false);
        b.add_sample(&[lb], &[7, 3], &[]);
        a.merge(&b).unwrap();
        assert_eq!(a.sample_types.len(), 2);
        assert_eq!(a.samples.len(), 1);
        assert_eq!(a.samples[0].values[..], [5, 7]);
    }

    #[test]
    fn merge_refuses_unit_mismatch() {
        let mut a = Profile::new(&[("cpu", "nanoseconds")]);
        let b = Profile::new(&[("cpu", "count")]);
        match a.merge(&b) {
            Err(Error::ConflictingUnits {
                sample_type,
                first,
                second,
            }) => assert_eq!(
                (&*sample_type, &*first, &*second),
                ("cpu", "nanoseconds", "count")
            ),
            other => panic!("expected ConflictingUnits, got {other:?}"),
        }
    }
}
