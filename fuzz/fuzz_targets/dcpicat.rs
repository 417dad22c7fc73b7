//! Fuzz target `dcpicat`: see `profconv_fuzz::dcpicat` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::dcpicat(data);
});
