//! Statistics mode (docs/msprobe-compare.md §6): per statistic a diff text and a relative-error text.

use probelake_query::msprobe::pyfmt::{float_repr, py_float, PyVal};

/// How docs/msprobe-compare.md §6.2 classifies a statistic's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Nan,
    Inf,
    NegInf,
    Num,
    Device,
    Na,
    Other,
}

fn classify(text: &str) -> Class {
    let lower = text.to_ascii_lowercase();
    if lower == "nan" {
        Class::Nan
    } else if lower == "inf" {
        Class::Inf
    } else if lower == "-inf" {
        Class::NegInf
    } else if lower != "true" && lower != "false" && py_float(text).is_some() {
        Class::Num
    } else if lower.contains("npu") || lower.contains("cpu") || lower.contains("cuda") {
        Class::Device
    } else if text == "N/A" {
        Class::Na
    } else {
        Class::Other
    }
}

/// The cells of two Python floats, as the text rules below give them without going through
/// the text: `repr` is one-to-one on non-NaN floats (a `PyVal::Float` is never NaN), finite
/// ones classify as numbers that read back exactly, and `inf`/`-inf` as themselves.
fn float_cells(x: f64, y: f64) -> (String, String) {
    if x.to_bits() == y.to_bits() {
        return ("0".into(), "0".into());
    }
    let token = match (x.is_finite(), y.is_finite()) {
        (true, true) => {
            let diff = x - y;
            let rel = if y == 0.0 {
                "inf".to_owned()
            } else {
                let mut rel = float_repr(((diff / y) * 100.0).abs());
                rel.push('%');
                rel
            };
            return (float_repr(diff), rel);
        }
        (true, false) => {
            if y > 0.0 {
                "-inf"
            } else {
                "inf"
            }
        }
        (false, true) => {
            if x > 0.0 {
                "inf"
            } else {
                "-inf"
            }
        }
        // Different infinities: `inf` against `-inf` is `inf`, the other way `-inf`.
        (false, false) => {
            if x > 0.0 {
                "inf"
            } else {
                "-inf"
            }
        }
    };
    (token.into(), token.into())
}

/// The (diff, relative) cells of one statistic; `bench` is `None` when the row is unmatched.
pub(crate) fn stat_cells(npu: &PyVal, bench: Option<&PyVal>) -> (String, String) {
    let Some(bench) = bench else { return ("N/A".into(), "N/A".into()) };
    if let (PyVal::Float(x), PyVal::Float(y)) = (npu, bench) {
        return float_cells(*x, *y);
    }
    let (a, b) = (npu.py_str(), bench.py_str());
    if a == b {
        return ("0".into(), "0".into());
    }
    use Class::*;
    let token = match (classify(&a), classify(&b)) {
        (Na, _) | (_, Na) => "N/A",
        (Num, Num) => {
            let x = py_float(&a).unwrap_or(f64::NAN);
            let y = py_float(&b).unwrap_or(f64::NAN);
            let diff = x - y;
            let rel = if y == 0.0 { "inf".to_owned() } else { format!("{}%", float_repr(((diff / y) * 100.0).abs())) };
            return (float_repr(diff), rel);
        }
        (Device, Device) => "N/A",
        (Device, _) | (_, Device) | (Other, _) | (_, Other) => "Diff",
        (Nan, _) | (_, Nan) => "Nan",
        (Num, Inf) => "-inf",
        (Num, NegInf) => "inf",
        (Inf, Num) | (Inf, NegInf) => "inf",
        (NegInf, Num) | (NegInf, Inf) => "-inf",
        (Inf, Inf) | (NegInf, NegInf) => "N/A",
    };
    (token.into(), token.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> PyVal {
        PyVal::Float(x)
    }

    #[test]
    fn observed_cells() {
        let c = |a: PyVal, b: PyVal| stat_cells(&a, Some(&b));
        assert_eq!(c(f(2.0), f(2.01)), ("-0.009999999999999787".into(), "0.4975124378109347%".into()));
        assert_eq!(c(PyVal::Str("Nan".into()), f(3.0)), ("Nan".into(), "Nan".into()));
        assert_eq!(c(f(0.5), f(0.0)), ("0.5".into(), "inf".into()));
        assert_eq!(c(f(5.0), f(f64::INFINITY)), ("-inf".into(), "-inf".into()));
        assert_eq!(c(f(f64::INFINITY), f(f64::NEG_INFINITY)), ("inf".into(), "inf".into()));
        assert_eq!(c(PyVal::Str("npu:0".into()), PyVal::Str("cuda:0".into())), ("N/A".into(), "N/A".into()));
        assert_eq!(c(PyVal::Str("abc".into()), PyVal::Str("abd".into())), ("Diff".into(), "Diff".into()));
        assert_eq!(c(PyVal::Int("2".into()), PyVal::Int("3".into())), ("-1.0".into(), "33.33333333333333%".into()));
        assert_eq!(c(PyVal::Int("3".into()), f(3.0)), ("0.0".into(), "0.0%".into()));
        assert_eq!(c(PyVal::Int("4".into()), PyVal::Int("0".into())), ("4.0".into(), "inf".into()));
    }

    #[test]
    fn floats_follow_the_text_rules() {
        let values = [0.0, -0.0, 1.0, -2.5, 3.0e-7, 1e300, -1e-300, 2.01, f64::INFINITY, f64::NEG_INFINITY];
        for &x in &values {
            for &y in &values {
                let text = |v: f64| PyVal::Str(float_repr(v));
                assert_eq!(stat_cells(&f(x), Some(&f(y))), stat_cells(&text(x), Some(&text(y))), "{x} {y}");
            }
        }
    }
}
