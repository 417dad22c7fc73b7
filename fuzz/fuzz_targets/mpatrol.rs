//! Fuzz target `mpatrol`: see `profconv_fuzz::mpatrol` (fuzz/harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = profconv_fuzz::mpatrol(data);
});
