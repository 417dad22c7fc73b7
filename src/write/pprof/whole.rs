//! A whole profile written as gzip-compressed pprof, through the one gzip
//! pipeline ([`Pool`]) the streamed writer uses too, in one of two ways
//! ([`way`]):
//!
//! - with rows enough to pay for threads, on more than one core
//!   ([`Way::Members`]): this thread encodes the message in pieces, and the
//!   pool's workers, one per core, compress each piece as a gzip member of
//!   its own while the next is encoded;
//! - otherwise ([`Way::Encoded`]): encoded whole, then compressed
//!   ([`write_encoded`]).
//!
//! The message is encoded tables first (locations, mappings, functions,
//! strings and the fields after them), then `sample_type` and the samples
//! ([`super::encode`]): the tables compress about half as fast as the
//! samples, so they are compressed while the samples are still being
//! encoded rather than after. Protocol buffers may carry fields in any
//! order; every decoder (Go's, prost's) reads them the same.
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

/// The largest piece of encoded bytes per gzip member. Each member starts
/// compressing with an empty window; at this size that costs well under
/// 1 % of the output.
const PIECE: usize = 1 << 18;

/// The smallest piece: below, a member's start (a compressor reset, a
/// header) costs more than sharing the work saves.
const MIN_PIECE: usize = 1 << 16;

/// Locations encoded between checks of the piece's size.
const LOCATIONS_AT_ONCE: usize = 1 << 12;

/// How [`super::write`] compresses a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// [`write_members`] in pieces of this size.
    Members(usize),
    /// Small, or one core: encoded whole, then compressed.
    Encoded,
}

/// The way for `profile`: with rows enough to pay for a thread and a second
/// core, members of a sixteenth of the size its encoding is guessed at
/// (between [`MIN_PIECE`] and [`PIECE`]), so that every worker has several
/// to compress and the last one is short.
pub(super) fn way(profile: &Profile) -> Way {
    let threads = super::worth_a_thread(profile) && crate::cores() > 1;
    if !threads {
        return Way::Encoded;
    }
    let guess = super::samples_len_guess(profile) + 16 * profile.locations().len();
    Way::Members((guess / 16).clamp(MIN_PIECE, PIECE))
}

/// Writes `profile` as gzip-compressed pprof to `out`, the [`way`] its
/// size asks for.
pub(super) fn write_gzip(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    match way(profile) {
        Way::Members(piece) => write_members(profile, piece, out),
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
    let mut pool = Pool::new(crate::cores(), |_| 0)?;
    let mut compress = |encoded: Vec<u8>| {
        pool.compress(encoded, &mut *out)?;
        Ok(pool.buffer(piece + piece / 8))
    };
    encode_tables_in_pieces(profile, piece, &mut compress)?;
    encode_samples_in_pieces(profile, piece, &mut compress)?;
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

/// Encodes field 1 (`sample_type`) and every written sample (field 2), and
/// hands them to `send` in pieces of about `size` bytes.
fn encode_samples_in_pieces(
    profile: &Profile,
    size: usize,
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<Vec<u8>>,
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

/// Hands `out` to `send` once it holds `size` bytes, and goes on in the
/// empty buffer `send` gives back.
fn send_full(
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<Vec<u8>>,
    out: &mut Vec<u8>,
    size: usize,
) -> io::Result<()> {
    if out.len() >= size {
        *out = send(std::mem::take(out))?;
    }
    Ok(())
}

/// Hands the last piece to `send`, if it holds anything.
fn send_rest(send: &mut dyn FnMut(Vec<u8>) -> io::Result<Vec<u8>>, out: Vec<u8>) -> io::Result<()> {
    if !out.is_empty() {
        send(out)?;
    }
    Ok(())
}

/// Encodes the tables: locations (field 4), mappings (field 3), then
/// fields 5 to 15, and hands them to `send` in pieces of about `size`
/// bytes.
fn encode_tables_in_pieces(
    profile: &Profile,
    size: usize,
    send: &mut dyn FnMut(Vec<u8>) -> io::Result<Vec<u8>>,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(size + size / 8);
    let locations = profile.locations();
    for (k, window) in locations.chunks(LOCATIONS_AT_ONCE).enumerate() {
        super::encode_some_locations_of(window, k * LOCATIONS_AT_ONCE, &mut out);
        send_full(send, &mut out, size)?;
    }
    // Encoded once the first pieces of locations are being compressed.
    // `sample_type` goes before the samples ([`encode_samples_in_pieces`]).
    let [_, mappings, tail] = super::encode_tables(profile);
    out.extend_from_slice(&mappings);
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
        let cores = crate::cores();
        // Pieces of the largest size, and of the size a middle-sized
        // profile gets.
        for (n, piece) in [(80_000, PIECE), (6_000, MIN_PIECE)] {
            let p = profile(n);
            assert!(
                way(&p) == Way::Members(piece) || cores == 1,
                "{n}: {:?}",
                way(&p)
            );
            let mut joined = Vec::new();
            write_members(&p, piece, &mut joined).unwrap();
            let members = super::super::decoded_members(&joined);
            assert!(members.len() > 2, "{} members", members.len());
            assert!(
                members.concat() == super::super::encode(&p),
                "{n}: the members decode to the message"
            );
        }
    }

    #[test]
    fn small_profiles_stay_one_member() {
        assert!(way(&profile(1_000)) == Way::Encoded);
    }
}
