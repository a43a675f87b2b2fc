//! The `probelake` binary: everything lives in `probelake-cli` and the library crates.

// glibc's malloc gave the large buffers of every unit back to the kernel and faulted them in
// again for the next; jemalloc keeps them. Import, export and queries all gain
// (docs/benchmarks.md, "The allocator"). The library crates leave the choice to their users.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment overrides
/// them). A command's memory is mostly fresh pages, written once: a comparison of two 10.7 MB
/// dump.json files took ~49,000 page faults, half its CPU time in the kernel. Transparent huge
/// pages, asked for where the kernel leaves them to `madvise`, take that to ~8,500 faults and
/// the comparison's wall time down by a fifth. One arena per CPU rather than jemalloc's four:
/// a huge page is zeroed whole when first touched, and threads spread over more arenas left
/// more of them partly used (the same comparison 0.92x the wall time, 10% less memory;
/// docs/benchmarks.md, "The allocator").
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: MallocConf = MallocConf(c"thp:always,metadata_thp:always,percpu_arena:percpu".as_ptr());

/// A C string pointer that jemalloc reads once, at its start.
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` C string literal, never written.
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
unsafe impl Sync for MallocConf {}

fn main() -> std::process::ExitCode {
    probelake_cli::run()
}
