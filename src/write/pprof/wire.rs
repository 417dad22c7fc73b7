//! Protobuf encoding of the two messages the streaming writer emits by the
//! million, `Sample` and `Location` (as `Profile` fields 2 and 4), straight
//! into a byte buffer: no message objects, no allocation per entry. The
//! bytes are exactly prost's for the same message (tested below), so a
//! streamed profile decodes to what [`super::to_proto`] builds.

/// Varint wire type.
const VARINT: u64 = 0;
/// Length-delimited wire type.
const LEN: u64 = 2;

/// The `Profile` field of samples.
const PROFILE_SAMPLE: u64 = 2;
/// The `Profile` field of locations.
const PROFILE_LOCATION: u64 = 4;

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_key(buf: &mut Vec<u8>, field: u64, wire: u64) {
    put_varint(buf, field << 3 | wire);
}

/// A varint field, left out when 0 (proto3).
fn put_field(buf: &mut Vec<u8>, field: u64, v: u64) {
    if v != 0 {
        put_key(buf, field, VARINT);
        put_varint(buf, v);
    }
}

/// A label with its strings already indexes of the output's string table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Label {
    pub key: i64,
    pub str: i64,
    pub num: i64,
    pub num_unit: i64,
}

/// A line of a location: function id (1-based) and line number.
#[derive(Debug, Clone, Copy, Default)]
pub struct Line {
    pub function_id: u64,
    pub line: i64,
}

/// Bytes of `v` as a varint: 1 per 7 bits, at least one (prost's
/// `encoded_len_varint`: ⌈bits / 7⌉ as a multiply and a shift).
fn varint_len(v: u64) -> usize {
    (((v | 1).leading_zeros() ^ 63) as usize * 9 + 73) / 64
}

/// Bytes of a varint field (key of one byte: fields below 16), 0 when left out.
fn field_len(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        1 + varint_len(v)
    }
}

/// Appends `labels` as a `Sample`'s field 3, for [`sample_encoded`].
pub fn encode_labels(out: &mut Vec<u8>, labels: &[Label]) {
    for l in labels {
        let len = field_len(l.key as u64)
            + field_len(l.str as u64)
            + field_len(l.num as u64)
            + field_len(l.num_unit as u64);
        put_key(out, 3, LEN);
        put_varint(out, len as u64);
        put_field(out, 1, l.key as u64);
        put_field(out, 2, l.str as u64);
        put_field(out, 3, l.num as u64);
        put_field(out, 4, l.num_unit as u64);
    }
}

/// Appends `Profile.sample` (field 2) with this sample to `out`, its
/// labels already encoded ([`encode_labels`]).
pub fn sample_encoded(out: &mut Vec<u8>, location_ids: &[u64], values: &[i64], labels: &[u8]) {
    sample_of(out, location_ids.iter().copied(), values, labels);
}

/// [`sample_encoded`] of location ids given one by one. Most samples'
/// lengths (the body's, the packed fields') are below 128, one byte each:
/// the sample is written in one pass with room for them, each set once
/// known. A longer one is written again by [`sample_measured`]; one of
/// [`LONG_STACK`] frames or more is measured first.
pub fn sample_of(
    out: &mut Vec<u8>,
    location_ids: impl ExactSizeIterator<Item = u64> + Clone,
    values: &[i64],
    labels: &[u8],
) {
    if location_ids.len() >= LONG_STACK {
        return sample_measured(out, location_ids, values, labels);
    }
    let start = out.len();
    let room = 6 + 10 * (location_ids.len() + values.len()) + labels.len();
    let mut short = false;
    Small::append_room(out, room, |m| {
        short = m.sample(location_ids.clone(), values, labels);
    });
    if !short {
        out.truncate(start);
        sample_measured(out, location_ids, values, labels);
    }
}

/// Stacks of this many frames or more are written by [`sample_measured`]
/// at once: measuring them costs little next to writing them twice when
/// they do not fit (3 bytes a frame from location 16 384 on: 43 frames).
const LONG_STACK: usize = 16;

/// [`sample_of`] with every length found first, then the bytes written.
fn sample_measured(
    out: &mut Vec<u8>,
    location_ids: impl Iterator<Item = u64> + Clone,
    values: &[i64],
    labels: &[u8],
) {
    let ids_len: usize = location_ids.clone().map(varint_len).sum();
    let values_len: usize = values.iter().map(|&v| varint_len(v as u64)).sum();
    let packed = |n: usize| {
        if n == 0 {
            0
        } else {
            1 + varint_len(n as u64) + n
        }
    };
    let body = packed(ids_len) + packed(values_len) + labels.len();
    let room = 1 + varint_len(body as u64) + body;
    Small::append_room(out, room, |m| {
        m.byte((PROFILE_SAMPLE << 3 | LEN) as u8);
        m.varint(body as u64);
        if ids_len > 0 {
            m.byte((1 << 3 | LEN) as u8);
            m.varint(ids_len as u64);
            location_ids.for_each(|v| m.varint(v));
        }
        if values_len > 0 {
            m.byte((2 << 3 | LEN) as u8);
            m.varint(values_len as u64);
            values.iter().for_each(|&v| m.varint(v as u64));
        }
        m.bytes(labels);
    });
}

/// Reusable buffers for encoding (one per writer).
#[derive(Debug, Default)]
pub struct Encoder {
    inner: Vec<u8>,
    /// Where a batch of messages is written before it is copied out; its
    /// bytes stay initialized from batch to batch (no clearing per batch).
    batch: Vec<u8>,
}

impl Encoder {
    /// Appends `Profile.sample` (field 2) with this sample to `out`.
    pub fn sample(
        &mut self,
        out: &mut Vec<u8>,
        location_ids: &[u64],
        values: &[i64],
        labels: &[Label],
    ) {
        let mut inner = std::mem::take(&mut self.inner);
        inner.clear();
        encode_labels(&mut inner, labels);
        sample_encoded(out, location_ids, values, &inner);
        self.inner = inner;
    }

    /// Appends `Profile.location` (field 4) with this location to `out`:
    /// in one pass when its body is below 128 bytes (a length of one byte,
    /// set once known), as most are.
    pub fn location(
        &mut self,
        out: &mut Vec<u8>,
        id: u64,
        mapping_id: u64,
        address: u64,
        lines: &[Line],
    ) {
        let start = out.len();
        let mut short = false;
        Small::append_room(out, LOCATION_BYTES + LINE_BYTES * lines.len(), |m| {
            short = m.location_with_lines(id, mapping_id, address, lines);
        });
        if !short {
            out.truncate(start);
            self.location_measured(out, [id, mapping_id, address], lines);
        }
    }

    /// [`Encoder::location`] with its body's length found first.
    fn location_measured(&mut self, out: &mut Vec<u8>, fields: [u64; 3], lines: &[Line]) {
        let [id, mapping_id, address] = fields;
        let inner = &mut self.inner;
        inner.clear();
        for line in lines {
            let len = field_len(line.function_id) + field_len(line.line as u64);
            put_key(inner, 4, LEN);
            put_varint(inner, len as u64);
            put_field(inner, 1, line.function_id);
            put_field(inner, 2, line.line as u64);
        }
        let body = field_len(id) + field_len(mapping_id) + field_len(address) + inner.len();
        put_key(out, PROFILE_LOCATION, LEN);
        put_varint(out, body as u64);
        put_field(out, 1, id);
        put_field(out, 2, mapping_id);
        put_field(out, 3, address);
        out.extend_from_slice(inner);
    }
}

/// Messages written into a slice with room for the largest they could be
/// (the end of the output, then trimmed; or, a batch at a time, the
/// encoder's batch buffer, then copied out): bare locations and one-frame
/// samples, with no capacity check per byte.
struct Small<'o> {
    bytes: &'o mut [u8],
    len: usize,
}

impl Small<'_> {
    /// Writes at most `room` bytes with `f` at the end of `out`.
    fn append_room(out: &mut Vec<u8>, room: usize, f: impl FnOnce(&mut Small<'_>)) {
        let start = out.len();
        out.resize(start + room, 0);
        let mut m = Small {
            bytes: &mut out[start..],
            len: 0,
        };
        f(&mut m);
        let end = start + m.len;
        out.truncate(end);
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.bytes[self.len] = (v as u8) | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.bytes[self.len] = v as u8;
        self.len += 1;
    }

    #[inline(always)]
    fn bytes(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return; // most samples have no labels: no call to copy nothing
        }
        let end = self.len + bytes.len();
        self.bytes[self.len..end].copy_from_slice(bytes);
        self.len = end;
    }

    /// A packed repeated varint field (key of one byte), left out when
    /// empty, its length written as one byte: false when it needs more
    /// (then the bytes are not the field's).
    #[inline(always)]
    fn packed(&mut self, field: u64, values: impl Iterator<Item = u64>) -> bool {
        let at = self.len;
        self.byte((field << 3 | LEN) as u8);
        self.byte(0);
        values.for_each(|v| self.varint(v));
        match self.len - at - 2 {
            0 => self.len = at,
            n => self.bytes[at + 1] = n as u8,
        }
        self.len - at < 0x80 + 2
    }

    /// A varint field (key of one byte), left out when 0.
    #[inline(always)]
    fn field(&mut self, key: u8, v: u64) {
        if v != 0 {
            self.byte(key);
            self.varint(v);
        }
    }

    /// A bare location (at most [`LOCATION_BYTES`]).
    #[inline(always)]
    fn location(&mut self, id: u64, mapping_id: u64, address: u64) {
        // The body is at most 33 bytes: its length is one byte.
        self.location_with_lines(id, mapping_id, address, &[]);
    }

    /// A location with its lines (at most [`LOCATION_BYTES`] and
    /// [`LINE_BYTES`] per line), its length written as one byte, set last:
    /// false when it needs more (then the bytes are not the location's).
    #[inline(always)]
    fn location_with_lines(
        &mut self,
        id: u64,
        mapping_id: u64,
        address: u64,
        lines: &[Line],
    ) -> bool {
        let at = self.len;
        self.byte((PROFILE_LOCATION << 3 | LEN) as u8);
        self.byte(0);
        self.field((1 << 3 | VARINT) as u8, id);
        self.field((2 << 3 | VARINT) as u8, mapping_id);
        self.field((3 << 3 | VARINT) as u8, address);
        for line in lines {
            // At most 22 bytes: its length is one byte.
            let line_at = self.len;
            self.byte((4 << 3 | LEN) as u8);
            self.byte(0);
            self.field((1 << 3 | VARINT) as u8, line.function_id);
            self.field((2 << 3 | VARINT) as u8, line.line as u64);
            self.bytes[line_at + 1] = (self.len - line_at - 2) as u8;
        }
        let body = self.len - at - 2;
        self.bytes[at + 1] = body as u8;
        body < 0x80
    }

    /// A sample with each length written as one byte, set once known:
    /// false when one needs more (then the bytes are not the sample's). A
    /// one-frame sample of at most [`SMALL_VALUES`] values and
    /// [`SMALL_LABELS`] bytes of labels (at most [`sample_room`] bytes)
    /// always fits.
    #[inline(always)]
    fn sample(
        &mut self,
        location_ids: impl Iterator<Item = u64>,
        values: &[i64],
        labels: &[u8],
    ) -> bool {
        let at = self.len;
        self.byte((PROFILE_SAMPLE << 3 | LEN) as u8);
        self.byte(0);
        let mut short = self.packed(1, location_ids);
        short &= self.packed(2, values.iter().map(|&v| v as u64));
        self.bytes(labels);
        let body = self.len - at - 2;
        self.bytes[at + 1] = body as u8;
        short && body < 0x80
    }
}

/// The largest bare location: key, length, and three fields of up to 11 bytes.
const LOCATION_BYTES: usize = 2 + 3 * 11;

/// The largest line of a location: key, length, and two fields of up to 11
/// bytes.
const LINE_BYTES: usize = 2 + 2 * 11;

/// Values a one-frame sample may have for [`one_frame_sample`] to build it
/// in place (more go the general way).
const SMALL_VALUES: usize = 10;

/// Bytes of labels a one-frame sample may have for [`one_frame_sample`]
/// to build it in place: with [`SMALL_VALUES`] values, its body stays
/// below 128 bytes (2 + 10 bytes of id, 2 + 100 of values, 13 of labels).
const SMALL_LABELS: usize = 13;

/// The largest one-frame sample of `width` values and `labels` bytes of
/// labels: key and length (2: the body is below 128 bytes), key, length
/// and id (12), key and length of the values (2), 10 bytes a value.
fn sample_room(width: usize, labels: usize) -> usize {
    16 + 10 * width + labels
}

/// Rows [`Encoder::bare_locations`] and [`Encoder::one_frame_samples`]
/// write at a time: the batch stays in cache.
const BATCH_ROWS: usize = 1024;

/// [`Encoder::location`] of a location with no lines: the same bytes.
#[cfg(test)]
fn bare_location(out: &mut Vec<u8>, id: u64, mapping_id: u64, address: u64) {
    Small::append_room(out, LOCATION_BYTES, |m| m.location(id, mapping_id, address));
}

/// [`Encoder::sample`] of a sample whose stack is the one location
/// `location_id` (not 0), with labels already encoded ([`encode_labels`]:
/// the same for many samples): the same bytes.
pub fn one_frame_sample(out: &mut Vec<u8>, location_id: u64, values: &[i64], labels: &[u8]) {
    if values.len() > SMALL_VALUES || labels.len() > SMALL_LABELS {
        return sample_encoded(out, &[location_id], values, labels);
    }
    let room = sample_room(values.len(), labels.len());
    Small::append_room(out, room, |m| {
        m.sample(std::iter::once(location_id), values, labels);
    });
}

impl Encoder {
    /// Writes at most `room` bytes with `f` into the batch buffer, then
    /// appends them to `out`.
    fn batch(&mut self, out: &mut Vec<u8>, room: usize, f: impl FnOnce(&mut Small<'_>)) {
        if self.batch.len() < room {
            self.batch.resize(room, 0);
        }
        let mut m = Small {
            bytes: &mut self.batch[..room],
            len: 0,
        };
        f(&mut m);
        let len = m.len;
        out.extend_from_slice(&self.batch[..len]);
    }

    /// A bare location ([`Encoder::location`] with no lines) for each of
    /// `addresses` in turn, with ids from `first_id` on, in mapping
    /// `mapping_id`: the same bytes.
    pub fn bare_locations(
        &mut self,
        out: &mut Vec<u8>,
        first_id: u64,
        mapping_id: u64,
        addresses: &[u64],
    ) {
        let mut id = first_id;
        for batch in addresses.chunks(BATCH_ROWS) {
            self.batch(out, batch.len() * LOCATION_BYTES, |m| {
                for &address in batch {
                    m.location(id, mapping_id, address);
                    id = id.wrapping_add(1);
                }
            });
        }
    }

    /// [`one_frame_sample`] of each row of `width` values in `values` whose
    /// values are not all zero, the row `i` with location id `first_id + i`,
    /// all with the same encoded `labels`: the same bytes.
    pub fn one_frame_samples(
        &mut self,
        out: &mut Vec<u8>,
        first_id: u64,
        values: &[i64],
        width: usize,
        labels: &[u8],
    ) {
        // Rows of no values are all zero: none is written.
        if width == 0 {
            return;
        }
        if width > SMALL_VALUES || labels.len() > SMALL_LABELS {
            for (i, row) in values.chunks_exact(width).enumerate() {
                if row.iter().any(|v| *v != 0) {
                    sample_encoded(out, &[first_id.wrapping_add(i as u64)], row, labels);
                }
            }
            return;
        }
        let room = sample_room(width, labels.len());
        let mut id = first_id;
        let whole_rows = values
            .get(..values.len() / width * width)
            .unwrap_or_default();
        for batch in whole_rows.chunks(BATCH_ROWS * width) {
            self.batch(out, batch.len() / width * room, |m| {
                for row in batch.chunks_exact(width) {
                    if row.iter().any(|v| *v != 0) {
                        m.sample(std::iter::once(id), row, labels);
                    }
                    id = id.wrapping_add(1);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pb;
    use super::*;
    use prost::Message;

    /// The prost message of a sample, for comparison.
    fn pb_sample(ids: &[u64], values: &[i64], labels: &[Label]) -> pb::Sample {
        pb::Sample {
            location_id: ids.to_vec(),
            value: values.to_vec(),
            label: labels
                .iter()
                .map(|l| pb::Label {
                    key: l.key,
                    str: l.str,
                    num: l.num,
                    num_unit: l.num_unit,
                })
                .collect(),
        }
    }

    /// The prost message of a location, for comparison.
    fn pb_location(id: u64, mapping_id: u64, address: u64, lines: &[Line]) -> pb::Location {
        pb::Location {
            id,
            mapping_id,
            address,
            line: lines
                .iter()
                .map(|l| pb::Line {
                    function_id: l.function_id,
                    line: l.line,
                    column: 0,
                })
                .collect(),
            is_folded: false,
        }
    }

    #[test]
    fn samples_of_every_length_encode_as_prost_does() {
        // Around each one-byte length's limit: the packed ids, the packed
        // values and the whole body at 127, 128 and beyond (the one-pass
        // write, then the measured one).
        let mut enc = Encoder::default();
        for frames in [0usize, 1, 5, 42, 63, 64, 65, 127, 128, 129, 300] {
            for values in [&[][..], &[1, 2][..], &[-1; 12][..], &[-1; 13][..]] {
                let ids: Vec<u64> = (0..frames as u64).map(|k| 1 + k * 3).collect();
                let labels = [Label {
                    key: 1,
                    str: 2,
                    num: 0,
                    num_unit: 0,
                }];
                let mut mine = Vec::new();
                enc.sample(&mut mine, &ids, values, &labels);
                let theirs = pb::Profile {
                    sample: vec![pb_sample(&ids, values, &labels)],
                    ..Default::default()
                };
                assert_eq!(mine, theirs.encode_to_vec(), "{frames} frames, {values:?}");
            }
        }
    }

    #[test]
    fn locations_of_every_length_encode_as_prost_does() {
        // Bodies from a few bytes to past 128 (one pass, then measured).
        let mut enc = Encoder::default();
        for count in [0usize, 1, 4, 5, 6, 7, 20] {
            for line in [0i64, 7, 300, -1] {
                let lines: Vec<Line> = (0..count as u64)
                    .map(|k| Line {
                        function_id: k * 1000,
                        line,
                    })
                    .collect();
                let (id, mapping_id, address) = (count as u64 + 1, 1, u64::MAX - count as u64);
                let mut mine = Vec::new();
                enc.location(&mut mine, id, mapping_id, address, &lines);
                let theirs = pb::Profile {
                    location: vec![pb_location(id, mapping_id, address, &lines)],
                    ..Default::default()
                };
                assert_eq!(mine, theirs.encode_to_vec(), "{count} lines of {line}");
            }
        }
    }

    #[test]
    fn samples_and_locations_encode_as_prost_does() {
        let mut enc = Encoder::default();
        let mut mine = Vec::new();
        let mut theirs = pb::Profile::default();
        let values: [&[i64]; 4] = [&[0, 5], &[-1, 0, i64::MAX], &[], &[300, 1 << 40]];
        for (i, v) in values.iter().enumerate() {
            let ids: Vec<u64> = (0..i as u64).map(|k| k * 1000 + 1).collect();
            let labels: Vec<Label> = (0..i as i64)
                .map(|k| Label {
                    key: k + 1,
                    str: 2 * k,
                    num: -k,
                    num_unit: 0,
                })
                .collect();
            enc.sample(&mut mine, &ids, v, &labels);
            theirs.sample.push(pb_sample(&ids, v, &labels));
            let lines: Vec<Line> = (0..i as u64)
                .map(|k| Line {
                    function_id: k,
                    line: k as i64 - 1,
                })
                .collect();
            let address = (i as u64) << 40;
            enc.location(&mut mine, i as u64 + 1, i as u64, address, &lines);
            theirs
                .location
                .push(pb_location(i as u64 + 1, i as u64, address, &lines));
        }
        let decoded = pb::Profile::decode(&mine[..]).unwrap();
        assert_eq!(decoded, theirs);
        // Field by field, the bytes are prost's own.
        let mut one = Vec::new();
        enc.sample(&mut one, &[7], &[1, -2], &[]);
        let expect = pb::Profile {
            sample: vec![pb::Sample {
                location_id: vec![7],
                value: vec![1, -2],
                label: vec![],
            }],
            ..Default::default()
        };
        assert_eq!(one, expect.encode_to_vec());
    }

    /// One string label, and its bytes as the encoder writes them.
    fn one_label() -> ([Label; 1], Vec<u8>) {
        let labels = [Label {
            key: 3,
            str: 4,
            ..Label::default()
        }];
        let mut label_bytes = Vec::new();
        encode_labels(&mut label_bytes, &labels);
        (labels, label_bytes)
    }

    #[test]
    fn bare_locations_and_one_frame_samples_encode_as_the_general_encoder_does() {
        let (labels, label_bytes) = one_label();
        let mut enc = Encoder::default();
        let big = [
            0,
            1,
            127,
            128,
            300,
            1 << 35,
            (1 << 56) - 1,
            1 << 56,
            u64::MAX,
        ];
        for &a in &big {
            for &id in &[1, 127, 128, 1 << 40, u64::MAX] {
                let (mut fast, mut general) = (Vec::new(), Vec::new());
                bare_location(&mut fast, id, a % 7, a);
                enc.location(&mut general, id, a % 7, a, &[]);
                assert_eq!(fast, general, "location {id} at {a:#x}");
                let values: Vec<Vec<i64>> = vec![
                    vec![],
                    vec![0, 0],
                    vec![a as i64, -1],
                    (0..10).map(|k| (a as i64).wrapping_mul(k)).collect(),
                    (0..11).map(|k| (a as i64).wrapping_sub(k)).collect(),
                ];
                for v in &values {
                    for with_labels in [false, true] {
                        let (mut fast, mut general) = (Vec::new(), Vec::new());
                        let (l, lb): (&[Label], &[u8]) = if with_labels {
                            (&labels, &label_bytes)
                        } else {
                            (&[], &[])
                        };
                        one_frame_sample(&mut fast, id, v, lb);
                        enc.sample(&mut general, &[id], v, l);
                        assert_eq!(fast, general, "sample {id} {v:?} {with_labels}");
                    }
                }
            }
        }
    }

    #[test]
    fn batches_encode_as_one_message_at_a_time() {
        let (_, label_bytes) = one_label();
        let addresses: Vec<u64> = (0..3000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 64))
            .collect();
        let (mut batch, mut single) = (Vec::new(), Vec::new());
        let mut enc = Encoder::default();
        enc.bare_locations(&mut batch, 120, 200, &addresses);
        for (i, &a) in addresses.iter().enumerate() {
            bare_location(&mut single, 120 + i as u64, 200, a);
        }
        assert_eq!(batch, single);
        for width in [0, 1, 2, 3, 10, 11] {
            for lb in [&[][..], &label_bytes[..], &[7u8; 14][..]] {
                let values: Vec<i64> = (0..2500 * width + width / 2)
                    .map(|i| match i % 5 {
                        0 | 1 => 0,
                        2 => -(i as i64),
                        _ => (addresses[i % 3000] >> (i % 3)) as i64,
                    })
                    .collect();
                let (mut batch, mut single) = (Vec::new(), Vec::new());
                enc.one_frame_samples(&mut batch, 1 << 30, &values, width, lb);
                if width > 0 {
                    for (i, row) in values.chunks_exact(width).enumerate() {
                        if row.iter().any(|v| *v != 0) {
                            one_frame_sample(&mut single, (1 << 30) + i as u64, row, lb);
                        }
                    }
                }
                assert!(batch == single, "width {width}, {} label bytes", lb.len());
            }
        }
    }
}
