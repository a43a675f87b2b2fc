//! Running the real binary.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `probelake ARGS` and returns its output.
pub fn probelake<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_probelake")).args(args).output().expect("the probelake binary runs")
}

/// Runs `probelake ARGS` and asserts success.
pub fn ok<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = probelake(args);
    assert!(out.status.success(), "probelake failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    out
}

/// `probelake import SRC DST --quiet`.
pub fn import(src: &Path, dst: &Path) {
    ok([Path::new("import"), src, dst, Path::new("--quiet")]);
}

/// `probelake export SRC DST --quiet`.
pub fn export(src: &Path, dst: &Path) {
    ok([Path::new("export"), src, dst, Path::new("--quiet")]);
}
