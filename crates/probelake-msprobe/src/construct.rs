//! construct.json: node → parent module (`null`, `""`, a name, or Megatron's
//! `[parent, micro_step]`), plus odd members such as `megatron_micro_step_number`.

use std::borrow::Cow;

use crate::error::MsprobeError;
use crate::json::{write_compact, write_str, ArrayWriter, Layout, Node, ObjectWriter, Value};

use crate::leaf::render_json_text;

/// One member of construct.json.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstructRow<'a> {
    /// The node name.
    pub name: Cow<'a, str>,
    /// The parent node, `None` for `null`.
    pub parent: Option<Cow<'a, str>>,
    /// Megatron's micro step, when the value is `[parent, micro_step]`.
    pub micro_step: Option<i64>,
    /// The value's JSON (one-line layout) when it has none of the forms above.
    pub raw: Option<Cow<'a, str>>,
}

/// Reads a parsed construct.json.
pub fn take_apart_construct<'a>(doc: &'a Node<'a>) -> Result<Vec<ConstructRow<'a>>, MsprobeError> {
    let Value::Object(members) = &doc.value else {
        return Err(MsprobeError::Schema {
            file: Default::default(),
            offset: doc.pos,
            path: "$".into(),
            message: format!("construct.json must be an object, found {}", doc.value.type_name()),
        });
    };
    let mut rows = Vec::with_capacity(members.len());
    for (name, value) in members.iter() {
        let mut row = ConstructRow { name: Cow::Borrowed(name.as_ref()), parent: None, micro_step: None, raw: None };
        match &value.value {
            Value::Null => {}
            Value::Str(s) => row.parent = Some(Cow::Borrowed(s.as_ref())),
            Value::Array(pair) => match pair {
                [Node { value: Value::Str(p), .. }, Node { value: Value::Number(n), .. }]
                    if n.parse::<i64>().is_ok() =>
                {
                    row.parent = Some(Cow::Borrowed(p.as_ref()));
                    row.micro_step = n.parse().ok();
                }
                [Node { value: Value::Null, .. }, Node { value: Value::Number(n), .. }] if n.parse::<i64>().is_ok() => {
                    row.micro_step = n.parse().ok();
                }
                _ => row.raw = Some(Cow::Owned(compact(value))),
            },
            _ => row.raw = Some(Cow::Owned(compact(value))),
        }
        rows.push(row);
    }
    Ok(rows)
}

fn compact(node: &Node<'_>) -> String {
    let mut out = Vec::new();
    write_compact(&mut out, node);
    String::from_utf8_lossy(&out).into_owned()
}

/// Lays out construct.json from its rows.
pub fn render_construct(layout: Layout, rows: &[ConstructRow<'_>], out: &mut Vec<u8>) {
    let mut obj = ObjectWriter::begin(out, layout, 0);
    for row in rows {
        obj.key(out, &row.name);
        if let Some(raw) = &row.raw {
            render_json_text(out, raw, layout, 1);
            continue;
        }
        let parent = |out: &mut Vec<u8>| match &row.parent {
            Some(p) => write_str(out, p),
            None => out.extend_from_slice(b"null"),
        };
        match row.micro_step {
            Some(step) => {
                let mut pair = ArrayWriter::begin(out, layout, 1);
                pair.item(out);
                parent(out);
                pair.item(out);
                out.extend_from_slice(step.to_string().as_bytes());
                pair.end(out);
            }
            None => parent(out),
        }
    }
    obj.end(out);
}
