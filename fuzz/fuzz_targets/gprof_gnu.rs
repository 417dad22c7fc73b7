//! Fuzz target `gprof_gnu`: see `profconv_fuzz::gprof_gnu` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::gprof_gnu(data);
});
