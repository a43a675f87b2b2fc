//! Python's text for the values msprobe puts into cells: `repr(float)`, `str(int)`,
//! `str(list)`, `repr(str)`, and `float(text)` parsing.
//!
//! msprobe builds every cell with Python's `str()`/`repr()`, so a port has to print numbers the
//! way CPython does (`1e-05`, `2.0`, `2e+300`), not the way Rust's `{}` does (`0.00001`, `2`).

use probelake_format::json::{Node, Value};

/// A statistic or scalar value as msprobe holds it after reading the dump (a Python object).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PyVal {
    /// JSON `null` → `None`.
    None,
    /// JSON boolean → `True`/`False` (msprobe turns booleans into these strings; kept apart so
    /// Python equality `True == 1` still works in the scalar rule).
    Bool(bool),
    /// A JSON integer token, as Python's `str(int)` prints it.
    Int(String),
    /// A JSON float token (never NaN: msprobe replaces NaN by the string `Nan`).
    Float(f64),
    /// A string (also `Nan`), or the `str()` text of a list/dict value.
    Str(String),
}

impl PyVal {
    /// From a JSON value as Python's `json.load` would produce it (NaN → `Nan`).
    pub(crate) fn from_node(node: Option<&Node<'_>>) -> PyVal {
        let Some(node) = node else { return PyVal::None };
        match &node.value {
            Value::Null => PyVal::None,
            Value::Bool(b) => PyVal::Bool(*b),
            Value::Number(tok) => number(tok),
            Value::Str(s) => PyVal::Str(s.to_string()),
            _ => PyVal::Str(py_str_node(node)),
        }
    }

    /// Python's `str(value)`.
    pub(crate) fn py_str(&self) -> String {
        match self {
            PyVal::None => "None".into(),
            PyVal::Bool(b) => py_bool(*b).into(),
            PyVal::Int(s) | PyVal::Str(s) => s.clone(),
            PyVal::Float(f) => float_repr(*f),
        }
    }

    /// The text pandas writes into the CSV: like [`PyVal::py_str`], except that float
    /// infinities get a leading space (msprobe's CSV writer does that to every float inf).
    pub(crate) fn cell(&self) -> String {
        match self {
            PyVal::Float(f) => float_cell(*f),
            other => other.py_str(),
        }
    }

    /// The numeric value for Python's `==` between numbers (`True == 1`, `1 == 1.0`).
    fn as_number(&self) -> Option<f64> {
        match self {
            PyVal::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            PyVal::Int(s) => s.parse().ok(),
            PyVal::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Python's `a == b` for the values msprobe compares in the scalar rule.
    pub(crate) fn py_eq(&self, other: &PyVal) -> bool {
        match (self.as_number(), other.as_number()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self == other,
            _ => false,
        }
    }
}

/// `True` / `False`.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// A JSON number token as the Python object `json.load` makes of it.
fn number(tok: &str) -> PyVal {
    let is_int = !tok.contains(['.', 'e', 'E']) && !tok.contains("Infinity") && tok != "NaN";
    if is_int {
        // Python's int() drops a leading minus on zero and never keeps a sign otherwise.
        let (neg, digits) = tok.strip_prefix('-').map_or((false, tok), |d| (true, d));
        let digits = digits.trim_start_matches('0');
        return PyVal::Int(match (neg, digits.is_empty()) {
            (_, true) => "0".into(),
            (true, false) => format!("-{digits}"),
            (false, false) => digits.into(),
        });
    }
    let f = match tok {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => tok.parse().unwrap_or(f64::NAN),
    };
    if f.is_nan() {
        PyVal::Str("Nan".into())
    } else {
        PyVal::Float(f)
    }
}

/// CPython's `repr(float)`: shortest round-trip digits, positional for decimal exponents in
/// [-4, 16), scientific (`1e-05`, `2e+300`) otherwise.
pub(crate) fn float_repr(x: f64) -> String {
    let mut out = String::with_capacity(24);
    push_float_repr(&mut out, x);
    out
}

/// Appends CPython's `repr(float)` of `x` to `out`.
///
/// ryu gives the same shortest digits as CPython (the nearest of the shortest candidates, an
/// exact tie to the even one) and nearly the same layout: it writes `1e-5` for `1e-05`, `1e16`
/// for `1e+16`, and stays positional one decade lower (`0.00001`).
pub(crate) fn push_float_repr(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
        return;
    }
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(x);
    let (sign, body) = text.split_at(usize::from(text.starts_with('-')));
    if let Some(digits) = body.strip_prefix("0.0000") {
        // ryu stays positional down to 1e-5, CPython only to 1e-4.
        let (first, rest) = digits.split_at(1);
        out.push_str(sign);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push_str("e-05");
        return;
    }
    match text.split_once('e') {
        None => out.push_str(text),
        Some((mantissa, exp)) => {
            out.push_str(mantissa);
            out.push('e');
            let digits = match exp.strip_prefix('-') {
                Some(d) => {
                    out.push('-');
                    d
                }
                None => {
                    out.push('+');
                    exp
                }
            };
            if digits.len() < 2 {
                out.push('0');
            }
            out.push_str(digits);
        }
    }
}

/// A float as msprobe's CSV holds it: `repr`, with ` inf` / ` -inf` for infinities.
pub(crate) fn float_cell(x: f64) -> String {
    let mut out = String::with_capacity(24);
    if x.is_infinite() {
        out.push(' ');
    }
    push_float_repr(&mut out, x);
    out
}

/// Python's `float(text)`: surrounding whitespace, `inf`/`nan`/`infinity` in any case, `_`
/// digit separators are rare in msprobe output and are not accepted here.
pub(crate) fn py_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = body.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            if body.is_empty()
                || !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                return None;
            }
            body.parse::<f64>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

/// Python's `repr(str)`.
pub(crate) fn py_repr_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_repr_str(&mut out, s);
    out
}

/// Appends Python's `repr(str)` of `s` to `out`.
fn push_repr_str(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    // Runs of characters that need no escape are copied whole.
    let mut plain = 0;
    for (at, c) in s.char_indices() {
        let escape = match c {
            '\\' | '\n' | '\r' | '\t' => true,
            c if c == quote => true,
            c => (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)),
        };
        if !escape {
            continue;
        }
        out.push_str(&s[plain..at]);
        plain = at + c.len_utf8();
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
        }
    }
    out.push_str(&s[plain..]);
    out.push(quote);
}

/// Python's `str(list_of_str)`: `['a', 'b']`.
pub(crate) fn py_str_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::with_capacity(2 + items.iter().map(|s| s.as_ref().len() + 4).sum::<usize>());
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_repr_str(&mut out, item.as_ref());
    }
    out.push(']');
    out
}

/// Python's `str(list_of_int)`: `[2, 8]`.
pub(crate) fn py_int_list(items: &[i64]) -> String {
    let inner: Vec<String> = items.iter().map(i64::to_string).collect();
    format!("[{}]", inner.join(", "))
}

/// Python's `repr()` of a JSON value loaded by `json.load` (used inside containers).
fn py_repr_node(node: &Node<'_>) -> String {
    match &node.value {
        Value::Str(s) => py_repr_str(s),
        _ => py_str_node(node),
    }
}

/// Python's `str()` of a JSON value loaded by `json.load`.
pub(crate) fn py_str_node(node: &Node<'_>) -> String {
    match &node.value {
        Value::Null | Value::Hole => "None".into(),
        Value::Bool(b) => py_bool(*b).into(),
        Value::Number(tok) => match number(tok) {
            // Inside a container a NaN float stays a float.
            PyVal::Str(_) => "nan".into(),
            v => v.py_str(),
        },
        Value::Str(s) => s.to_string(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(py_repr_node).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(members) => {
            let inner: Vec<String> =
                members.iter().map(|(k, v)| format!("{}: {}", py_repr_str(k), py_repr_node(v))).collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// Python's type text of a JSON value: `<class 'int'>`.
pub(crate) fn py_type_name(node: Option<&Node<'_>>) -> &'static str {
    match node.map(|n| &n.value) {
        None | Some(Value::Null) | Some(Value::Hole) => "<class 'NoneType'>",
        Some(Value::Bool(_)) => "<class 'bool'>",
        Some(Value::Number(tok)) => match number(tok) {
            PyVal::Int(_) => "<class 'int'>",
            _ => "<class 'float'>",
        },
        Some(Value::Str(_)) => "<class 'str'>",
        Some(Value::Array(_)) => "<class 'list'>",
        Some(Value::Object(_)) => "<class 'dict'>",
    }
}

/// `float(format(x, ".12f"))`: decimal rounding of the exact binary value, ties to even.
pub(crate) fn round_decimals(x: f64, places: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.places$}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_cpython() {
        for (x, s) in [
            (1e-5, "1e-05"),
            (2.0, "2.0"),
            (2e300, "2e+300"),
            (-0.009999999999999787, "-0.009999999999999787"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0001, "0.0001"),
            (5.6423486e-05, "5.6423486e-05"),
            (-0.0, "-0.0"),
            (0.0022401809692382812, "0.0022401809692382812"),
            (-9.965896606445312e-05, "-9.965896606445312e-05"),
            (100.0, "100.0"),
            (0.5, "0.5"),
        ] {
            assert_eq!(float_repr(x), s);
        }
    }

    /// The exact-formatting construction `float_repr` used before it went through `write_f64`:
    /// Rust's shortest digits, re-rounded half-even at that length, laid out as CPython does.
    fn slow_repr(x: f64) -> String {
        let shortest = format!("{x:e}");
        let n = shortest.split('e').next().unwrap_or_default().bytes().filter(u8::is_ascii_digit).count();
        let even = format!("{:.*e}", n.saturating_sub(1), x);
        let sci = if even.parse::<f64>().ok() == Some(x) { even } else { shortest };
        let (mant, exp) = sci.split_once('e').unwrap();
        let exp: i32 = exp.parse().unwrap();
        let sign = if mant.starts_with('-') { "-" } else { "" };
        let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
        let n = digits.len() as i32;
        if (-4..16).contains(&exp) {
            if exp < 0 {
                format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
            } else if exp + 1 >= n {
                format!("{sign}{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
            } else {
                let (a, b) = digits.split_at((exp + 1) as usize);
                format!("{sign}{a}.{b}")
            }
        } else {
            let (first, rest) = digits.split_at(1);
            let mant = if rest.is_empty() { first.to_string() } else { format!("{first}.{rest}") };
            format!("{sign}{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
        }
    }

    #[test]
    fn repr_agrees_with_exact_formatting() {
        // Random bit patterns (every exponent), values near the positional/scientific borders
        // and float32 values widened to f64 (what dumps mostly hold), including exact ties.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // 23.6343536376953125 is exactly halfway between two 16-digit decimals.
        let tie: f64 = "23.6343536376953125".parse().unwrap();
        let mut values = vec![tie, 1e-4, 9.999999999999999e-5, 1e16, 9999999999999998.0, 5e-324];
        for _ in 0..20_000 {
            let r = next();
            values.push(f64::from_bits(r));
            values.push(f64::from(f32::from_bits(r as u32)));
            values.push((r % 1_000_000) as f64 / 1024.0);
        }
        for x in values.into_iter().filter(|x| x.is_finite() && *x != 0.0) {
            assert_eq!(float_repr(x), slow_repr(x), "{:e}", x);
        }
    }

    #[test]
    fn repr_str_quotes() {
        assert_eq!(py_repr_str("a'b"), "\"a'b\"");
        assert_eq!(py_repr_str("x\n y"), "'x\\n y'");
        assert_eq!(py_str_list(&["-1", "N/A"]), "['-1', 'N/A']");
        assert_eq!(py_repr_str("é\u{1}\u{85}\u{7f}x\\"), "'é\\x01\\x85\\x7fx\\\\'");
        assert_eq!(py_str_list::<&str>(&[]), "[]");
    }

    #[test]
    fn python_float() {
        assert_eq!(py_float(" inf"), Some(f64::INFINITY));
        assert!(py_float("Nan").is_some_and(f64::is_nan));
        assert_eq!(py_float("N/A"), None);
        assert_eq!(py_float("0.5"), Some(0.5));
        assert_eq!(round_decimals(0.1234567890125, 12), 0.123456789012);
    }
}
