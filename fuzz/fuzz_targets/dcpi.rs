//! Fuzz target `dcpi`: see `profconv_fuzz::dcpi` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::dcpi(data);
});
