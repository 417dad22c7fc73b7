//! The `profconv` command: parse arguments, run, map errors to exit codes
//! (0 ok, 1 bad input, 2 usage).

fn main() {
    std::process::exit(profconv::cli::main());
}
