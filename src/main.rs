//! The `probelake` binary: everything lives in `probelake-cli` and the library crates.

mod allocator;

fn main() -> std::process::ExitCode {
    probelake_cli::run()
}
