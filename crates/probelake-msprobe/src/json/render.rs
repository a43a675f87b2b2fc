//! Scalars exactly as CPython's `json` module writes them with `ensure_ascii=True` and
//! `allow_nan=True`: strings with `\uXXXX` escapes, floats as `float.__repr__`.

use super::words::{control_bytes, high_bytes, splat, unflagged_prefix, zero_bytes};

/// Appends `s` as a JSON string literal, escaped the way CPython's `json.dumps` does by default
/// (`ensure_ascii=True`): `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other control characters and
/// everything from DEL (0x7F) up as lowercase `\u00xx`, astral characters as surrogate pairs.
///
/// ```
/// let mut out = Vec::new();
/// probelake_msprobe::json::write_str(&mut out, "é\n\"x\"");
/// assert_eq!(out, br#""\u00e9\n\"x\"""#);
/// ```
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Most strings (names, dtypes, keys) need no escape: one check, one copy.
    if plain_prefix(bytes) == bytes.len() {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    // Fast path: copy runs of plain printable ASCII in one go.
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if is_plain(b) {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        if b < 0x80 {
            escape_ascii(out, b);
        } else {
            // Non-ASCII: handled character-wise below; mark that we must switch modes.
            start = i;
            return write_str_slow(out, s, start);
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A byte `write_str` copies as it is: printable ASCII but the quote and the backslash.
fn is_plain(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// How many bytes from the start of `bytes` [`write_str`] copies as they are (printable ASCII
/// but `"` and `\`), eight at a time: a byte loop was most of the cost of writing a name.
pub(crate) fn plain_prefix(bytes: &[u8]) -> usize {
    let n = unflagged_prefix(bytes, |w| {
        control_bytes(w) | high_bytes(w) | zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\'))
    });
    if n + 8 <= bytes.len() {
        return n;
    }
    n + bytes[n..].iter().take_while(|&&b| is_plain(b)).count()
}

fn write_str_slow(out: &mut Vec<u8>, s: &str, from: usize) {
    for c in s[from..].chars() {
        let code = c as u32;
        if code < 0x80 {
            let b = code as u8;
            if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
                out.push(b);
            } else {
                escape_ascii(out, b);
            }
        } else if code < 0x10000 {
            push_u_escape(out, code);
        } else {
            let v = code - 0x10000;
            push_u_escape(out, 0xd800 | (v >> 10));
            push_u_escape(out, 0xdc00 | (v & 0x3ff));
        }
    }
    out.push(b'"');
}

fn escape_ascii(out: &mut Vec<u8>, b: u8) {
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        _ => push_u_escape(out, u32::from(b)),
    }
}

fn push_u_escape(out: &mut Vec<u8>, unit: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xf) as usize]);
    }
}

/// Appends `v` as CPython's `repr(float)` (and so `json.dumps`) writes it: the shortest digit
/// string that reads back to the same double, positional when the decimal exponent is in
/// `-4..16` (`0.0001`, `2512.0`, `-0.0`), scientific otherwise (`1e-05`, `1e+16`,
/// `3.3215508210560074e-06`), and the bare tokens `NaN`, `Infinity`, `-Infinity`.
///
/// ```
/// let render = |v: f64| {
///     let mut out = Vec::new();
///     probelake_msprobe::json::write_f64(&mut out, v);
///     String::from_utf8(out).unwrap()
/// };
/// assert_eq!(render(1e-5), "1e-05");
/// assert_eq!(render(2512.0), "2512.0");
/// assert_eq!(render(1e16), "1e+16");
/// assert_eq!(render(-0.0), "-0.0");
/// assert_eq!(render(f64::NAN), "NaN");
/// ```
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    for_f64_text(v, |piece| out.extend_from_slice(piece.as_bytes()));
}

/// [`write_f64`] for a `String`: the same text, appended in pieces that are `str` already (no
/// UTF-8 check of bytes known to be ASCII).
///
/// ```
/// let mut out = String::from("max=");
/// probelake_msprobe::json::push_f64(&mut out, 1e-5);
/// assert_eq!(out, "max=1e-05");
/// ```
pub fn push_f64(out: &mut String, v: f64) {
    for_f64_text(v, |piece| out.push_str(piece));
}

/// Whether [`write_f64`] writes `v` as exactly `text`: a cheaper way to that answer than writing
/// it and comparing, with nothing written.
///
/// ```
/// use probelake_msprobe::json::f64_is_written_as;
/// assert!(f64_is_written_as(1e-5, b"1e-05"));
/// assert!(!f64_is_written_as(1.5, b"1.50"));
/// ```
pub fn f64_is_written_as(v: f64, text: &[u8]) -> bool {
    let mut at = 0;
    let mut same = true;
    for_f64_text(v, |piece| {
        let end = at + piece.len();
        same = same && text.get(at..end) == Some(piece.as_bytes());
        at = end;
    });
    same && at == text.len()
}

/// Python's `repr` of `v` (with JSON's names for the non-finite ones), handed to `push` in
/// pieces.
fn for_f64_text(v: f64, mut push: impl FnMut(&str)) {
    if v.is_nan() {
        push("NaN");
        return;
    }
    if v.is_infinite() {
        push(if v > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // zmij (Schubfach) gives the shortest round-trip digits, nearest the exact value, like
    // Python's repr; only the layout differs, so take digits and exponent from it and lay them
    // out the Python way. This runs four times per tensor leaf and per compared statistic;
    // zmij takes about half of Ryū's instructions, `core::fmt`'s `{:e}` several times more.
    let mut digits_buf = zmij::Buffer::new();
    let mut text = digits_buf.format_finite(v);
    // Most floats are positional with a decimal exponent of -4 or more, where zmij's text is
    // repr's unless it may be a tie: read straight off the text, that costs a third of
    // `Decimal::of`.
    if let Some(len) = positional_digits(text.as_bytes()) {
        if len < 15 || !may_be_tie(v, len) {
            push(text);
            return;
        }
    }
    let mut decimal = Decimal::of(text.as_bytes());
    // Among equally short strings CPython picks the one nearest the exact value, halves to
    // even; a shortest-digits algorithm may take the other one of an exact tie
    // (23.634353637695313 for 23.6343536376953125, where CPython writes …312), so ties are
    // settled by an exact-mode format. Ties need ≥ 15 digits.
    // Made only for a possible tie: zeroing its 64 bytes for every float showed in profiles.
    let mut nearest = None;
    if decimal.len >= 15 && may_be_tie(v, decimal.len) {
        use std::fmt::Write as _;
        let nearest = nearest.insert(StackBuf::new());
        let _ = write!(nearest, "{v:.*e}", decimal.len - 1);
        if let Some(exact) = std::str::from_utf8(nearest.as_bytes()).ok().filter(|s| s.parse::<f64>().ok() == Some(v)) {
            text = exact;
            decimal = Decimal::of(text.as_bytes());
        }
    }
    // zmij's positional form is Python's for decimal exponents -4..16 (`0.0001`, `2512.0`);
    // Python switches to scientific one step earlier (`1e-05` where zmij writes `0.00001`).
    if !decimal.scientific && decimal.exp >= -4 {
        push(text);
        return;
    }
    let Decimal { negative, exp, .. } = decimal;
    let digits = Digits::of(text, &decimal);
    let n = digits.len();
    if negative {
        push("-");
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            push("0.");
            push_zeros((-exp - 1) as usize, &mut push);
            digits.push(0..n, &mut push);
        } else if exp as usize + 1 >= n {
            digits.push(0..n, &mut push);
            push_zeros(exp as usize + 1 - n, &mut push);
            push(".0");
        } else {
            let point = exp as usize + 1;
            digits.push(0..point, &mut push);
            push(".");
            digits.push(point..n, &mut push);
        }
    } else {
        digits.push(0..1, &mut push);
        if n > 1 {
            push(".");
            digits.push(1..n, &mut push);
        }
        push(if exp < 0 { "e-" } else { "e+" });
        // Two digits at least, as Python writes them; a double's exponent has at most three.
        let abs = exp.unsigned_abs() as usize;
        if abs >= 100 {
            push(DIGITS[abs / 100]);
        }
        push(DIGITS[abs / 10 % 10]);
        push(DIGITS[abs % 10]);
    }
}

/// The number of significant digits of zmij's text for a float that Python writes the same
/// way (positional, decimal exponent -4 or more); `None` for any other text. zmij writes the
/// shortest digits, so they end in a zero only as an integer's `.0`, and positional text has
/// no exponent at its end.
fn positional_digits(text: &[u8]) -> Option<usize> {
    let body = match text.split_first() {
        Some((b'-', rest)) => rest,
        _ => text,
    };
    if body[body.len().saturating_sub(5)..].contains(&b'e') || body.starts_with(b"0.0000") {
        return None;
    }
    if let Some(fraction) = body.strip_prefix(b"0.") {
        let zeros = fraction.iter().take_while(|&&b| b == b'0').count();
        // `0.0` is zero: one digit, as `Decimal` counts it.
        return Some((fraction.len() - zeros).max(1));
    }
    match body.strip_suffix(b".0") {
        // An integer: its trailing zeros are not significant.
        Some(integer) => Some(integer.iter().rposition(|&b| b != b'0').map_or(1, |last| last + 1)),
        None => Some(body.len().saturating_sub(1)),
    }
}

const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

fn push_zeros(mut n: usize, push: &mut impl FnMut(&str)) {
    const ZEROS: &str = "0000000000000000";
    while n > 0 {
        let now = n.min(ZEROS.len());
        push(&ZEROS[..now]);
        n -= now;
    }
}

/// The significant digits of a number's text, in the (at most two) pieces either side of its
/// point.
struct Digits<'t>(&'t str, &'t str);

impl<'t> Digits<'t> {
    fn of(text: &'t str, decimal: &Decimal) -> Digits<'t> {
        if decimal.span.is_empty() {
            return Digits("0", "");
        }
        let span = text.get(decimal.span.clone()).unwrap_or_default();
        match span.split_once('.') {
            Some((before, after)) => Digits(before, after),
            None => Digits(span, ""),
        }
    }

    fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }

    /// Hands the digits in `range` (indices among the digits) to `push`.
    fn push(&self, range: std::ops::Range<usize>, push: &mut impl FnMut(&str)) {
        let first = self.0.len();
        if range.start < first {
            push(self.0.get(range.start..range.end.min(first)).unwrap_or_default());
        }
        if range.end > first {
            push(self.1.get(range.start.max(first) - first..range.end - first).unwrap_or_default());
        }
    }
}

/// A decimal number as zmij or `{:e}` write it (`-1234.5`, `0.001`, `1e+16`, `1.25e-7`), read
/// without copying its digits: sign, number of significant digits (no leading or trailing
/// zeros; one for zero), the decimal exponent of the first one, and whether it was written
/// with an exponent. Each is found by a short scan from the end it is nearest (the first
/// non-zero digit is rarely past the third byte, the last one is at the end); a digit-by-digit
/// pass over the whole text, as before, was a third of `write_f64`.
struct Decimal {
    negative: bool,
    len: usize,
    exp: i32,
    scientific: bool,
    /// Where the significant digits are in the text: from the first to the last non-zero one,
    /// with the point among them when it falls there.
    span: std::ops::Range<usize>,
}

impl Decimal {
    fn of(text: &[u8]) -> Decimal {
        let negative = text.first() == Some(&b'-');
        let start = usize::from(negative);
        let body = text.get(start..).unwrap_or_default();
        // The exponent ends the text (`e-324` at the longest): look for its `e` there only.
        let tail = body.len().saturating_sub(6);
        let (mantissa, exp10, scientific) = match body[tail..].iter().rposition(|&b| b == b'e' || b == b'E') {
            Some(at) => (&body[..tail + at], parse_exponent(&body[tail + at + 1..]), true),
            None => (body, 0, false),
        };
        let nonzero = |b: &u8| (b'1'..=b'9').contains(b);
        let (Some(first), Some(last)) = (mantissa.iter().position(nonzero), mantissa.iter().rposition(nonzero)) else {
            return Decimal { negative, len: 1, exp: 0, scientific, span: 0..0 };
        };
        let point = mantissa.iter().position(|&b| b == b'.').unwrap_or(mantissa.len());
        // A digit's place among the digits: bytes after the point are one further on.
        let place = |byte: usize| if byte > point { byte - 1 } else { byte };
        Decimal {
            negative,
            len: place(last) - place(first) + 1,
            exp: exp10 + point as i32 - 1 - place(first) as i32,
            scientific,
            span: start + first..start + last + 1,
        }
    }

    /// The significant digits of `text`, the text this was read from, in `buf`.
    #[cfg(test)]
    fn digits<'b>(&self, text: &[u8], buf: &'b mut [u8; 40]) -> &'b [u8] {
        if self.span.is_empty() {
            buf[0] = b'0';
            return &buf[..1];
        }
        let mut n = 0;
        for &b in text.get(self.span.clone()).unwrap_or_default() {
            if b != b'.' && n < buf.len() {
                buf[n] = b;
                n += 1;
            }
        }
        &buf[..n]
    }
}

/// Whether the exact value of finite `v` may lie halfway between two `digits`-digit decimals.
///
/// A tie needs the exact decimal expansion to have `digits + 1` significant digits, the last
/// one a 5. `v = m·2^-k` with `m` odd expands to `m·5^k` (scaled by a power of ten), whose
/// digit count is cheap to get for the `k` that matter. Saying "maybe" is always safe: the
/// caller then formats the exact rounding and compares.
fn may_be_tie(v: f64, digits: usize) -> bool {
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mut m, mut e) = if biased == 0 { (fraction, -1074) } else { (fraction | (1 << 52), biased - 1075) };
    if m == 0 {
        return false;
    }
    let tz = m.trailing_zeros();
    m >>= tz;
    e += tz as i32;
    if e >= 0 {
        // An integer; its expansion may end in zeros, so leave it to the exact check.
        return true;
    }
    let k = e.unsigned_abs();
    // 5^26 alone has 19 digits, more than the 18 a tie of at most 17 shortest digits needs.
    if k >= 26 {
        return false;
    }
    // `m` is odd and k ≥ 1, so the expansion ends in a 5; only its length is in question:
    // `digits + 1` digits is 10^digits ≤ exact < 10^(digits + 1). (A u128 `ilog10` and `% 10`
    // were an eighth of `write_f64`.)
    let exact = u128::from(m) * POW5[k as usize];
    match (POW10.get(digits), POW10.get(digits + 1)) {
        (Some(&low), Some(&high)) => (low..high).contains(&exact),
        _ => true,
    }
}

/// 5^0 ..= 5^25.
const POW5: [u128; 26] = powers(5);
/// 10^0 ..= 10^25.
const POW10: [u128; 26] = powers(10);

const fn powers(base: u128) -> [u128; 26] {
    let mut table = [1u128; 26];
    let mut i = 1;
    while i < 26 {
        table[i] = table[i - 1] * base;
        i += 1;
    }
    table
}

fn parse_exponent(text: &[u8]) -> i32 {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let magnitude =
        digits.iter().fold(0i32, |acc, &d| acc.saturating_mul(10).saturating_add(i32::from(d.wrapping_sub(b'0'))));
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// A small fixed buffer for `write!`, so formatting a number allocates nothing.
struct StackBuf {
    buf: [u8; 64],
    len: usize,
}

impl StackBuf {
    fn new() -> Self {
        StackBuf { buf: [0; 64], len: 0 }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends an integer in decimal.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(decimal(v.unsigned_abs(), &mut [0; 20]).as_bytes());
}

/// `v` in decimal, written into the end of `buf` (without `core::fmt`, which costs ~200
/// instructions a number).
pub(crate) fn decimal(v: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    let mut rest = v;
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_prefix_stops_where_a_byte_loop_would() {
        let bytewise = |b: &[u8]| b.iter().take_while(|&&c| is_plain(c)).count();
        for stop in 0..=255u8 {
            for len in 0..20 {
                for at in 0..len {
                    for filler in [b'a', b'~', b' ', b'!'] {
                        let mut bytes = vec![filler; len];
                        bytes[at] = stop;
                        assert_eq!(plain_prefix(&bytes), bytewise(&bytes), "{stop:#x} at {at} of {len}");
                        // A second stop after the first does not move the answer.
                        if at + 1 < len {
                            bytes[at + 1] = 0x00;
                            assert_eq!(plain_prefix(&bytes), bytewise(&bytes), "{stop:#x} at {at} of {len}");
                        }
                    }
                }
            }
        }
    }

    /// `write_f64` as it was before Ryū and zmij: digits from `core::fmt`'s shortest `{:e}`, with the
    /// same tie rule, laid out the Python way by hand.
    fn reference(v: f64) -> String {
        if !v.is_finite() {
            let mut out = Vec::new();
            write_f64(&mut out, v);
            return String::from_utf8(out).unwrap();
        }
        let short = format!("{v:e}");
        let n = Decimal::of(short.as_bytes()).len;
        let mut text = short.clone();
        // Every candidate checked, not only those `may_be_tie` lets through.
        if n >= 15 {
            let nearest = format!("{v:.*e}", n - 1);
            if nearest.parse::<f64>().ok() == Some(v) {
                text = nearest;
            }
        }
        let decimal = Decimal::of(text.as_bytes());
        let (negative, exp) = (decimal.negative, decimal.exp);
        let mut buf = [0; 40];
        let digits = std::str::from_utf8(decimal.digits(text.as_bytes(), &mut buf)).unwrap();
        let n = digits.len();
        let sign = if negative { "-" } else { "" };
        let n = n as i32;
        if (-4..16).contains(&exp) {
            if exp < 0 {
                format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
            } else if exp + 1 >= n {
                format!("{sign}{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
            } else {
                let point = (exp + 1) as usize;
                format!("{sign}{}.{}", &digits[..point], &digits[point..])
            }
        } else {
            let rest = if n > 1 { format!(".{}", &digits[1..]) } else { String::new() };
            format!("{sign}{}{rest}e{}{:02}", &digits[..1], if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
        }
    }

    #[test]
    fn shortest_digits_agree_with_core_fmt() {
        // A fixed xorshift stream: random bit patterns (every exponent) and f32-derived values
        // (what msprobe's statistics are), plus the powers of ten around the layout switches.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut values: Vec<f64> = (-30..30).map(|e| 10f64.powi(e)).collect();
        for _ in 0..100_000 {
            let bits = next();
            values.push(f64::from_bits(bits));
            values.push(f64::from(f32::from_bits(bits as u32)));
            values.push((bits % 1_000_000) as f64 / 64.0);
        }
        for v in values {
            if v.is_finite() {
                // The fast path's digit count is `Decimal`'s wherever it answers.
                let mut buf = zmij::Buffer::new();
                let text = buf.format_finite(v).as_bytes();
                if let Some(len) = positional_digits(text) {
                    let decimal = Decimal::of(text);
                    assert_eq!(len, decimal.len, "bits {:#x}", v.to_bits());
                    assert!(!decimal.scientific && decimal.exp >= -4, "bits {:#x}", v.to_bits());
                }
            }
            let want = reference(v);
            assert_eq!(f(v), want, "bits {:#x}", v.to_bits());
            let mut pushed = String::new();
            push_f64(&mut pushed, v);
            assert_eq!(pushed, want, "push_f64, bits {:#x}", v.to_bits());
        }
    }

    fn f(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_match_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (3.3215508210560074e-06, "3.3215508210560074e-06"),
            (1.0000000200408773e+20, "1.0000000200408773e+20"),
            (2e300, "2e+300"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.4993983507156372, "0.4993983507156372"),
            (-2.4096579551696777, "-2.4096579551696777"),
            (1.1015625, "1.1015625"),
            (1234.5, "1234.5"),
            (f64::from(23.634_354_f32), "23.634353637695312"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (v, want) in cases {
            assert_eq!(f(v), want, "{v:?}");
        }
    }

    #[test]
    fn strings_match_python_ensure_ascii() {
        let mut out = Vec::new();
        write_str(&mut out, "a\u{7f}\u{1}/\t😀");
        assert_eq!(out, br#""a\u007f\u0001/\t\ud83d\ude00""#);
    }
}
