//! msprobe's "md5" of a non-tensor value: a CRC-32 of its text.

/// Lowercase 8-hex-digit CRC-32 (IEEE, as zlib.crc32) of `bytes`; what msprobe writes for
/// non-tensor values (`str(value)`).
pub fn crc32_hex(bytes: &[u8]) -> String {
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
