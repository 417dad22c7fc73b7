//! Fuzz target `pipeline`: see `profconv_fuzz::pipeline` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::pipeline(data);
});
