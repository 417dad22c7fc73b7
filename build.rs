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
//!
//! Last, on Linux with the GNU C library, the command starts with less to
//! do ([`link_for_a_quick_start`]).
fn main() {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let fds = protox::compile(["profile.proto"], ["proto"]).expect("proto/profile.proto compiles");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("prost generates the pprof types");
    link_isal();
    link_for_a_quick_start();
    note_an_instrumented_build();
}

/// `benches/pgo.sh` builds the command twice: instrumented
/// (`-Cprofile-generate`), to count what its training runs execute, then
/// optimized with those counts. An instrumented process writes its counts
/// from an `atexit` handler, which `main`'s `_exit` skips;
/// `cfg(profconv_pgo_generate)` has it write them first.
fn note_an_instrumented_build() {
    println!("cargo:rustc-check-cfg=cfg(profconv_pgo_generate)");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.split('\x1f').any(|f| f.contains("profile-generate")) {
        println!("cargo:rustc-cfg=profconv_pgo_generate");
    }
}

/// Every run of `profconv` starts by loading its shared libraries and
/// relocating itself, before `main`; a gprof conversion of 3000 functions
/// takes ≈ 7 ms in all, of which this was ≈ 0.5 ms. Three link choices,
/// where the target is Linux with the GNU C library, take most of it away:
/// - the command is a position-dependent executable (`-no-pie`): the
///   dynamic loader had ≈ 8 000 relative relocations to apply, each page
///   of pointers they touch a copy-on-write fault (≈ 35);
/// - the unwinder (`libgcc_eh.a`, GCC's static part of `libgcc_s`) is
///   linked in, where the C compiler has it: one shared library fewer to
///   find, map and relocate;
/// - `pow`, the one function the command took from `libm.so.6` (for
///   indicatif's rates), is `src/main.rs`'s `__wrap_pow` (`--wrap=pow`):
///   one more library fewer.
///
/// The cost: the executable is loaded at a fixed address (its libraries,
/// stack and heap are still placed at random).
fn link_for_a_quick_start() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") != "linux" || target("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-no-pie");
    println!("cargo:rustc-link-arg-bins=-Wl,--wrap=pow");
    if let Some(dir) = static_unwinder_dir() {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
}

/// The directory of the C compiler's `libgcc_eh.a`, if it has one (GCC
/// does; `cc -print-file-name` prints the bare name when it has not).
fn static_unwinder_dir() -> Option<std::path::PathBuf> {
    let compiler = cc::Build::new()
        .cargo_warnings(false)
        .try_get_compiler()
        .ok()?;
    let out = compiler
        .to_command()
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file())
        .then(|| path.parent().map(std::path::Path::to_path_buf))
        .flatten()
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
