//! A stable LSD radix sort by a `u64` key (addresses, mostly): a few linear
//! passes instead of a comparison sort, for the thousands of addresses and
//! symbols of a large program.

/// Sorts `values` by `key`, keeping the order of values with equal keys, a
/// byte of the key at a time (least significant first), skipping the bytes
/// every key shares (the high bytes of addresses in one executable).
/// Values already in order are left as they are after one look.
pub(crate) fn sort_by_key<T: Copy>(values: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if values.is_sorted_by_key(&key) {
        return;
    }
    if values.len() <= 64 {
        values.sort_by_key(&key); // stable too
        return;
    }
    let first = key(&values[0]);
    let differing = values.iter().fold(0u64, |acc, v| acc | (key(v) ^ first));
    let mut other = values.clone();
    for shift in (0..64).step_by(8) {
        if (differing >> shift) & 0xff == 0 {
            continue;
        }
        let mut counts = [0usize; 256];
        for v in values.iter() {
            counts[((key(v) >> shift) & 0xff) as usize] += 1;
        }
        let mut start = 0;
        for count in counts.iter_mut() {
            (*count, start) = (start, start + *count);
        }
        for v in values.iter() {
            let slot = &mut counts[((key(v) >> shift) & 0xff) as usize];
            other[*slot] = *v;
            *slot += 1;
        }
        std::mem::swap(values, &mut other);
    }
}

#[cfg(test)]
mod tests {
    use super::sort_by_key;

    #[test]
    fn sorts_like_a_stable_sort() {
        let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next();
        for (len, mask) in [
            (0, u64::MAX),
            (10, u64::MAX),
            (1000, u64::MAX),
            (5000, 0xf_ffff),
            (5000, 0xff), // many equal keys: their order is kept
        ] {
            let mut values: Vec<(u64, usize)> =
                (0..len).map(|i| (0x40_0000 + (next() & mask), i)).collect();
            let mut expected = values.clone();
            expected.sort_by_key(|v| v.0);
            sort_by_key(&mut values, |v| v.0);
            assert_eq!(values, expected);
            sort_by_key(&mut values, |v| v.0);
            assert_eq!(values, expected, "sorted input");
        }
    }
}
