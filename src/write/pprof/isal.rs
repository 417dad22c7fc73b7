//! Gzip members of large pprof outputs compressed with ISA-L's igzip
//! (Intel's Intelligent Storage Acceleration Library, hand-written SIMD
//! deflate), where profconv is built with it and the library is there:
//! `build.rs` compiles `isal.c` against the installed
//! `<isa-l/igzip_lib.h>` (Debian `libisal-dev`) and sets
//! `cfg(profconv_isal)`; `isal.c` opens `libisal.so.2` at the first
//! [`available`] (the command line asks on a thread of its own as it
//! starts). Without either, [`gzip_member_into`] hands the buffer back and
//! the caller compresses with zlib-rs.
//!
//! `PROFCONV_ISAL=0` in the environment turns it off for a run (and, at
//! build time, leaves it out of the build).
//!
//! igzip's member of a piece depends on where its stream structure lies
//! in memory (`isal.c`): on a thread's stack, about one process in 150
//! made some members other bytes than the rest did (decoding the same).
//! The streams now lie at fixed places, one per member index modulo
//! `SLOTS`, so an output is the same bytes in every run, with ISA-L as
//! with zlib-rs.
//!
//! Why: a large output's time is mostly deflate. On the DCPI benchmark's
//! 303 MB message igzip's level 1 runs at ≈ 406 MB/s and makes 28.5 % of
//! the bytes, zlib-rs's level 1 (the one flate2 offers that fast) ≈ 315
//! MB/s and 42 %; on the gprof 20 000-function message 460 against 238
//! MB/s, 37 % against 45 %. Small outputs keep zlib-rs (their bytes do not
//! depend on the build).

/// Whether this build was made with ISA-L's header (so can use the
/// library where it is installed).
pub const BUILT: bool = cfg!(profconv_isal);

/// Whether ISA-L compresses here: built with it, not [`turned_off`], and
/// `libisal.so.2` found. The first call opens the library (≈ 0.1 ms; every
/// later one reads a flag).
pub fn available() -> bool {
    #[cfg(profconv_isal)]
    {
        static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        // SAFETY: isal.c's loader only opens the library and reads two of
        // its symbols; the OnceLock runs it once, before any member is
        // made (each asks here first).
        *LOADED.get_or_init(|| !turned_off() && unsafe { ffi::profconv_isal_load() } != 0)
    }
    #[cfg(not(profconv_isal))]
    false
}

/// Whether `PROFCONV_ISAL=0` is set: zlib-rs compresses this run (the
/// bytes a build without ISA-L writes).
fn turned_off() -> bool {
    std::env::var_os("PROFCONV_ISAL").is_some_and(|v| v == "0")
}

/// What compresses large pprof outputs here, for `profconv --version`.
pub fn compressor() -> &'static str {
    if available() && !same_bytes_every_run() {
        "ISA-L igzip (libisal.so.2; its streams could not be placed, so outputs may differ \
         in bytes from run to run)"
    } else if available() {
        "ISA-L igzip (libisal.so.2)"
    } else if BUILT && turned_off() {
        "zlib-rs (PROFCONV_ISAL=0)"
    } else if BUILT {
        "zlib-rs (libisal.so.2 was not found)"
    } else {
        "zlib-rs (built without libisal-dev)"
    }
}

#[cfg(profconv_isal)]
mod ffi {
    extern "C" {
        /// Opens libisal and finds its functions: 1 when they are there.
        pub fn profconv_isal_load() -> std::os::raw::c_int;
        /// `ISAL_DEF_LVL1_DEFAULT`: the level buffer's size.
        pub fn profconv_isal_level_buf_len() -> usize;
        /// One gzip member of `input` into `out` with slot `slot`'s
        /// stream; its length, 0 on failure.
        pub fn profconv_isal_gzip(
            input: *const u8,
            in_len: usize,
            out: *mut u8,
            out_cap: usize,
            level_buf: *mut u8,
            level_buf_len: usize,
            slot: usize,
        ) -> usize;
        /// Where slot `n`'s stream lies (0 when the slots are not mapped).
        pub fn profconv_isal_slot_address(n: usize) -> usize;
        /// How many slots the C side has.
        #[cfg(test)]
        pub fn profconv_isal_slots() -> usize;
    }
}

/// Streams at fixed places (`isal.c`): igzip's member of a piece depends on
/// where its stream lies, so member `index` is made with slot `index %
/// SLOTS` whatever the thread, and is the same bytes in every run. The
/// C side has as many.
#[cfg(profconv_isal)]
const SLOTS: usize = 128;

/// Whether a member is the same bytes in every run: made by zlib-rs, or by
/// ISA-L with its streams at their fixed places (not where the place was
/// taken, or before Linux 4.17: then on each thread's stack).
pub fn same_bytes_every_run() -> bool {
    #[cfg(profconv_isal)]
    {
        // SAFETY: reads the C side's table of places.
        !available() || unsafe { ffi::profconv_isal_slot_address(0) } != 0
    }
    #[cfg(not(profconv_isal))]
    true
}

/// Holds slot `index % SLOTS` for the calling thread alone. Members in
/// flight at once have different indexes modulo [`SLOTS`] up to 63 cores
/// (the pool has at most two per worker and one more), so a thread seldom
/// waits here.
#[cfg(profconv_isal)]
fn hold_slot(index: u64) -> (usize, std::sync::MutexGuard<'static, ()>) {
    use std::sync::Mutex;
    static HELD: [Mutex<()>; SLOTS] = [const { Mutex::new(()) }; SLOTS];
    let slot = (index % SLOTS as u64) as usize;
    (
        slot,
        HELD[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// One gzip member of `piece`, the `index`th of its output, at igzip's
/// level 1, written into `out` (emptied first, its capacity reused);
/// `Err(out)` when ISA-L is not [`available`] or the member did not fit,
/// for the caller to compress another way.
#[cfg(profconv_isal)]
pub fn gzip_member_into(piece: &[u8], mut out: Vec<u8>, index: u64) -> Result<Vec<u8>, Vec<u8>> {
    use std::cell::RefCell;
    if !available() {
        return Err(out);
    }
    thread_local! {
        /// igzip's level-1 tables (276 KiB), kept from member to member.
        static LEVEL_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    // Room for stored blocks (5 bytes per 64 KiB) and the header and trailer.
    let room = piece.len() + piece.len() / 8 + 1024;
    out.clear();
    if u32::try_from(room).is_err() {
        return Err(out);
    }
    out.reserve(room);
    let len = LEVEL_BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.is_empty() {
            // SAFETY: returns a constant.
            buf.resize(unsafe { ffi::profconv_isal_level_buf_len() }, 0);
        }
        let (slot, _held) = hold_slot(index);
        // SAFETY: the library is loaded (`available`); `piece` is read and
        // `out`'s spare capacity (at least `room` bytes) and `buf` written
        // only within the lengths passed (each below 4 GiB, as isal.c
        // needs); the stream is the slot's, held by this thread alone for
        // the call (or on the C stack when the slots are not mapped).
        unsafe {
            ffi::profconv_isal_gzip(
                piece.as_ptr(),
                piece.len(),
                out.spare_capacity_mut().as_mut_ptr().cast::<u8>(),
                room,
                buf.as_mut_ptr(),
                buf.len(),
                slot,
            )
        }
    });
    if len == 0 || len > room {
        return Err(out);
    }
    // SAFETY: igzip wrote the member's `len` bytes from the start of the
    // spare capacity (`len` ≤ `room` ≤ the capacity).
    unsafe { out.set_len(len) };
    Ok(out)
}

/// Built without ISA-L: the buffer back, for the caller's zlib-rs.
#[cfg(not(profconv_isal))]
pub fn gzip_member_into(_piece: &[u8], out: Vec<u8>, _index: u64) -> Result<Vec<u8>, Vec<u8>> {
    Err(out)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    /// The member decompresses (as gzip, so as Go reads it) to the piece:
    /// empty, small, protobuf-like and incompressible pieces.
    #[test]
    fn members_decompress_to_the_piece() {
        let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
        let mut random = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
        let records: Vec<u8> = (0..200_000u64)
            .flat_map(|i| [0x22, 0x0d, 0x08, i as u8, 0x10, 0x01, 0x18, (i * 4) as u8])
            .collect();
        for piece in [Vec::new(), b"gmon".to_vec(), records, random(3 << 20)] {
            let made = super::gzip_member_into(&piece, Vec::new(), 0);
            assert_eq!(
                made.is_ok(),
                super::available(),
                "a member iff ISA-L is there"
            );
            let Ok(member) = made else { continue };
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&member[..])
                .read_to_end(&mut back)
                .unwrap();
            assert!(back == piece, "{} bytes come back", piece.len());
        }
    }

    /// The streams lie at their fixed places (where the mapping succeeded,
    /// as it must under CI), one page-rounded stream apart.
    #[cfg(profconv_isal)]
    #[test]
    fn slots_lie_at_their_fixed_places() {
        if !super::available() {
            return;
        }
        // SAFETY: both read the C side's constants and table of places.
        assert_eq!(unsafe { super::ffi::profconv_isal_slots() }, super::SLOTS);
        let place = |n| unsafe { super::ffi::profconv_isal_slot_address(n) };
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(place(0) != 0 || !ci, "the slots are not mapped");
        assert_eq!(super::same_bytes_every_run(), place(0) != 0);
        if place(0) == 0 {
            return;
        }
        assert_eq!(place(0), 0x2a51_0000_0000);
        let apart = place(1) - place(0);
        assert!(apart % 4096 == 0 && apart >= 82_384, "{apart} bytes apart");
        for n in 1..super::SLOTS {
            assert_eq!(place(n), place(0) + n * apart);
        }
        assert_eq!(place(super::SLOTS), 0, "no slot past the last");
    }

    /// A member is the same bytes whichever thread makes it, and whatever
    /// that thread compressed before; its index alone picks the stream.
    #[test]
    fn members_are_the_same_bytes_on_every_thread() {
        if !super::same_bytes_every_run() {
            return; // streams on each thread's stack: not promised
        }
        let pieces = super::super::test_pieces(48);
        let n = pieces.len();
        // Each piece's member, made in `order`.
        let members = |order: Vec<usize>| {
            let mut made = vec![Vec::new(); n];
            for i in order {
                made[i] =
                    super::gzip_member_into(&pieces[i], Vec::new(), i as u64).unwrap_or_default();
            }
            made
        };
        let here = members((0..n).collect());
        // Four threads at once, each backwards from another piece.
        let there: Vec<Vec<Vec<u8>>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|t| scope.spawn(move || members((0..n - t).rev().collect())))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for (t, made) in there.iter().enumerate() {
            let differ: Vec<usize> = (0..n - t).filter(|&i| made[i] != here[i]).collect();
            assert!(differ.is_empty(), "thread {t}: members {differ:?} differ");
        }
    }

    /// CI installs libisal-dev (`.ci/run`), which brings libisal2: there
    /// the path is built, loaded and tested, not skipped.
    #[test]
    fn isal_is_built_and_loaded_under_ci() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let off = super::turned_off();
        assert!(
            super::available() || !ci || off,
            "CI=true but ISA-L is not used: {}",
            super::compressor()
        );
    }
}
