//! `numpy.save` `.npy` files (format versions 1.0, 2.0 and 3.0).

use super::{ContainerMeta, NpyMeta, TensorData, TensorFileError};

/// `(numpy dtype name, little-endian descr)`.
const DESCRS: &[(&str, &str)] = &[
    ("float16", "<f2"),
    ("float32", "<f4"),
    ("float64", "<f8"),
    ("int8", "|i1"),
    ("int16", "<i2"),
    ("int32", "<i4"),
    ("int64", "<i8"),
    ("uint8", "|u1"),
    ("uint16", "<u2"),
    ("uint32", "<u4"),
    ("uint64", "<u8"),
    ("bool", "|b1"),
    ("complex64", "<c8"),
    ("complex128", "<c16"),
];

const MAGIC: &[u8] = b"\x93NUMPY";

fn nerr(offset: usize, msg: impl Into<String>) -> TensorFileError {
    TensorFileError::Npy { offset: offset as u64, msg: msg.into() }
}

/// Maps a TensorData dtype (numpy or torch spelling) to the numpy name.
fn numpy_name(dtype: &str) -> &str {
    dtype.strip_prefix("torch.").unwrap_or(dtype)
}

/// Parsed header dict.
#[derive(Debug, PartialEq)]
struct Header {
    /// numpy dtype name.
    dtype: String,
    /// Whether the file stores big-endian elements.
    big_endian: bool,
    fortran: bool,
    shape: Vec<i64>,
}

/// Parses `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(text: &str, base: usize) -> Result<Header, TensorFileError> {
    let err = |m: &str| nerr(base, format!("header {text:?}: {m}"));
    let body = text
        .trim_end_matches([' ', '\n', '\0'])
        .trim()
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| err("not a dict literal"))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let q = rest.chars().next().filter(|c| *c == '\'' || *c == '"').ok_or_else(|| err("expected a quoted key"))?;
        let after = rest.get(1..).unwrap_or("");
        let end = after.find(q).ok_or_else(|| err("unterminated key"))?;
        let key = after.get(..end).unwrap_or("");
        rest = after.get(end + 1..).unwrap_or("").trim_start();
        rest = rest.strip_prefix(':').ok_or_else(|| err("expected ':'"))?.trim_start();
        match key {
            "descr" => {
                let q = rest
                    .chars()
                    .next()
                    .filter(|c| *c == '\'' || *c == '"')
                    .ok_or_else(|| err("descr is not a string"))?;
                let after = rest.get(1..).unwrap_or("");
                let end = after.find(q).ok_or_else(|| err("unterminated descr"))?;
                descr = Some(after.get(..end).unwrap_or("").to_string());
                rest = after.get(end + 1..).unwrap_or("");
            }
            "fortran_order" => {
                if let Some(r) = rest.strip_prefix("True") {
                    fortran = Some(true);
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("False") {
                    fortran = Some(false);
                    rest = r;
                } else {
                    return Err(err("fortran_order is not True/False"));
                }
            }
            "shape" => {
                let r = rest.strip_prefix('(').ok_or_else(|| err("shape is not a tuple"))?;
                let end = r.find(')').ok_or_else(|| err("unterminated shape"))?;
                let dims = r
                    .get(..end)
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.trim_end_matches('L').parse::<i64>().ok().filter(|d| *d >= 0))
                    .collect::<Option<Vec<i64>>>()
                    .ok_or_else(|| err("shape holds a non-integer"))?;
                shape = Some(dims);
                rest = r.get(end + 1..).unwrap_or("");
            }
            _ => return Err(err("unexpected key")),
        }
        rest = rest.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    let descr = descr.ok_or_else(|| err("no descr"))?;
    let (order, code) = descr.split_at_checked(1).ok_or_else(|| err("empty descr"))?;
    let (big_endian, le) = match order {
        "<" | "=" | "|" => (false, code),
        ">" => (true, code),
        _ => (false, descr.as_str()),
    };
    let dtype = DESCRS
        .iter()
        .find(|(_, d)| d.get(1..) == Some(le))
        .map(|(n, _)| (*n).to_string())
        .ok_or_else(|| TensorFileError::UnsupportedDtype(descr.clone()))?;
    Ok(Header {
        dtype,
        big_endian,
        fortran: fortran.ok_or_else(|| err("no fortran_order"))?,
        shape: shape.ok_or_else(|| err("no shape"))?,
    })
}

/// The header text numpy ≥ 1.23 writes (dict, growth-axis spaces, padding and `\n`), and
/// the format version.
fn numpy_header(dtype: &str, shape: &[i64]) -> Result<((u8, u8), String), TensorFileError> {
    let descr = DESCRS
        .iter()
        .find(|(n, _)| *n == numpy_name(dtype))
        .map(|(_, d)| *d)
        .ok_or_else(|| TensorFileError::UnsupportedDtype(dtype.to_string()))?;
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!("({})", shape.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = shape.first() {
        h.push_str(&" ".repeat(21usize.saturating_sub(first.to_string().len())));
    }
    let hlen = h.len() + 1;
    let (version, prefix) = if 10 + hlen + 64 <= 0xFFFF { ((1, 0), 10) } else { ((2, 0), 12) };
    let pad = 64 - ((prefix + hlen) % 64);
    h.push_str(&" ".repeat(pad));
    h.push('\n');
    Ok((version, h))
}

/// Parses a `.npy` file.
pub(crate) fn read(bytes: &[u8]) -> Result<(TensorData, ContainerMeta), TensorFileError> {
    if bytes.get(..6) != Some(MAGIC) {
        return Err(nerr(0, "missing \\x93NUMPY magic"));
    }
    let major = *bytes.get(6).ok_or_else(|| nerr(6, "truncated version"))?;
    let minor = *bytes.get(7).ok_or_else(|| nerr(7, "truncated version"))?;
    let (hlen, start) = match major {
        1 => {
            let b = bytes.get(8..10).ok_or_else(|| nerr(8, "truncated header length"))?;
            (usize::from(u16::from_le_bytes([b[0], b[1]])), 10usize)
        }
        2 | 3 => {
            let b = bytes.get(8..12).ok_or_else(|| nerr(8, "truncated header length"))?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12usize)
        }
        v => return Err(nerr(6, format!("unsupported .npy format version {v}.{minor}"))),
    };
    let end = start.checked_add(hlen).ok_or_else(|| nerr(8, "header length overflows"))?;
    let raw = bytes
        .get(start..end)
        .ok_or_else(|| nerr(start, format!("header of {hlen} bytes runs past the end of the file")))?;
    let text: String = if major == 3 {
        String::from_utf8(raw.to_vec()).map_err(|_| nerr(start, "header is not UTF-8"))?
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let h = parse_header(&text, start)?;
    let item = super::dtype_itemsize(&h.dtype).ok_or_else(|| TensorFileError::UnsupportedDtype(h.dtype.clone()))?;
    let numel = h
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .ok_or_else(|| nerr(start, "shape product overflows"))?;
    let payload = bytes.get(end..).unwrap_or(&[]);
    let want = numel.checked_mul(item as u64).ok_or_else(|| nerr(start, "data size overflows"))?;
    if want != payload.len() as u64 {
        return Err(nerr(end, format!("data holds {} bytes but the header implies {want}", payload.len())));
    }
    let mut data = payload.to_vec();
    if h.big_endian {
        super::pt::swap_bytes(&mut data, &h.dtype);
    }
    if h.fortran && h.shape.len() > 1 {
        data = fortran_to_c(&data, item, &h.shape);
    }
    Ok((
        TensorData { dtype: h.dtype, shape: h.shape, data },
        ContainerMeta::npy(NpyMeta { version: (major, minor), header: text }),
    ))
}

/// Reorders column-major elements into row-major order.
fn fortran_to_c(data: &[u8], item: usize, shape: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let n = data.len() / item.max(1);
    // Fortran strides (in elements).
    let mut fstride = Vec::with_capacity(shape.len());
    let mut acc = 1usize;
    for &d in shape {
        fstride.push(acc);
        acc = acc.saturating_mul(d as usize);
    }
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let e: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out.extend_from_slice(data.get(e * item..(e + 1) * item).unwrap_or(&[]));
        for dim in (0..idx.len()).rev() {
            if let (Some(i), Some(&d)) = (idx.get_mut(dim), shape.get(dim)) {
                *i += 1;
                if (*i as i64) < d {
                    break;
                }
                *i = 0;
            }
        }
    }
    out
}

/// Writes a `.npy` file, reusing the stored header text when it still describes the data.
pub(crate) fn write(t: &TensorData, meta: Option<&NpyMeta>) -> Result<Vec<u8>, TensorFileError> {
    let name = numpy_name(&t.dtype);
    let reuse = meta.filter(|m| {
        parse_header(&m.header, 0)
            .is_ok_and(|h| h.dtype == name && !h.big_endian && !(h.fortran && t.shape.len() > 1) && h.shape == t.shape)
    });
    let (version, header) = match reuse {
        Some(m) => (m.version, m.header.clone()),
        None => numpy_header(&t.dtype, &t.shape)?,
    };
    let hbytes: Vec<u8> = if version.0 == 3 {
        header.into_bytes()
    } else {
        header
            .chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| TensorFileError::Meta("npy header is not latin-1".into())))
            .collect::<Result<_, _>>()?
    };
    let mut out = Vec::with_capacity(12 + hbytes.len() + t.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version.0, version.1]);
    match version.0 {
        1 => out.extend_from_slice(
            &u16::try_from(hbytes.len())
                .map_err(|_| TensorFileError::Meta("npy 1.0 header longer than 65535 bytes".into()))?
                .to_le_bytes(),
        ),
        2 | 3 => out.extend_from_slice(
            &u32::try_from(hbytes.len())
                .map_err(|_| TensorFileError::Meta("npy header too long".into()))?
                .to_le_bytes(),
        ),
        v => return Err(TensorFileError::Meta(format!("npy version {v} is not supported"))),
    }
    out.extend_from_slice(&hbytes);
    out.extend_from_slice(&t.data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes numpy 2.x writes for `np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))`,
    /// spelled out by hand.
    fn f4_2x3() -> Vec<u8> {
        let mut h = String::from("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        h.push_str(&" ".repeat(20));
        let pad = 64 - (10 + h.len() + 1) % 64;
        h.push_str(&" ".repeat(pad));
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for i in 0..6 {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
        b
    }

    #[test]
    fn numpy_layout_round_trip() {
        let b = f4_2x3();
        assert_eq!(b.len(), 128 + 24);
        let (t, m) = read(&b).expect("read");
        assert_eq!((t.dtype.as_str(), t.shape.clone()), ("float32", vec![2, 3]));
        assert_eq!(write(&t, m.npy.as_ref()).expect("write"), b);
        // Generated header equals numpy's too.
        assert_eq!(write(&t, None).expect("write"), b);
    }

    #[test]
    fn big_endian_and_fortran() {
        let h = "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 2), }         \n";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for v in [1i16, 3, 2, 4] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        let (t, _) = read(&b).expect("read");
        assert_eq!(t.dtype, "int16");
        let vals: Vec<i16> = t.data.chunks(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(vals, vec![1, 2, 3, 4]);
    }

    #[test]
    fn hostile() {
        let b = f4_2x3();
        for cut in 0..b.len() {
            assert!(read(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut huge = b.clone();
        let at = huge.windows(6).position(|w| w == b"(2, 3)").expect("shape");
        huge[at..at + 6].copy_from_slice(b"(9, 9)");
        assert!(read(&huge).is_err());
        assert!(read(b"\x93NUMPY\x09\x00").is_err());
        assert!(read(b"\x93NUMPY\x02\x00\xff\xff\xff\xff").is_err());
    }
}
