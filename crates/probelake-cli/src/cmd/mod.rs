//! One module per subcommand: its arguments and its `run`.

pub mod cluster;
pub mod compare;
pub mod demo;
pub mod divergence;
pub mod export;
pub mod files;
pub mod import;
pub mod info;
pub mod plot;
pub mod report;
pub mod sql;
pub mod synth;
pub mod vacuum;

/// Settings every command shares.
pub struct Context {
    /// `--quiet`: no progress bars or notes.
    pub quiet: bool,
    /// How to reach s3:// datasets.
    pub storage: probelake_format::StorageOptions,
}

impl Context {
    /// Prints a note to stderr unless `--quiet`.
    pub fn note(&self, text: &str) {
        if !self.quiet {
            eprintln!("{text}");
        }
    }
}
