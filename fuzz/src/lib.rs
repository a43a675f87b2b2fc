//! Helpers shared by the fuzz targets.

/// Rewrites the CRC-32 of every stored entry of a zip archive to match its data.
///
/// The `.pt` reader refuses an entry whose CRC does not match, so nearly every mutation of an
/// archive stops there and the pickle parser behind it is never reached. Fixing the CRCs
/// before reading lets the fuzzer mutate what the archive holds. Anything that does not look
/// like a zip archive is left as it is; the reader's own checks still see every other field.
pub fn fix_zip_crcs(bytes: &mut [u8]) {
    const EOCD: [u8; 4] = *b"PK\x05\x06";
    const CENTRAL: [u8; 4] = *b"PK\x01\x02";
    const LOCAL_HEADER_LEN: usize = 30;
    let Some(eocd) = (0..bytes.len().saturating_sub(21)).rev().find(|&p| bytes.get(p..p + 4) == Some(&EOCD)) else {
        return;
    };
    let (Some(count), Some(cd_offset)) = (u16_at(bytes, eocd + 10), u32_at(bytes, eocd + 16)) else { return };
    let mut pos = cd_offset as usize;
    for _ in 0..count {
        if bytes.get(pos..pos + 4) != Some(&CENTRAL) {
            return;
        }
        let fields = (
            u32_at(bytes, pos + 20),
            u16_at(bytes, pos + 28),
            u16_at(bytes, pos + 30),
            u16_at(bytes, pos + 32),
            u32_at(bytes, pos + 42),
        );
        let (Some(size), Some(name_len), Some(extra_len), Some(comment_len), Some(local)) = fields else { return };
        let local = local as usize;
        if let (Some(lname), Some(lextra)) = (u16_at(bytes, local + 26), u16_at(bytes, local + 28)) {
            let data_at = local + LOCAL_HEADER_LEN + usize::from(lname) + usize::from(lextra);
            if let Some(data) = bytes.get(data_at..data_at + size as usize) {
                let crc = crc32fast::hash(data).to_le_bytes();
                for at in [pos + 16, local + 14] {
                    if let Some(field) = bytes.get_mut(at..at + 4) {
                        field.copy_from_slice(&crc);
                    }
                }
            }
        }
        pos += 46 + usize::from(name_len) + usize::from(extra_len) + usize::from(comment_len);
    }
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
