//! The rows of a lean part ([`crate::profile::AddressPart`]) as pprof
//! bytes: per sampled address one `Location` (`id`, `mapping_id`,
//! `address`) and one `Sample` (its location, its values, the part's
//! labels), the same bytes prost's generated code writes for those
//! messages (a test compares them). A DCPI database is tens of millions of
//! such rows; prost sizes each message and each packed field before
//! writing it, through its generic field code, and that was a third of a
//! conversion's time, more than the reading. Everything else is encoded by
//! prost.

use prost::encoding::encoded_len_varint as len;

/// Appends `v` as a protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint into `row` at `n`; where it ends.
fn put(row: &mut [u8], mut n: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        row[n] = v as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    row[n] = v as u8;
    n + 1
}

/// Appends `Profile.location` (field 4): a location with no lines. Zero
/// fields are left out, as proto3 writes them. Its body is at most three
/// 11-byte fields, so its length is one byte: the row is put together in a
/// small array and appended at once.
pub(super) fn location(out: &mut Vec<u8>, id: u64, mapping_id: u64, address: u64) {
    let mut row = [0u8; 2 + 3 * 11];
    row[0] = 4 << 3 | 2;
    let mut n = 2;
    for (tag, v) in [(1u8, id), (2, mapping_id), (3, address)] {
        if v != 0 {
            row[n] = tag << 3;
            n = put(&mut row, n + 1, v);
        }
    }
    row[1] = (n - 2) as u8;
    out.extend_from_slice(&row[..n]);
}

/// Appends `Profile.sample` (field 2): one location, `values` packed, and
/// `labels`, the `Sample.label` fields encoded already. A row of up to
/// four values and 64 bytes of labels (every DCPI row) has a body under 128
/// bytes, a one-byte length: it is put together in a small array, as a
/// location is; a longer one is sized first.
pub(super) fn sample(out: &mut Vec<u8>, location_id: u64, values: &[i64], labels: &[u8]) {
    if values.len() <= 4 && labels.len() <= 64 {
        let mut row = [0u8; 2 + 12 + 2 + 4 * 10];
        let mut n = put(&mut row, 2, 1 << 3 | 2);
        n = put(&mut row, n, len(location_id) as u64);
        n = put(&mut row, n, location_id);
        if !values.is_empty() {
            n = put(&mut row, n, 2 << 3 | 2);
            let at = n;
            n += 1;
            for &v in values {
                n = put(&mut row, n, v as u64);
            }
            row[at] = (n - at - 1) as u8;
        }
        row[0] = 2 << 3 | 2;
        row[1] = (n - 2 + labels.len()) as u8;
        out.extend_from_slice(&row[..n]);
        out.extend_from_slice(labels);
        return;
    }
    let packed = |n: usize| if n == 0 { 0 } else { 1 + len(n as u64) + n };
    let ids = len(location_id);
    let vals: usize = values.iter().map(|&v| len(v as u64)).sum();
    let body = packed(ids) + packed(vals) + labels.len();
    out.push(2 << 3 | 2);
    varint(out, body as u64);
    out.push(1 << 3 | 2);
    varint(out, ids as u64);
    varint(out, location_id);
    if vals > 0 {
        out.push(2 << 3 | 2);
        varint(out, vals as u64);
        for &v in values {
            varint(out, v as u64);
        }
    }
    out.extend_from_slice(labels);
}

#[cfg(test)]
mod tests {
    use super::super::pb;
    use super::*;

    #[test]
    fn rows_are_the_bytes_prost_writes() {
        let big = [0, 1, 127, 128, 300, 1 << 35, u64::MAX];
        for &id in &big[1..] {
            for &mapping_id in &big {
                for &address in &big {
                    let mut ours = Vec::new();
                    location(&mut ours, id, mapping_id, address);
                    let m = pb::Location {
                        id,
                        mapping_id,
                        address,
                        ..Default::default()
                    };
                    let mut theirs = Vec::new();
                    prost::encoding::message::encode(4, &m, &mut theirs);
                    assert_eq!(ours, theirs, "location {id} {mapping_id} {address}");
                }
            }
        }
        let labels = [
            pb::Label {
                key: 3,
                str: 4,
                ..Default::default()
            },
            pb::Label {
                key: 5,
                num: -7,
                num_unit: 6,
                ..Default::default()
            },
        ];
        let value_sets: [&[i64]; 7] = [
            &[],
            &[0],
            &[1, 0, 300],
            &[-1, i64::MIN, i64::MAX],
            &[-1, -2, i64::MIN, -4],
            &[1, 2, 3, 4, 5],
            &[0; 200],
        ];
        for labels in [&labels[..0], &labels[..1], &labels[..]] {
            let mut encoded = Vec::new();
            for l in labels {
                prost::encoding::message::encode(3, l, &mut encoded);
            }
            for values in value_sets {
                for &id in &big[1..] {
                    let mut ours = Vec::new();
                    sample(&mut ours, id, values, &encoded);
                    let m = pb::Sample {
                        location_id: vec![id],
                        value: values.to_vec(),
                        label: labels.to_vec(),
                    };
                    let mut theirs = Vec::new();
                    prost::encoding::message::encode(2, &m, &mut theirs);
                    assert_eq!(ours, theirs, "sample {id} {values:?} {labels:?}");
                }
            }
        }
    }
}
