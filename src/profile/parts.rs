//! A profile handed over in parts ([`PartSink`]), for readers whose
//! profiles can outgrow memory (a DCPI database): the parts, their lean
//! column form ([`AddressPart`]), and the sink that merges them back into
//! one profile ([`CollectParts`]), folded to a granularity if asked.

use super::{Granularity, Label, MappingId, Profile};
use crate::error::Result;

/// profile piece by piece so that it never has to be whole in memory.
///
/// The first part is the head: sample types, period, time, metadata,
/// groupings (and possibly strings and tables the later parts use). Every
/// later part holds some of the head's sample types (in any order, never a
/// new one: those it has values for) and its own mappings, functions,
/// locations and samples; its locations
/// and samples are distinct from every other part's (a part is, e.g., one
/// DCPI image). A part with no samples may carry comments to add at the end.
/// The profile the parts stand for is the head with every later part
/// [merged](Profile::merge) into it, in order.
pub(crate) trait PartSink {
    /// Takes the next part.
    fn part(&mut self, part: Profile) -> Result<()>;

    /// Takes the next part in its lean form (a later part, never the head).
    /// The part is lent: the reader reuses its buffers for the next one. By
    /// default it is made into the profile it stands for
    /// ([`AddressPart::to_profile`]) and handed to [`PartSink::part`]; a
    /// sink that can use the columns as they are (the streaming pprof
    /// writer) overrides this.
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        self.part(part.to_profile())
    }
}

/// A part ([`PartSink`]) in columns: one mapping, and per row one
/// unsymbolized location at a distinct address (not a return address) in
/// it and one sample whose stack is that location alone, all with the same
/// labels. No object per row: a DCPI image of millions of sampled addresses
/// is two flat arrays, reused from image to image.
#[derive(Debug, Clone)]
pub(crate) struct AddressPart {
    /// Sample types, strings and the mapping; no locations or samples.
    pub tables: Profile,
    /// The rows' mapping, in `tables`.
    pub mapping: MappingId,
    /// Every sample's labels, sorted by key.
    pub labels: Vec<Label>,
    /// Each row's address, in the order the rows are.
    pub addresses: Vec<u64>,
    /// Each row's values, one per sample type of `tables`, row after row.
    pub values: Vec<i64>,
}

impl Default for AddressPart {
    fn default() -> Self {
        AddressPart {
            tables: Profile::default(),
            mapping: MappingId::from_index(0),
            labels: Vec::new(),
            addresses: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl AddressPart {
    /// Empties the part, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.tables = Profile::default();
        self.labels.clear();
        self.addresses.clear();
        self.values.clear();
    }

    /// Values per row: the number of sample types.
    pub fn width(&self) -> usize {
        self.tables.sample_types().len()
    }

    /// Every row: its address and its values ([`AddressPart::width`] of them).
    pub fn rows(&self) -> impl Iterator<Item = (u64, &[i64])> {
        let width = self.width();
        self.addresses.iter().enumerate().map(move |(i, &address)| {
            let values = self.values.get(i * width..(i + 1) * width);
            (address, values.unwrap_or_default())
        })
    }

    /// The profile the part stands for: `tables` with a location and a
    /// one-frame sample per row, in row order.
    pub fn to_profile(&self) -> Profile {
        self.to_profile_of(0..self.addresses.len())
    }

    /// [`AddressPart::to_profile`] of some of the rows only: a part too
    /// large to be made into one profile is made into several.
    pub fn to_profile_of(&self, rows: std::ops::Range<usize>) -> Profile {
        let mut part = self.tables.clone();
        let rows = rows.start.min(self.addresses.len())..rows.end.min(self.addresses.len());
        part.reserve(rows.len(), rows.len(), 0);
        for (address, values) in self.rows().skip(rows.start).take(rows.len()) {
            let location = part.address_location(Some(self.mapping), address, false);
            part.add_sample(&[location], values, &self.labels);
        }
        part
    }
}

/// The [`PartSink`] that merges the parts into one profile: whole (the
/// collect-everything reading of [`crate::read::read`]), or folded to a
/// [`Granularity`] as they come ([`Profile::merge_folded`]), which keeps
/// only the distinct folded stacks: the profile of a writer that needs it
/// whole, as large as what it shows rather than as the input.
#[derive(Debug, Default)]
pub(crate) struct CollectParts {
    profile: Option<Profile>,
    granularity: Granularity,
}

impl CollectParts {
    /// Parts merged with their locations folded to `granularity`.
    pub fn folded(granularity: Granularity) -> Self {
        CollectParts {
            profile: None,
            granularity,
        }
    }

    /// Samples held so far.
    pub fn held_samples(&self) -> usize {
        self.profile.as_ref().map_or(0, |p| p.samples().len())
    }

    /// The profile merged so far, if a part came.
    pub fn profile_mut(&mut self) -> Option<&mut Profile> {
        self.profile.as_mut()
    }

    /// The merged profile (an empty one if no part came).
    pub fn into_profile(self) -> Profile {
        self.profile.unwrap_or_default()
    }
}

impl PartSink for CollectParts {
    fn part(&mut self, part: Profile) -> Result<()> {
        match (&mut self.profile, self.granularity) {
            (None, Granularity::Addresses) => self.profile = Some(part),
            (None, granularity) => {
                let mut folded = Profile::default();
                folded.merge_folded(&part, granularity)?;
                self.profile = Some(folded);
            }
            (Some(whole), granularity) => whole.merge_folded(&part, granularity)?,
        }
        Ok(())
    }

    /// Above [`Granularity::Addresses`], the rows of a part in a named image
    /// fold to that image's one frame: one sample of their summed values,
    /// with no profile of a row each made on the way.
    fn address_part(&mut self, part: &AddressPart) -> Result<()> {
        let named = part.tables.mappings().get(part.mapping.index());
        let named = named.is_some_and(|m| !part.tables.str(m.filename).is_empty());
        let (Some(&first), true) = (part.addresses.first(), named) else {
            return self.part(part.to_profile());
        };
        if self.granularity == Granularity::Addresses {
            return self.part(part.to_profile());
        }
        let mut sums = vec![0i64; part.width()];
        for (_, values) in part.rows() {
            for (sum, &v) in sums.iter_mut().zip(values) {
                *sum = sum.saturating_add(v);
            }
        }
        let mut folded = part.tables.clone();
        let location = folded.address_location(Some(part.mapping), first, false);
        folded.add_sample(&[location], &sums, &part.labels);
        self.part(folded)
    }
}
