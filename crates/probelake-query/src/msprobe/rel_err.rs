//! msprobe's relative error of two statistics, the rule below the `rel_err` SQL function
//! (`crate::udf::rel_err`), the first-divergence search and the report's colours.

/// `|(target - golden) / golden|`; 0 when the two are equal (NaN = NaN and inf = inf
/// included, as msprobe compares their text), `None` where msprobe writes a token instead of a
/// number (either side NaN or infinite, or golden 0).
pub fn rel_err(target: f64, golden: f64) -> Option<f64> {
    if target == golden || (target.is_nan() && golden.is_nan()) {
        return Some(0.0);
    }
    if !target.is_finite() || !golden.is_finite() || golden == 0.0 {
        return None;
    }
    Some(((target - golden) / golden).abs())
}
