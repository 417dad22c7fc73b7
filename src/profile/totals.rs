//! Totals of sample values that 64 bits cannot hold. A profile keeps one
//! `i64` per sample type per sample, and every sum of them (samples of one
//! stack, stacks merged by an output) saturates at `i64::MAX`; viewers add
//! them up again (`go tool pprof` in int64, inferno in u64) and wrap. The
//! totals here are kept in 128 bits per sample type, over a whole profile or
//! over the parts of a streamed one, so that a sum past the limit is said
//! ([`Profile::warn`]) instead of silently capped or wrapped. Memory: a few
//! words per sample type.

use super::Profile;

/// The sums of the positive and of the negative values of each sample type
/// (by name and unit, so that the parts of a streamed profile add up), and
/// whether a value sits at a limit of `i64` (a sum that saturated).
#[derive(Debug, Default, Clone)]
pub(crate) struct ValueTotals {
    types: Vec<TypeTotal>,
}

#[derive(Debug, Clone)]
struct TypeTotal {
    kind: String,
    unit: String,
    positive: i128,
    negative: i128,
    capped: bool,
}

impl ValueTotals {
    /// The totals of every sample of `profile`.
    pub fn of(profile: &Profile) -> ValueTotals {
        let mut totals = ValueTotals::default();
        totals.add_profile(profile);
        totals
    }

    /// Adds the values of every sample of `profile`.
    pub fn add_profile(&mut self, profile: &Profile) {
        let map = self.map_types(profile);
        for sample in profile.samples() {
            self.add_values(&map, &sample.values);
        }
    }

    /// Adds rows of values laid out as an [`super::AddressPart`]'s: one per
    /// sample type of `tables`, row after row.
    pub fn add_rows(&mut self, tables: &Profile, values: &[i64]) {
        let map = self.map_types(tables);
        if map.is_empty() {
            return;
        }
        for row in values.chunks(map.len()) {
            self.add_values(&map, row);
        }
    }

    /// Where each sample type of `profile` is among the totals (added when new).
    fn map_types(&mut self, profile: &Profile) -> Vec<usize> {
        (0..profile.sample_types().len())
            .map(|i| {
                let (kind, unit) = profile.sample_type_name(i);
                let found = self
                    .types
                    .iter()
                    .position(|t| t.kind == kind && t.unit == unit);
                found.unwrap_or_else(|| {
                    self.types.push(TypeTotal {
                        kind: kind.to_owned(),
                        unit: unit.to_owned(),
                        positive: 0,
                        negative: 0,
                        capped: false,
                    });
                    self.types.len() - 1
                })
            })
            .collect()
    }

    fn add_values(&mut self, map: &[usize], values: &[i64]) {
        for (&t, &v) in map.iter().zip(values) {
            let total = &mut self.types[t];
            if v > 0 {
                total.positive += i128::from(v);
            } else {
                total.negative += i128::from(v);
            }
            total.capped |= v == i64::MAX || v == i64::MIN;
        }
    }

    /// One diagnostic per sample type whose values add up past what an
    /// `i64` holds (or hold a value at its limit): what the outputs do
    /// about it.
    pub fn warnings(&self) -> Vec<String> {
        let max = i128::from(i64::MAX);
        let mut out = Vec::new();
        for t in &self.types {
            let over = t.positive > max || t.negative < i128::from(i64::MIN);
            if !over && !t.capped {
                continue;
            }
            let name = format!("{} ({})", t.kind, t.unit);
            let what = if t.positive > max {
                format!("values add up to {}", t.positive)
            } else if over {
                format!("negative values add up to {}", t.negative)
            } else {
                "a value (or a sum of values) reaches the limit".to_owned()
            };
            let mut text = format!(
                "{name}: {what}, past 2^63-1 ({max}), the most a 64-bit profile value holds: sums are capped there"
            );
            if over {
                text.push_str(", go tool pprof (which adds values in 64 bits) shows a wrong total");
            }
            let shift = count_shift(t.positive);
            if shift > 0 {
                text.push_str(&format!(
                    ", and flamegraphs count in units of 2^{shift} (scaled back in the numbers shown)"
                ));
            }
            out.push(text);
        }
        out
    }
}

/// The largest total a flamegraph's counts may add up to: inferno adds
/// them in a `u64`; this leaves room for rounding and stays in `i64`.
const FLAME_TOTAL: i128 = 1 << 62;

/// By how many bits to shift the counts of a flamegraph whose positive
/// values add up to `total`, so that inferno can add them up: none while
/// the total fits an `i64`, else enough to bring it to 2^62.
pub(crate) fn count_shift(total: i128) -> u32 {
    if total <= i128::from(i64::MAX) {
        return 0;
    }
    let mut shift = 0;
    while total >> shift > FLAME_TOTAL {
        shift += 1;
    }
    shift
}

impl Profile {
    /// Warns ([`Profile::warn`]), once per sample type, about values that
    /// add up past what an `i64` holds (or hold a value at its limit): the
    /// type, its exact total, and that sums are capped there. Writers call
    /// nothing; a conversion calls it before writing.
    pub fn warn_unrepresentable_totals(&mut self) {
        for text in ValueTotals::of(self).warnings() {
            self.warn_once(text);
        }
    }

    /// [`Profile::warn`], unless the same diagnostic is there already.
    pub(crate) fn warn_once(&mut self, text: String) {
        if !self.warnings().any(|w| w == text) {
            self.warn(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_past_i64_are_said_once_per_type() {
        let mut p = Profile::new(&[("space", "bytes"), ("objects", "count")]);
        for a in 0..4 {
            let l = p.address_location(None, a, false);
            p.add_sample(&[l], &[i64::MAX, 1], &[]);
        }
        p.warn_unrepresentable_totals();
        p.warn_unrepresentable_totals();
        let warnings: Vec<&str> = p.warnings().collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let want = (i128::from(i64::MAX) * 4).to_string();
        assert!(warnings[0].starts_with("space (bytes): values add up to "));
        assert!(warnings[0].contains(&want), "{}", warnings[0]);
        assert!(warnings[0].contains("units of 2^3"), "{}", warnings[0]);
    }

    #[test]
    fn a_saturated_sum_is_said_though_the_total_fits() {
        let mut p = Profile::new(&[("space", "bytes")]);
        let l = p.address_location(None, 1, false);
        p.add_sample(&[l], &[i64::MAX - 1], &[]);
        p.add_sample(&[l], &[5], &[]);
        assert_eq!(p.samples()[0].values[..], [i64::MAX]);
        p.warn_unrepresentable_totals();
        let warnings: Vec<&str> = p.warnings().collect();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("capped"), "{}", warnings[0]);
    }

    #[test]
    fn ordinary_totals_warn_nothing() {
        let mut p = Profile::new(&[("space", "bytes")]);
        let l = p.address_location(None, 1, false);
        p.add_sample(&[l], &[i64::MAX / 2], &[]);
        p.add_sample(&[l], &[-5], &[]);
        p.warn_unrepresentable_totals();
        assert_eq!(p.warnings().count(), 0);
        assert_eq!(count_shift(i128::from(i64::MAX)), 0);
        assert_eq!(count_shift(i128::from(i64::MAX) + 1), 1);
        assert_eq!(count_shift(1 << 62), 0);
        assert_eq!(count_shift(4 * i128::from(i64::MAX)), 3);
    }
}
