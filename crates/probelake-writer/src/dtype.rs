//! Element types of recorded tensors, named as msprobe writes them for PyTorch.

use std::fmt;
use std::str::FromStr;

/// The element type of a tensor. Elements are little-endian, contiguous, in C order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `torch.float64`
    F64,
    /// `torch.float32`
    F32,
    /// `torch.float16` (IEEE half)
    F16,
    /// `torch.bfloat16`
    BF16,
    /// `torch.int8`
    I8,
    /// `torch.int16`
    I16,
    /// `torch.int32`
    I32,
    /// `torch.int64`
    I64,
    /// `torch.uint8`
    U8,
    /// `torch.bool` (one byte per element, 0 or 1)
    Bool,
    /// `torch.complex64`: pairs of f32 (real, imaginary)
    Complex64,
    /// `torch.complex128`: pairs of f64
    Complex128,
    /// `torch.float8_e4m3fn`. The float8 and float4 types have no statistics (msprobe skips
    /// them: torch has no reductions for them); their bytes are kept (`md5`, task `tensor`).
    F8E4M3FN,
    /// `torch.float8_e5m2`
    F8E5M2,
    /// `torch.float8_e4m3fnuz`
    F8E4M3FNUZ,
    /// `torch.float8_e5m2fnuz`
    F8E5M2FNUZ,
    /// `torch.float8_e8m0fnu` (an exponent-only scale)
    F8E8M0FNU,
    /// `torch.float4_e2m1fn_x2`: two 4-bit elements per byte; the shape counts bytes, as torch's.
    F4E2M1FNX2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 18] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
        DType::Complex64,
        DType::Complex128,
        DType::F8E4M3FN,
        DType::F8E5M2,
        DType::F8E4M3FNUZ,
        DType::F8E5M2FNUZ,
        DType::F8E8M0FNU,
        DType::F4E2M1FNX2,
    ];

    /// The name msprobe writes in `dtype` (`str(tensor.dtype)`).
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F64 => "torch.float64",
            DType::F32 => "torch.float32",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::I8 => "torch.int8",
            DType::I16 => "torch.int16",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
            DType::U8 => "torch.uint8",
            DType::Bool => "torch.bool",
            DType::Complex64 => "torch.complex64",
            DType::Complex128 => "torch.complex128",
            DType::F8E4M3FN => "torch.float8_e4m3fn",
            DType::F8E5M2 => "torch.float8_e5m2",
            DType::F8E4M3FNUZ => "torch.float8_e4m3fnuz",
            DType::F8E5M2FNUZ => "torch.float8_e5m2fnuz",
            DType::F8E8M0FNU => "torch.float8_e8m0fnu",
            DType::F4E2M1FNX2 => "torch.float4_e2m1fn_x2",
        }
    }

    /// The name msprobe writes for a numpy array of this type (`str(ndarray.dtype)`): `torch.`
    /// left out (`float32`, `int64`, `bool`); numpy has no bfloat16, float8 or float4.
    pub fn numpy_name(self) -> &'static str {
        let name = self.torch_name();
        name.strip_prefix("torch.").unwrap_or(name)
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0FNU => 1,
            DType::F4E2M1FNX2 => 1,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
        }
    }

    /// Whether msprobe records statistics for the type at all: not for float8 and float4
    /// (`Max`…`Norm` are `null`, and xor mode's `md5` too), as msprobe 26.2 records them.
    pub fn has_statistics(self) -> bool {
        !matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E5M2
                | DType::F8E4M3FNUZ
                | DType::F8E5M2FNUZ
                | DType::F8E8M0FNU
                | DType::F4E2M1FNX2
        )
    }

    /// Whether msprobe computes all four statistics in the tensor's own precision
    /// (float32, float16, bfloat16).
    pub fn is_low_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.torch_name())
    }
}

impl FromStr for DType {
    type Err = String;

    /// Parses `torch.float32`, `float32`, `bf16`, `f32`, … .
    fn from_str(s: &str) -> Result<Self, String> {
        let bare = s.strip_prefix("torch.").unwrap_or(s);
        Ok(match bare {
            "float64" | "double" | "f64" => DType::F64,
            "float32" | "float" | "f32" => DType::F32,
            "float16" | "half" | "f16" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "int8" | "i8" => DType::I8,
            "int16" | "short" | "i16" => DType::I16,
            "int32" | "int" | "i32" => DType::I32,
            "int64" | "long" | "i64" => DType::I64,
            "uint8" | "u8" => DType::U8,
            "bool" => DType::Bool,
            "complex64" | "cfloat" => DType::Complex64,
            "complex128" | "cdouble" => DType::Complex128,
            "float8_e4m3fn" => DType::F8E4M3FN,
            "float8_e5m2" => DType::F8E5M2,
            "float8_e4m3fnuz" => DType::F8E4M3FNUZ,
            "float8_e5m2fnuz" => DType::F8E5M2FNUZ,
            "float8_e8m0fnu" => DType::F8E8M0FNU,
            "float4_e2m1fn_x2" => DType::F4E2M1FNX2,
            _ => {
                return Err(format!(
                    "unknown dtype `{s}`: use one of float64, float32, float16, bfloat16, int8, int16, int32, int64, \
                     uint8, bool, complex64, complex128, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, \
                     float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn_x2"
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sizes_match_the_format_crate() {
        for d in DType::ALL {
            assert_eq!(d.torch_name().parse::<DType>(), Ok(d));
            assert_eq!(probelake_msprobe::tensor_file::dtype_itemsize(d.torch_name()), Some(d.itemsize()), "{d}");
        }
        assert_eq!("bf16".parse::<DType>(), Ok(DType::BF16));
        assert_eq!("float8_e4m3fn".parse::<DType>(), Ok(DType::F8E4M3FN));
        assert!("float8_e4m3".parse::<DType>().unwrap_err().contains("unknown dtype"));
        assert!(DType::ALL
            .iter()
            .filter(|d| !d.has_statistics())
            .all(|d| d.torch_name().contains("float8") || d.torch_name().contains("float4")));
    }

    #[test]
    fn float8_and_float4_have_null_statistics_and_xor() {
        use crate::checksum::{xor_md5, Md5};
        use crate::stats::{summarize, Summary};
        for d in DType::ALL.into_iter().filter(|d| !d.has_statistics()) {
            assert_eq!(summarize(d, &[0x38, 0x40], false), Summary::NULL, "{d}");
            assert_eq!(summarize(d, &[0x38], true), Summary::NULL, "{d}");
            assert_eq!(xor_md5(d, &[0x38, 0x40], false), Md5::Null, "{d}");
        }
    }
}
