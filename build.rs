//! Generates the pprof wire types from `proto/profile.proto` with prost.
//! The `.proto` is compiled by `protox` (pure Rust), so no `protoc` is needed.
//!
//! Then looks for ISA-L's igzip (Debian `libisal-dev`): when
//! `<isa-l/igzip_lib.h>` is installed, `src/write/pprof/isal.c` is compiled
//! against it and `cfg(profconv_isal)` is set; the library itself is opened
//! at run time (`dlopen`), and the gzip members of large pprof outputs are
//! compressed with it where it is there (`src/write/pprof/isal.rs`).
//! Without the header the build is pure Rust (zlib-rs). `PROFCONV_ISAL=0`
//! builds without it even when it is installed.
fn main() {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let fds = protox::compile(["profile.proto"], ["proto"]).expect("proto/profile.proto compiles");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("prost generates the pprof types");
    link_isal();
}

/// Compiles the ISA-L shim when the library's header is there (the
/// library is opened at run time).
fn link_isal() {
    const SHIM: &str = "src/write/pprof/isal.c";
    println!("cargo:rustc-check-cfg=cfg(profconv_isal)");
    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-env-changed=PROFCONV_ISAL");
    let wanted = !std::env::var("PROFCONV_ISAL").is_ok_and(|v| v == "0");
    let compiled = wanted
        && cc::Build::new()
            .file(SHIM)
            .cargo_warnings(false)
            .try_compile("profconv_isal")
            .is_ok();
    if compiled {
        println!("cargo:rustc-cfg=profconv_isal");
    }
}
