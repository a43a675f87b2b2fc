//! msprobe's `md5` field: a CRC-32 in `md5` mode, a 64-bit XOR in `xor` mode.

use crate::dtype::DType;

/// `md5` mode: the CRC-32 (zlib polynomial) of the raw bytes in the tensor's own dtype, as 8
/// lowercase hex digits. An empty tensor gives `00000000`.
///
/// ```
/// assert_eq!(probelake_writer::checksum::crc32_hex(b""), "00000000");
/// assert_eq!(probelake_writer::checksum::crc32_hex(b"123456789"), "cbf43926");
/// ```
pub fn crc32_hex(data: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(data))
}

/// XOR of the little-endian 64-bit words of `data`, the last one zero-padded.
pub fn xor64(data: &[u8]) -> u64 {
    let (words, tail) = data.as_chunks::<8>();
    let mut lanes = [0u64; 4];
    let (blocks, rest) = words.as_chunks::<4>();
    for block in blocks {
        for (lane, w) in lanes.iter_mut().zip(block) {
            *lane ^= u64::from_le_bytes(*w);
        }
    }
    let mut acc = lanes.iter().fold(0, |a, l| a ^ l);
    for w in rest {
        acc ^= u64::from_le_bytes(*w);
    }
    if !tail.is_empty() {
        let mut last = [0u8; 8];
        for (d, s) in last.iter_mut().zip(tail) {
            *d = *s;
        }
        acc ^= u64::from_le_bytes(last);
    }
    acc
}

/// What `md5` holds for one tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Md5 {
    /// No `md5` field (summary mode `statistics`).
    Absent,
    /// A string: the CRC-32 hex, or `0x` + 16 hex digits in xor mode.
    Text(String),
    /// xor mode, 0-dim float tensor: the value itself, as a JSON number.
    Number(f64),
    /// xor mode, empty tensor: `null`.
    Null,
}

/// xor mode's `md5` for a tensor: `0x%016x` of the XOR, `null` for an empty tensor, and for a
/// 0-dim tensor the scalar itself (ints and bools as 64-bit two's complement hex, floats as a
/// JSON number), as msprobe writes it.
/// float8 and float4 tensors get `null`: msprobe computes no checksum for them.
pub fn xor_md5(dtype: DType, data: &[u8], zero_dim: bool) -> Md5 {
    if data.is_empty() || !dtype.has_statistics() {
        return Md5::Null;
    }
    if zero_dim {
        let first = data.first().copied().unwrap_or(0);
        let widened = |n: usize| {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(data.iter().take(n)) {
                *d = *s;
            }
            b
        };
        match dtype {
            DType::F32 => return Md5::Number(f64::from(f32::from_le_bytes(four(data)))),
            DType::F64 => return Md5::Number(f64::from_le_bytes(widened(8))),
            DType::BF16 => return Md5::Number(half::bf16::from_le_bytes(two(data)).to_f64()),
            DType::F16 => return Md5::Number(half::f16::from_le_bytes(two(data)).to_f64()),
            DType::Bool => return Md5::Text(format!("0x{:016x}", u64::from(first != 0))),
            DType::U8 => return Md5::Text(format!("0x{:016x}", u64::from(first))),
            DType::I8 => return Md5::Text(format!("0x{:016x}", i64::from(i8::from_le_bytes([first])) as u64)),
            DType::I16 => return Md5::Text(format!("0x{:016x}", i64::from(i16::from_le_bytes(two(data))) as u64)),
            DType::I32 => return Md5::Text(format!("0x{:016x}", i64::from(i32::from_le_bytes(four(data))) as u64)),
            DType::I64 => return Md5::Text(format!("0x{:016x}", u64::from_le_bytes(widened(8)))),
            DType::Complex64
            | DType::Complex128
            | DType::F8E4M3FN
            | DType::F8E5M2
            | DType::F8E4M3FNUZ
            | DType::F8E5M2FNUZ
            | DType::F8E8M0FNU
            | DType::F4E2M1FNX2 => {}
        }
    }
    Md5::Text(format!("0x{:016x}", xor64(data)))
}

fn two(data: &[u8]) -> [u8; 2] {
    data.first_chunk::<2>().copied().unwrap_or_default()
}

fn four(data: &[u8]) -> [u8; 4] {
    data.first_chunk::<4>().copied().unwrap_or_default()
}
