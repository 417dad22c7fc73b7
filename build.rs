//! Generates the pprof wire types from `proto/profile.proto` with prost.
//! The `.proto` is compiled by `protox` (pure Rust), so no `protoc` is needed.
fn main() {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let fds = protox::compile(["profile.proto"], ["proto"]).expect("proto/profile.proto compiles");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("prost generates the pprof types");
}
