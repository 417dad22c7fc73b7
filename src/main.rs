//! The `profconv` command: parse arguments, run, map errors to exit codes
//! (0 ok, 1 bad input or output, 2 usage, 128 + the signal when stopped by
//! SIGINT, SIGTERM or SIGHUP). The command line lives in [`cli`]; the
//! library (`profconv`) knows no flags.

mod cli;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::main())
}
