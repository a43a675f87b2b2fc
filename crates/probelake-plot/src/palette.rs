//! Colours: one per line of a trend chart, and the heatmap's scale of relative errors.

use plotters::style::RGBColor;

/// Tableau 10, the default line colours of matplotlib: distinct, and readable by most
/// colour-blind readers in the first few.
pub const LINES: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The colour of line `i` (cycling after ten).
pub fn line(i: usize) -> RGBColor {
    LINES[i % LINES.len()]
}

/// ColorBrewer's YlOrRd (9 classes): pale yellow for agreement, dark red for the largest
/// errors, monotone in lightness so the order reads in greyscale too.
const YL_OR_RD: [RGBColor; 9] = [
    RGBColor(0xff, 0xff, 0xcc),
    RGBColor(0xff, 0xed, 0xa0),
    RGBColor(0xfe, 0xd9, 0x76),
    RGBColor(0xfe, 0xb2, 0x4c),
    RGBColor(0xfd, 0x8d, 0x3c),
    RGBColor(0xfc, 0x4e, 0x2a),
    RGBColor(0xe3, 0x1a, 0x1c),
    RGBColor(0xbd, 0x00, 0x26),
    RGBColor(0x80, 0x00, 0x26),
];

/// A cell whose target value is NaN or infinite where the golden one is finite: outside the
/// scale, in a hue the scale never takes.
pub const NON_FINITE: RGBColor = RGBColor(0x25, 0x4f, 0xc8);
/// A cell with no leaf in both runs.
pub const MISSING: RGBColor = RGBColor(0xe6, 0xe6, 0xe6);
/// A cell whose values cannot be compared (golden NaN or infinite, or no statistics).
pub const UNCOMPARABLE: RGBColor = RGBColor(0xa0, 0xa0, 0xa0);

/// The scale's colour at `t` in [0, 1] (clamped), interpolated linearly between the classes.
pub fn scale(t: f64) -> RGBColor {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let pos = t * (YL_OR_RD.len() - 1) as f64;
    let i = (pos.floor() as usize).min(YL_OR_RD.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (YL_OR_RD[i], YL_OR_RD[i + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_runs_from_pale_to_dark_and_clamps() {
        assert_eq!(scale(0.0), YL_OR_RD[0]);
        assert_eq!(scale(1.0), YL_OR_RD[8]);
        assert_eq!(scale(-3.0), YL_OR_RD[0]);
        assert_eq!(scale(7.0), YL_OR_RD[8]);
        assert_eq!(scale(f64::NAN), YL_OR_RD[0]);
        let lightness = |c: RGBColor| u32::from(c.0) + u32::from(c.1) + u32::from(c.2);
        let steps: Vec<u32> = (0..=20).map(|i| lightness(scale(f64::from(i) / 20.0))).collect();
        assert!(steps.windows(2).all(|w| w[0] >= w[1]), "{steps:?}");
    }
}
