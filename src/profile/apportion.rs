//! Splitting a total into integer parts in proportion to weights, so that
//! the parts add up to the total exactly (largest-remainder rounding): how
//! gprof's self time is spread over the call-graph arcs.

/// Splits `total` into integer parts proportional to `weights`, so that the
/// parts add up to `total` exactly (largest-remainder rounding).
pub(crate) fn apportion(total: i64, weights: &[f64]) -> Vec<i64> {
    let mut parts = vec![0; weights.len()];
    Apportioner::default().split_into(total, weights, &mut parts);
    parts
}

/// [`apportion`] for callers that split many totals: its working space is
/// kept from call to call, and the parts written into a slice.
#[derive(Debug, Default)]
pub(crate) struct Apportioner {
    exact: Vec<f64>,
    order: Vec<usize>,
}

impl Apportioner {
    /// Writes [`apportion`]`(total, weights)` into `parts` (as long as
    /// `weights`).
    pub fn split_into(&mut self, total: i64, weights: &[f64], parts: &mut [i64]) {
        assert_eq!(parts.len(), weights.len(), "one part per weight");
        let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
        if weights.is_empty() || sum <= 0.0 {
            parts.fill(0);
            return;
        }
        let exact = &mut self.exact;
        exact.clear();
        exact.extend(weights.iter().map(|w| {
            if w.is_finite() && *w > 0.0 {
                total as f64 * w / sum
            } else {
                0.0
            }
        }));
        for (p, e) in parts.iter_mut().zip(exact.iter()) {
            *p = e.floor() as i64;
        }
        // What flooring left over: fewer than one per part in exact
        // arithmetic, but anything when the total is too large for an f64 to
        // hold exactly (a crafted count near 2^63): handed out in bulk, never
        // one by one.
        let assigned: i128 = parts.iter().map(|&p| i128::from(p)).sum();
        let mut rest = i128::from(total) - assigned;
        if rest == 0 {
            return;
        }
        let order = &mut self.order;
        order.clear();
        order.extend((0..weights.len()).filter(|&i| exact[i] > 0.0 || weights[i] > 0.0));
        if order.is_empty() {
            return;
        }
        // Largest remainder first, then lowest index: a total order (the
        // remainders are finite), so any sort gives this one sequence.
        let by_remainder = |&a: &usize, &b: &usize| {
            let ra = exact[a] - exact[a].floor();
            let rb = exact[b] - exact[b].floor();
            rb.partial_cmp(&ra)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(&b))
        };
        let n = order.len() as i128;
        if rest > 0 {
            // Every part gets `each`, the `extra` first in that order one
            // more: which those are, not their order, is all that counts.
            let (each, extra) = (rest / n, (rest % n) as usize);
            if extra > 0 && extra < order.len() {
                order.select_nth_unstable_by(extra, by_remainder);
            }
            for (k, &i) in order.iter().enumerate() {
                let add = each + i128::from(k < extra);
                parts[i] =
                    (i128::from(parts[i]) + add).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            }
            return;
        }
        // Too much given (rounding up): taken back from the smallest
        // remainders.
        order.sort_unstable_by(by_remainder);
        for &i in order.iter().rev() {
            if rest >= 0 {
                break;
            }
            let take = (-rest).min(i128::from(parts[i].max(0)));
            parts[i] -= take as i64;
            rest += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `apportion` as first written (every part sorted by remainder,
    /// stable, fresh vectors), which `Apportioner` must match exactly.
    fn apportion_by_full_sort(total: i64, weights: &[f64]) -> Vec<i64> {
        let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
        if weights.is_empty() || sum <= 0.0 {
            return vec![0; weights.len()];
        }
        let ok = |w: f64| w.is_finite() && w > 0.0;
        let exact: Vec<f64> = weights
            .iter()
            .map(|&w| if ok(w) { total as f64 * w / sum } else { 0.0 })
            .collect();
        let mut parts: Vec<i64> = exact.iter().map(|e| e.floor() as i64).collect();
        let assigned: i128 = parts.iter().map(|&p| i128::from(p)).sum();
        let mut rest = i128::from(total) - assigned;
        let mut order: Vec<usize> = (0..weights.len())
            .filter(|&i| exact[i] > 0.0 || weights[i] > 0.0)
            .collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
            rb.partial_cmp(&ra).unwrap().then(a.cmp(&b))
        });
        if order.is_empty() {
            return parts;
        }
        let n = order.len() as i128;
        if rest > 0 {
            let (each, extra) = (rest / n, rest % n);
            for (k, &i) in order.iter().enumerate() {
                let add = each + i128::from((k as i128) < extra);
                parts[i] =
                    (i128::from(parts[i]) + add).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            }
            rest = 0;
        }
        // Rounded up: the excess comes back from the smallest remainders,
        // as much as each positive part holds.
        let mut excess = -rest;
        let mut k = order.len();
        while excess > 0 && k > 0 {
            k -= 1;
            let back = excess.min(i128::from(parts[order[k]]).max(0));
            parts[order[k]] -= back as i64;
            excess -= back;
        }
        parts
    }

    #[test]
    fn apportioner_matches_a_full_sort_of_the_remainders() {
        let mut rng = crate::test_rng::XorShift(0x51_7cc1_b727_220a);
        let mut split = Apportioner::default();
        let totals = [
            0,
            1,
            7,
            1000,
            123_456_789,
            -5,
            i64::MAX,
            i64::MAX - 3,
            i64::MIN,
        ];
        for round in 0..20_000 {
            let n = 1 + (rng.next() % 9) as usize;
            let weights: Vec<f64> = (0..n)
                .map(|_| match rng.next() % 10 {
                    0 => 0.0,
                    1 => (rng.next() % 3) as f64, // ties
                    2 => u64::MAX as f64,
                    3 => f64::NAN,
                    _ => (rng.next() % 100_000) as f64 + 0.5,
                })
                .collect();
            let total = match round % 3 {
                0 => totals[(rng.next() % totals.len() as u64) as usize],
                _ => (rng.next() % 1_000_000) as i64,
            };
            let mut parts = vec![-1; n];
            split.split_into(total, &weights, &mut parts);
            let want = apportion_by_full_sort(total, &weights);
            assert_eq!(parts, want, "total {total}, weights {weights:?}");
            assert_eq!(apportion(total, &weights), want);
        }
    }

    #[test]
    fn apportion_keeps_the_total() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]).iter().sum::<i64>(), 10);
        assert_eq!(
            apportion(7, &[0.5, 0.25, 0.25]),
            vec![3, 2, 2],
            "largest remainders first"
        );
        assert_eq!(apportion(5, &[0.0, 0.0]), vec![0, 0]);
        assert_eq!(apportion(3, &[1.0, 0.0]), vec![3, 0]);
    }
}
