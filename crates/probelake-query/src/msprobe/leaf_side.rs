//! One side of a compare row straight from a leaf's typed `dump` columns.
//!
//! msprobe reads its cells from the leaf's JSON. A leaf stored without `raw` renders to a JSON
//! text fixed by its columns (`Leaf::render`), so for the common shapes of that text — a tensor
//! object, a scalar `{"type", "value"}` object — the cells follow from the columns directly,
//! as [`side_of`] would read them from the rendered text. Every other leaf (a kept `raw`, a JSON
//! `null`, a shape without a dtype) is rendered and read by [`side_of`] itself.

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::arrow::error::ArrowError;
use probelake_msprobe::json::{self, Arena, Layout};
use probelake_msprobe::Leaf;

use super::crc::crc32_hex;
use super::pyfmt::{py_bool, py_int_list, py_str_node, PyVal};
use super::rows::{data_name_cell, dtype_of, side_of, synthetic_dtype, synthetic_fields, synthetic_stats, Side};
use crate::error::QueryError;

/// The `dump` columns a leaf is rebuilt from, in the order the plan selects them (each with the
/// side's prefix, `t_` or `g_`).
pub const LEAF_COLUMNS: [&str; 12] =
    ["kind", "dtype", "shape", "max", "min", "mean", "norm", "requires_grad", "md5", "data_name", "value", "raw"];

/// One leaf's columns, borrowed from a batch.
#[derive(Debug, Clone, Default)]
pub struct LeafColumns<'a> {
    /// `kind`: msprobe's `type` (or `class_type`).
    pub kind: Option<&'a str>,
    /// `dtype`.
    pub dtype: Option<&'a str>,
    /// `shape`.
    pub shape: Option<Cow<'a, [i64]>>,
    /// `max`, `min`, `mean`, `norm`.
    pub stats: [Option<f64>; 4],
    /// `requires_grad`.
    pub requires_grad: Option<bool>,
    /// `md5`.
    pub md5: Option<&'a str>,
    /// `data_name`.
    pub data_name: Option<&'a str>,
    /// `value`: a scalar's JSON text.
    pub value: Option<&'a str>,
    /// `raw`: the leaf's JSON where the columns do not render it.
    pub raw: Option<&'a str>,
}

impl<'a> LeafColumns<'a> {
    /// The leaf as the format crate renders it.
    fn to_leaf(&self) -> Leaf<'_> {
        Leaf {
            kind: self.kind.map(Cow::Borrowed),
            dtype: self.dtype.map(Cow::Borrowed),
            shape: self.shape.as_deref().map(<[i64]>::to_vec),
            stats: self.stats,
            requires_grad: self.requires_grad,
            md5: self.md5.map(Cow::Borrowed),
            data_name: self.data_name.map(Cow::Borrowed),
            value: self.value.map(Cow::Borrowed),
            raw: self.raw.map(Cow::Borrowed),
        }
    }

    /// Appends the leaf's JSON text (one-line layout) to `buf`.
    pub fn render(&self, buf: &mut Vec<u8>) {
        self.to_leaf().render(buf, Layout { indent: None }, 0);
    }

    /// The leaf's JSON text (one-line layout), as `msprobe_leaf_json` gives it.
    fn json(&self) -> String {
        let mut buf = Vec::new();
        self.render(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// The dtype cell of row `item`, as `dtype_of(item, &self.json())` reads it, without
    /// rendering and parsing the JSON of a tensor or a plain scalar (most leaves).
    pub fn compare_dtype(&self, item: &str) -> Option<Cow<'a, str>> {
        if self.is_plain_tensor() {
            return self.dtype.map(Cow::Borrowed);
        }
        if self.is_plain_scalar() {
            if let Ok(value) = json::parse(self.value.unwrap_or("null").as_bytes(), &Arena::new()) {
                return Some(Cow::Owned(synthetic_dtype(item, self.kind.unwrap_or_default(), Some(&value))));
            }
        }
        dtype_of(item, &self.json()).map(Cow::Owned)
    }

    /// Whether the leaf has an `md5` field, as `side_of(_, _, &self.json()).has_md5` reads it:
    /// a leaf stored without `raw` is rendered with its `md5` column when it is a tensor (a
    /// dtype or a shape) and without one when it is a scalar (`type` and `value` only).
    pub fn has_md5(&self) -> bool {
        if self.raw.is_none() && self.kind.is_some() {
            return self.md5.is_some() && (self.dtype.is_some() || self.shape.is_some());
        }
        side_of("", "", &self.json()).has_md5
    }

    /// Whether the rendered text is a tensor object (`type`, `dtype`, …) made from the columns.
    fn is_plain_tensor(&self) -> bool {
        self.raw.is_none() && self.kind.is_some() && self.dtype.is_some()
    }

    /// Whether the rendered text is `{"type": kind, "value": value}` made from the columns.
    fn is_plain_scalar(&self) -> bool {
        self.raw.is_none() && self.kind.is_some() && self.dtype.is_none() && self.shape.is_none()
    }
}

/// The side of a row for leaf `leaf` of entry `name`, row name `item`: the same as
/// `side_of(item, name, msprobe_leaf_json(leaf))`, except that a plain scalar's md5 cell (the
/// CRC-32 of its value's text) is left out unless `md5` asks for it.
pub fn side_of_leaf<'a>(item: &'a str, name: &'a str, leaf: &LeafColumns<'a>, md5: bool) -> Side<'a> {
    if leaf.is_plain_tensor() {
        return tensor_side(item, name, leaf);
    }
    let scalar = with_scalar_value(leaf, |value| {
        let synthetic = synthetic_fields(item, leaf.kind.unwrap_or_default(), Some(value), None);
        let md5 = synthetic.md5.or_else(|| md5.then(|| crc32_hex(py_str_node(value).as_bytes())));
        Side {
            name: item,
            key: name,
            dtype: Some(synthetic.dtype.into()),
            shape: Some(synthetic.shape),
            requires_grad: None,
            stats: synthetic.stats,
            md5: md5.map(Into::into),
            data_name: data_name_cell(None),
            has_md5: false,
        }
    });
    scalar.unwrap_or_else(|| side_of(item, name, &leaf.json()))
}

/// What `read` makes of a plain scalar leaf's value, parsed; `None` for any other leaf (or a
/// value that does not parse), which is read from its rendered JSON instead.
fn with_scalar_value<R>(leaf: &LeafColumns<'_>, read: impl FnOnce(&json::Node<'_>) -> R) -> Option<R> {
    if !leaf.is_plain_scalar() {
        return None;
    }
    // The rendered text holds `"value": null` when there is no value.
    let arena = Arena::new();
    let value = json::parse(leaf.value.unwrap_or("null").as_bytes(), &arena).ok()?;
    Some(read(&value))
}

/// `crc32_hex(b"")`, the md5 cell of a tensor leaf without one.
const EMPTY_CRC: &str = "00000000";

/// A tensor leaf without `raw`: `Leaf::render` writes its statistics with `write_f64`, which
/// always marks a float (`.`/`e`) or writes `NaN`/`Infinity`, so they read back as Python
/// floats (NaN as msprobe's `Nan` string); in xor mode it writes `md5` instead of them.
fn tensor_side<'a>(item: &'a str, name: &'a str, leaf: &LeafColumns<'a>) -> Side<'a> {
    Side {
        name: item,
        key: name,
        dtype: leaf.dtype.map(Cow::Borrowed),
        shape: leaf.shape.as_deref().map(py_int_list),
        requires_grad: leaf.requires_grad.map(|b| Cow::Borrowed(py_bool(b))),
        stats: tensor_stats(leaf),
        // Without a `value` field, the md5 of `str(value)` is that of the empty string.
        md5: Some(Cow::Borrowed(leaf.md5.filter(|m| !m.is_empty()).unwrap_or(EMPTY_CRC))),
        data_name: data_name_cell(leaf.data_name),
        has_md5: leaf.md5.is_some(),
    }
}

/// The statistics of a tensor leaf without `raw` (see [`tensor_side`]).
fn tensor_stats(leaf: &LeafColumns<'_>) -> [PyVal; 4] {
    let xor = leaf.md5.is_some_and(|m| m.starts_with("0x"));
    leaf.stats.map(|s| match s {
        Some(_) if xor => PyVal::None,
        None => PyVal::None,
        Some(v) if v.is_nan() => PyVal::Str("Nan".into()),
        Some(v) => PyVal::Float(v),
    })
}

/// The statistics of `side_of_leaf(item, _, leaf)`, without the rest of the side for a tensor.
pub fn leaf_stats(item: &str, leaf: &LeafColumns<'_>) -> [PyVal; 4] {
    if leaf.is_plain_tensor() {
        return tensor_stats(leaf);
    }
    with_scalar_value(leaf, |value| synthetic_stats(item, leaf.kind.unwrap_or_default(), Some(value), None))
        .unwrap_or_else(|| side_of_leaf(item, "", leaf, false).stats)
}

/// One side's leaf columns of a plan batch, cast to the types they are read as.
pub struct LeafArrays {
    texts: [StringArray; 6],
    shape: ListArray,
    dims: Int64Array,
    stats: [Float64Array; 4],
    requires_grad: BooleanArray,
}

/// The text at row `i` of `a`, or None where it is null.
pub fn text_at(a: &StringArray, i: usize) -> Option<&str> {
    a.is_valid(i).then(|| a.value(i))
}

impl LeafArrays {
    /// The columns of the side whose names start with `prefix`.
    pub fn new(batch: &RecordBatch, prefix: &str) -> Result<Self, QueryError> {
        let mut columns = Vec::with_capacity(LEAF_COLUMNS.len());
        for c in LEAF_COLUMNS {
            let name = format!("{prefix}{c}");
            let column = batch.column_by_name(&name);
            columns
                .push(Arc::clone(column.ok_or_else(|| {
                    QueryError::Argument(format!("unexpected plan schema: column `{name}` missing"))
                })?));
        }
        let columns = <[ArrayRef; 12]>::try_from(columns)
            .map_err(|_| QueryError::Argument("unexpected plan schema: twelve leaf columns".into()))?;
        Self::from_columns(&columns).map_err(|e| QueryError::DataFusion(e.into()))
    }

    /// The leaf columns in [`LEAF_COLUMNS`] order, as a query hands them over (string views or
    /// dictionaries are cast to plain strings).
    pub fn from_columns(columns: &[ArrayRef; 12]) -> Result<Self, ArrowError> {
        let [kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw] = columns;
        // `cast` hands a column of the type asked for back as it is.
        let utf8 = |a| cast(a, &DataType::Utf8).map(|a| a.as_string::<i32>().clone());
        let f64s = |a| cast(a, &DataType::Float64).map(|a| a.as_primitive::<Float64Type>().clone());
        let shape = cast(shape, &DataType::List(Arc::new(Field::new("item", DataType::Int64, true))))?;
        let shape = shape.as_list::<i32>().clone();
        let dims = shape.values().as_primitive::<Int64Type>().clone();
        let requires_grad = cast(requires_grad, &DataType::Boolean)?.as_boolean().clone();
        Ok(LeafArrays {
            texts: [utf8(kind)?, utf8(dtype)?, utf8(md5)?, utf8(data_name)?, utf8(value)?, utf8(raw)?],
            shape,
            dims,
            stats: [f64s(max)?, f64s(min)?, f64s(mean)?, f64s(norm)?],
            requires_grad,
        })
    }

    /// How many rows the columns hold.
    pub fn len(&self) -> usize {
        self.requires_grad.len()
    }

    /// Whether the columns hold no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `self.get(i).has_md5()`, reading only the columns it needs for a leaf stored without
    /// `raw` (most leaves).
    pub fn has_md5(&self, i: usize) -> bool {
        let [kind, dtype, md5, _, _, raw] = &self.texts;
        if raw.is_null(i) && kind.is_valid(i) {
            return md5.is_valid(i) && (dtype.is_valid(i) || self.shape.is_valid(i));
        }
        self.get(i).has_md5()
    }

    /// Row `i`.
    pub fn get(&self, i: usize) -> LeafColumns<'_> {
        let [kind, dtype, md5, data_name, value, raw] = &self.texts;
        let shape = self.shape.is_valid(i).then(|| {
            let offsets = self.shape.value_offsets();
            let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
            if self.dims.null_count() == 0 {
                Cow::Borrowed(&self.dims.values()[start..end])
            } else {
                // As `msprobe_leaf_json` reads a null dimension.
                Cow::Owned((start..end).map(|j| if self.dims.is_valid(j) { self.dims.value(j) } else { 0 }).collect())
            }
        });
        let rg = &self.requires_grad;
        LeafColumns {
            kind: text_at(kind, i),
            dtype: text_at(dtype, i),
            shape,
            stats: self.stats.each_ref().map(|a| a.is_valid(i).then(|| a.value(i))),
            requires_grad: rg.is_valid(i).then(|| rg.value(i)),
            md5: text_at(md5, i),
            data_name: text_at(data_name, i),
            value: text_at(value, i),
            raw: text_at(raw, i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fast path must give what `side_of` reads from the rendered JSON, and so must the
    /// dtype the plan joins on (`dtype_of`).
    fn same_as_json(item: &str, name: &str, leaf: LeafColumns<'_>) {
        let fast = side_of_leaf(item, name, &leaf, true);
        let slow = side_of(item, name, &leaf.json());
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{}", leaf.json());
        // Without the md5 cell, a side differs from the JSON's in that cell alone.
        let lean = side_of_leaf(item, name, &leaf, false);
        assert!(lean.md5.is_none() || lean.md5 == slow.md5, "{}", leaf.json());
        assert_eq!(format!("{:?}", Side { md5: slow.md5.clone(), ..lean }), format!("{slow:?}"), "{}", leaf.json());
        assert_eq!(dtype_of(item, &leaf.json()).as_deref(), slow.dtype.as_deref(), "{}", leaf.json());
        assert_eq!(leaf.compare_dtype(item).as_deref(), slow.dtype.as_deref(), "{}", leaf.json());
        assert_eq!(leaf.has_md5(), slow.has_md5, "{}", leaf.json());
        assert_eq!(leaf_stats(item, &leaf), slow.stats, "{}", leaf.json());
    }

    /// `LeafArrays::has_md5` reads a few columns where `LeafColumns::has_md5` reads the row.
    #[test]
    fn md5_flag_from_the_arrays() {
        use datafusion::arrow::array::{Float64Array, Int64Builder, ListBuilder};
        let texts = |v: [Option<&str>; 5]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let raw = r#"{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [2], "md5": "ab"}"#;
        let kind = texts([Some("torch.Tensor"), Some("int"), Some("torch.Tensor"), None, Some("x")]);
        let dtype = texts([Some("torch.float32"), None, Some("torch.int64"), None, None]);
        let mut shape = ListBuilder::new(Int64Builder::new());
        for dims in [Some(vec![2]), None, None, None, Some(vec![1])] {
            match dims {
                Some(d) => shape.append_value(d.into_iter().map(Some)),
                None => shape.append_null(),
            }
        }
        let stat = || Arc::new(Float64Array::from(vec![None::<f64>; 5])) as ArrayRef;
        let requires_grad = Arc::new(BooleanArray::from(vec![None::<bool>; 5])) as ArrayRef;
        let md5 = texts([Some("1a2b3c4d"), Some("ff"), None, None, Some("ab")]);
        let none = || texts([None; 5]);
        let raw = texts([None, None, Some(raw), None, None]);
        let columns = [
            kind,
            dtype,
            Arc::new(shape.finish()) as ArrayRef,
            stat(),
            stat(),
            stat(),
            stat(),
            requires_grad,
            md5,
            none(),
            none(),
            raw,
        ];
        let arrays = LeafArrays::from_columns(&columns).expect("leaf columns");
        let flags: Vec<bool> = (0..arrays.len()).map(|i| arrays.has_md5(i)).collect();
        assert_eq!(flags, (0..arrays.len()).map(|i| arrays.get(i).has_md5()).collect::<Vec<_>>());
        assert_eq!(flags, [true, false, true, false, true]);
    }

    #[test]
    fn fast_paths_match_the_json_reading() {
        let tensor = LeafColumns {
            kind: Some("torch.Tensor"),
            dtype: Some("torch.float32"),
            shape: Some(Cow::Owned(vec![2, 8])),
            stats: [Some(4.1), Some(f64::NAN), Some(f64::INFINITY), None],
            requires_grad: Some(true),
            ..Default::default()
        };
        let (item, name) = ("M.fc.Linear.forward.0.input.0", "M.fc.Linear.forward.0");
        same_as_json(item, name, tensor.clone());
        same_as_json(item, name, LeafColumns { md5: Some("0x0000000000000003"), ..tensor.clone() });
        same_as_json(item, name, LeafColumns { md5: Some("1a2b3c4d"), data_name: Some("x.pt"), ..tensor.clone() });
        same_as_json(item, name, LeafColumns { md5: Some(""), data_name: Some(""), shape: None, ..tensor.clone() });
        same_as_json(item, name, LeafColumns { dtype: Some("torch.\"odd\"\n"), requires_grad: None, ..tensor });
        let scalar = |kind, value| LeafColumns { kind: Some(kind), value, ..Default::default() };
        for (kind, value) in [
            ("int", Some("3")),
            ("float", Some("1e-05")),
            ("bool", Some("true")),
            ("str", Some("\"mean\"")),
            ("torch.Size", Some("[2, 8]")),
            ("torch.Size", None),
            ("slice", Some("[null, 2, null]")),
            ("ellipsis", Some("\"...\"")),
            ("NoneType", None),
            ("torch.ProcessGroup", Some("{\"a\": 1}")),
        ] {
            same_as_json(item, name, scalar(kind, value));
            same_as_json("Distributed.send.0.forward.input.dst", name, scalar(kind, value));
        }
        assert_eq!(crc32_hex(b""), EMPTY_CRC);
        // Not fast: a JSON null leaf, a kept raw, a shape without dtype.
        same_as_json(item, name, LeafColumns::default());
        let raw = r#"{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [2], "Max": 57, "md5": "00000000"}"#;
        same_as_json(item, name, LeafColumns { kind: Some("torch.Tensor"), raw: Some(raw), ..Default::default() });
        let p2p = r#"{"class_type": "torch.distributed.P2POp", "tensor": {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1.0, "Min": 1.0, "Mean": 1.0, "Norm": 1.0, "requires_grad": false}, "op": "isend", "peer": 1}"#;
        same_as_json(
            item,
            name,
            LeafColumns { kind: Some("torch.distributed.P2POp"), raw: Some(p2p), ..Default::default() },
        );
        same_as_json(
            item,
            name,
            LeafColumns { kind: Some("x"), shape: Some(Cow::Owned(vec![1])), md5: Some("ab"), ..Default::default() },
        );
    }
}
