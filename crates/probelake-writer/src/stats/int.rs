//! Integer, bool and complex reductions.

use super::float::Moments;
use crate::dtype::DType;

/// (max, min) of an integer tensor, widened to i64. `data` holds at least one element.
pub(super) fn min_max(dtype: DType, data: &[u8]) -> (i64, i64) {
    fn fold<const N: usize>(data: &[u8], read: impl Fn([u8; N]) -> i64) -> (i64, i64) {
        let (items, _) = data.as_chunks::<N>();
        let mut max = i64::MIN;
        let mut min = i64::MAX;
        for &item in items {
            let v = read(item);
            max = max.max(v);
            min = min.min(v);
        }
        (max, min)
    }
    match dtype {
        DType::I8 => fold::<1>(data, |b| i64::from(i8::from_le_bytes(b))),
        DType::U8 => fold::<1>(data, |b| i64::from(u8::from_le_bytes(b))),
        DType::I16 => fold::<2>(data, |b| i64::from(i16::from_le_bytes(b))),
        DType::I32 => fold::<4>(data, |b| i64::from(i32::from_le_bytes(b))),
        _ => fold::<8>(data, i64::from_le_bytes),
    }
}

/// (sum, sum of squares, count) of an integer tensor's elements, in f64: numpy's mean and
/// norm of an integer array, which it converts to float64 first.
pub(super) fn sums(dtype: DType, data: &[u8]) -> (f64, f64, usize) {
    fn fold<const N: usize>(data: &[u8], read: impl Fn([u8; N]) -> f64) -> (f64, f64, usize) {
        let (items, _) = data.as_chunks::<N>();
        let (sum, sum_sq) = items.iter().fold((0.0, 0.0), |(s, q), &item| {
            let v = read(item);
            (s + v, q + v * v)
        });
        (sum, sum_sq, items.len())
    }
    match dtype {
        DType::I8 => fold::<1>(data, |b| f64::from(i8::from_le_bytes(b))),
        DType::U8 => fold::<1>(data, |b| f64::from(u8::from_le_bytes(b))),
        DType::I16 => fold::<2>(data, |b| f64::from(i16::from_le_bytes(b))),
        DType::I32 => fold::<4>(data, |b| f64::from(i32::from_le_bytes(b))),
        _ => fold::<8>(data, |b| i64::from_le_bytes(b) as f64),
    }
}

/// (any, all) of a bool tensor: any nonzero byte is `true`.
pub(super) fn any_all(data: &[u8]) -> (bool, bool) {
    (data.iter().any(|&b| b != 0), data.iter().all(|&b| b != 0))
}

/// Moments of the magnitudes |z| of a complex tensor (`max`, `min`, `sum`; `sum_sq` is only a
/// NaN detector). |z| is `hypot` in the component precision, as torch's `abs` computes it.
pub(super) fn magnitudes(dtype: DType, data: &[u8]) -> Moments {
    let mut max = f64::NEG_INFINITY;
    let mut min = f64::INFINITY;
    let mut sum = 0f64;
    let mut nan = false;
    let mut count = 0usize;
    let mut add = |m: f64| {
        nan |= m.is_nan();
        max = if m > max { m } else { max };
        min = if m < min { m } else { min };
        sum += m;
        count += 1;
    };
    if dtype == DType::Complex64 {
        let (pairs, _) = data.as_chunks::<8>();
        for p in pairs {
            let [a, b, c, d, e, f, g, h] = *p;
            let re = f32::from_le_bytes([a, b, c, d]);
            let im = f32::from_le_bytes([e, f, g, h]);
            add(f64::from(re.hypot(im)));
        }
    } else {
        let (pairs, _) = data.as_chunks::<16>();
        for p in pairs {
            let (re, im) = p.split_at(8);
            let re = re.try_into().map(f64::from_le_bytes).unwrap_or(f64::NAN);
            let im = im.try_into().map(f64::from_le_bytes).unwrap_or(f64::NAN);
            add(re.hypot(im));
        }
    }
    Moments { max, min, sum, sum_sq: if nan { f64::NAN } else { 0.0 }, count }
}
