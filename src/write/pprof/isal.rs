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
//! build time, leaves it out of the build): zlib-rs's members are the same
//! bytes from run to run, igzip's not always. On these machines about one
//! process in a hundred and fifty compresses some pieces into other members
//! than the rest do, whichever thread, CPU or buffer addresses (a C program
//! calling libisal2 2.30 directly does the same); the members always decode
//! to the same bytes, so the profile never changes.
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

/// Whether `PROFCONV_ISAL=0` is set: zlib-rs compresses this run, for
/// outputs whose bytes do not vary from run to run.
fn turned_off() -> bool {
    std::env::var_os("PROFCONV_ISAL").is_some_and(|v| v == "0")
}

/// What compresses large pprof outputs here, for `profconv --version`.
pub fn compressor() -> &'static str {
    if available() {
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
        /// One gzip member of `input` into `out`; its length, 0 on failure.
        pub fn profconv_isal_gzip(
            input: *const u8,
            in_len: usize,
            out: *mut u8,
            out_cap: usize,
            level_buf: *mut u8,
            level_buf_len: usize,
        ) -> usize;
    }
}

/// One gzip member of `piece` at igzip's level 1, written into `out`
/// (emptied first, its capacity reused); `Err(out)` when ISA-L is not
/// [`available`] or the member did not fit, for the caller to compress
/// another way.
#[cfg(profconv_isal)]
pub fn gzip_member_into(piece: &[u8], mut out: Vec<u8>) -> Result<Vec<u8>, Vec<u8>> {
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
        // SAFETY: the library is loaded (`available`); `piece` is read and
        // `out`'s spare capacity (at least `room` bytes) and `buf` written
        // only within the lengths passed (each below 4 GiB, as isal.c
        // needs); the stream state lives on the C stack for the call alone.
        unsafe {
            ffi::profconv_isal_gzip(
                piece.as_ptr(),
                piece.len(),
                out.spare_capacity_mut().as_mut_ptr().cast::<u8>(),
                room,
                buf.as_mut_ptr(),
                buf.len(),
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
pub fn gzip_member_into(_piece: &[u8], out: Vec<u8>) -> Result<Vec<u8>, Vec<u8>> {
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
            let made = super::gzip_member_into(&piece, Vec::new());
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

    /// CI installs libisal-dev (`.ci/run`), which brings libisal2: there
    /// the path is built, loaded and tested, not skipped.
    #[test]
    fn isal_is_built_and_loaded_under_ci() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let off = std::env::var("PROFCONV_ISAL").is_ok_and(|v| v == "0");
        assert!(
            super::available() || !ci || off,
            "CI=true but ISA-L is not used: {}",
            super::compressor()
        );
    }
}
