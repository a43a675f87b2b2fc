//! Python's text for the values msprobe puts into cells: `repr(float)`, `str(int)`,
//! `str(list)`, `repr(str)`, and `float(text)` parsing.
//!
//! msprobe builds every cell with Python's `str()`/`repr()`, so a port has to print numbers the
//! way CPython does (`1e-05`, `2.0`, `2e+300`), not the way Rust's `{}` does (`0.00001`, `2`).

use probelake_msprobe::json::{parse, Arena, Node, Value};

/// A statistic or scalar value as msprobe holds it after reading the dump (a Python object).
#[derive(Debug, Clone, PartialEq)]
pub enum PyVal {
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
    pub fn from_node(node: Option<&Node<'_>>) -> PyVal {
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
    pub fn py_str(&self) -> String {
        match self {
            PyVal::None => "None".into(),
            PyVal::Bool(b) => py_bool(*b).into(),
            PyVal::Int(s) | PyVal::Str(s) => s.clone(),
            PyVal::Float(f) => float_repr(*f),
        }
    }

    /// Appends the text pandas writes into the CSV: like [`PyVal::py_str`], except that float
    /// infinities get a leading space (msprobe's CSV writer does that to every float inf).
    pub fn push_cell(&self, out: &mut String) {
        match self {
            PyVal::None => out.push_str("None"),
            PyVal::Bool(b) => out.push_str(py_bool(*b)),
            PyVal::Int(s) | PyVal::Str(s) => out.push_str(s),
            PyVal::Float(f) => push_float_cell(out, *f),
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
    pub fn py_eq(&self, other: &PyVal) -> bool {
        match (self.as_number(), other.as_number()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self == other,
            _ => false,
        }
    }
}

/// `True` / `False`.
pub fn py_bool(b: bool) -> &'static str {
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
pub fn float_repr(x: f64) -> String {
    let mut out = String::with_capacity(24);
    push_float_repr(&mut out, x);
    out
}

/// Appends CPython's `repr(float)` of `x` to `out`.
pub fn push_float_repr(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
        return;
    }
    // msprobe's JSON holds finite floats as `json.dumps` writes them, which is `repr`: one
    // implementation serves both (ties, layout switches and its tests live there).
    probelake_msprobe::json::push_f64(out, x);
}

/// Appends a float as msprobe's CSV holds it: `repr`, with ` inf` / ` -inf` for infinities.
pub fn push_float_cell(out: &mut String, x: f64) {
    if x.is_infinite() {
        out.push(' ');
    }
    push_float_repr(out, x);
}

/// Python's `float(text)`: surrounding whitespace, `inf`/`nan`/`infinity` in any case, `_`
/// digit separators are rare in msprobe output and are not accepted here.
pub fn py_float(text: &str) -> Option<f64> {
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
pub fn py_repr_str(s: &str) -> String {
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
#[cfg(test)]
pub fn py_str_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::with_capacity(2 + items.iter().map(|s| s.as_ref().len() + 4).sum::<usize>());
    push_py_str_list(&mut out, items);
    out
}

/// Appends [`py_str_list`] of `items` to `out`.
pub fn push_py_str_list<S: AsRef<str>>(out: &mut String, items: &[S]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_repr_str(out, item.as_ref());
    }
    out.push(']');
}

/// Python's `str(list_of_int)`: `[2, 8]`.
pub fn py_int_list(items: &[i64]) -> String {
    // Digits by `write_i64`: `core::fmt`'s `{}` costs several times more, and every tensor's
    // shape is printed this way. The bytes become the string without a copy.
    let mut out = Vec::with_capacity(2 + 6 * items.len());
    out.push(b'[');
    for (i, &item) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        probelake_msprobe::json::write_i64(&mut out, item);
    }
    out.push(b']');
    String::from_utf8(out).unwrap_or_default()
}

/// Python's `repr()` of a JSON value loaded by `json.load` (used inside containers).
fn py_repr_node(node: &Node<'_>) -> String {
    match &node.value {
        Value::Str(s) => py_repr_str(s),
        _ => py_str_node(node),
    }
}

/// Python's `str()` of a JSON value loaded by `json.load`.
pub fn py_str_node(node: &Node<'_>) -> String {
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
        // Only `parse_taking` makes one; read as the object it is.
        Value::Taken { text, .. } => {
            let arena = Arena::new();
            parse(text.as_bytes(), &arena).map(|object| py_str_node(&object)).unwrap_or_default()
        }
    }
}

/// Python's type text of a JSON value: `<class 'int'>`.
pub fn py_type_name(node: Option<&Node<'_>>) -> &'static str {
    match node.map(|n| &n.value) {
        None | Some(Value::Null) | Some(Value::Hole) => "<class 'NoneType'>",
        Some(Value::Bool(_)) => "<class 'bool'>",
        Some(Value::Number(tok)) => match number(tok) {
            PyVal::Int(_) => "<class 'int'>",
            _ => "<class 'float'>",
        },
        Some(Value::Str(_)) => "<class 'str'>",
        Some(Value::Array(_)) => "<class 'list'>",
        Some(Value::Object(_) | Value::Taken { .. }) => "<class 'dict'>",
    }
}

/// `float(format(x, ".12f"))`: decimal rounding of the exact binary value, ties to even.
pub fn round_decimals(x: f64, places: usize) -> f64 {
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
        // Exactly halfway between two 16-digit decimals: CPython takes the even one.
        let tie: f64 = "23.6343536376953125".parse().expect("a float");
        assert_eq!(float_repr(tie), "23.634353637695312");
    }

    #[test]
    fn repr_str_quotes() {
        assert_eq!(py_repr_str("a'b"), "\"a'b\"");
        assert_eq!(py_repr_str("x\n y"), "'x\\n y'");
        assert_eq!(py_str_list(&["-1", "N/A"]), "['-1', 'N/A']");
        assert_eq!((py_int_list(&[2, -8, 0]), py_int_list(&[])), ("[2, -8, 0]".into(), "[]".into()));
        let extremes = [i64::MIN, i64::MAX, -1, 10, 4096];
        assert_eq!(py_int_list(&extremes), format!("{extremes:?}"));
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
