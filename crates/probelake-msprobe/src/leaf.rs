//! One leaf of an entry — a tensor object, a scalar object or a `null` — as typed columns, and
//! its rendering back to msprobe's JSON.
//!
//! The `raw` rule: a leaf is stored as typed columns, and its original JSON text is kept in
//! `raw` only where rendering the columns would not give the same bytes (an integer statistic
//! written as `5` rather than `5.0`, an unknown field, another key order). So the byte-exact
//! round trip is checked for every leaf at import time rather than hoped for.

use std::borrow::Cow;

use crate::json::{
    parse, write_compact, write_f64, write_i64, write_node, write_str, Arena, ArrayWriter, Layout, Node, ObjectWriter,
    Value,
};

/// A leaf as the `dump` table stores it (its position columns aside).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Leaf<'a> {
    /// msprobe's `type` (or `class_type`); `None` for a JSON `null` leaf.
    pub kind: Option<Cow<'a, str>>,
    /// Tensor dtype text.
    pub dtype: Option<Cow<'a, str>>,
    /// Tensor shape.
    pub shape: Option<Vec<i64>>,
    /// `Max`, `Min`, `Mean`, `Norm`.
    pub stats: [Option<f64>; 4],
    /// `requires_grad`.
    pub requires_grad: Option<bool>,
    /// `md5` (CRC-32 hex, or `0x…` in xor mode).
    pub md5: Option<Cow<'a, str>>,
    /// `data_name`: the tensor file.
    pub data_name: Option<Cow<'a, str>>,
    /// JSON text (one-line layout) of a scalar's `value`.
    pub value: Option<Cow<'a, str>>,
    /// The original JSON (one-line layout), where rendering the columns differs from it.
    pub raw: Option<Cow<'a, str>>,
}

/// The statistic keys, in msprobe's order.
pub const STAT_KEYS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

/// Why a leaf was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafError {
    /// Byte offset of the offending value.
    pub offset: usize,
    /// The member inside the leaf (`shape`, `Max`, …), if any.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub message: String,
}

/// Whether `node` is a leaf: `null`, or an object with a string `type` or a `class_type`.
pub fn is_leaf(node: &Node<'_>) -> bool {
    match &node.value {
        Value::Null | Value::Taken { .. } => true,
        Value::Object(m) => {
            m.iter().any(|(k, v)| (k == "type" && matches!(v.value, Value::Str(_))) || k == "class_type")
        }
        _ => false,
    }
}

pub(super) fn is_tensor_kind(kind: &str) -> bool {
    // The common answer first: a substring search costs ~200 instructions a leaf.
    kind == "torch.Tensor" || kind.contains("Tensor") || kind == "numpy.ndarray"
}

/// The text a leaf node was parsed from: the whole file, its layout, and the leaf's nesting
/// depth in it (what [`write_node`] would be given for the leaf).
#[derive(Debug, Clone, Copy)]
pub struct LeafSource<'s> {
    /// The file's bytes; node positions index into them.
    pub bytes: &'s [u8],
    /// The file's layout.
    pub layout: Layout,
    /// Nesting depth of the leaf.
    pub depth: usize,
}

impl<'a> Leaf<'a> {
    /// Reads a leaf node (see [`is_leaf`]) into columns, validating what msprobe's tools rely on,
    /// and sets `raw` when the columns alone would not reproduce the node.
    pub fn from_node(node: &'a Node<'a>, scratch: &mut (Vec<u8>, Vec<u8>)) -> Result<Leaf<'a>, LeafError> {
        let mut leaf = Leaf::columns_of(node, scratch)?;
        leaf.set_raw(node, scratch);
        Ok(leaf)
    }

    /// Like [`Leaf::from_node`], for a node parsed from `source`; also returns the length of the
    /// node's text when the columns render, in the file's layout at the leaf's depth, to exactly
    /// the bytes at the node's position.
    ///
    /// That comparison is the cheap way to the `raw` rule: text equal to the file's is a
    /// canonical rendering of the node, so the columns also render to the node's one-line text
    /// and need no `raw`; the node is not rendered at all. Only where it fails (another
    /// layout, an integer statistic, …) is the node rendered and compared as `from_node` does,
    /// so `raw` is set exactly as there.
    pub fn from_source(
        node: &'a Node<'a>,
        scratch: &mut (Vec<u8>, Vec<u8>),
        source: LeafSource<'_>,
    ) -> Result<(Leaf<'a>, Option<usize>), LeafError> {
        let mut leaf = Leaf::columns_of(node, scratch)?;
        // Only an object is self-delimiting: `5` would also match the start of `57`.
        if leaf.kind.is_some() {
            let (rendered, _) = &mut *scratch;
            rendered.clear();
            leaf.render(rendered, source.layout, source.depth);
            let end = node.pos.saturating_add(rendered.len());
            if source.bytes.get(node.pos..end) == Some(rendered.as_slice()) {
                return Ok((leaf, Some(rendered.len())));
            }
        }
        leaf.set_raw(node, scratch);
        Ok((leaf, None))
    }

    /// The typed columns of a leaf node, without the `raw` rule.
    fn columns_of(node: &'a Node<'a>, scratch: &mut (Vec<u8>, Vec<u8>)) -> Result<Leaf<'a>, LeafError> {
        let mut leaf = Leaf::default();
        let Value::Object(members) = &node.value else {
            return Ok(leaf);
        };
        let kind = node.value.get("type").or_else(|| node.value.get("class_type"));
        leaf.kind = kind.and_then(|k| k.value.as_str()).map(Cow::Borrowed);
        let tensor_like = leaf.kind.as_deref().is_some_and(is_tensor_kind);
        let class_type = node.value.get("type").is_none();
        let source = if class_type {
            // A P2POp-like record: describe it by the tensor it carries.
            match node.value.get("tensor") {
                Some(t @ Node { value: Value::Object(_), .. }) => t,
                _ => node,
            }
        } else {
            node
        };
        let Value::Object(fields) = &source.value else {
            return Ok(leaf);
        };
        for (key, v) in fields.iter() {
            let bad = |field: &'static str, want: &str| LeafError {
                offset: v.pos,
                field: Some(field),
                message: format!("`{field}` must be {want}, found {}", v.value.type_name()),
            };
            match key.as_ref() {
                "dtype" => match &v.value {
                    Value::Str(s) => leaf.dtype = Some(Cow::Borrowed(s)),
                    _ if tensor_like => return Err(bad("dtype", "a string")),
                    _ => {}
                },
                "shape" => match &v.value {
                    Value::Array(items) if tensor_like || items.iter().all(|i| matches!(i.value, Value::Number(_))) => {
                        let mut dims = Vec::with_capacity(items.len());
                        for item in items.iter() {
                            match &item.value {
                                Value::Number(n) => match n.parse::<i64>() {
                                    Ok(d) => dims.push(d),
                                    Err(_) if tensor_like && n.contains(['.', 'e', 'E', 'N', 'I']) => {
                                        return Err(LeafError {
                                            offset: item.pos,
                                            field: Some("shape"),
                                            message: format!("`shape` must hold integers, found {n}"),
                                        })
                                    }
                                    // Larger than i64: kept in `raw` only.
                                    Err(_) => {}
                                },
                                _ => {
                                    return Err(LeafError {
                                        offset: item.pos,
                                        field: Some("shape"),
                                        message: format!(
                                            "`shape` must hold integers, found {}",
                                            item.value.type_name()
                                        ),
                                    })
                                }
                            }
                        }
                        leaf.shape = Some(dims);
                    }
                    _ if tensor_like => return Err(bad("shape", "an array of integers")),
                    _ => {}
                },
                "Max" | "Min" | "Mean" | "Norm" => {
                    let slot = match key.as_ref() {
                        "Max" => 0,
                        "Min" => 1,
                        "Mean" => 2,
                        _ => 3,
                    };
                    leaf.stats[slot] = match &v.value {
                        Value::Number(n) => Some(parse_number(n)),
                        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                        Value::Null => None,
                        _ => {
                            let field = STAT_KEYS[slot];
                            return Err(LeafError {
                                offset: v.pos,
                                field: Some(field),
                                message: format!(
                                    "`{field}` must be a number, a boolean or null, found {}",
                                    v.value.type_name()
                                ),
                            });
                        }
                    };
                }
                "requires_grad" => match &v.value {
                    Value::Bool(b) => leaf.requires_grad = Some(*b),
                    _ if tensor_like => return Err(bad("requires_grad", "a boolean")),
                    _ => {}
                },
                "md5" => {
                    if let Value::Str(s) = &v.value {
                        leaf.md5 = Some(Cow::Borrowed(s));
                    }
                }
                "data_name" => {
                    if let Value::Str(s) = &v.value {
                        leaf.data_name = Some(Cow::Borrowed(s));
                    }
                }
                "value" if !tensor_like => {
                    let (buf, _) = &mut *scratch;
                    buf.clear();
                    write_compact(buf, v);
                    leaf.value = Some(Cow::Owned(String::from_utf8_lossy(buf).into_owned()));
                }
                _ => {}
            }
        }
        let _ = members;
        Ok(leaf)
    }

    /// The raw rule: keep the original only if the columns do not render it.
    fn set_raw(&mut self, node: &Node<'_>, scratch: &mut (Vec<u8>, Vec<u8>)) {
        let (rendered, original) = &mut *scratch;
        rendered.clear();
        original.clear();
        self.render(rendered, Layout { indent: None }, 0);
        write_compact(original, node);
        if rendered != original {
            self.raw = Some(Cow::Owned(String::from_utf8_lossy(original).into_owned()));
        }
    }

    /// Writes the leaf as msprobe does, at nesting `depth`.
    pub fn render(&self, out: &mut Vec<u8>, layout: Layout, depth: usize) {
        if let Some(raw) = self.raw.as_deref().or(if self.kind.is_none() { self.value.as_deref() } else { None }) {
            render_json_text(out, raw, layout, depth);
            return;
        }
        let Some(kind) = self.kind.as_deref() else {
            out.extend_from_slice(b"null");
            return;
        };
        let mut obj = ObjectWriter::begin(out, layout, depth);
        obj.raw_key(out, b"\"type\"");
        write_str(out, kind);
        if self.dtype.is_none() && self.shape.is_none() {
            obj.raw_key(out, b"\"value\"");
            match self.value.as_deref() {
                Some(v) => render_json_text(out, v, layout, depth + 1),
                None => out.extend_from_slice(b"null"),
            }
            obj.end(out);
            return;
        }
        if let Some(dtype) = self.dtype.as_deref() {
            obj.raw_key(out, b"\"dtype\"");
            write_str(out, dtype);
        }
        if let Some(shape) = &self.shape {
            obj.raw_key(out, b"\"shape\"");
            let mut arr = ArrayWriter::begin(out, layout, depth + 1);
            for d in shape {
                arr.item(out);
                write_i64(out, *d);
            }
            arr.end(out);
        }
        let xor = self.md5.as_deref().is_some_and(|m| m.starts_with("0x"));
        if xor {
            obj.raw_key(out, b"\"md5\"");
            write_str(out, self.md5.as_deref().unwrap_or_default());
        } else {
            for (key, stat) in [&b"\"Max\""[..], b"\"Min\"", b"\"Mean\"", b"\"Norm\""].into_iter().zip(self.stats) {
                obj.raw_key(out, key);
                match stat {
                    Some(v) => write_f64(out, v),
                    None => out.extend_from_slice(b"null"),
                }
            }
        }
        if let Some(rg) = self.requires_grad {
            obj.raw_key(out, b"\"requires_grad\"");
            out.extend_from_slice(if rg { b"true" } else { b"false" });
        }
        if let Some(name) = self.data_name.as_deref() {
            obj.raw_key(out, b"\"data_name\"");
            write_str(out, name);
        }
        if let (false, Some(md5)) = (xor, self.md5.as_deref()) {
            obj.raw_key(out, b"\"md5\"");
            write_str(out, md5);
        }
        obj.end(out);
    }
}

/// Parses a number token as msprobe's tools would (`float(token)`).
pub fn parse_number(token: &str) -> f64 {
    match token {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => token.parse().unwrap_or(f64::NAN),
    }
}

/// Re-lays-out JSON text that probelake stored in the one-line layout.
pub fn render_json_text(out: &mut Vec<u8>, text: &str, layout: Layout, depth: usize) {
    let arena = Arena::new();
    match parse(text.as_bytes(), &arena) {
        Ok(node) => {
            let _ = write_node::<()>(out, &node, layout, depth, &mut |_, _| Ok(()));
        }
        // Stored text is always valid JSON; write it as it is rather than lose it.
        Err(_) => out.extend_from_slice(text.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> (bool, String) {
        let arena = Arena::new();
        let node = parse(text.as_bytes(), &arena).unwrap();
        let mut scratch = Default::default();
        let leaf = Leaf::from_node(&node, &mut scratch).unwrap();
        let mut out = Vec::new();
        leaf.render(&mut out, Layout::MSPROBE, 0);
        let mut want = Vec::new();
        write_node::<()>(&mut want, &node, Layout::MSPROBE, 0, &mut |_, _| Ok(())).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&want));
        (leaf.raw.is_none(), String::from_utf8(out).unwrap())
    }

    #[test]
    fn common_leaves_need_no_raw() {
        let tensor = r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 8], "Max": 4.1014933586120605, "Min": -3.1, "Mean": NaN, "Norm": Infinity, "requires_grad": true}"#;
        assert!(round_trip(tensor).0);
        assert!(round_trip(r#"{"type": "float", "value": 1e-05}"#).0);
        assert!(round_trip(r#"{"type": "slice", "value": [null, 2, null]}"#).0);
        assert!(round_trip("null").0);
        assert!(round_trip(r#"{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [], "md5": "0x0000000000000003", "requires_grad": false}"#).0);
        assert!(round_trip(r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [0], "Max": null, "Min": null, "Mean": null, "Norm": null, "requires_grad": false, "data_name": "a.pt", "md5": "00000000"}"#).0);
    }

    #[test]
    fn unusual_leaves_keep_raw_and_still_round_trip() {
        assert!(!round_trip(r#"{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [2], "Max": 57, "Min": 12, "Mean": null, "Norm": null, "requires_grad": false}"#).0);
        assert!(!round_trip(r#"{"type": "torch.memory_format", "format": "contiguous_format"}"#).0);
        assert!(!round_trip(r#"{"class_type": "torch.distributed.P2POp", "tensor": {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1.0, "Min": 1.0, "Mean": 1.0, "Norm": 1.0, "requires_grad": false}, "op": "isend", "peer": 1}"#).0);
    }

    #[test]
    fn wrong_types_in_tensors_are_errors() {
        for bad in [
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": "2x3"}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2.5]}"#,
            r#"{"type": "torch.Tensor", "dtype": 3, "shape": [2]}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": "big"}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "requires_grad": "yes"}"#,
        ] {
            let arena = Arena::new();
            let node = parse(bad.as_bytes(), &arena).unwrap();
            assert!(Leaf::from_node(&node, &mut Default::default()).is_err(), "{bad}");
        }
    }
}
