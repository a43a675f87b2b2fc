//! How one recorded tensor is written for a run's task and dtype: its dtype string and
//! statistics, the `md5` CRC of its raw bytes, and its `.pt` file.

use crate::tensor::{f32_summary, Summary};
use crate::trace::Elems;
use crate::{SynthDtype, SynthTask};
use probelake_msprobe::tensor_file::{default_pt_meta, write_tensor_file, TensorData, TensorFileError};

/// What a run writes per tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Encoding {
    pub(crate) task: SynthTask,
    pub(crate) dtype: SynthDtype,
}

/// Rounds to the nearest bfloat16 (ties to even), as `tensor.to(torch.bfloat16)` does; NaN
/// stays a (quiet) NaN.
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) as u16) | 0x0040;
    }
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (rounded >> 16) as u16
}

/// The bfloat16 value nearest to `x`, as an f32.
pub(crate) fn bf16_round(x: f32) -> f32 {
    f32::from_bits(u32::from(bf16_bits(x)) << 16)
}

/// `str(tensor.dtype)` of a recorded tensor under `dtype`: floating tensors take the run's
/// dtype, integer and bool tensors keep theirs.
pub(crate) fn dtype_name(elems: &Elems, dtype: SynthDtype) -> &'static str {
    match (elems, dtype) {
        (Elems::F32(_), SynthDtype::Fp32) => "torch.float32",
        (Elems::F32(_), SynthDtype::Bf16) => "torch.bfloat16",
        (Elems::Float32(_), _) => "torch.float32",
        (Elems::I64(_), _) => "torch.int64",
        (Elems::Bool(_), _) => "torch.bool",
    }
}

/// msprobe's Max/Min/Mean/Norm. In bf16 the values are first rounded to bf16 and every
/// statistic is a bf16 value again, as torch's reductions of a bf16 tensor return.
pub(crate) fn summary(elems: &Elems, dtype: SynthDtype) -> Summary {
    match elems {
        Elems::F32(v) => match dtype {
            SynthDtype::Fp32 => f32_summary(v),
            SynthDtype::Bf16 => {
                let rounded: Vec<f32> = v.iter().map(|&x| bf16_round(x)).collect();
                match f32_summary(&rounded) {
                    Summary::F32 { max, min, mean, norm } => Summary::F32 {
                        max: bf16_round(max),
                        min: bf16_round(min),
                        mean: bf16_round(mean),
                        norm: bf16_round(norm),
                    },
                    other => other,
                }
            }
        },
        Elems::Float32(v) => f32_summary(v),
        Elems::I64(v) => {
            Summary::I64 { max: v.iter().copied().max().unwrap_or(0), min: v.iter().copied().min().unwrap_or(0) }
        }
        Elems::Bool(v) => Summary::Bool { max: v.iter().any(|&b| b), min: v.iter().all(|&b| b) && !v.is_empty() },
    }
}

/// The tensor's contiguous little-endian bytes in its written dtype (bf16: 2 bytes each).
pub(crate) fn raw_bytes(elems: &Elems, dtype: SynthDtype) -> Vec<u8> {
    match (elems, dtype) {
        (Elems::F32(v), SynthDtype::Fp32) | (Elems::Float32(v), _) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (Elems::F32(v), SynthDtype::Bf16) => v.iter().flat_map(|&x| bf16_bits(x).to_le_bytes()).collect(),
        (Elems::I64(v), _) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (Elems::Bool(v), _) => v.iter().map(|&b| u8::from(b)).collect(),
    }
}

/// msprobe's `md5` field (summary_mode md5): CRC-32 of the raw bytes, 8 lowercase hex digits.
pub(crate) fn md5_field(raw: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(raw))
}

/// The `.pt` file `torch.save` writes for the tensor (detached, so `requires_grad` false),
/// named `data_name` (its archive folder is the name without `.pt`).
pub(crate) fn pt_file(data_name: &str, dtype: &str, shape: &[usize], raw: Vec<u8>) -> Result<Vec<u8>, TensorFileError> {
    let stem = data_name.strip_suffix(".pt").unwrap_or(data_name);
    let data = TensorData { dtype: dtype.to_string(), shape: shape.iter().map(|&d| d as i64).collect(), data: raw };
    write_tensor_file(&data, &default_pt_meta(stem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(bf16_round(1.0), 1.0);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one, 1.
        assert_eq!(bf16_round(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(bf16_round(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(bf16_round(4.101_493_4), 4.093_75);
        assert!(bf16_round(f32::NAN).is_nan());
        assert_eq!(bf16_round(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn bf16_statistics_are_bf16_values() {
        let s = summary(&Elems::F32(vec![0.1, 0.2, 0.3, 4.101_493_4]), SynthDtype::Bf16);
        let Summary::F32 { max, min, mean, norm } = s else { panic!("{s:?}") };
        for v in [max, min, mean, norm] {
            assert_eq!(bf16_round(v), v);
        }
        assert_eq!(max, 4.093_75);
    }

    #[test]
    fn md5_is_the_crc32_of_the_bytes_in_the_written_dtype() {
        let e = Elems::F32(vec![1.0, -2.0]);
        assert_eq!(raw_bytes(&e, SynthDtype::Bf16), [0x80, 0x3f, 0x00, 0xc0]);
        // zlib.crc32(b"") == 0, zlib.crc32(b"a") == 0xe8b7be43
        assert_eq!(md5_field(b""), "00000000");
        assert_eq!(md5_field(b"a"), "e8b7be43");
    }
}
