//! Tensor files written by msprobe: `torch.save` `.pt` archives and `numpy.save` `.npy` files.
//!
//! [`read_tensor_file`] splits a file into the tensor itself ([`TensorData`]: dtype, shape and
//! contiguous little-endian bytes) and everything else needed to re-create the same bytes
//! ([`ContainerMeta`]). [`write_tensor_file`] re-creates the file. For files torch 2.x or
//! numpy wrote from a contiguous tensor, the result is byte-identical to the original; the
//! caller checks that and keeps the original bytes when it is not.

mod npy;
mod pickle;
mod pickler;
mod pt;
mod zip;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

/// One tensor as probelake stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorData {
    /// dtype as msprobe's dump.json writes it for torch: "torch.float32", "torch.bfloat16",
    /// "torch.float16", "torch.float64", "torch.int8/16/32/64", "torch.uint8", "torch.bool",
    /// "torch.complex64", "torch.complex128", the float8 types and "torch.float4_e2m1fn_x2";
    /// for .npy files the numpy name ("float32", "int64", "bool", ...).
    pub dtype: String,
    /// Dimensions; empty for a 0-dim tensor.
    pub shape: Vec<i64>,
    /// Contiguous (C order) little-endian element bytes.
    pub data: Vec<u8>,
}

/// The kind of file a tensor came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Container {
    /// A `torch.save` zip archive holding one tensor.
    Pt,
    /// A `numpy.save` file.
    Npy,
}

/// Everything beyond [`TensorData`] needed to re-create the same file bytes.
///
/// Stored by the caller as a compact JSON string ([`ContainerMeta::to_json`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerMeta {
    /// Which container format.
    pub container: Container,
    /// `.pt` details; present when `container` is [`Container::Pt`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pt: Option<PtMeta>,
    /// `.npy` details; present when `container` is [`Container::Npy`] and the tensor came
    /// from a file (absent: write the header numpy would write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npy: Option<NpyMeta>,
}

/// Layout of a `torch.save` archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtMeta {
    /// Top-level folder inside the zip (torch uses the file name without extension).
    pub archive: String,
    /// Records in archive order, names relative to `archive`.
    pub records: Vec<PtRecord>,
    /// Alignment of record data (torch: 64).
    pub alignment: u64,
    /// Whether the archive ends with a zip64 end-of-central-directory record (torch ≥ 1.x).
    pub zip64_eocd: bool,
    /// Storage key: the storage record is `data/<key>`.
    pub storage_key: String,
    /// Device string recorded in the pickle ("cpu", "npu:0", "cuda:0").
    pub device: String,
    /// The tensor's `requires_grad` flag.
    pub requires_grad: bool,
    /// The original view, when the saved tensor was not a plain contiguous tensor over its
    /// whole storage (informational; a re-encoding always writes a contiguous tensor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<PtView>,
}

/// A non-trivial tensor view over its storage, as found in the original pickle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtView {
    /// Storage offset in elements.
    pub storage_offset: u64,
    /// Number of elements (bytes for untyped storages) of the storage.
    pub storage_numel: u64,
    /// Strides in elements.
    pub stride: Vec<i64>,
}

/// One record of a `.pt` archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtRecord {
    /// Name relative to the archive folder, e.g. `data.pkl`, `data/0`, `version`.
    pub name: String,
    /// Where the record's bytes come from.
    pub content: RecordContent,
}

/// Source of a record's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordContent {
    /// The tensor pickle, regenerated from the tensor and [`PtMeta`].
    Pickle,
    /// The tensor's storage bytes.
    Storage,
    /// Literal UTF-8 text (e.g. `.format_version`, `byteorder`, `version`).
    Text(String),
    /// Literal bytes that are not UTF-8.
    Bytes(Vec<u8>),
}

/// Header of a `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpyMeta {
    /// Format version `(major, minor)`.
    pub version: (u8, u8),
    /// The exact header text (dict literal, padding and the final `\n`).
    pub header: String,
}

impl ContainerMeta {
    /// Metadata for a `.pt` archive.
    pub fn pt(pt: PtMeta) -> Self {
        ContainerMeta { container: Container::Pt, pt: Some(pt), npy: None }
    }

    /// Metadata for a `.npy` file.
    pub fn npy(npy: NpyMeta) -> Self {
        ContainerMeta { container: Container::Npy, pt: None, npy: Some(npy) }
    }

    /// Compact JSON form.
    pub fn to_json(&self) -> Result<String, TensorFileError> {
        Ok(serde_json::to_string(self)?)
    }

    /// Parses the form [`ContainerMeta::to_json`] writes.
    pub fn from_json(json: &str) -> Result<Self, TensorFileError> {
        Ok(serde_json::from_str(json)?)
    }
}

/// Errors reading or writing tensor files.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    /// Neither extension nor magic bytes identify the file.
    #[error("{name:?}: not a tensor file (neither a .pt zip archive nor a .npy file)")]
    UnknownFormat {
        /// The file name given.
        name: String,
    },
    /// Malformed zip structure.
    #[error("zip: {msg} (at byte offset {offset})")]
    Zip {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// A zip entry is unusable.
    #[error("zip entry {entry:?}: {msg}")]
    ZipEntry {
        /// Entry name.
        entry: String,
        /// What is wrong.
        msg: String,
    },
    /// Malformed or unsupported pickle.
    #[error("data.pkl: {msg} (at byte offset {offset} of the pickle)")]
    Pickle {
        /// Byte offset inside `data.pkl`.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// The pickle is valid but does not describe a supported tensor.
    #[error("data.pkl: {0}")]
    Torch(String),
    /// Malformed `.npy` file.
    #[error("npy: {msg} (at byte offset {offset})")]
    Npy {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// dtype not supported by the container.
    #[error("unsupported dtype {0:?}")]
    UnsupportedDtype(String),
    /// Tensor data inconsistent with dtype and shape.
    #[error("tensor data: {0}")]
    Data(String),
    /// Metadata inconsistent or unusable.
    #[error("container metadata: {0}")]
    Meta(String),
    /// Metadata JSON could not be (de)serialised.
    #[error("container metadata JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Bytes per element of a dtype (torch or numpy spelling), or `None` if unknown.
pub fn dtype_itemsize(dtype: &str) -> Option<usize> {
    Some(match dtype.strip_prefix("torch.").unwrap_or(dtype) {
        "bool" | "int8" | "uint8" | "float8_e4m3fn" | "float8_e5m2" | "float8_e4m3fnuz" | "float8_e5m2fnuz" => 1,
        // float4_e2m1fn_x2 packs two 4-bit elements in a byte; torch's shape counts bytes.
        "float8_e8m0fnu" | "float4_e2m1fn_x2" => 1,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        "float32" | "int32" | "uint32" => 4,
        "float64" | "int64" | "uint64" | "complex64" => 8,
        "complex128" => 16,
        _ => return None,
    })
}

/// Parses a `.pt` or `.npy` file, chosen by the name's extension or else by magic bytes.
pub fn read_tensor_file(name: &str, bytes: &[u8]) -> Result<(TensorData, ContainerMeta), TensorFileError> {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".npy") || bytes.starts_with(b"\x93NUMPY") {
        npy::read(bytes)
    } else if lower.ends_with(".pt") || lower.ends_with(".pth") || bytes.starts_with(b"PK\x03\x04") {
        pt::read(bytes)
    } else {
        Err(TensorFileError::UnknownFormat { name: name.to_string() })
    }
}

/// Checks that `data.len() == numel * itemsize`.
fn check_data(t: &TensorData) -> Result<(), TensorFileError> {
    let item = dtype_itemsize(&t.dtype).ok_or_else(|| TensorFileError::UnsupportedDtype(t.dtype.clone()))?;
    let mut numel: u64 = 1;
    for &d in &t.shape {
        let d = u64::try_from(d)
            .map_err(|_| TensorFileError::Data(format!("negative dimension in shape {:?}", t.shape)))?;
        numel = numel.checked_mul(d).ok_or_else(|| TensorFileError::Data(format!("shape {:?} overflows", t.shape)))?;
    }
    let want = numel.checked_mul(item as u64);
    if want != Some(t.data.len() as u64) {
        return Err(TensorFileError::Data(format!(
            "{} bytes do not match shape {:?} of {} ({} bytes per element)",
            t.data.len(),
            t.shape,
            t.dtype,
            item
        )));
    }
    Ok(())
}

/// Re-creates the file bytes of a tensor.
pub fn write_tensor_file(data: &TensorData, meta: &ContainerMeta) -> Result<Vec<u8>, TensorFileError> {
    check_data(data)?;
    match meta.container {
        Container::Npy => npy::write(data, meta.npy.as_ref()),
        Container::Pt => {
            let pt =
                meta.pt.as_ref().ok_or_else(|| TensorFileError::Meta("container is pt but no pt metadata".into()))?;
            let storage = format!("data/{}", pt.storage_key);
            let ok =
                |c: &RecordContent, n: &str| pt.records.iter().filter(|r| &r.content == c && r.name == n).count() == 1;
            if !ok(&RecordContent::Pickle, "data.pkl") || !ok(&RecordContent::Storage, &storage) {
                return Err(TensorFileError::Meta(format!(
                    "pt records must hold one pickle record data.pkl and one storage record {storage}"
                )));
            }
            pt::write(data, pt)
        }
    }
}

/// Default metadata for a tensor that did not come from a file (e.g. the async writer): a
/// `.pt` exactly as torch 2.x `torch.save(t, f"{stem}.pt")` would write it (cpu tensor,
/// `requires_grad` false). The serialization id, random in torch, is derived from `stem`.
pub fn default_pt_meta(stem: &str) -> ContainerMeta {
    // FNV-1a, twice with different seeds, for a deterministic 40-digit id.
    let fnv = |seed: u64| stem.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let id =
        format!("{:020}{:020}", fnv(0xcbf2_9ce4_8422_2325) % 10u64.pow(19), fnv(0x8422_2325_cbf2_9ce4) % 10u64.pow(19));
    let text = |name: &str, s: &str| PtRecord { name: name.to_string(), content: RecordContent::Text(s.to_string()) };
    ContainerMeta::pt(PtMeta {
        archive: stem.to_string(),
        records: vec![
            PtRecord { name: "data.pkl".into(), content: RecordContent::Pickle },
            text(".format_version", "1"),
            text(".storage_alignment", "64"),
            text("byteorder", "little"),
            PtRecord { name: "data/0".into(), content: RecordContent::Storage },
            text("version", "3\n"),
            text(".data/serialization_id", &id),
        ],
        alignment: 64,
        zip64_eocd: true,
        storage_key: "0".into(),
        device: "cpu".into(),
        requires_grad: false,
        view: None,
    })
}
