//! A whole profile written as gzip-compressed pprof, through the one gzip
//! pipeline ([`Pool`]) the streamed writer uses too, in one of three ways
//! by the size its encoding is guessed at ([`way`]):
//!
//! - large ([`Way::Members`]): this thread encodes the message (`sample_type`
//!   and the samples, then the mappings, locations and fields 5 to 15) in
//!   pieces of about [`PIECE`] bytes, and the pool's workers, one per core,
//!   compress each as a gzip member of its own while the next is encoded;
//! - middle-sized ([`Way::Piped`]): this thread encodes the message in small
//!   pieces while one worker compresses them, as they come, into one member;
//! - small, or one core ([`Way::Encoded`]): encoded whole, then compressed
//!   ([`write_encoded`]).
//!
//! Concatenated gzip members are read as one stream by gzip, Go's
//! `compress/gzip` (so `go tool pprof`) and flate2's `MultiGzDecoder`; they
//! decompress to exactly [`super::encode`]'s bytes.
//!
//! Memory: the encoded message and its compressed members (O(output)), as
//! [`super::write`] otherwise keeps.

use std::io::{self, Write};

use prost::Message;

use super::pool::Pool;
use super::{pb, Profile};

/// Encoded sample bytes per gzip member. Each member starts compressing
/// with an empty window; at this size that costs well under 1 % of the
/// output, and a 3 MB profile still makes pieces enough to share.
const PIECE: usize = 1 << 19;

/// Profiles whose encoding is guessed at this many bytes or more are
/// written by [`write_members`]; smaller ones keep [`write_encoded`]'s
/// bytes (one member below 2 MiB encoded: the fixtures' outputs, and
/// `compare_outputs.sh`'s DCPI database, 1.7 MB encoded, guessed 2.4 MB).
/// The guess overstates: 3.7 MB for the gprof-20000 benchmark's 3.5 MB.
const MIN_BYTES: usize = 3 << 20;

/// Locations encoded between checks of the piece's size.
const LOCATIONS_AT_ONCE: usize = 1 << 12;

/// How [`super::write`] compresses a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// Large: [`write_members`] in pieces of this size.
    Members(usize),
    /// Middle-sized: [`write_piped`].
    Piped,
    /// Small, or one core: encoded whole, then compressed.
    Encoded,
}

/// Encodings guessed below this are [`Way::Piped`] (so that
/// [`write_encoded`] would make one member of them).
const PIPED_BYTES: usize = 2 << 20;

/// The way for `profile`: with rows enough to pay for a thread and a second
/// core, by the size its encoding is guessed at.
pub(super) fn way(profile: &Profile) -> Way {
    let threads = super::worth_a_thread(profile) && super::cores() > 1;
    if !threads {
        return Way::Encoded;
    }
    let guess = super::samples_len_guess(profile) + 16 * profile.locations().len();
    if guess >= MIN_BYTES {
        Way::Members(PIECE)
    } else if guess < PIPED_BYTES {
        Way::Piped
    } else {
        Way::Encoded
    }
}

/// Writes `profile` as gzip-compressed pprof to `out`, the [`way`] its
/// size asks for.
pub(super) fn write_gzip(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    match way(profile) {
        Way::Members(piece) => write_members(profile, piece, out),
        Way::Piped => write_piped(profile, out),
        Way::Encoded => write_encoded(super::encode(profile), out),
    }
}

/// The gzip members of `profile`'s pprof message (at Go's BestSpeed
/// level), one per piece of about `piece` encoded bytes, compressed by a
/// worker per core while this thread encodes, and written to `out` in
/// order.
pub(super) fn write_members(
    profile: &Profile,
    piece: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut pool = Pool::new(super::cores(), |_| 0)?;
    let mut compress = |piece: Vec<u8>| pool.compress(piece, &mut *out);
    encode_samples_in_pieces(profile, piece, &mut compress)?;
    encode_rest_in_pieces(profile, piece, &mut compress)?;
    pool.finish(out)
}

/// The encoded message `encoded` as gzip members: one below
/// [`super::GZIP_MEMBER_MIN`] bytes per core, compressed on this thread;
/// else one per core at most, compressed at once.
pub(super) fn write_encoded(encoded: Vec<u8>, out: &mut dyn Write) -> io::Result<()> {
    let count = super::gzip_member_count(encoded.len());
    // A quarter of the input to start with: about what it compresses to.
    let room = |len| len / 4;
    if count == 1 {
        let mut pool = Pool::new(0, room)?;
        pool.compress(encoded, out)?;
        return pool.finish(out);
    }
    let mut pool = Pool::new(count, room)?;
    for piece in encoded.chunks(encoded.len().div_ceil(count)) {
        pool.compress(piece.to_vec(), out)?;
    }
    pool.finish(out)
}

/// Pieces of [`write_piped`]: small, so that compressing starts early.
const SMALL_PIECE: usize = 1 << 16;

/// [`write_encoded`]`(super::encode(profile))`, the same bytes: the message
/// is encoded on this thread in pieces that a worker compresses as they
/// come, into one member. When the message turns out to be longer than one
/// member holds (the guess was short), it is encoded and compressed again
/// the usual way.
fn write_piped(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let mut pool = Pool::new(1, |_| 0)?;
    // The member is written out only once it is known to be the one wanted.
    let mut member = Vec::new();
    let pieces = pool.member(&mut member)?;
    let mut len = 0;
    let mut send = |piece: Vec<u8>| {
        len += piece.len();
        pieces.send(piece)
    };
    encode_samples_in_pieces(profile, SMALL_PIECE, &mut send)?;
    encode_rest_in_pieces(profile, SMALL_PIECE, &mut send)?;
    drop(pieces);
    pool.finish(&mut member)?;
    if super::gzip_member_count(len) == 1 {
        return out.write_all(&member);
    }
    write_encoded(super::encode(profile), out)
}

/// Encodes field 1 (`sample_type`) and every written sample (field 2), and
/// hands them to `send` in pieces of about `size` bytes.
fn encode_samples_in_pieces(
    profile: &Profile,
    size: usize,
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    let head = pb::Profile {
        sample_type: profile
            .sample_types()
            .iter()
            .map(super::pb_value_type)
            .collect(),
        ..Default::default()
    };
    let mut out = head.encode_to_vec();
    out.reserve(size + size / 8);
    let mut scratch = Vec::new();
    for sample in profile.samples().iter().filter(|s| super::is_written(s)) {
        super::put_sample(sample, &mut out, &mut scratch);
        send_full(send, &mut out, size)?;
    }
    send_rest(send, out)
}

/// Hands `out` to `send` once it holds `size` bytes, leaving an empty
/// buffer.
fn send_full(
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<()>,
    out: &mut Vec<u8>,
    size: usize,
) -> io::Result<()> {
    if out.len() < size {
        return Ok(());
    }
    let next = Vec::with_capacity(size + size / 8);
    send(std::mem::replace(out, next))
}

/// Hands the last piece to `send`, if it holds anything.
fn send_rest(send: &mut dyn FnMut(Vec<u8>) -> io::Result<()>, out: Vec<u8>) -> io::Result<()> {
    match out.is_empty() {
        true => Ok(()),
        false => send(out),
    }
}

/// Encodes the message after the samples: mappings (field 3), locations
/// (field 4), then fields 5 to 15, and hands it to `send` in pieces of
/// about `size` bytes.
fn encode_rest_in_pieces(
    profile: &Profile,
    size: usize,
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    // `sample_type` goes before the samples ([`encode_samples_in_pieces`]).
    let [_, mappings, tail] = super::encode_tables(profile);
    let mut out = Vec::with_capacity(size + size / 8);
    out.extend_from_slice(&mappings);
    let locations = profile.locations();
    for (k, window) in locations.chunks(LOCATIONS_AT_ONCE).enumerate() {
        super::encode_some_locations_of(window, k * LOCATIONS_AT_ONCE, &mut out);
        send_full(send, &mut out, size)?;
    }
    // The functions and strings, in pieces too: the last piece is
    // compressed while the other workers may have nothing left to do.
    for part in tail.chunks(size) {
        out.extend_from_slice(part);
        send_full(send, &mut out, size)?;
    }
    send_rest(send, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Line, Location, Mapping, StrId};

    /// A profile of `n` samples of 8 frames each over `n` locations.
    fn profile(n: u64) -> Profile {
        let mut p = Profile::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
        p.add_comment("a comment");
        let name = p.intern("a.out");
        let m = p.add_mapping(Mapping::new(0x1000, 0x9000_0000, 0, name, StrId::EMPTY));
        let f = p.add_function("main", "main", "main.c", 3);
        let ids: Vec<_> = (0..n)
            .map(|a| {
                p.add_location(Location {
                    mapping: Some(m),
                    address: 0x1000 + a * 977,
                    is_return_address: false,
                    lines: smallvec::smallvec![Line {
                        function: f,
                        line: a as i64,
                    }],
                })
            })
            .collect();
        let pid = [p.label_num("pid", 42, "")];
        for i in 0..n as usize {
            let stack: Vec<_> = (0..8).map(|k| ids[(i * 7 + k * 131) % ids.len()]).collect();
            let values = [i as i64 % 5, (i as i64) << 20];
            p.add_sample(&stack, &values, if i % 3 == 0 { &pid[..] } else { &[] });
        }
        p
    }

    #[test]
    fn members_decompress_to_the_encoded_message() {
        let p = profile(80_000);
        let cores = super::super::cores();
        assert!(way(&p) == Way::Members(PIECE) || cores == 1);
        let mut joined = Vec::new();
        write_members(&p, PIECE, &mut joined).unwrap();
        let members = super::super::decoded_members(&joined);
        assert!(members.len() > 2, "{} members", members.len());
        assert!(
            members.concat() == super::super::encode(&p),
            "the members decode to the message"
        );
    }

    #[test]
    fn piped_is_what_encoding_then_compressing_gives() {
        let cores = super::super::cores();
        // One member of many pieces; then a message past one member, whose
        // pieces are compressed again as members.
        for n in [6_000, 80_000] {
            let p = profile(n);
            let encoded = super::super::encode(&p);
            assert!(encoded.len() > 4 * SMALL_PIECE, "{} bytes", encoded.len());
            assert!(n > 6_000 || way(&p) == Way::Piped || cores == 1);
            let mut expected = Vec::new();
            write_encoded(encoded, &mut expected).unwrap();
            let members = super::super::decoded_members(&expected).len();
            assert!(n == 6_000 || members > 1 || cores == 1);
            let mut piped = Vec::new();
            write_piped(&p, &mut piped).unwrap();
            assert!(piped == expected, "{n} samples");
        }
    }

    #[test]
    fn small_profiles_stay_one_member() {
        assert!(way(&profile(1_000)) == Way::Encoded);
    }
}
