//! `torch.save` archives of a single tensor: recognising and re-creating `data.pkl`.

use super::pickle::{self, Value};
use super::pickler::Pickler;
use super::zip::{self, ZipEntry};
use super::{dtype_itemsize, ContainerMeta, PtMeta, PtRecord, RecordContent, TensorData, TensorFileError};

/// `(torch dtype, legacy storage class)`; dtypes without a legacy class use
/// `_rebuild_tensor_v3` with an `UntypedStorage`.
const STORAGES: &[(&str, &str)] = &[
    ("torch.float32", "FloatStorage"),
    ("torch.float64", "DoubleStorage"),
    ("torch.float16", "HalfStorage"),
    ("torch.bfloat16", "BFloat16Storage"),
    ("torch.int64", "LongStorage"),
    ("torch.int32", "IntStorage"),
    ("torch.int16", "ShortStorage"),
    ("torch.int8", "CharStorage"),
    ("torch.uint8", "ByteStorage"),
    ("torch.bool", "BoolStorage"),
    ("torch.complex64", "ComplexFloatStorage"),
    ("torch.complex128", "ComplexDoubleStorage"),
];

/// dtypes that torch pickles via `_rebuild_tensor_v3` (`torch.storage._new_dtypes()`).
const V3_DTYPES: &[&str] = &[
    "torch.float8_e4m3fn",
    "torch.float8_e5m2",
    "torch.float8_e4m3fnuz",
    "torch.float8_e5m2fnuz",
    "torch.float8_e8m0fnu",
    "torch.float4_e2m1fn_x2",
    "torch.uint16",
    "torch.uint32",
    "torch.uint64",
];

/// Alternative spellings `torch.<name>` that a v3 pickle may use for a dtype.
fn canonical_dtype(name: &str) -> String {
    let n = match name {
        "float" => "float32",
        "double" => "float64",
        "half" => "float16",
        "long" => "int64",
        "int" => "int32",
        "short" => "int16",
        "cfloat" => "complex64",
        "cdouble" => "complex128",
        other => other,
    };
    format!("torch.{n}")
}

fn terr(msg: impl Into<String>) -> TensorFileError {
    TensorFileError::Torch(msg.into())
}

fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Tuple(c) | Value::List(c) => Some(&c.items),
        _ => None,
    }
}

fn int(v: Option<&Value>, what: &str) -> Result<i64, TensorFileError> {
    match v {
        Some(Value::Int(i)) => Ok(*i),
        _ => Err(terr(format!("{what} is not an int"))),
    }
}

fn text<'v>(v: Option<&'v Value>, what: &str) -> Result<&'v str, TensorFileError> {
    match v {
        Some(Value::Str(s)) => Ok(s),
        _ => Err(terr(format!("{what} is not a str"))),
    }
}

fn ints(v: Option<&Value>, what: &str) -> Result<Vec<i64>, TensorFileError> {
    let it = v.and_then(items).ok_or_else(|| terr(format!("{what} is not a tuple")))?;
    it.iter()
        .map(|x| match x {
            Value::Int(i) if *i >= 0 => Ok(*i),
            _ => Err(terr(format!("{what} holds a non-int or negative value"))),
        })
        .collect()
}

/// What the pickle says about the tensor.
struct Rebuild {
    dtype: String,
    key: String,
    device: String,
    storage_numel: u64,
    offset: i64,
    shape: Vec<i64>,
    stride: Vec<i64>,
    requires_grad: bool,
}

fn interpret(v: &Value) -> Result<Rebuild, TensorFileError> {
    let Value::Reduce(r) = v else {
        return Err(terr("data.pkl does not hold a tensor (top value is not a REDUCE)"));
    };
    let (func, args) = match r.items.as_slice() {
        [Value::Global(m, n), a] => ((m.as_ref(), n.as_ref()), a),
        _ => return Err(terr("tensor REDUCE does not call a global")),
    };
    let args = items(args).ok_or_else(|| terr("rebuild arguments are not a tuple"))?;
    let v3 = match func {
        ("torch._utils", "_rebuild_tensor_v2") => false,
        ("torch._utils", "_rebuild_tensor_v3") => true,
        ("torch._utils", "_rebuild_parameter") => {
            return interpret(args.first().ok_or_else(|| terr("empty _rebuild_parameter"))?)
        }
        (m, n) => return Err(terr(format!("unsupported tensor rebuild function {m}.{n}"))),
    };
    let Some(Value::PersId(pid)) = args.first() else {
        return Err(terr("first rebuild argument is not a persistent storage id"));
    };
    let pid = pid.items.first().and_then(items).ok_or_else(|| terr("persistent id is not a tuple"))?;
    if text(pid.first(), "persistent id tag")? != "storage" {
        return Err(terr("persistent id is not a 'storage' reference"));
    }
    let storage_class = match pid.get(1) {
        Some(Value::Global(m, n)) if m.as_ref() == "torch" => n.to_string(),
        _ => return Err(terr("storage type is not a torch global")),
    };
    let key = text(pid.get(2), "storage key")?.to_string();
    let device = text(pid.get(3), "storage device")?.to_string();
    let storage_numel = u64::try_from(int(pid.get(4), "storage numel")?).map_err(|_| terr("negative storage numel"))?;
    let dtype = if v3 {
        match args.get(6) {
            Some(Value::Global(m, n)) if m.as_ref() == "torch" => canonical_dtype(n),
            _ => return Err(terr("_rebuild_tensor_v3 dtype argument is not a torch global")),
        }
    } else {
        STORAGES
            .iter()
            .find(|(_, s)| *s == storage_class)
            .map(|(d, _)| (*d).to_string())
            .ok_or_else(|| terr(format!("unsupported storage class torch.{storage_class}")))?
    };
    let requires_grad = match args.get(4) {
        Some(Value::Bool(b)) => *b,
        _ => return Err(terr("requires_grad is not a bool")),
    };
    Ok(Rebuild {
        dtype,
        key,
        device,
        storage_numel,
        offset: int(args.get(1), "storage offset")?,
        shape: ints(args.get(2), "size")?,
        stride: ints(args.get(3), "stride")?,
        requires_grad,
    })
}

fn contiguous_stride(shape: &[i64]) -> Vec<i64> {
    let mut stride = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (s, d) in stride.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul((*d).max(1));
    }
    stride
}

/// Copies the elements of a strided view into C order.
fn gather(
    storage: &[u8],
    item: usize,
    offset: u64,
    shape: &[i64],
    stride: &[i64],
    numel: u64,
    cap: u64,
) -> Result<Vec<u8>, TensorFileError> {
    let out_len = numel
        .checked_mul(item as u64)
        .filter(|&n| n <= cap)
        .ok_or_else(|| terr(format!("tensor of {numel} elements is implausibly large for the file")))?;
    if numel == 0 {
        return Ok(Vec::new());
    }
    // Highest element index touched, checked against the storage.
    let mut max = offset;
    for (&d, &s) in shape.iter().zip(stride) {
        let span = (d as u64 - 1)
            .checked_mul(s as u64)
            .and_then(|x| max.checked_add(x))
            .ok_or_else(|| terr("strided view overflows"))?;
        max = span;
    }
    let storage_numel = (storage.len() / item.max(1)) as u64;
    if max >= storage_numel {
        return Err(terr(format!(
            "view (offset {offset}, size {shape:?}, stride {stride:?}) reaches element {max} of a storage of {storage_numel}"
        )));
    }
    let mut out = Vec::with_capacity(out_len as usize);
    let mut idx = vec![0i64; shape.len()];
    loop {
        let mut e = offset;
        for (&i, &s) in idx.iter().zip(stride) {
            e += (i as u64) * (s as u64);
        }
        let at = (e as usize) * item;
        out.extend_from_slice(storage.get(at..at + item).ok_or_else(|| terr("gather out of bounds"))?);
        // Odometer increment, last dimension fastest.
        let mut dim = idx.len();
        loop {
            if dim == 0 {
                return Ok(out);
            }
            dim -= 1;
            let (Some(i), Some(&d)) = (idx.get_mut(dim), shape.get(dim)) else {
                return Ok(out);
            };
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
}

/// Swaps the byte order of each scalar component (complex types swap each half).
pub(crate) fn swap_bytes(data: &mut [u8], dtype: &str) {
    let comp = match dtype {
        "torch.complex64" | "complex64" => 4,
        "torch.complex128" | "complex128" => 8,
        d => dtype_itemsize(d).unwrap_or(1),
    };
    if comp > 1 {
        data.chunks_exact_mut(comp).for_each(<[u8]>::reverse);
    }
}

/// Parses a `torch.save` zip archive.
pub(crate) fn read(bytes: &[u8]) -> Result<(TensorData, ContainerMeta), TensorFileError> {
    let ar = zip::read_archive(bytes)?;
    let first = ar.entries.first().ok_or_else(|| terr("archive has no records"))?;
    let archive = first
        .name
        .split_once('/')
        .map(|(a, _)| a.to_string())
        .ok_or_else(|| terr(format!("record {:?} is not inside a top-level folder", first.name)))?;
    let prefix = format!("{archive}/");
    let find =
        |rel: &str| -> Option<&ZipEntry<'_>> { ar.entries.iter().find(|e| e.name.strip_prefix(&prefix) == Some(rel)) };
    let pkl = find("data.pkl").ok_or_else(|| terr(format!("no {archive}/data.pkl record")))?;
    let rb = interpret(&pickle::load(pkl.data)?)?;
    let item = dtype_itemsize(&rb.dtype).ok_or_else(|| TensorFileError::UnsupportedDtype(rb.dtype.clone()))?;
    let storage_name = format!("data/{}", rb.key);
    let storage = find(&storage_name).ok_or_else(|| terr(format!("no {archive}/{storage_name} record")))?;
    let v3 = V3_DTYPES.contains(&rb.dtype.as_str());
    let storage_bytes = if v3 { rb.storage_numel } else { rb.storage_numel.saturating_mul(item as u64) };
    if storage_bytes != storage.data.len() as u64 {
        return Err(TensorFileError::ZipEntry {
            entry: storage.name.clone(),
            msg: format!("holds {} bytes but the pickle claims {storage_bytes}", storage.data.len()),
        });
    }
    if rb.shape.len() != rb.stride.len() {
        return Err(terr("size and stride have different lengths"));
    }
    let numel =
        rb.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).ok_or_else(|| terr("numel overflows"))?;
    let offset = u64::try_from(rb.offset).map_err(|_| terr("negative storage offset"))?;
    let mut byteorder_big = false;
    let mut records = Vec::with_capacity(ar.entries.len());
    for e in &ar.entries {
        let rel = e
            .name
            .strip_prefix(&prefix)
            .ok_or_else(|| terr(format!("record {:?} is outside the archive folder {archive:?}", e.name)))?;
        let content = if rel == "data.pkl" {
            RecordContent::Pickle
        } else if rel == storage_name {
            RecordContent::Storage
        } else {
            if rel == "byteorder" && e.data == b"big" {
                byteorder_big = true;
            }
            match std::str::from_utf8(e.data) {
                Ok(s) => RecordContent::Text(s.to_string()),
                Err(_) => RecordContent::Bytes(e.data.to_vec()),
            }
        };
        records.push(PtRecord { name: rel.to_string(), content });
    }
    let contiguous = contiguous_stride(&rb.shape);
    let trivial = offset == 0 && (rb.stride == contiguous || numel <= 1) && storage_bytes == numel * item as u64;
    let cap = (bytes.len() as u64).saturating_mul(64).max(1 << 24);
    let mut data = if trivial {
        storage.data.to_vec()
    } else {
        gather(storage.data, item, offset, &rb.shape, &rb.stride, numel, cap)?
    };
    if byteorder_big {
        swap_bytes(&mut data, &rb.dtype);
    }
    let pt = PtMeta {
        archive,
        records,
        alignment: 64,
        zip64_eocd: ar.zip64_eocd,
        storage_key: rb.key,
        device: rb.device,
        requires_grad: rb.requires_grad,
        view: (!trivial).then(|| super::PtView {
            storage_offset: offset,
            storage_numel: rb.storage_numel,
            stride: rb.stride.clone(),
        }),
    };
    let mut pt = pt;
    // The alignment shows in the first record's data offset; torch writes `.storage_alignment`.
    if let Some(RecordContent::Text(t)) = pt.records.iter().find(|r| r.name == ".storage_alignment").map(|r| &r.content)
    {
        if let Ok(a) = t.trim().parse::<u64>() {
            if (1..=4096).contains(&a) {
                pt.alignment = a;
            }
        }
    }
    Ok((TensorData { dtype: rb.dtype, shape: rb.shape, data }, ContainerMeta::pt(pt)))
}

/// The `data.pkl` torch 2.x writes for a contiguous tensor.
pub(crate) fn encode_pickle(t: &TensorData, pt: &PtMeta) -> Result<Vec<u8>, TensorFileError> {
    let item = dtype_itemsize(&t.dtype).ok_or_else(|| TensorFileError::UnsupportedDtype(t.dtype.clone()))?;
    let numel = (t.data.len() / item) as i64;
    let v3 = V3_DTYPES.contains(&t.dtype.as_str());
    let mut p = Pickler::new();
    p.global("torch._utils", if v3 { "_rebuild_tensor_v3" } else { "_rebuild_tensor_v2" });
    p.mark(); // args tuple (6 or 7 items)
    p.mark(); // persistent id tuple (5 items)
    p.str("storage");
    if v3 {
        p.global("torch", "UntypedStorage");
    } else {
        let class = STORAGES
            .iter()
            .find(|(d, _)| *d == t.dtype)
            .map(|(_, s)| *s)
            .ok_or_else(|| TensorFileError::UnsupportedDtype(t.dtype.clone()))?;
        p.global("torch", class);
    }
    p.str(&pt.storage_key);
    p.str(&pt.device);
    p.int(if v3 { t.data.len() as i64 } else { numel });
    p.end_tuple(5);
    p.raw(b"Q"); // BINPERSID
    p.int(0);
    p.int_tuple(&t.shape);
    p.int_tuple(&contiguous_stride(&t.shape));
    p.bool(pt.requires_grad);
    p.global("collections", "OrderedDict");
    p.raw(b")R");
    p.memoize();
    if v3 {
        let name = t.dtype.strip_prefix("torch.").unwrap_or(&t.dtype);
        p.global("torch", name);
    }
    p.end_tuple(if v3 { 7 } else { 6 });
    p.raw(b"R");
    p.memoize();
    p.raw(b".");
    Ok(p.out)
}

/// Re-creates the archive bytes.
pub(crate) fn write(t: &TensorData, pt: &PtMeta) -> Result<Vec<u8>, TensorFileError> {
    let pkl = encode_pickle(t, pt)?;
    let big =
        pt.records.iter().any(|r| r.name == "byteorder" && matches!(&r.content, RecordContent::Text(s) if s == "big"));
    let swapped;
    let storage: &[u8] = if big {
        let mut d = t.data.clone();
        swap_bytes(&mut d, &t.dtype);
        swapped = d;
        &swapped
    } else {
        &t.data
    };
    let mut recs: Vec<(String, &[u8])> = Vec::with_capacity(pt.records.len());
    for r in &pt.records {
        let data: &[u8] = match &r.content {
            RecordContent::Pickle => &pkl,
            RecordContent::Storage => storage,
            RecordContent::Text(s) => s.as_bytes(),
            RecordContent::Bytes(b) => b,
        };
        recs.push((format!("{}/{}", pt.archive, r.name), data));
    }
    zip::write_archive(&recs, pt.alignment, pt.zip64_eocd)
}
