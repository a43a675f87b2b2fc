//! indicatif progress bars behind the library's `Progress` trait.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use probelake_msprobe::Progress;

/// A byte-counting bar on stderr; hidden when stderr is not a terminal or with `--quiet`.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar labelled `what` (`importing`, `exporting`).
    pub fn new(what: &'static str, quiet: bool) -> Self {
        let bar = ProgressBar::hidden();
        if !quiet {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        let style = ProgressStyle::with_template("{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(what);
        Bar { bar }
    }
}

impl Progress for Bar {
    fn start(&self, bytes: u64, units: usize) {
        self.bar.set_length(bytes);
        self.bar.set_message(format!("{units} units"));
    }
    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
