//! What is recorded: an msprobe entry — a name and its sections of values — built without JSON.
//!
//! ```
//! use probelake_writer::{DType, Entry, Tensor, TensorSource, Value};
//! let x = Tensor::new(DType::F32, [2, 2], TensorSource::host(vec![0u8; 16])).requires_grad(true);
//! let entry = Entry::new("Functional.relu.0.forward")
//!     .input_args([Value::tensor(x)])
//!     .input_kwargs([("inplace", Value::bool(false))])
//!     .output([Value::null()]);
//! assert_eq!(entry.name(), "Functional.relu.0.forward");
//! ```

use probelake_msprobe::json::{write_f64, write_str};

use crate::dtype::DType;
use crate::source::TensorSource;

/// One msprobe entry (`"Functional.linear.0.forward": {"input_args": [...], ...}`).
///
/// Sections keep the order they are added in, as msprobe's dicts do. In a forward or backward
/// entry the value slots are `input_args`, `input_kwargs`, `input`, `output` and `parameters`;
/// in a `parameters_grad` entry every section is a parameter name. Other sections (such as
/// the historical `is_recompute`) must hold [`Value::json`] literals.
#[derive(Debug)]
pub struct Entry {
    pub(crate) name: String,
    pub(crate) sections: Vec<(String, Value)>,
    pub(crate) stack: Option<Vec<String>>,
    pub(crate) parent: Option<Option<String>>,
}

impl Entry {
    /// An entry with no sections yet.
    pub fn new(name: impl Into<String>) -> Self {
        Entry { name: name.into(), sections: Vec::new(), stack: None, parent: None }
    }

    /// The entry name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Appends a section.
    pub fn section(mut self, name: impl Into<String>, value: Value) -> Self {
        self.sections.push((name.into(), value));
        self
    }

    /// `input_args`: positional arguments.
    pub fn input_args(self, values: impl IntoIterator<Item = Value>) -> Self {
        self.section("input_args", Value::list(values))
    }

    /// `input_kwargs`: keyword arguments, in call order.
    pub fn input_kwargs<K: Into<String>>(self, values: impl IntoIterator<Item = (K, Value)>) -> Self {
        self.section("input_kwargs", Value::map(values))
    }

    /// `output`: the return value as msprobe wraps it (a tuple's elements, or one element).
    pub fn output(self, values: impl IntoIterator<Item = Value>) -> Self {
        self.section("output", Value::list(values))
    }

    /// `input` of a backward entry: gradients w.r.t. the forward outputs.
    pub fn input(self, values: impl IntoIterator<Item = Value>) -> Self {
        self.section("input", Value::list(values))
    }

    /// `parameters` of a module entry: parameter short name → value.
    pub fn parameters<K: Into<String>>(self, values: impl IntoIterator<Item = (K, Value)>) -> Self {
        self.section("parameters", Value::map(values))
    }

    /// One gradient of a `parameters_grad` entry: `{param: [value]}`.
    pub fn grad(self, param: impl Into<String>, value: Value) -> Self {
        self.section(param, Value::List(vec![value]))
    }

    /// The entry's call stack for stack.json, innermost frame first
    /// (`File /x.py, line 3, in f, \n y = g(x)`). Entries with the same frames share a group.
    pub fn stack(mut self, frames: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.stack = Some(frames.into_iter().map(Into::into).collect());
        self
    }

    /// The entry's parent node for construct.json (`None`: a top-level node, written `null`).
    pub fn parent(mut self, parent: Option<&str>) -> Self {
        self.parent = Some(parent.map(str::to_string));
        self
    }
}

/// A value inside a section: a leaf (tensor, scalar, `null`) or a container of values.
#[derive(Debug)]
pub enum Value {
    /// `null` (a `None` argument or output).
    Null,
    /// A tensor.
    Tensor(Tensor),
    /// `{"type": kind, "value": value}` with `value` as compact JSON text.
    Scalar {
        /// msprobe's `type`: `int`, `float`, `bool`, `str`, `torch.dtype`, `torch.Size`, `slice`, …
        kind: String,
        /// The value as JSON (`3`, `1e-05`, `"mean"`, `[4, 2]`).
        value: String,
    },
    /// A list or tuple.
    List(Vec<Value>),
    /// A dict, namedtuple or dataclass, in key order.
    Map(Vec<(String, Value)>),
    /// A bare JSON number, string or boolean that is not a leaf (msprobe writes these outside
    /// value objects, e.g. `"is_recompute": false`).
    Json(String),
}

impl Value {
    /// `null`.
    pub fn null() -> Self {
        Value::Null
    }

    /// A tensor.
    pub fn tensor(t: Tensor) -> Self {
        Value::Tensor(t)
    }

    /// `{"type": "int", "value": v}`.
    pub fn int(v: i64) -> Self {
        Value::Scalar { kind: "int".into(), value: v.to_string() }
    }

    /// `{"type": "float", "value": v}` (written as Python's `repr`).
    pub fn float(v: f64) -> Self {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        Value::Scalar { kind: "float".into(), value: String::from_utf8_lossy(&out).into_owned() }
    }

    /// `{"type": "bool", "value": v}`.
    pub fn bool(v: bool) -> Self {
        Value::Scalar { kind: "bool".into(), value: v.to_string() }
    }

    /// `{"type": "str", "value": v}`.
    pub fn str(v: &str) -> Self {
        Value::Scalar { kind: "str".into(), value: json_string(v) }
    }

    /// `{"type": "torch.dtype", "value": "torch.float32"}`.
    pub fn dtype(d: DType) -> Self {
        Value::Scalar { kind: "torch.dtype".into(), value: json_string(d.torch_name()) }
    }

    /// `{"type": kind, "value": json}` for any other scalar; `json` is checked when recorded.
    pub fn scalar(kind: impl Into<String>, json: impl Into<String>) -> Self {
        Value::Scalar { kind: kind.into(), value: json.into() }
    }

    /// A list of values.
    pub fn list(values: impl IntoIterator<Item = Value>) -> Self {
        Value::List(values.into_iter().collect())
    }

    /// A map of values.
    pub fn map<K: Into<String>>(values: impl IntoIterator<Item = (K, Value)>) -> Self {
        Value::Map(values.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A bare JSON literal; checked when recorded.
    pub fn json(text: impl Into<String>) -> Self {
        Value::Json(text.into())
    }
}

fn json_string(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    write_str(&mut out, s);
    String::from_utf8_lossy(&out).into_owned()
}

/// A tensor value: dtype, shape and where its bytes are.
#[derive(Debug)]
pub struct Tensor {
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<i64>,
    pub(crate) requires_grad: Option<bool>,
    pub(crate) kind: Option<String>,
    /// A numpy array: msprobe's `numpy.ndarray` leaf (numpy's dtype name, numpy's statistics,
    /// no `requires_grad`, no md5).
    pub(crate) numpy: bool,
    pub(crate) source: TensorSource,
}

impl Tensor {
    /// A tensor of `dtype` and `shape` (`[]` for 0-dim) whose elements are `source`.
    pub fn new(dtype: DType, shape: impl Into<Vec<i64>>, source: TensorSource) -> Self {
        Tensor { dtype, shape: shape.into(), requires_grad: Some(false), kind: None, numpy: false, source }
    }

    /// A numpy array of `dtype` and `shape`, recorded as msprobe records one: `type`
    /// `numpy.ndarray`, `dtype` as numpy names it (`float32`), no `requires_grad`, and numpy's
    /// statistics (`np.max`, `np.min`, `np.mean`, `np.linalg.norm`: Mean and Norm of integer
    /// and bool arrays as float64, of float arrays in their own type), even in md5 and xor
    /// modes, where msprobe computes no checksum for an array. Complex arrays get no
    /// statistics.
    pub fn numpy(dtype: DType, shape: impl Into<Vec<i64>>, source: TensorSource) -> Self {
        Tensor {
            dtype,
            shape: shape.into(),
            requires_grad: None,
            kind: Some("numpy.ndarray".into()),
            numpy: true,
            source,
        }
    }

    /// `requires_grad` of the original tensor (default `false`).
    pub fn requires_grad(mut self, yes: bool) -> Self {
        self.requires_grad = Some(yes);
        self
    }

    /// Omits `requires_grad` (as MindSpore dumps do).
    pub fn without_requires_grad(mut self) -> Self {
        self.requires_grad = None;
        self
    }

    /// msprobe's `type` (default `torch.Tensor`), e.g. `torch.distributed.tensor.DTensor`.
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// Size of the bytes in hand.
    pub fn byte_len(&self) -> usize {
        self.source.len()
    }
}
