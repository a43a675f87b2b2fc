//! Leaves as the `dump` table stores them: the format crate's [`Leaf`], with `raw` set exactly
//! where import would set it — where the typed columns cannot render msprobe's JSON (integer or
//! boolean statistics, xor mode's numeric or null `md5`).

use std::borrow::Cow;

use probelake_msprobe::json::{write_f64, write_i64, write_str, ArrayWriter, Layout, ObjectWriter};
use probelake_msprobe::Leaf;

use crate::checksum::Md5;
use crate::stats::{Stat, Summary};

/// Everything msprobe writes for one tensor.
pub(crate) struct TensorFacts<'a> {
    pub kind: &'a str,
    /// `dtype` as msprobe names it: `torch.float32`, or `float32` for a numpy array.
    pub dtype_name: &'static str,
    pub shape: &'a [i64],
    /// `None` in xor mode (the statistics are replaced by `md5`).
    pub summary: Option<Summary>,
    pub requires_grad: Option<bool>,
    pub data_name: Option<String>,
    pub md5: Md5,
}

/// The `null` leaf.
pub(crate) fn null_leaf() -> Leaf<'static> {
    Leaf::default()
}

/// `{"type": kind, "value": value}`; `value` is compact JSON text.
pub(crate) fn scalar_leaf(kind: String, value: String) -> Leaf<'static> {
    Leaf { kind: Some(Cow::Owned(kind)), value: Some(Cow::Owned(value)), ..Leaf::default() }
}

/// A tensor leaf, with `raw` where the columns alone would not render it.
pub(crate) fn tensor_leaf(t: TensorFacts<'_>) -> Leaf<'static> {
    let xor = t.summary.is_none();
    let stats = t.summary.map_or([None; 4], |s| s.as_array().map(Stat::as_f64));
    let needs_raw = match (&t.summary, &t.md5) {
        (Some(s), _) => !s.as_array().iter().all(|s| s.renders_from_column()),
        (None, Md5::Text(text)) => !text.starts_with("0x"),
        (None, _) => true,
    };
    let raw = needs_raw.then(|| raw_text(&t, xor));
    let md5 = match t.md5 {
        Md5::Text(text) => Some(Cow::Owned(text)),
        _ => None,
    };
    Leaf {
        kind: Some(Cow::Owned(t.kind.to_string())),
        dtype: Some(Cow::Borrowed(t.dtype_name)),
        shape: Some(t.shape.to_vec()),
        stats,
        requires_grad: t.requires_grad,
        md5,
        data_name: t.data_name.map(Cow::Owned),
        value: None,
        raw: raw.map(Cow::Owned),
    }
}

/// The tensor object in the one-line layout, every token as msprobe writes it.
fn raw_text(t: &TensorFacts<'_>, xor: bool) -> String {
    let mut out = Vec::with_capacity(192);
    let layout = Layout { indent: None };
    let mut obj = ObjectWriter::begin(&mut out, layout, 0);
    obj.raw_key(&mut out, b"\"type\"");
    write_str(&mut out, t.kind);
    obj.raw_key(&mut out, b"\"dtype\"");
    write_str(&mut out, t.dtype_name);
    obj.raw_key(&mut out, b"\"shape\"");
    let mut arr = ArrayWriter::begin(&mut out, layout, 1);
    for &d in t.shape {
        arr.item(&mut out);
        write_i64(&mut out, d);
    }
    arr.end(&mut out);
    if xor {
        obj.raw_key(&mut out, b"\"md5\"");
        write_md5(&mut out, &t.md5);
    } else {
        let summary = t.summary.unwrap_or(Summary::NULL);
        for (key, stat) in [&b"\"Max\""[..], b"\"Min\"", b"\"Mean\"", b"\"Norm\""].into_iter().zip(summary.as_array()) {
            obj.raw_key(&mut out, key);
            write_stat(&mut out, stat);
        }
    }
    if let Some(rg) = t.requires_grad {
        obj.raw_key(&mut out, b"\"requires_grad\"");
        out.extend_from_slice(if rg { b"true" } else { b"false" });
    }
    if let Some(name) = &t.data_name {
        obj.raw_key(&mut out, b"\"data_name\"");
        write_str(&mut out, name);
    }
    if !xor && t.md5 != Md5::Absent {
        obj.raw_key(&mut out, b"\"md5\"");
        write_md5(&mut out, &t.md5);
    }
    obj.end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn write_stat(out: &mut Vec<u8>, stat: Stat) {
    match stat {
        Stat::Null => out.extend_from_slice(b"null"),
        Stat::Float(v) => write_f64(out, v),
        Stat::Int(v) => write_i64(out, v),
        Stat::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
    }
}

fn write_md5(out: &mut Vec<u8>, md5: &Md5) {
    match md5 {
        Md5::Text(t) => write_str(out, t),
        Md5::Number(v) => write_f64(out, *v),
        Md5::Null | Md5::Absent => out.extend_from_slice(b"null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use probelake_msprobe::json::{parse, write_node, Arena};

    /// The writer's leaf equals what import reads from the JSON msprobe would have written.
    fn same_as_import(facts: TensorFacts<'_>, want_raw: bool) {
        let leaf = tensor_leaf(facts);
        assert_eq!(leaf.raw.is_some(), want_raw, "{leaf:?}");
        let mut text = Vec::new();
        leaf.render(&mut text, Layout::MSPROBE, 0);
        let arena = Arena::new();
        let node = parse(&text, &arena).unwrap();
        let imported = Leaf::from_node(&node, &mut Default::default()).unwrap();
        // Debug text, so NaN statistics compare equal.
        assert_eq!(format!("{imported:?}"), format!("{leaf:?}"), "{}", String::from_utf8_lossy(&text));
        let mut again = Vec::new();
        write_node::<()>(&mut again, &node, Layout::MSPROBE, 0, &mut |_, _| Ok(())).unwrap();
        assert_eq!(again, text);
    }

    fn facts(dtype: DType, summary: Option<Summary>, md5: Md5) -> TensorFacts<'static> {
        TensorFacts {
            kind: "torch.Tensor",
            dtype_name: dtype.torch_name(),
            shape: &[2, 3],
            summary,
            requires_grad: Some(true),
            data_name: None,
            md5,
        }
    }

    #[test]
    fn float_statistics_render_from_columns() {
        let s = Summary {
            max: Stat::Float(1.5),
            min: Stat::Float(-0.0),
            mean: Stat::Float(f64::NAN),
            norm: Stat::Float(f64::INFINITY),
        };
        same_as_import(facts(DType::F32, Some(s), Md5::Absent), false);
        same_as_import(facts(DType::BF16, Some(s), Md5::Text("6bd78a08".into())), false);
        same_as_import(facts(DType::F32, None, Md5::Text("0x804000003f800000".into())), false);
        let mut t = facts(DType::F16, Some(Summary::NULL), Md5::Text("00000000".into()));
        t.data_name = Some("Functional.linear.0.forward.input.0.pt".into());
        same_as_import(t, false);
    }

    #[test]
    fn integer_and_bool_statistics_and_odd_md5_keep_raw() {
        let ints = Summary { max: Stat::Int(57), min: Stat::Int(-3), mean: Stat::Null, norm: Stat::Null };
        same_as_import(facts(DType::I64, Some(ints), Md5::Absent), true);
        let bools = Summary { max: Stat::Bool(true), min: Stat::Bool(false), mean: Stat::Null, norm: Stat::Null };
        same_as_import(facts(DType::Bool, Some(bools), Md5::Text("28959bdf".into())), true);
        same_as_import(facts(DType::F32, None, Md5::Number(-0.0173722505569458)), true);
        same_as_import(facts(DType::F32, None, Md5::Null), true);
    }
}
