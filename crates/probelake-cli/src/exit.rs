//! The process exit code, as a number that can be read back.
//!
//! `std::process::ExitCode` cannot be read once made, and the Python package's `probelake`
//! command (a console script that runs this command line inside the extension module) has to
//! hand the code to `sys.exit`.

/// The exit code of a command: `0` success, `1` "they differ", `2` an error, `130` Ctrl-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCode(u8);

impl ExitCode {
    /// Exit code 0.
    pub const SUCCESS: ExitCode = ExitCode(0);

    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self.0
    }
}

impl From<u8> for ExitCode {
    fn from(code: u8) -> Self {
        ExitCode(code)
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code.0)
    }
}
