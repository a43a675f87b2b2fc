//! msprobe's Max/Min/Mean/Norm of a tensor, computed from its little-endian bytes.
//!
//! The rules are msprobe 26.2's for PyTorch (msprobe: core/dump/data_dump/data_processor/pytorch_processor.py,
//! `PytorchDataProcessor.get_stat_info`; docs/writer.md, "Statistics"):
//!
//! | tensor | Max | Min | Mean | Norm |
//! |---|---|---|---|---|
//! | empty | null | null | null | null |
//! | 0-dim, not bool/complex | the value | the value | the value | the value |
//! | bool | any (bool) | all (bool) | null | null |
//! | float32 / float16 / bfloat16 | float | float | float | float |
//! | float64 | float | float | null | null |
//! | integer | int | int | null | null |
//! | complex | max \|z\| | min \|z\| | mean \|z\| | null |
//!
//! Any NaN element makes all four NaN (as torch's reductions do); ±inf elements give what IEEE
//! arithmetic gives (`Max` = inf, `Mean` = inf or NaN, `Norm` = inf).
//!
//! # Precision
//!
//! Max and Min are exact: they are elements of the tensor. Sums run in f32 over chunks of 128
//! elements, each f32 partial sum adding 8 values, and the partial sums are added in f64 —
//! per-element f64 arithmetic would run at a third of memory speed. Mean and Norm are then
//! rounded once, to nearest, to the tensor's dtype (msprobe reports values of the tensor's
//! dtype). A partial sum of 8 values errs by at most 7·2⁻²⁴ of their magnitudes, so against the
//! exact value:
//!
//! - `|Mean − exact| ≤ 1 ulp(dtype) + 8·2⁻²⁴·mean(|x|)`,
//! - `|Norm − exact| ≤ 1 ulp(dtype) + 4·2⁻²⁴·Norm`,
//!
//! which the property tests check against a sequential f64 reference. bfloat16 partials add 16
//! values (widening them costs more per element than float32's), so there the factors are 16 and
//! 8. For bfloat16 and float16 the second terms are far below one ulp of the dtype. Tensors whose largest magnitude is below
//! 2⁻⁴⁰ or above 2⁶⁰, where f32 squares would underflow or overflow, are reduced entirely in
//! f64. torch, whose values msprobe writes, also accumulates in float32 (the fixture replay in
//! the e2e tests finds the two within a few float32 ulps). Complex magnitudes are computed in
//! the component precision (`hypot`), their mean accumulated in f64.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod float;
mod int;
pub(crate) mod numpy;

pub use float::{moments_bf16, moments_f16, moments_f32, moments_f64, Moments};

use half::{bf16, f16};

use crate::dtype::DType;

/// One statistic as msprobe writes it: the JSON token's type matters (`5` is not `5.0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// `null`.
    Null,
    /// A JSON float (`NaN`, `Infinity` included).
    Float(f64),
    /// A JSON integer.
    Int(i64),
    /// `true` / `false`.
    Bool(bool),
}

impl Stat {
    /// The value as the `dump` table's float64 columns store it (what import reads from the
    /// token): ints widened, booleans as 1.0 / 0.0, `null` as `None`.
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Stat::Null => None,
            Stat::Float(v) => Some(v),
            Stat::Int(v) => Some(v as f64),
            Stat::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
        }
    }

    /// Whether the `dump` table's typed columns render this token exactly (a float or null).
    pub fn renders_from_column(self) -> bool {
        matches!(self, Stat::Null | Stat::Float(_))
    }
}

/// Max, Min, Mean, Norm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// `Max`.
    pub max: Stat,
    /// `Min`.
    pub min: Stat,
    /// `Mean`.
    pub mean: Stat,
    /// `Norm`.
    pub norm: Stat,
}

impl Summary {
    /// All four `null`.
    pub const NULL: Summary = Summary { max: Stat::Null, min: Stat::Null, mean: Stat::Null, norm: Stat::Null };

    /// The four in msprobe's order.
    pub fn as_array(&self) -> [Stat; 4] {
        [self.max, self.min, self.mean, self.norm]
    }

    fn all(s: Stat) -> Summary {
        Summary { max: s, min: s, mean: s, norm: s }
    }
}

/// Rounds `v` to the nearest value of a float dtype and widens it back (how msprobe's values,
/// computed in the tensor's dtype, reach the JSON).
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 | DType::Complex64 => f64::from(v as f32),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::F16 => f16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// The statistics of a tensor of `dtype` whose elements are `data` (little-endian, C order).
/// `zero_dim` is a 0-dim tensor (shape `[]`, one element). Trailing bytes that do not make a
/// whole element are ignored; the writer checks sizes before it gets here.
pub fn summarize(dtype: DType, data: &[u8], zero_dim: bool) -> Summary {
    if data.len() < dtype.itemsize() || !dtype.has_statistics() {
        return Summary::NULL;
    }
    match dtype {
        DType::F32 | DType::BF16 | DType::F16 => low_float(dtype, data, zero_dim),
        DType::F64 => {
            let m = moments_f64(data);
            if zero_dim {
                Summary::all(Stat::Float(scalar_value(dtype, data)))
            } else if m.has_nan() {
                Summary { mean: Stat::Null, norm: Stat::Null, ..Summary::all(Stat::Float(f64::NAN)) }
            } else {
                Summary { max: Stat::Float(m.max), min: Stat::Float(m.min), mean: Stat::Null, norm: Stat::Null }
            }
        }
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 => {
            let (max, min) = int::min_max(dtype, data);
            if zero_dim {
                Summary::all(Stat::Int(max))
            } else {
                Summary { max: Stat::Int(max), min: Stat::Int(min), mean: Stat::Null, norm: Stat::Null }
            }
        }
        DType::Bool => {
            let (any, all) = int::any_all(data);
            Summary { max: Stat::Bool(any), min: Stat::Bool(all), mean: Stat::Null, norm: Stat::Null }
        }
        DType::F8E4M3FN
        | DType::F8E5M2
        | DType::F8E4M3FNUZ
        | DType::F8E5M2FNUZ
        | DType::F8E8M0FNU
        | DType::F4E2M1FNX2 => Summary::NULL,
        DType::Complex64 | DType::Complex128 => {
            let m = int::magnitudes(dtype, data);
            if m.has_nan() {
                return Summary { norm: Stat::Null, ..Summary::all(Stat::Float(f64::NAN)) };
            }
            Summary {
                max: Stat::Float(m.max),
                min: Stat::Float(m.min),
                mean: Stat::Float(round_to(dtype, m.mean())),
                norm: Stat::Null,
            }
        }
    }
}

/// The one element of a 0-dim float tensor (NaN and -0.0 kept).
fn scalar_value(dtype: DType, data: &[u8]) -> f64 {
    match dtype {
        DType::F32 => data.first_chunk::<4>().map_or(f64::NAN, |b| f64::from(f32::from_le_bytes(*b))),
        DType::BF16 => data.first_chunk::<2>().map_or(f64::NAN, |b| bf16::from_le_bytes(*b).to_f64()),
        DType::F16 => data.first_chunk::<2>().map_or(f64::NAN, |b| f16::from_le_bytes(*b).to_f64()),
        _ => data.first_chunk::<8>().map_or(f64::NAN, |b| f64::from_le_bytes(*b)),
    }
}

fn low_float(dtype: DType, data: &[u8], zero_dim: bool) -> Summary {
    if zero_dim {
        return Summary::all(Stat::Float(scalar_value(dtype, data)));
    }
    let m = match dtype {
        DType::BF16 => moments_bf16(data),
        DType::F16 => moments_f16(data),
        _ => moments_f32(data),
    };
    float_summary(dtype, &m)
}

/// Max and Min as they are, Mean and Norm rounded to `dtype` (computed in its type, as torch
/// and numpy compute them); all NaN when an element is.
fn float_summary(dtype: DType, m: &Moments) -> Summary {
    if m.has_nan() {
        return Summary::all(Stat::Float(f64::NAN));
    }
    Summary {
        max: Stat::Float(m.max),
        min: Stat::Float(m.min),
        mean: Stat::Float(round_to(dtype, m.mean())),
        norm: Stat::Float(round_to(dtype, m.sum_sq.sqrt())),
    }
}

#[cfg(test)]
mod tests;
