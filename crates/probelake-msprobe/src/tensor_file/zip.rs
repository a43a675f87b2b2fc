//! Minimal zip reader/writer for PyTorch `torch.save` archives.
//!
//! Only stored (uncompressed) entries are supported. The writer reproduces the exact bytes
//! PyTorch's `PyTorchStreamWriter` (miniz) writes: zero timestamps, flags `0x0808`, a
//! `FB` extra field in every local header that pads the record data to the archive's
//! alignment, a 32-bit data descriptor after each record, a central directory without
//! extra fields and (in torch ≥ 1.x with zip64 enabled) a zip64 end-of-central-directory
//! record plus locator before the classic end record.

use super::TensorFileError;

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;
const LOCAL_HEADER_LEN: u64 = 30;
const U32_MAX: u64 = 0xFFFF_FFFF;

/// One stored record of an archive, borrowed from the input bytes.
#[derive(Debug, Clone)]
pub(crate) struct ZipEntry<'a> {
    /// Full entry name, e.g. `archive/data.pkl`.
    pub name: String,
    /// The entry's bytes.
    pub data: &'a [u8],
}

/// Result of reading an archive: its entries in central-directory order and layout facts.
#[derive(Debug, Clone)]
pub(crate) struct ZipArchive<'a> {
    /// Entries in central-directory order.
    pub entries: Vec<ZipEntry<'a>>,
    /// Whether a zip64 end-of-central-directory record was present.
    pub zip64_eocd: bool,
}

fn err(offset: u64, msg: impl Into<String>) -> TensorFileError {
    TensorFileError::Zip { offset, msg: msg.into() }
}

fn slice_at(bytes: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    bytes.get(start..end)
}

fn u16_at(bytes: &[u8], offset: u64) -> Result<u16, TensorFileError> {
    slice_at(bytes, offset, 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| err(offset, "truncated: expected a 2-byte field"))
}

fn u32_at(bytes: &[u8], offset: u64) -> Result<u32, TensorFileError> {
    slice_at(bytes, offset, 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| err(offset, "truncated: expected a 4-byte field"))
}

fn u64_at(bytes: &[u8], offset: u64) -> Result<u64, TensorFileError> {
    slice_at(bytes, offset, 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| err(offset, "truncated: expected an 8-byte field"))
}

fn add(a: u64, b: u64, at: u64) -> Result<u64, TensorFileError> {
    a.checked_add(b).ok_or_else(|| err(at, "offset arithmetic overflows"))
}

/// Finds the classic end-of-central-directory record, searching backwards over the
/// maximum comment length.
fn find_eocd(bytes: &[u8]) -> Result<u64, TensorFileError> {
    let len = bytes.len();
    if len < 22 {
        return Err(err(len as u64, "too short for a zip end-of-central-directory record"));
    }
    let lowest = len.saturating_sub(22 + 0xFFFF);
    let mut pos = len - 22;
    loop {
        if bytes.get(pos..pos + 4) == Some(&EOCD_SIG.to_le_bytes()[..]) {
            return Ok(pos as u64);
        }
        if pos == lowest {
            return Err(err(len as u64, "no zip end-of-central-directory record found (not a zip archive?)"));
        }
        pos -= 1;
    }
}

/// Reads the central directory and returns the stored entries.
pub(crate) fn read_archive(bytes: &[u8]) -> Result<ZipArchive<'_>, TensorFileError> {
    let eocd = find_eocd(bytes)?;
    let mut count = u64::from(u16_at(bytes, eocd + 10)?);
    let mut cd_size = u64::from(u32_at(bytes, eocd + 12)?);
    let mut cd_offset = u64::from(u32_at(bytes, eocd + 16)?);
    let mut zip64_eocd = false;
    if eocd >= 20 && u32_at(bytes, eocd - 20)? == ZIP64_LOCATOR_SIG {
        let z64 = u64_at(bytes, eocd - 20 + 8)?;
        if u32_at(bytes, z64)? != ZIP64_EOCD_SIG {
            return Err(err(z64, "zip64 locator does not point at a zip64 end record"));
        }
        count = u64_at(bytes, add(z64, 32, z64)?)?;
        cd_size = u64_at(bytes, add(z64, 40, z64)?)?;
        cd_offset = u64_at(bytes, add(z64, 48, z64)?)?;
        zip64_eocd = true;
    }
    let cd_end = add(cd_offset, cd_size, eocd)?;
    if cd_end > bytes.len() as u64 {
        return Err(err(cd_offset, format!("central directory ({cd_size} bytes) runs past the end of the file")));
    }
    // Each central header is at least 46 bytes: cap the count by the directory size.
    if count > cd_size / 46 {
        return Err(err(eocd, format!("end record claims {count} entries, more than the central directory can hold")));
    }
    let mut entries = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut pos = cd_offset;
    for _ in 0..count {
        if u32_at(bytes, pos)? != CENTRAL_SIG {
            return Err(err(pos, "expected a central directory header signature"));
        }
        let flags = u16_at(bytes, pos + 8)?;
        let method = u16_at(bytes, pos + 10)?;
        let crc = u32_at(bytes, pos + 16)?;
        let mut csize = u64::from(u32_at(bytes, pos + 20)?);
        let mut usize_ = u64::from(u32_at(bytes, pos + 24)?);
        let name_len = u64::from(u16_at(bytes, pos + 28)?);
        let extra_len = u64::from(u16_at(bytes, pos + 30)?);
        let comment_len = u64::from(u16_at(bytes, pos + 32)?);
        let mut header_offset = u64::from(u32_at(bytes, pos + 42)?);
        let name_bytes = slice_at(bytes, pos + 46, name_len).ok_or_else(|| err(pos + 46, "truncated entry name"))?;
        let name = String::from_utf8(name_bytes.to_vec()).map_err(|_| err(pos + 46, "entry name is not UTF-8"))?;
        let extra_at = pos + 46 + name_len;
        let extra = slice_at(bytes, extra_at, extra_len)
            .ok_or_else(|| err(extra_at, format!("truncated extra field of entry {name:?}")))?;
        // zip64 extended information: fields present only where the 32-bit value is 0xFFFFFFFF.
        let mut e = 0usize;
        while let (Some(id), Some(sz)) = (extra.get(e..e + 2), extra.get(e + 2..e + 4)) {
            let id = u16::from_le_bytes([id[0], id[1]]);
            let sz = usize::from(u16::from_le_bytes([sz[0], sz[1]]));
            let body = extra.get(e + 4..e + 4 + sz).unwrap_or(&[]);
            if id == 1 {
                let mut fields = body.chunks_exact(8).map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    u64::from_le_bytes(a)
                });
                for target in [&mut usize_, &mut csize, &mut header_offset] {
                    if *target == U32_MAX {
                        *target = fields
                            .next()
                            .ok_or_else(|| err(extra_at, format!("entry {name:?}: zip64 extra field is too short")))?;
                    }
                }
            }
            e += 4 + sz;
        }
        if method != 0 {
            return Err(TensorFileError::ZipEntry {
                entry: name,
                msg: format!("compression method {method} is not supported (only stored entries)"),
            });
        }
        if flags & 1 != 0 {
            return Err(TensorFileError::ZipEntry { entry: name, msg: "encrypted entries are not supported".into() });
        }
        if csize != usize_ {
            return Err(TensorFileError::ZipEntry {
                entry: name,
                msg: format!("stored entry has compressed size {csize} != size {usize_}"),
            });
        }
        if u32_at(bytes, header_offset)? != LOCAL_SIG {
            return Err(err(header_offset, format!("entry {name:?}: expected a local header signature")));
        }
        let lname = u64::from(u16_at(bytes, header_offset + 26)?);
        let lextra = u64::from(u16_at(bytes, header_offset + 28)?);
        let data_at = add(header_offset, LOCAL_HEADER_LEN + lname + lextra, header_offset)?;
        let data = slice_at(bytes, data_at, csize).ok_or_else(|| TensorFileError::ZipEntry {
            entry: name.clone(),
            msg: format!(
                "data of {csize} bytes at byte offset {data_at} runs past the end of the file ({} bytes)",
                bytes.len()
            ),
        })?;
        if crc32fast::hash(data) != crc {
            return Err(TensorFileError::ZipEntry {
                entry: name,
                msg: format!("CRC-32 mismatch for data at byte offset {data_at}"),
            });
        }
        entries.push(ZipEntry { name, data });
        pos = add(extra_at, extra_len + comment_len, pos)?;
    }
    Ok(ZipArchive { entries, zip64_eocd })
}

/// Length of the `FB` padding extra field (4-byte header included) that torch's
/// `getPadding` puts in a local header at `cursor` for a record of `size` bytes.
fn torch_padding(cursor: u64, name_len: u64, size: u64, alignment: u64) -> u64 {
    let mut start = cursor + LOCAL_HEADER_LEN + name_len + 4;
    if size >= U32_MAX || cursor >= U32_MAX {
        start += 4;
        if size >= U32_MAX {
            start += 16;
        }
        if cursor >= U32_MAX {
            start += 8;
        }
    }
    let alignment = alignment.max(1);
    let rem = start % alignment;
    let pad = if rem == 0 { 0 } else { alignment - rem };
    pad + 4
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn clamp32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Writes records the way torch's `PyTorchStreamWriter` does.
pub(crate) fn write_archive(
    records: &[(String, &[u8])],
    alignment: u64,
    zip64_eocd: bool,
) -> Result<Vec<u8>, TensorFileError> {
    let total: usize =
        records.iter().map(|(n, d)| d.len() + 2 * n.len() + 200 + usize::try_from(alignment).unwrap_or(0)).sum();
    let mut out = Vec::with_capacity(total);
    let mut central = Vec::new();
    for (name, data) in records {
        let name_len = u16::try_from(name.len())
            .map_err(|_| TensorFileError::Meta(format!("record name {name:?} is too long")))?;
        let cursor = out.len() as u64;
        let size = data.len() as u64;
        let crc = crc32fast::hash(data);
        let big = size >= U32_MAX || cursor >= U32_MAX;
        let mut zip64_extra = Vec::new();
        if big {
            put16(&mut zip64_extra, 1);
            let mut body = Vec::new();
            if size >= U32_MAX {
                put64(&mut body, size);
                put64(&mut body, size);
            }
            if cursor >= U32_MAX {
                put64(&mut body, cursor);
            }
            put16(&mut zip64_extra, body.len() as u16);
            zip64_extra.extend_from_slice(&body);
        }
        let pad = torch_padding(cursor, u64::from(name_len), size, alignment);
        let pad_body = pad - 4;
        let extra_len = u16::try_from(pad + zip64_extra.len() as u64)
            .map_err(|_| TensorFileError::Meta(format!("alignment {alignment} is too large")))?;
        put32(&mut out, LOCAL_SIG);
        put16(&mut out, 0); // version needed
        put16(&mut out, 0x0808); // data descriptor + UTF-8 names
        put16(&mut out, 0); // stored
        put32(&mut out, 0); // time + date
        put32(&mut out, 0); // crc (in descriptor)
        put32(&mut out, 0);
        put32(&mut out, 0);
        put16(&mut out, name_len);
        put16(&mut out, extra_len);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&zip64_extra);
        out.extend_from_slice(b"FB");
        put16(&mut out, pad_body as u16);
        out.resize(out.len() + pad_body as usize, b'Z');
        out.extend_from_slice(data);
        put32(&mut out, DESCRIPTOR_SIG);
        put32(&mut out, crc);
        if size >= U32_MAX {
            put64(&mut out, size);
            put64(&mut out, size);
        } else {
            put32(&mut out, size as u32);
            put32(&mut out, size as u32);
        }
        // Central directory entry.
        let mut cd_extra = Vec::new();
        if big {
            let mut body = Vec::new();
            if size >= U32_MAX {
                put64(&mut body, size);
                put64(&mut body, size);
            }
            if cursor >= U32_MAX {
                put64(&mut body, cursor);
            }
            put16(&mut cd_extra, 1);
            put16(&mut cd_extra, body.len() as u16);
            cd_extra.extend_from_slice(&body);
        }
        put32(&mut central, CENTRAL_SIG);
        put16(&mut central, 0); // made by
        put16(&mut central, 0); // needed
        put16(&mut central, 0x0808);
        put16(&mut central, 0);
        put32(&mut central, 0);
        put32(&mut central, crc);
        put32(&mut central, clamp32(size));
        put32(&mut central, clamp32(size));
        put16(&mut central, name_len);
        put16(&mut central, cd_extra.len() as u16);
        put16(&mut central, 0); // comment
        put16(&mut central, 0); // disk
        put16(&mut central, 0); // internal attributes
        put32(&mut central, 0); // external attributes
        put32(&mut central, clamp32(cursor));
        central.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&cd_extra);
    }
    let cd_offset = out.len() as u64;
    let cd_size = central.len() as u64;
    let count = records.len() as u64;
    out.extend_from_slice(&central);
    if zip64_eocd {
        let z64 = out.len() as u64;
        put32(&mut out, ZIP64_EOCD_SIG);
        put64(&mut out, 44);
        put16(&mut out, 0x031e); // made by: unix, 3.0
        put16(&mut out, 0x002d); // needed: 4.5
        put32(&mut out, 0);
        put32(&mut out, 0);
        put64(&mut out, count);
        put64(&mut out, count);
        put64(&mut out, cd_size);
        put64(&mut out, cd_offset);
        put32(&mut out, ZIP64_LOCATOR_SIG);
        put32(&mut out, 0);
        put64(&mut out, z64);
        put32(&mut out, 1);
    } else if count > 0xFFFF || cd_offset >= U32_MAX || cd_size >= U32_MAX {
        return Err(TensorFileError::Meta("archive needs zip64 but the metadata says no zip64 end record".into()));
    }
    put32(&mut out, EOCD_SIG);
    put16(&mut out, 0);
    put16(&mut out, 0);
    put16(&mut out, u16::try_from(count).unwrap_or(u16::MAX));
    put16(&mut out, u16::try_from(count).unwrap_or(u16::MAX));
    put32(&mut out, clamp32(cd_size));
    put32(&mut out, clamp32(cd_offset));
    put16(&mut out, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_alignment() {
        let a = [1u8; 10];
        let recs = vec![("x/data.pkl".to_string(), &a[..]), ("x/data/0".to_string(), &b""[..])];
        let bytes = write_archive(&recs, 64, true).expect("write");
        let ar = read_archive(&bytes).expect("read");
        assert!(ar.zip64_eocd);
        assert_eq!(ar.entries.len(), 2);
        assert_eq!(ar.entries[0].name, "x/data.pkl");
        assert_eq!(ar.entries[0].data, &a[..]);
        assert!(ar.entries[1].data.is_empty());
        let off = ar.entries[0].data.as_ptr() as usize - bytes.as_ptr() as usize;
        assert_eq!(off % 64, 0);
        let plain = write_archive(&recs, 64, false).expect("write");
        assert!(!read_archive(&plain).expect("read").zip64_eocd);
    }

    #[test]
    fn hostile_sizes() {
        let a = [7u8; 100];
        let recs = vec![("x/data/0".to_string(), &a[..])];
        let good = write_archive(&recs, 64, true).expect("write");
        // Make the central directory claim a huge size (offset 20/24 inside the entry).
        let cd = good.windows(4).position(|w| w == CENTRAL_SIG.to_le_bytes()).expect("cd");
        for field in [20, 24] {
            let mut bad = good.clone();
            bad[cd + field..cd + field + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
            assert!(read_archive(&bad).is_err());
        }
        // Claim an absurd entry count.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 12..n - 10].copy_from_slice(&0xFFFFu16.to_le_bytes());
        bad[n - 12..n - 10].copy_from_slice(&0xFFFFu16.to_le_bytes());
        let _ = read_archive(&bad); // must not panic or allocate absurdly
        for cut in 0..good.len() {
            let _ = read_archive(&good[..cut]);
        }
        assert!(read_archive(b"garbage garbage garbage garbage").is_err());
    }
}
