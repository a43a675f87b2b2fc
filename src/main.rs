//! The `probelake` binary: everything lives in `probelake-cli` and the library crates.

// glibc's malloc gave the large buffers of every unit back to the kernel and faulted them in
// again for the next; jemalloc keeps them. Import, export and queries all gain
// (docs/benchmarks.md, "The allocator"). The library crates leave the choice to their users.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    probelake_cli::run()
}
