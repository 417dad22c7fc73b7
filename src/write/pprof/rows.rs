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

/// Appends `Profile.location` (field 4): a location with no lines. Zero
/// fields are left out, as proto3 writes them.
pub(super) fn location(out: &mut Vec<u8>, id: u64, mapping_id: u64, address: u64) {
    let field = |v: u64| if v == 0 { 0 } else { 1 + len(v) };
    let body = field(id) + field(mapping_id) + field(address);
    out.push(4 << 3 | 2);
    varint(out, body as u64);
    for (tag, v) in [(1u8, id), (2, mapping_id), (3, address)] {
        if v != 0 {
            out.push(tag << 3);
            varint(out, v);
        }
    }
}

/// Appends `Profile.sample` (field 2): one location, `values` packed, and
/// `labels`, the `Sample.label` fields encoded already.
pub(super) fn sample(out: &mut Vec<u8>, location_id: u64, values: &[i64], labels: &[u8]) {
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
        let value_sets: [&[i64]; 5] = [
            &[],
            &[0],
            &[1, 0, 300],
            &[-1, i64::MIN, i64::MAX],
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
