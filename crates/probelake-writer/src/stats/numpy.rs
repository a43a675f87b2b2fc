//! Statistics of numpy arrays as msprobe computes them (`BaseDataProcessor._analyze_ndarray`,
//! mindstudio-probe 26.2): `np.max(a).item()`, `np.min`, `np.mean`, `np.linalg.norm`. Max and
//! Min keep the array's type (an int for integers, a bool for bools); Mean and Norm are float64
//! for integer and bool arrays (numpy converts them) and of the array's own type for float
//! arrays, which numpy reduces in that type (pairwise sums, a BLAS dot for the norm): here they
//! are summed in f64 and rounded to the type, which can differ from numpy in the last bit. An
//! empty array has no statistics; nor has a complex one (its `.item()` is a Python complex,
//! which msprobe cannot write as JSON).

use super::float::{moments_f16, moments_f32, moments_f64};
use super::{float_summary, int, Stat, Summary};
use crate::dtype::DType;

/// The statistics msprobe records for a numpy array of `dtype` whose elements are `data`.
pub fn summarize_numpy(dtype: DType, data: &[u8]) -> Summary {
    if data.len() < dtype.itemsize() {
        return Summary::NULL;
    }
    match dtype {
        DType::F64 | DType::F32 | DType::F16 => {
            let m = match dtype {
                DType::F64 => moments_f64(data),
                DType::F32 => moments_f32(data),
                _ => moments_f16(data),
            };
            float_summary(dtype, &m)
        }
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 => {
            let (max, min) = int::min_max(dtype, data);
            let (sum, sum_sq, count) = int::sums(dtype, data);
            Summary {
                max: Stat::Int(max),
                min: Stat::Int(min),
                mean: Stat::Float(sum / count as f64),
                norm: Stat::Float(sum_sq.sqrt()),
            }
        }
        DType::Bool => {
            let (any, all) = int::any_all(data);
            let set = data.iter().filter(|&&b| b != 0).count() as f64;
            Summary {
                max: Stat::Bool(any),
                min: Stat::Bool(all),
                mean: Stat::Float(set / data.len() as f64),
                norm: Stat::Float(set.sqrt()),
            }
        }
        _ => Summary::NULL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<const N: usize, T: Copy>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    #[test]
    fn as_numpy_computes_them() {
        // Each expectation printed by numpy 2.x: np.max(a).item(), …, np.linalg.norm(a).item().
        let ints = bytes(&[3i64, -4, 12], i64::to_le_bytes);
        let s = summarize_numpy(DType::I64, &ints);
        assert_eq!(
            s,
            Summary { max: Stat::Int(12), min: Stat::Int(-4), mean: Stat::Float(11.0 / 3.0), norm: Stat::Float(13.0) }
        );
        let floats = bytes(&[0.5f32, -2.25, 4.0], f32::to_le_bytes);
        let s = summarize_numpy(DType::F32, &floats);
        assert_eq!((s.max, s.min), (Stat::Float(4.0), Stat::Float(-2.25)));
        assert_eq!(s.mean, Stat::Float(f64::from(2.25f32 / 3.0)));
        assert_eq!(s.norm, Stat::Float(f64::from(21.3125f32.sqrt())));
        let flags = [1u8, 0, 1, 1];
        let s = summarize_numpy(DType::Bool, &flags);
        assert_eq!(
            s,
            Summary {
                max: Stat::Bool(true),
                min: Stat::Bool(false),
                mean: Stat::Float(0.75),
                norm: Stat::Float(3f64.sqrt())
            }
        );
        assert_eq!(summarize_numpy(DType::F32, &[]), Summary::NULL);
        assert_eq!(summarize_numpy(DType::Complex64, &[0; 8]), Summary::NULL);
        let nan = summarize_numpy(DType::F64, &bytes(&[1.0f64, f64::NAN], f64::to_le_bytes));
        assert!(nan.as_array().iter().all(|s| s.as_f64().is_some_and(f64::is_nan)), "{nan:?}");
    }
}
