//! The `probelake` command of the Python package: the command line of `probelake-cli`, run in
//! this module so that one `pip install` gives the package and the command from one build.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the command line on `args` (the first names the program) and returns its exit code.
///
/// The GIL is released for the whole run: a command can take minutes, and the command line
/// runs its own runtime, not the package's.
#[pyfunction]
pub fn main(py: Python<'_>, args: Vec<OsString>) -> u8 {
    py.detach(|| probelake_cli::run_with_args(args).code())
}
