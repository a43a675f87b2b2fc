//! Tensor mode (docs/msprobe-compare.md §8): the six metrics msprobe computes from the two tensor files.
//!
//! Precision follows 26.2: Cosine, EucDist and MaxAbsErr in float64; the relative error in
//! `result_type(npu, bench, float32)` — float32 for fp16/bf16/fp32 data, so the subtraction and
//! division must happen in f32 to print the same digits — and every metric but EucDist rounded
//! to 12 decimals.

use crate::join::load::TensorData;
use probelake_query::msprobe::pyfmt::{push_float_cell, round_decimals};

/// The metric columns of tensor mode, in order.
pub(crate) const METRIC_COLUMNS: [&str; 6] =
    ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"];

/// A metric cell: a float, or one of msprobe's tokens.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Metric {
    /// A number (`Nan` when NaN).
    Num(f64),
    /// `unsupported`, `shape unmatched`, `N/A`.
    Token(&'static str),
}

impl Metric {
    /// The CSV text.
    pub(crate) fn cell(&self) -> String {
        let mut out = String::new();
        self.push_cell(&mut out);
        out
    }

    /// Appends [`Metric::cell`] to `out`.
    pub(crate) fn push_cell(&self, out: &mut String) {
        match self {
            Metric::Num(x) if x.is_nan() => out.push_str("Nan"),
            Metric::Num(x) => push_float_cell(out, *x),
            Metric::Token(t) => out.push_str(t),
        }
    }
}

/// Element type class after msprobe's loading (bf16/fp8 → fp32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// fp16, bf16 (loaded as fp32), fp32: relative error in f32.
    Small,
    /// fp64.
    F64,
    /// Integers and bools (cast to f64 for the relative error).
    Int,
}

/// A loaded, squeezed tensor as f64 values (exact for every supported dtype but huge int64s).
struct Arr {
    vals: Vec<f64>,
    shape: Vec<i64>,
    kind: Kind,
}

fn decode(t: &TensorData) -> Option<Arr> {
    let d = t.dtype.strip_prefix("torch.").unwrap_or(&t.dtype);
    let b = &t.data;
    fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
    }
    let (vals, kind): (Vec<f64>, Kind) = match d {
        "float32" | "float" => (chunks::<4>(b).map(|c| f64::from(f32::from_le_bytes(c))).collect(), Kind::Small),
        "float64" | "double" => (chunks::<8>(b).map(f64::from_le_bytes).collect(), Kind::F64),
        "bfloat16" => (
            chunks::<2>(b).map(|c| f64::from(f32::from_bits(u32::from(u16::from_le_bytes(c)) << 16))).collect(),
            Kind::Small,
        ),
        "float16" | "half" => (chunks::<2>(b).map(|c| f16_to_f64(u16::from_le_bytes(c))).collect(), Kind::Small),
        "int64" | "long" => (chunks::<8>(b).map(|c| i64::from_le_bytes(c) as f64).collect(), Kind::Int),
        "int32" | "int" => (chunks::<4>(b).map(|c| f64::from(i32::from_le_bytes(c))).collect(), Kind::Int),
        "int16" | "short" => (chunks::<2>(b).map(|c| f64::from(i16::from_le_bytes(c))).collect(), Kind::Int),
        "int8" => (b.iter().map(|&x| f64::from(x as i8)).collect(), Kind::Int),
        "uint8" | "bool" => (b.iter().map(|&x| f64::from(x)).collect(), Kind::Int),
        _ => return None,
    };
    let shape: Vec<i64> = t.shape.iter().copied().filter(|&d| d != 1).collect();
    Some(Arr { vals, shape, kind })
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

const EPS32: f32 = f32::EPSILON;
const EPS64: f64 = f64::EPSILON;

/// Elementwise relative error `|(a - b) / b|` in the precision msprobe uses.
fn rel(n: &Arr, b: &Arr) -> Vec<f64> {
    if n.kind == Kind::Small && b.kind == Kind::Small {
        n.vals
            .iter()
            .zip(&b.vals)
            .map(|(&x, &y)| {
                let (mut x, mut y) = (x as f32, y as f32);
                if y == 0.0 {
                    x += EPS32;
                    y += EPS32;
                }
                f64::from(((x - y) / y).abs())
            })
            .collect()
    } else {
        n.vals
            .iter()
            .zip(&b.vals)
            .map(|(&x, &y)| {
                let (mut x, mut y) = (x, y);
                if y == 0.0 {
                    x += EPS64;
                    y += EPS64;
                }
                ((x - y) / y).abs()
            })
            .collect()
    }
}

/// numpy's `max` over an array that may hold NaN (NaN wins).
fn nanmax(v: impl Iterator<Item = f64>) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for x in v {
        if x.is_nan() {
            return f64::NAN;
        }
        if x > m {
            m = x;
        }
    }
    m
}

fn r12(x: f64) -> Metric {
    if x.is_nan() {
        Metric::Num(x)
    } else {
        Metric::Num(round_decimals(x, 12))
    }
}

/// The six metrics of one row. `npu`/`bench` are the tensors named by the row's data names;
/// `None` when the name is `-1`, the row is unmatched, or the file is missing.
pub(crate) fn metrics(npu: Option<&TensorData>, bench: Option<&TensorData>) -> [Metric; 6] {
    let all = |t: &'static str| std::array::from_fn(|_| Metric::Token(t));
    let (Some(n), Some(b)) = (npu, bench) else { return all("unsupported") };
    let (Some(mut n), Some(mut b)) = (decode(n), decode(b)) else { return all("unsupported") };
    if n.vals.is_empty() {
        return all("unsupported");
    }
    if n.shape != b.shape || n.vals.len() != b.vals.len() {
        return all("shape unmatched");
    }
    if n.shape.is_empty() {
        // 0-d: no NaN/inf cleaning; MaxAbsErr in the arrays' own precision.
        let (x, y) = (n.vals[0], b.vals[0]);
        let abs = if n.kind == Kind::Small && b.kind == Kind::Small {
            f64::from((x as f32 - y as f32).abs())
        } else {
            (x - y).abs()
        };
        let rel_v = rel(&n, &b)[0];
        let u = Metric::Token("unsupported");
        return [u.clone(), u.clone(), r12(abs), r12(rel_v), u.clone(), u];
    }
    let special = |v: &f64| v.is_nan() || v.is_infinite();
    if n.vals.iter().any(special) || b.vals.iter().any(special) {
        let same =
            n.vals.iter().zip(&b.vals).all(|(x, y)| x.is_nan() == y.is_nan() && x.is_infinite() == y.is_infinite());
        if !same {
            return all("N/A");
        }
        for (x, y) in n.vals.iter_mut().zip(b.vals.iter_mut()) {
            if special(x) {
                *x = 0.0;
                *y = 0.0;
            }
        }
    }
    let size = n.vals.len();
    let cosine = if size <= 1 {
        Metric::Token("unsupported")
    } else {
        let dot: f64 = n.vals.iter().zip(&b.vals).map(|(x, y)| x * y).sum();
        let nn = n.vals.iter().map(|x| x * x).sum::<f64>().sqrt();
        let bn = b.vals.iter().map(|x| x * x).sum::<f64>().sqrt();
        match (nn <= EPS64, bn <= EPS64) {
            (true, true) => Metric::Num(1.0),
            (true, false) | (false, true) => Metric::Num(f64::NAN),
            _ => {
                let c = dot / (nn * bn);
                if c.is_nan() {
                    Metric::Num(c)
                } else {
                    let r = round_decimals(c, 12);
                    Metric::Num(if r > 0.9999 { round_decimals(r, 6) } else { r })
                }
            }
        }
    };
    let euc = Metric::Num(n.vals.iter().zip(&b.vals).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt());
    let max_abs = r12(nanmax(n.vals.iter().zip(&b.vals).map(|(x, y)| (x - y).abs())));
    let r = rel(&n, &b);
    let max_rel = r12(nanmax(r.iter().copied()));
    let small = n.kind == Kind::Small && b.kind == Kind::Small;
    let ratio = |t: f64| {
        let count = if small {
            r.iter().filter(|&&v| (v as f32) < t as f32).count()
        } else {
            r.iter().filter(|&&v| v < t).count()
        };
        r12(count as f64 / size as f64)
    };
    [cosine, euc, max_abs, max_rel, ratio(0.001), ratio(0.005)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32t(v: &[f32]) -> TensorData {
        TensorData {
            dtype: "torch.float32".into(),
            shape: vec![v.len() as i64],
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    #[test]
    fn observed_values() {
        let m = metrics(Some(&f32t(&[1e-3, 1.0, 2.0, 3.0])), Some(&f32t(&[0.0, 1.0, 2.0, 3.0])));
        assert_eq!(m[3], Metric::Num(8388.6083984375));
        let m = metrics(Some(&f32t(&[3.0])), Some(&f32t(&[3.5])));
        assert_eq!(m[3].cell(), "0.142857149243");
        let m = metrics(Some(&f32t(&[0.0; 5])), Some(&f32t(&[1.0; 5])));
        assert_eq!(
            m.iter().map(Metric::cell).collect::<Vec<_>>(),
            ["Nan", "2.23606797749979", "1.0", "1.0", "0.0", "0.0"]
        );
    }
}
