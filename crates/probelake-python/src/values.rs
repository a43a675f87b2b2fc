//! Python objects, nested as msprobe nests them, turned into the writer's `Value`s.
//!
//! Tensors are snapshotted here, on the caller's thread: `record` promises the statistics of the
//! values at the moment it was called, and the caller may change a tensor in place right after
//! (`y.relu_()`). A contiguous CPU tensor is copied (one `memcpy`); a non-contiguous one is made
//! contiguous by torch, which is already a private copy the writer then keeps. Either copy is
//! made inside the writer's `record`, once its staging budget has admitted the bytes (see
//! `TensorSource::deferred`), so memory stays within the budget. A device tensor
//! is staged by `probelake._device.stage`: a non-blocking copy into pinned host memory enqueued
//! on the current stream, waited for on a writer thread. Where the unit needs no bytes (task
//! `statistics`, summary mode `statistics`), a device tensor is not copied at all: its
//! statistics are computed on its device by `probelake._device_stats` and only the four values
//! reach the host, waited for on a writer thread.

use std::cell::Cell;

use probelake_writer::device::{CopyCompletion, DeviceError, DeviceSummary, DeviceTensor, PinnedBuffer};
use probelake_writer::stats::{Stat, Summary};
use probelake_writer::{DType, Tensor, TensorSource, Value};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySlice, PyString, PyTuple, PyType};

use crate::error::{Error, Kind, Result};

/// Containers nested deeper than this are refused (a cycle, or not what msprobe records).
const MAX_DEPTH: usize = 64;

/// torch's types and dtypes, looked up once torch is imported by the caller (never by us).
struct Torch {
    tensor: Py<PyType>,
    size: Py<PyType>,
    dtype: Py<PyType>,
    device: Py<PyType>,
    /// `torch.strided`, the only layout recorded.
    strided: Py<PyAny>,
    dtypes: Vec<(Py<PyAny>, DType)>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();
static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn torch(py: Python<'_>) -> Option<&Torch> {
    if let Some(t) = TORCH.get(py) {
        return Some(t);
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let torch = modules.get_item("torch").ok()?;
    let ty = |name: &str| torch.getattr(name).ok()?.cast_into::<PyType>().ok().map(Bound::unbind);
    let mut dtypes = Vec::new();
    for d in DType::ALL {
        let bare = d.torch_name().trim_start_matches("torch.");
        if let Ok(obj) = torch.getattr(bare) {
            dtypes.push((obj.unbind(), d));
        }
    }
    let strided = torch.getattr("strided").ok()?.unbind();
    let found =
        Torch { tensor: ty("Tensor")?, size: ty("Size")?, dtype: ty("dtype")?, device: ty("device")?, strided, dtypes };
    Some(TORCH.get_or_init(py, || found))
}

fn ndarray(py: Python<'_>) -> Option<&Bound<'_, PyType>> {
    if let Some(t) = NDARRAY.get(py) {
        return Some(t.bind(py));
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let numpy = modules.get_item("numpy").ok()?;
    let ty = numpy.getattr("ndarray").ok()?.cast_into::<PyType>().ok()?.unbind();
    Some(NDARRAY.get_or_init(py, || ty).bind(py))
}

/// Converts the values of one entry.
pub struct Converter<'a, 'py> {
    py: Python<'py>,
    /// The entry, for messages.
    pub entry: &'a str,
    /// `probelake._device.stage`-like callable that CPU tensors go through too (tests of the
    /// device path without a device).
    pub stage_cpu: Option<&'a Bound<'py, PyAny>>,
    /// Whether the unit needs tensors' statistics only (no bytes): device tensors are then
    /// summarized on their device.
    pub statistics_only: bool,
    /// CPU tensors take the device path too (tests of it without a device).
    pub cpu_on_device: bool,
    /// Whether a tensor of this entry was summarized on its device (its buffer is sealed
    /// once the entry is converted).
    summarized: Cell<bool>,
}

impl<'a, 'py> Converter<'a, 'py> {
    /// A converter for the entry `entry`.
    pub fn new(py: Python<'py>, entry: &'a str, stage_cpu: Option<&'a Bound<'py, PyAny>>) -> Self {
        Converter { py, entry, stage_cpu, statistics_only: false, cpu_on_device: false, summarized: Cell::new(false) }
    }

    /// Enqueues the host copies of the statistics this entry's tensors left on their devices,
    /// so that the writer's threads find them on their way; call it once the entry is converted.
    pub fn finish(&self) -> Result<()> {
        if self.summarized.get() {
            self.py
                .import("probelake._device_stats")
                .and_then(|m| m.call_method0("seal"))
                .map_err(|e| Error::new(Kind::Internal, format!("entry `{}`: {e}", self.entry)))?;
        }
        Ok(())
    }

    fn invalid(&self, path: &str, message: impl std::fmt::Display) -> Error {
        Error::argument(format!("entry `{}`: {path}: {message}", self.entry))
    }

    /// One value; `path` names it in messages (`input_args[0][1]`).
    pub fn value(&self, obj: &Bound<'py, PyAny>, path: &str, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.invalid(path, format!("nested more than {MAX_DEPTH} levels deep")));
        }
        if obj.is_none() {
            return Ok(Value::null());
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            return Ok(Value::bool(b.is_true()));
        }
        if let Ok(i) = obj.cast::<PyInt>() {
            let v: i64 = i.extract().map_err(|_| self.invalid(path, "int out of the 64-bit range"))?;
            return Ok(Value::int(v));
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return Ok(Value::float(f.value()));
        }
        if let Ok(s) = obj.cast::<PyString>() {
            let s = s.to_str().map_err(|_| self.invalid(path, "str is not valid UTF-8"))?;
            return Ok(Value::str(s));
        }
        if let Some(torch) = torch(self.py) {
            if obj.is_instance(torch.tensor.bind(self.py)).unwrap_or(false) {
                return self.torch_tensor(torch, obj, path).map(Value::tensor);
            }
            if obj.is_instance(torch.size.bind(self.py)).unwrap_or(false) {
                let dims: Vec<i64> = obj.extract().map_err(|_| self.invalid(path, "torch.Size of non-ints"))?;
                return Ok(Value::scalar("torch.Size", json_ints(&dims)));
            }
            if obj.is_instance(torch.dtype.bind(self.py)).unwrap_or(false) {
                let name = obj.str().map_err(|e| self.invalid(path, e))?.to_string();
                return Ok(Value::scalar("torch.dtype", json_str(&name)));
            }
            if obj.is_instance(torch.device.bind(self.py)).unwrap_or(false) {
                let name = obj.str().map_err(|e| self.invalid(path, e))?.to_string();
                return Ok(Value::scalar("torch.device", json_str(&name)));
            }
        }
        if let Some(nd) = ndarray(self.py) {
            if obj.is_instance(nd).unwrap_or(false) {
                return self.numpy_array(obj, path).map(Value::tensor);
            }
        }
        if let Ok(list) = obj.cast::<PyList>() {
            return self.items(list.iter(), path, depth);
        }
        if let Ok(tuple) = obj.cast::<PyTuple>() {
            return self.items(tuple.iter(), path, depth);
        }
        if let Ok(dict) = obj.cast::<PyDict>() {
            return self.map(dict, path, depth);
        }
        if let Ok(slice) = obj.cast::<PySlice>() {
            let part = |name: &str| -> Result<String> {
                let v = slice.getattr(name).map_err(|e| self.invalid(path, e))?;
                if v.is_none() {
                    return Ok("null".into());
                }
                let i: i64 = v.extract().map_err(|_| self.invalid(path, "slice bounds must be ints or None"))?;
                Ok(i.to_string())
            };
            return Ok(Value::scalar("slice", format!("[{}, {}, {}]", part("start")?, part("stop")?, part("step")?)));
        }
        if obj.is(self.py.Ellipsis()) {
            return Ok(Value::scalar("ellipsis", "\"...\""));
        }
        let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        Err(Error::new(
            Kind::Type,
            format!(
                "entry `{}`: {path}: cannot record a value of type {ty}; record tensors, numpy arrays, None, bool, \
                 int, float, str, torch.dtype, torch.Size, torch.device, slices, lists, tuples and dicts",
                self.entry
            ),
        ))
    }

    fn items<I: Iterator<Item = Bound<'py, PyAny>>>(&self, items: I, path: &str, depth: usize) -> Result<Value> {
        let mut out = Vec::new();
        for (i, item) in items.enumerate() {
            out.push(self.value(&item, &format!("{path}[{i}]"), depth + 1)?);
        }
        Ok(Value::List(out))
    }

    /// A dict's entries in insertion order; keys must be strings.
    pub fn map(&self, dict: &Bound<'py, PyDict>, path: &str, depth: usize) -> Result<Value> {
        let mut out = Vec::with_capacity(dict.len());
        for (k, v) in dict.iter() {
            let key: String = k.extract().map_err(|_| self.invalid(path, "dict keys must be str"))?;
            let value = self.value(&v, &format!("{path}[{key:?}]"), depth + 1)?;
            out.push((key, value));
        }
        Ok(Value::Map(out))
    }

    fn torch_tensor(&self, torch: &Torch, t: &Bound<'py, PyAny>, path: &str) -> Result<Tensor> {
        let py = self.py;
        let err = |e: PyErr| self.invalid(path, e);
        let dtype_obj = t.getattr("dtype").map_err(err)?;
        let Some(dtype) = torch.dtypes.iter().find(|(o, _)| o.bind(py).is(&dtype_obj)).map(|(_, d)| *d) else {
            let name = dtype_obj.str().map(|s| s.to_string()).unwrap_or_default();
            return Err(self.invalid(
                path,
                format!(
                    "tensors of dtype {name} cannot be recorded yet; the writer takes float64, float32, float16, \
                     bfloat16, int8, int16, int32, int64, uint8, bool, complex64, complex128, the float8 types and \
                     float4_e2m1fn_x2"
                ),
            ));
        };
        // Attributes that make no new Python objects where they can: `record` runs them for
        // every tensor on the caller's thread.
        let layout = t.getattr("layout").map_err(err)?;
        if !layout.is(torch.strided.bind(py)) {
            let layout = layout.str().map_err(err)?;
            return Err(self.invalid(path, format!("{layout} tensors cannot be recorded; call .to_dense() first")));
        }
        let size = t.getattr("shape").map_err(err)?;
        let size = size.cast::<PyTuple>().map_err(|e| self.invalid(path, e))?;
        let mut shape = Vec::with_capacity(size.len());
        for d in size.iter() {
            shape.push(d.extract::<i64>().map_err(err)?);
        }
        let requires_grad = t.getattr("requires_grad").map_err(err)?.is_truthy().map_err(err)?;
        let on_cpu = t.getattr("is_cpu").map_err(err)?.is_truthy().map_err(err)?;
        let on_device = !on_cpu || self.cpu_on_device;
        if on_device && self.statistics_only && device_statistics(dtype) && shape.iter().all(|&d| d > 0) {
            let row = self
                .py
                .import("probelake._device_stats")
                .and_then(|m| m.call_method1("summarize", (t,)))
                .map_err(err)?;
            self.summarized.set(true);
            let source = TensorSource::summarized(DeviceRow { row: row.unbind() });
            return Ok(Tensor::new(dtype, shape, source).requires_grad(requires_grad));
        }
        let source = if on_cpu && self.stage_cpu.is_none() && !self.cpu_on_device {
            // Conjugate and negative views keep the bit in metadata, not in the bytes.
            let t = if matches!(dtype, DType::Complex64 | DType::Complex128) {
                t.call_method0("resolve_conj").and_then(|t| t.call_method0("resolve_neg")).map_err(err)?
            } else {
                t.clone()
            };
            self.cpu_tensor(&t, dtype, &shape, path)?
        } else {
            self.staged(t, dtype, &shape, path)?
        };
        Ok(Tensor::new(dtype, shape, source).requires_grad(requires_grad))
    }

    fn cpu_tensor(&self, t: &Bound<'py, PyAny>, dtype: DType, shape: &[i64], path: &str) -> Result<TensorSource> {
        let err = |e: PyErr| self.invalid(path, e);
        let len = byte_len(dtype, shape).ok_or_else(|| self.invalid(path, "shape too large"))?;
        let contiguous: bool = t.call_method0("is_contiguous").and_then(|c| c.extract()).map_err(err)?;
        if !contiguous {
            return Ok(made_contiguous(t.clone().unbind(), "contiguous", len));
        }
        let ptr: usize = t.call_method0("data_ptr").and_then(|p| p.extract()).map_err(err)?;
        Ok(snapshot(t.clone().unbind(), ptr, len))
    }

    fn staged(&self, t: &Bound<'py, PyAny>, dtype: DType, shape: &[i64], path: &str) -> Result<TensorSource> {
        let err = |e: PyErr| self.invalid(path, e);
        let len = byte_len(dtype, shape).ok_or_else(|| self.invalid(path, "shape too large"))?;
        let stage = match self.stage_cpu {
            Some(stage) => stage.clone(),
            None => self.py.import("probelake._device").and_then(|m| m.getattr("stage")).map_err(err)?,
        };
        let (stage, tensor, path) = (stage.unbind(), t.clone().unbind(), path.to_owned());
        // Staged once the budget has admitted the tensor, so that torch's pinned copy, like
        // every other snapshot, exists only within the budget.
        Ok(TensorSource::deferred(len, move || {
            Python::attach(|py| -> PyResult<TensorSource> {
                let staged = stage.bind(py).call1((tensor.bind(py),))?;
                let (host, waiter): (Bound<'_, PyAny>, Bound<'_, PyAny>) = staged.extract()?;
                let ptr: usize = host.call_method0("data_ptr")?.extract()?;
                Ok(TensorSource::device(StagedTensor { _host: host.unbind(), waiter: waiter.unbind(), ptr, len }))
            })
            .map_err(|e| format!("{path}: {e}"))
        }))
    }

    fn numpy_array(&self, a: &Bound<'py, PyAny>, path: &str) -> Result<Tensor> {
        let err = |e: PyErr| self.invalid(path, e);
        let code: String = a.getattr("dtype").and_then(|d| d.getattr("str")).and_then(|s| s.extract()).map_err(err)?;
        let (order, kind) = code.split_at(1.min(code.len()));
        let dtype = match kind {
            "f8" => DType::F64,
            "f4" => DType::F32,
            "f2" => DType::F16,
            "i1" => DType::I8,
            "i2" => DType::I16,
            "i4" => DType::I32,
            "i8" => DType::I64,
            "u1" => DType::U8,
            "b1" => DType::Bool,
            "c8" => DType::Complex64,
            "c16" => DType::Complex128,
            _ => return Err(self.invalid(path, format!("numpy arrays of dtype {code} cannot be recorded"))),
        };
        if order == ">" {
            return Err(self.invalid(path, "big-endian numpy arrays cannot be recorded; use .astype('<…') first"));
        }
        let shape: Vec<i64> = a.getattr("shape").and_then(|s| s.extract()).map_err(err)?;
        let len = byte_len(dtype, &shape).ok_or_else(|| self.invalid(path, "shape too large"))?;
        let contiguous: bool =
            a.getattr("flags").and_then(|f| f.getattr("c_contiguous")).and_then(|c| c.extract()).map_err(err)?;
        let data = |arr: &Bound<'py, PyAny>| -> Result<usize> {
            arr.getattr("ctypes").and_then(|c| c.getattr("data")).and_then(|p| p.extract()).map_err(err)
        };
        let source = if contiguous {
            snapshot(a.clone().unbind(), data(a)?, len)
        } else {
            made_contiguous(a.clone().unbind(), "ascontiguousarray", len)
        };
        Ok(Tensor::numpy(dtype, shape, source))
    }
}

fn byte_len(dtype: DType, shape: &[i64]) -> Option<usize> {
    let mut n: usize = dtype.itemsize();
    for &d in shape {
        n = n.checked_mul(usize::try_from(d).ok()?)?;
    }
    Some(n)
}

/// The `len` bytes at `ptr` (the memory of `owner`, a contiguous CPU tensor or array), copied
/// by the writer's `record` once its staging budget has admitted them, so that the copy is
/// counted in the budget: `record` runs with the GIL released and `owner` keeps the memory
/// alive until then (the caller may change it in place only after `record` returns).
fn snapshot(owner: Py<PyAny>, ptr: usize, len: usize) -> TensorSource {
    TensorSource::deferred(len, move || {
        let bytes = if len == 0 || ptr == 0 {
            Vec::new()
        } else {
            // SAFETY: `ptr` is the data pointer of the contiguous tensor or array `owner` of
            // `len` bytes (numel × itemsize), alive while `owner` is, during `record`.
            unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }.to_vec()
        };
        drop(owner);
        Ok(TensorSource::host(bytes))
    })
}

/// A contiguous copy of the non-contiguous `owner` made by torch or numpy (`method`:
/// `contiguous`, or numpy's `ascontiguousarray`) once the writer's budget has admitted its `len`
/// bytes; the writer keeps that private copy rather than copying it again.
fn made_contiguous(owner: Py<PyAny>, method: &'static str, len: usize) -> TensorSource {
    TensorSource::deferred(len, move || {
        Python::attach(|py| -> PyResult<TensorSource> {
            let owner = owner.bind(py);
            let (owned, ptr) = if method == "contiguous" {
                let owned = owner.call_method0("contiguous")?;
                let ptr: usize = owned.call_method0("data_ptr")?.extract()?;
                (owned, ptr)
            } else {
                let owned = py.import("numpy")?.call_method1(method, (owner,))?;
                let ptr: usize = owned.getattr("ctypes")?.getattr("data")?.extract()?;
                (owned, ptr)
            };
            Ok(TensorSource::shared(PyOwned { _owner: owned.unbind(), ptr, len }))
        })
        .map_err(|e: PyErr| format!("making a contiguous copy: {e}"))
    })
}

/// Bytes owned by a Python object (a private contiguous copy), released when the writer is done.
struct PyOwned {
    _owner: Py<PyAny>,
    ptr: usize,
    len: usize,
}

impl AsRef<[u8]> for PyOwned {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 || self.ptr == 0 {
            return &[];
        }
        // SAFETY: `_owner` is a contiguous tensor or array of `len` bytes at `ptr` that only
        // the writer references (made by `.contiguous()` / `ascontiguousarray` for it), kept
        // alive as long as this struct.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

/// A device tensor whose copy into pinned host memory (`host`) was enqueued by
/// `probelake._device.stage`; `waiter.synchronize()` returns once it is done.
struct StagedTensor {
    _host: Py<PyAny>,
    waiter: Py<PyAny>,
    ptr: usize,
    len: usize,
}

impl DeviceTensor for StagedTensor {
    fn len(&self) -> usize {
        self.len
    }

    fn start_copy(self: Box<Self>, dst: PinnedBuffer) -> std::result::Result<Box<dyn CopyCompletion>, DeviceError> {
        // The copy was enqueued before `record`; the writer's buffer is filled after it ends.
        Ok(Box::new(StagedCopy { tensor: *self, dst }))
    }
}

struct StagedCopy {
    tensor: StagedTensor,
    dst: PinnedBuffer,
}

impl CopyCompletion for StagedCopy {
    fn wait(self: Box<Self>) -> std::result::Result<PinnedBuffer, DeviceError> {
        let StagedCopy { tensor, mut dst } = *self;
        Python::attach(|py| {
            tensor.waiter.bind(py).call_method0("synchronize").map_err(|e| DeviceError(e.to_string()))?;
            let n = tensor.len.min(dst.len());
            if n > 0 && tensor.ptr != 0 {
                // SAFETY: `host` is a contiguous CPU tensor of `len` bytes at `ptr`, kept alive
                // by `tensor._host`, and its copy from the device is complete (synchronized).
                let src = unsafe { std::slice::from_raw_parts(tensor.ptr as *const u8, n) };
                dst.as_mut_slice()[..n].copy_from_slice(src);
            }
            drop(tensor);
            Ok(dst)
        })
    }
}

/// The dtypes `probelake._device_stats` summarizes on a device: those with statistics, but
/// complex (whose magnitudes msprobe reduces on the host).
fn device_statistics(dtype: DType) -> bool {
    dtype.has_statistics() && !matches!(dtype, DType::Complex64 | DType::Complex128)
}

/// A `probelake._device_stats.Row`: its `values()` waits for the device's copy and gives Max,
/// Min, Mean and Norm as `.item()` would (bool, int, float or None).
struct DeviceRow {
    row: Py<PyAny>,
}

impl DeviceSummary for DeviceRow {
    fn wait(self: Box<Self>) -> std::result::Result<Summary, DeviceError> {
        Python::attach(|py| -> PyResult<Summary> {
            let values = self.row.bind(py).call_method0("values")?;
            let [max, min, mean, norm] = [0, 1, 2, 3].map(|i| values.get_item(i).and_then(|v| stat(&v)));
            Ok(Summary { max: max?, min: min?, mean: mean?, norm: norm? })
        })
        .map_err(|e| DeviceError(e.to_string()))
    }
}

fn stat(value: &Bound<'_, PyAny>) -> PyResult<Stat> {
    if value.is_none() {
        Ok(Stat::Null)
    } else if let Ok(b) = value.cast::<PyBool>() {
        Ok(Stat::Bool(b.is_true()))
    } else if let Ok(i) = value.cast::<PyInt>() {
        Ok(Stat::Int(i.extract()?))
    } else {
        Ok(Stat::Float(value.extract()?))
    }
}

fn json_ints(values: &[i64]) -> String {
    let parts: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
