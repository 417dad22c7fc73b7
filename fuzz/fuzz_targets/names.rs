//! Fuzz target `names`: see `profconv_fuzz::names` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::names(data);
});
