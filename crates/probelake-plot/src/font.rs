//! The embedded font: PNG text without system fonts (see `fonts/README.md`).

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

use crate::error::{PlotError, Result};

/// DejaVu Sans, cut down to the characters chart labels use.
static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans-subset.ttf");

/// The family every chart asks for; SVG viewers substitute their own sans-serif font.
pub const FAMILY: &str = "sans-serif";

/// Registers the font with plotters once per process (before any text is measured or drawn).
pub fn ensure_registered() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        [FontStyle::Normal, FontStyle::Bold].into_iter().all(|style| register_font(FAMILY, style, DEJAVU_SANS).is_ok())
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Internal("the embedded font does not parse".into()))
    }
}
