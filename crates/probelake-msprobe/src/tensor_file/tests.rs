//! Tests for the tensor file codec: real msprobe fixtures, synthetic round trips, hostile input.

use std::path::{Path, PathBuf};

use super::pickler::Pickler;
use super::*;

/// The repository's real msprobe output (`tests/data/fixtures`); absent only from a copy of
/// the crate without the repository.
fn fixtures_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures");
    dir.is_dir().then_some(dir)
}

fn collect_pt(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_pt(&p, out);
        } else if p.extension().is_some_and(|e| e == "pt")
            && p.parent().and_then(Path::file_name).is_some_and(|n| n == "dump_tensor_data")
        {
            out.push(p);
        }
    }
}

fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

#[test]
fn fixtures_reencode_byte_identical() {
    let Some(dir) = fixtures_dir() else {
        println!("skipping: tests/data/fixtures not found (a copy of the crate without the repository)");
        return;
    };
    let mut files = Vec::new();
    collect_pt(&dir, &mut files);
    assert!(!files.is_empty(), "no dump_tensor_data/*.pt under {}", dir.display());
    let mut identical = 0;
    let mut failures = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).expect("read fixture");
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (t, meta) = read_tensor_file(name, &bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(t.dtype.starts_with("torch."), "{}: dtype {}", f.display(), t.dtype);
        let numel: i64 = t.shape.iter().product();
        let item = dtype_itemsize(&t.dtype).expect("itemsize");
        assert_eq!(numel as usize * item, t.data.len(), "{}", f.display());
        let pt = meta.pt.as_ref().expect("pt meta");
        assert_eq!(Some(pt.archive.as_str()), name.strip_suffix(".pt"));
        // The metadata survives JSON.
        let meta2 = ContainerMeta::from_json(&meta.to_json().expect("json")).expect("json back");
        assert_eq!(meta2, meta);
        let again = write_tensor_file(&t, &meta2).expect("write");
        match first_diff(&again, &bytes) {
            None => identical += 1,
            Some(at) => failures.push(format!("{}: first difference at byte {at}", f.display())),
        }
    }
    println!("{identical}/{} fixture .pt files re-encoded byte-identically", files.len());
    assert!(failures.is_empty(), "not byte-identical:\n{}", failures.join("\n"));
}

const TORCH_DTYPES: &[&str] = &[
    "torch.float32",
    "torch.float64",
    "torch.float16",
    "torch.bfloat16",
    "torch.int8",
    "torch.int16",
    "torch.int32",
    "torch.int64",
    "torch.uint8",
    "torch.bool",
    "torch.complex64",
    "torch.complex128",
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

fn tensor(dtype: &str, shape: &[i64]) -> TensorData {
    let item = dtype_itemsize(dtype).expect("dtype");
    let numel: i64 = shape.iter().product();
    let data = (0..numel as usize * item)
        .map(|i| (i * 37 % 251) as u8 % if dtype.ends_with("bool") { 2 } else { 255 })
        .collect();
    TensorData { dtype: dtype.to_string(), shape: shape.to_vec(), data }
}

#[test]
fn pt_round_trip_every_dtype_and_shape() {
    for dtype in TORCH_DTYPES {
        for shape in [&[][..], &[0][..], &[3][..], &[2, 3][..], &[1, 2, 3, 4][..], &[2, 0, 3][..], &[300, 2][..]] {
            let t = tensor(dtype, shape);
            let meta = default_pt_meta("Module.x.forward.0.input.0");
            let bytes = write_tensor_file(&t, &meta).expect("write");
            let (t2, meta2) = read_tensor_file("x.pt", &bytes).expect("read");
            assert_eq!(t2, t, "{dtype} {shape:?}");
            assert_eq!(meta2, meta, "{dtype} {shape:?}");
            assert_eq!(write_tensor_file(&t2, &meta2).expect("write"), bytes);
        }
    }
}

#[test]
fn npy_round_trip_every_dtype() {
    for dtype in [
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "complex64",
        "complex128",
    ] {
        for shape in [&[][..], &[0][..], &[5][..], &[2, 3][..]] {
            let t = tensor(dtype, shape);
            let meta = ContainerMeta { container: Container::Npy, pt: None, npy: None };
            let bytes = write_tensor_file(&t, &meta).expect("write");
            assert_eq!(bytes.len() % 64, t.data.len() % 64, "header is 64-aligned");
            let (t2, meta2) = read_tensor_file("a.npy", &bytes).expect("read");
            assert_eq!(t2, t);
            assert_eq!(write_tensor_file(&t2, &meta2).expect("write"), bytes);
        }
    }
}

/// A hand-built torch pickle of a float32 view (offset, size, stride) over `storage_numel`.
fn view_pickle(storage_numel: i64, offset: i64, size: &[i64], stride: &[i64]) -> Vec<u8> {
    let mut p = Pickler::new();
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();
    p.str("storage");
    p.global("torch", "FloatStorage");
    p.str("0");
    p.str("npu:0");
    p.int(storage_numel);
    p.end_tuple(5);
    p.raw(b"Q");
    p.int(offset);
    p.int_tuple(size);
    p.int_tuple(stride);
    p.bool(true);
    p.global("collections", "OrderedDict");
    p.raw(b")R");
    p.memoize();
    p.end_tuple(6);
    p.raw(b"R");
    p.memoize();
    p.raw(b".");
    p.out
}

fn archive_with(pickle: &[u8], storage: &[u8]) -> Vec<u8> {
    let recs = vec![
        ("t/data.pkl".to_string(), pickle),
        ("t/byteorder".to_string(), &b"little"[..]),
        ("t/data/0".to_string(), storage),
        ("t/version".to_string(), &b"3\n"[..]),
    ];
    zip::write_archive(&recs, 64, true).expect("zip")
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn non_contiguous_view_is_gathered() {
    let storage = f32s(&[0., 1., 2., 3., 4., 5., 6.]);
    // Transpose of a 2x3 matrix starting at element 1: [[1,4],[2,5],[3,6]].
    let bytes = archive_with(&view_pickle(7, 1, &[3, 2], &[1, 3]), &storage);
    let (t, meta) = read_tensor_file("t.pt", &bytes).expect("read");
    assert_eq!(t.shape, vec![3, 2]);
    assert_eq!(t.data, f32s(&[1., 4., 2., 5., 3., 6.]));
    let pt = meta.pt.as_ref().expect("pt");
    assert_eq!(pt.device, "npu:0");
    assert!(pt.requires_grad);
    let view = pt.view.as_ref().expect("view");
    assert_eq!((view.storage_offset, view.storage_numel, view.stride.clone()), (1, 7, vec![1, 3]));
    // Re-encoding writes a contiguous tensor that reads back the same.
    let again = write_tensor_file(&t, &meta).expect("write");
    assert_ne!(again, bytes);
    let (t2, _) = read_tensor_file("t.pt", &again).expect("read");
    assert_eq!(t2, t);
    // Expanded (stride 0) view.
    let bytes = archive_with(&view_pickle(7, 2, &[2, 3], &[0, 1]), &storage);
    let (t, _) = read_tensor_file("t.pt", &bytes).expect("read");
    assert_eq!(t.data, f32s(&[2., 3., 4., 2., 3., 4.]));
    // Views reaching past the storage are errors.
    let bytes = archive_with(&view_pickle(7, 5, &[3], &[1]), &storage);
    assert!(read_tensor_file("t.pt", &bytes).is_err());
    // A huge expansion of a tiny storage is refused rather than allocated.
    let bytes = archive_with(&view_pickle(7, 0, &[1 << 20, 1 << 20], &[0, 0]), &storage);
    assert!(read_tensor_file("t.pt", &bytes).is_err());
}

fn small_file() -> Vec<u8> {
    if let Some(dir) = fixtures_dir() {
        let mut files = Vec::new();
        collect_pt(&dir, &mut files);
        if let Some(f) = files.iter().min_by_key(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(u64::MAX)) {
            return std::fs::read(f).expect("read");
        }
    }
    write_tensor_file(&tensor("torch.float32", &[2]), &default_pt_meta("small")).expect("write")
}

#[test]
fn truncated_at_every_offset_is_an_error() {
    let bytes = small_file();
    assert!(read_tensor_file("x.pt", &bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(read_tensor_file("x.pt", &bytes[..cut]).is_err(), "cut at {cut}");
    }
    // Every single-byte corruption is either an error or a parse; never a panic.
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0xA5;
        let _ = read_tensor_file("x.pt", &b);
    }
}

#[test]
fn garbage_and_hostile_input() {
    assert!(read_tensor_file("x.pt", b"").is_err());
    assert!(read_tensor_file("x.pt", &[0u8; 1000]).is_err());
    assert!(read_tensor_file("x.bin", b"hello world").is_err());
    assert!(read_tensor_file("x.npy", b"PK\x03\x04garbage").is_err());
    let junk: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    assert!(read_tensor_file("x.pt", &junk).is_err());
    // Storage record size disagreeing with the pickle.
    let bytes = archive_with(&view_pickle(1 << 40, 0, &[1 << 20, 1 << 20], &[1 << 20, 1]), &f32s(&[1.0]));
    assert!(read_tensor_file("t.pt", &bytes).is_err());
    // Unknown opcode inside data.pkl.
    let mut pkl = view_pickle(1, 0, &[1], &[1]);
    let at = pkl.len() - 1;
    pkl.insert(at, 0xFE);
    assert!(matches!(
        read_tensor_file("t.pt", &archive_with(&pkl, &f32s(&[1.0]))),
        Err(TensorFileError::Pickle { .. })
    ));
    // Deep MARK nesting and deep tuple nesting.
    let mut deep = vec![0x80, 2];
    deep.extend(std::iter::repeat_n(b'(', 100_000));
    deep.push(b'.');
    assert!(read_tensor_file("t.pt", &archive_with(&deep, b"")).is_err());
    let mut deep = vec![0x80, 2, b')'];
    deep.extend(std::iter::repeat_n(0x85, 100_000));
    deep.push(b'.');
    assert!(read_tensor_file("t.pt", &archive_with(&deep, b"")).is_err());
    // A pickle that is not a tensor.
    assert!(read_tensor_file("t.pt", &archive_with(b"\x80\x02K\x01.", b"")).is_err());
}

#[test]
fn write_rejects_inconsistent_input() {
    let mut t = tensor("torch.float32", &[2, 2]);
    t.data.pop();
    assert!(matches!(write_tensor_file(&t, &default_pt_meta("a")), Err(TensorFileError::Data(_))));
    let t = TensorData { dtype: "torch.qint8".into(), shape: vec![], data: vec![0] };
    assert!(write_tensor_file(&t, &default_pt_meta("a")).is_err());
    let mut meta = default_pt_meta("a");
    if let Some(pt) = meta.pt.as_mut() {
        pt.storage_key = "7".into();
    }
    assert!(matches!(write_tensor_file(&tensor("torch.float32", &[1]), &meta), Err(TensorFileError::Meta(_))));
    assert!(ContainerMeta::from_json("{").is_err());
}

#[test]
fn default_meta_json_is_compact_and_stable() {
    let m = default_pt_meta("Module.fc1.Linear.forward.0.input.0");
    let j = m.to_json().expect("json");
    assert!(!j.contains('\n') && !j.contains(": "));
    assert_eq!(ContainerMeta::from_json(&j).expect("back"), m);
    assert_eq!(default_pt_meta("Module.fc1.Linear.forward.0.input.0"), m);
    let id = m.pt.as_ref().and_then(|p| p.records.last()).map(|r| r.content.clone());
    assert!(matches!(id, Some(RecordContent::Text(s)) if s.len() == 40 && s.bytes().all(|b| b.is_ascii_digit())));
}
