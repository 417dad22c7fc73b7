//! A large whole profile encoded and gzip-compressed on two threads at
//! once, as concatenated gzip members (which gzip, Go's `compress/gzip`, so
//! `go tool pprof`, and flate2's `MultiGzDecoder` read as one stream).
//!
//! This thread encodes `sample_type` and the samples (fields 1 and 2), the
//! other the rest of the message (mappings, locations, then fields 5 to
//! 15), each in pieces of about [`PIECE`] bytes handed on as they are done.
//! Each thread then compresses the pieces still waiting, so the first to
//! finish encoding starts compressing and both cores work until the end;
//! this thread writes the members done, in message order, while the other
//! compresses its last. The members decompress to exactly
//! [`super::encode`]'s bytes.
//!
//! A middle-sized profile ([`Way::Piped`]) keeps the one member
//! [`super::gzip_members`] makes of it: this thread encodes the whole
//! message in small pieces while another compresses them in order.
//!
//! Memory: the encoded message and its compressed members (O(output)), as
//! [`super::write`] otherwise keeps.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{mpsc, Mutex};

use prost::Message;

use super::{gzip_member_into, member_deflate, pb, Member, Profile};

/// Encoded sample bytes per gzip member. Each member starts compressing
/// with an empty window; at this size that costs well under 1 % of the
/// output, and a 3 MB profile still makes pieces enough to share.
const PIECE: usize = 1 << 19;

/// Profiles whose encoding is guessed at this many bytes or more are
/// written by [`write_gzip_members`]; smaller ones keep [`super::gzip_members`]'s
/// bytes (one member below 2 MiB encoded: the fixtures' outputs, and
/// `compare_outputs.sh`'s DCPI database, 1.7 MB encoded, guessed 2.4 MB).
/// The guess overstates: 3.7 MB for the gprof-20000 benchmark's 3.5 MB.
const MIN_BYTES: usize = 3 << 20;

/// A piece of the encoded message and its place: which thread's part of
/// the message (0 before 1), then its number in it. Pieces are compressed
/// in any order and written in this order.
type Piece = ((u8, usize), Vec<u8>);

/// Locations encoded between checks of the piece's size.
const LOCATIONS_AT_ONCE: usize = 1 << 12;

/// How [`super::write`] compresses a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// Large: [`write_gzip_members`] in pieces of this size.
    Members(usize),
    /// Middle-sized: [`gzip_piped`].
    Piped,
    /// Small, or one core: encoded whole, then compressed.
    Encoded,
}

/// Encodings guessed below this are [`Way::Piped`] (so that
/// [`super::gzip_members`] would make one member of them).
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

/// The gzip members of `profile`'s pprof message (at Go's BestSpeed
/// level), made on two threads from pieces of about `piece` encoded bytes,
/// written to `out` in order. This thread writes the members done once it
/// has nothing left to compress, while the other finishes its last; then
/// the rest.
pub(super) fn write_gzip_members(
    profile: &Profile,
    piece: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (pieces, waiting) = mpsc::channel::<Piece>();
    let waiting = Mutex::new(waiting);
    let done = Mutex::new(Done::default());
    let (waiting, done) = (&waiting, &done);
    let theirs = pieces.clone();
    // Each sender is dropped before compressing: then no thread waits for
    // pieces that will not come.
    let rest = move || {
        encode_rest_in_pieces(profile, theirs, piece);
        compress_all_waiting(waiting, done)
    };
    let mut next = (0, 0);
    let samples = || {
        let count = encode_samples_in_pieces(profile, pieces, piece);
        compress_all_waiting(waiting, done)?;
        write_done(done, &mut next, count, &mut *out)?;
        Ok(count)
    };
    // The halves wait for each other's pieces: they run at once.
    let (theirs, mine): (io::Result<()>, io::Result<usize>) = std::thread::scope(|scope| {
        let rest = scope.spawn(rest);
        let mine = samples();
        (
            rest.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            mine,
        )
    });
    theirs?;
    let count = mine?;
    write_done(done, &mut next, count, out)?;
    debug_assert!(lock(done).is_empty(), "every member written");
    Ok(())
}

/// The members done, whether or not a thread panicked holding the lock
/// (its panic is resumed when it is joined).
fn lock(done: &Mutex<Done>) -> std::sync::MutexGuard<'_, Done> {
    done.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The members made and not yet written, by their place.
type Done = BTreeMap<(u8, usize), Vec<u8>>;

/// Writes the members of `done` from `next` on while the next one is
/// there; the samples' part has `count` pieces, the rest's part follows.
fn write_done(
    done: &Mutex<Done>,
    next: &mut (u8, usize),
    count: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    loop {
        if *next == (0, count) {
            *next = (1, 0);
        }
        let Some(member) = lock(done).remove(next) else {
            return Ok(());
        };
        out.write_all(&member)?;
        next.1 += 1;
    }
}

/// Pieces of [`gzip_piped`]: small, so that compressing starts early.
const SMALL_PIECE: usize = 1 << 16;

/// `super::gzip_members(&super::encode(profile))`, the same bytes: the
/// message is encoded on this thread in pieces that another thread
/// compresses as they come, into one member. When the message turns out
/// to be longer than one member holds, its pieces are compressed again
/// the usual way.
pub(super) fn gzip_piped(profile: &Profile) -> io::Result<Vec<Vec<u8>>> {
    let (pieces, waiting) = mpsc::channel::<Piece>();
    let (member, encoded) = std::thread::scope(|scope| {
        let compressor = scope.spawn(move || compress_in_order(waiting));
        encode_samples_in_pieces(profile, pieces.clone(), SMALL_PIECE);
        encode_rest_in_pieces(profile, pieces, SMALL_PIECE);
        compressor
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })?;
    let len = encoded.iter().map(Vec::len).sum();
    if super::gzip_member_count(len) == 1 {
        return Ok(vec![member]);
    }
    super::gzip_members(&encoded.concat())
}

/// One gzip member of the pieces sent to `waiting`, in the order sent
/// (by one thread), and the pieces.
fn compress_in_order(waiting: mpsc::Receiver<Piece>) -> io::Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let mut deflate = member_deflate();
    let mut member = Member::start(Vec::new(), &mut deflate);
    let mut pieces = Vec::new();
    for (_, piece) in waiting {
        member.add(&piece)?;
        pieces.push(piece);
    }
    Ok((member.finish()?, pieces))
}

/// Compresses the pieces sent to `waiting` until none is left and no more
/// will come, into `done`.
fn compress_all_waiting(
    waiting: &Mutex<mpsc::Receiver<Piece>>,
    done: &Mutex<Done>,
) -> io::Result<()> {
    let mut deflate = member_deflate();
    loop {
        // A poisoned lock means the other thread panicked: its panic is
        // resumed when it is joined.
        let next = match waiting.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return Ok(()),
        };
        let Ok((i, piece)) = next else {
            return Ok(());
        };
        // Each compressor sizes the member's buffer itself.
        let member = gzip_member_into(&piece, Vec::new(), &mut deflate)?;
        lock(done).insert(i, member);
    }
}

/// Encodes field 1 (`sample_type`) and every written sample (field 2), and
/// sends them in pieces of about `size` bytes, numbered from 0; returns how
/// many.
fn encode_samples_in_pieces(profile: &Profile, pieces: mpsc::Sender<Piece>, size: usize) -> usize {
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
    let mut i = 0;
    for sample in profile.samples().iter().filter(|s| super::is_written(s)) {
        super::put_sample(sample, &mut out, &mut scratch);
        send_full(&pieces, (0, &mut i), &mut out, size);
    }
    if !out.is_empty() {
        // The receiver lives until both threads are done.
        let _ = pieces.send(((0, i), out));
        i += 1;
    }
    i
}

/// Sends `out` as piece `place` (and counts it) once it holds `size`
/// bytes, leaving an empty buffer.
fn send_full(
    pieces: &mpsc::Sender<Piece>,
    place: (u8, &mut usize),
    out: &mut Vec<u8>,
    size: usize,
) {
    if out.len() < size {
        return;
    }
    let next = Vec::with_capacity(size + size / 8);
    let _ = pieces.send(((place.0, *place.1), std::mem::replace(out, next)));
    *place.1 += 1;
}

/// Encodes the message after the samples: mappings (field 3), locations
/// (field 4), then fields 5 to 15, and sends it in pieces of about
/// `size` bytes, numbered from 0.
fn encode_rest_in_pieces(profile: &Profile, pieces: mpsc::Sender<Piece>, size: usize) {
    // `sample_type` goes before the samples ([`encode_samples_in_pieces`]).
    let [_, mappings, tail] = super::encode_tables(profile);
    let mut out = Vec::with_capacity(size + size / 8);
    out.extend_from_slice(&mappings);
    let mut i = 0;
    let locations = profile.locations();
    for (k, window) in locations.chunks(LOCATIONS_AT_ONCE).enumerate() {
        super::encode_some_locations_of(window, k * LOCATIONS_AT_ONCE, &mut out);
        send_full(&pieces, (1, &mut i), &mut out, size);
    }
    // The functions and strings, in pieces too: the last piece is
    // compressed while the other thread may have nothing left to do.
    for part in tail.chunks(size) {
        out.extend_from_slice(part);
        send_full(&pieces, (1, &mut i), &mut out, size);
    }
    if !out.is_empty() {
        let _ = pieces.send(((1, i), out));
    }
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
        write_gzip_members(&p, PIECE, &mut joined).unwrap();
        let members = super::super::decoded_members(&joined).len();
        assert!(members > 2, "{members} members");
        let mut back = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::MultiGzDecoder::new(&joined[..]),
            &mut back,
        )
        .unwrap();
        assert!(
            back == super::super::encode(&p),
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
            let expected = super::super::gzip_members(&encoded).unwrap();
            assert!(n == 6_000 || expected.len() > 1 || cores == 1);
            assert!(gzip_piped(&p).unwrap() == expected, "{n} samples");
        }
    }

    #[test]
    fn small_profiles_stay_one_member() {
        assert!(way(&profile(1_000)) == Way::Encoded);
    }
}
