//! Fuzz target `aps`: see `profconv_fuzz::aps` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::aps(data);
});
