//! Link options of the `probelake` binary.

fn main() {
    // On Linux the binary is linked position-dependent (`-no-pie`). As a PIE, the dynamic
    // loader applied ~281,000 relocations to it at every start, writing (and so copying) ~1,200
    // pages of tables: 5 ms and 1,400 page faults before `main`, for `--version` as for a
    // comparison of two dump files that takes 150 ms (docs/performance.md, "Start-up"). The
    // libraries, tests and the Python module are compiled and linked as before; only where the
    // binary is loaded in memory is fixed, so it gets no address randomization of its own code.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu_or_musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu" || env == "musl");
    if linux && gnu_or_musl {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
