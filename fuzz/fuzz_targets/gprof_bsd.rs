//! Fuzz target `gprof_bsd`: see `profconv_fuzz::gprof_bsd` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::gprof_bsd(data);
});
