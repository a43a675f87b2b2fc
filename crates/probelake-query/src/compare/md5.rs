//! MD5 mode (§8): msprobe's "md5" is a CRC-32, compared as text.

use super::rows::Side;

/// Lowercase 8-hex-digit CRC-32 (IEEE, as zlib.crc32) of `bytes`; what msprobe writes for
/// non-tensor values (`str(value)`).
pub(crate) fn crc32_hex(bytes: &[u8]) -> String {
    let mut crc: u32 = 0xFFFF_FFFF;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    format!("{:08x}", !crc)
}

/// The `NPU MD5` / `BENCH MD5` cells.
pub(crate) fn md5_cells<'a>(npu: &'a Side<'_>, bench: Option<&'a Side<'_>>) -> [&'a str; 2] {
    let cell = |s: Option<&'a Side<'_>>| s.and_then(|s| s.md5.as_deref()).unwrap_or("N/A");
    [cell(Some(npu)), cell(bench)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_of_python_ints() {
        assert_eq!(crc32_hex(b"3"), "6dd28e9b");
        assert_eq!(crc32_hex(b"4"), "f3b61b38");
        assert_eq!(crc32_hex(b""), "00000000");
    }
}
