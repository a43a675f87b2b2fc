//! What `probelake.msprobe` needs from Rust: a dataset checked before training starts, and a
//! dump that msprobe held in memory committed as one unit.

use probelake_msprobe::{import_captured, CapturedDump};
use probelake_writer::checksum::crc32_hex;
use probelake_writer::stats::{summarize, Stat};
use probelake_writer::DType;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{Error, Result};
use crate::lake::{display, open_for_write, storage_options};
use crate::runtime::block_on;

/// Opens `uri` for writing and checks that it takes writes (creating the dataset if new).
#[pyfunction]
#[pyo3(signature = (uri, storage_options=None))]
pub fn check_dataset(py: Python<'_>, uri: String, storage_options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let storage = self::storage_options(storage_options)?;
    let lake = open_for_write(&uri, &storage)?;
    let result = block_on(py, async move { lake.check_takes_writes().await })?;
    result.map_err(|e| Error::from(e).context(format!("dataset {} does not take writes", display(&uri))))?;
    Ok(())
}

/// Commits one captured dump folder to `uri` as its unit, replacing it if present; `relayout`
/// as [`CapturedDump::relayout`]. Returns (step, stage, rank, entries, tensors).
#[pyfunction]
#[pyo3(signature = (uri, dump_path, dump, stack=None, construct=None, tensors=Vec::new(), relayout=None, storage_options=None))]
#[allow(clippy::too_many_arguments)]
pub fn commit_captured(
    py: Python<'_>,
    uri: String,
    dump_path: String,
    dump: Vec<u8>,
    stack: Option<Vec<u8>>,
    construct: Option<Vec<u8>>,
    tensors: Vec<(String, Vec<u8>)>,
    relayout: Option<u16>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(i64, String, i64, u64, u64)> {
    let storage = self::storage_options(storage_options)?;
    let lake = open_for_write(&uri, &storage)?;
    let captured = CapturedDump { dump_path, dump, stack, construct, tensors, relayout };
    let what = captured.dump_path.clone();
    let result: Result<_> = block_on(py, async move { import_captured(&lake, &captured).await })?
        .map_err(|e| Error::from(e).context(format!("committing msprobe's dump {what} to {}", display(&uri))));
    let record = result?;
    let unit = record.unit;
    Ok((unit.step, unit.stage, unit.rank, record.counts.entries, record.counts.tensors))
}

/// msprobe's Max, Min, Mean and Norm of the `nbytes` bytes at `ptr` (a contiguous CPU tensor
/// of torch dtype `dtype`, e.g. "torch.float32"), as `.item()` would give them: floats, ints
/// or bools, `None` where msprobe writes null; and with `crc32`, its `md5` field in md5 mode
/// (the CRC-32 of the bytes, 8 hex digits). `probelake.msprobe`'s fast mode calls it instead
/// of four torch reductions, four `.item()` syncs and a CRC on a thread pool.
///
/// # Safety (for the caller)
///
/// The tensor must stay alive and unchanged during the call: the Python caller holds it.
#[pyfunction]
#[pyo3(signature = (dtype, ptr, nbytes, zero_dim, crc32=false))]
pub fn tensor_summary(
    py: Python<'_>,
    dtype: &str,
    ptr: usize,
    nbytes: usize,
    zero_dim: bool,
    crc32: bool,
) -> PyResult<TensorSummary> {
    let Some(dtype) = DType::ALL.into_iter().find(|d| d.torch_name() == dtype) else {
        return Err(Error::argument(format!("{dtype}: not a dtype probelake summarizes")).into());
    };
    if ptr == 0 && nbytes > 0 {
        return Err(Error::argument("a null data pointer").into());
    }
    let data: &[u8] = if nbytes == 0 {
        &[]
    } else {
        // SAFETY: the caller passes a live contiguous tensor's data_ptr() and its byte size,
        // and holds the tensor for the duration of this call.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, nbytes) }
    };
    let (summary, crc) = py.detach(|| (summarize(dtype, data, zero_dim), crc32.then(|| crc32_hex(data))));
    let [max, min, mean, norm] = summary.as_array().map(|s| stat_object(py, s));
    Ok((max?, min?, mean?, norm?, crc))
}

/// Max, Min, Mean and Norm as Python numbers (or `None`), and the CRC-32 if asked for.
type TensorSummary = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Option<String>);

fn stat_object(py: Python<'_>, stat: Stat) -> PyResult<Py<PyAny>> {
    Ok(match stat {
        Stat::Null => py.None(),
        Stat::Float(v) => v.into_pyobject(py)?.into_any().unbind(),
        Stat::Int(v) => v.into_pyobject(py)?.into_any().unbind(),
        Stat::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
    })
}
