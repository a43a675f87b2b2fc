//! stack.json in both of msprobe's formats: grouped (`{"0": [[names], [frames]]}`, ≥ 8.2.1) and
//! by name (`{name: [frames]}`, older releases and MindSpore static graphs).

use std::borrow::Cow;

use crate::error::MsprobeError;
use crate::json::{write_str, ArrayWriter, Layout, Node, ObjectWriter, Value};

/// Which stack.json format a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackFormat {
    /// `{"0": [[names...], [frames...]], ...}`
    Grouped,
    /// `{name: [frames...], ...}`
    ByName,
}

impl StackFormat {
    /// `grouped` or `by_name`, as `source.stack_format` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            StackFormat::Grouped => "grouped",
            StackFormat::ByName => "by_name",
        }
    }

    /// The inverse of [`StackFormat::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "grouped" => Some(StackFormat::Grouped),
            "by_name" => Some(StackFormat::ByName),
            _ => None,
        }
    }
}

/// One entry name with its call stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRow<'a> {
    /// The group (grouped format) or position (by-name format).
    pub group: i64,
    /// The entry name.
    pub name: Cow<'a, str>,
    /// Frames, innermost first.
    pub frames: Vec<Cow<'a, str>>,
}

fn bad(node: &Node<'_>, path: String, message: String) -> MsprobeError {
    MsprobeError::Schema { file: Default::default(), offset: node.pos, path, message }
}

fn strings<'a>(node: &'a Node<'a>, path: &str, what: &str) -> Result<Vec<Cow<'a, str>>, MsprobeError> {
    let Value::Array(items) = &node.value else {
        return Err(bad(
            node,
            path.into(),
            format!("{what} must be an array of strings, found {}", node.value.type_name()),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match &item.value {
            Value::Str(s) => Ok(Cow::Borrowed(s.as_ref())),
            other => {
                Err(bad(item, format!("{path}[{i}]"), format!("{what} must hold strings, found {}", other.type_name())))
            }
        })
        .collect()
}

/// Reads a parsed stack.json.
pub fn take_apart_stack<'a>(doc: &'a Node<'a>) -> Result<(StackFormat, Vec<StackRow<'a>>), MsprobeError> {
    let Value::Object(members) = &doc.value else {
        return Err(bad(doc, "$".into(), format!("stack.json must be an object, found {}", doc.value.type_name())));
    };
    // Grouped when the first member holds [[names], [frames]]: its group keys need not start
    // at "0" (a dump cut after its first APIs keeps the later groups' numbers).
    let grouped = match members.iter().next() {
        None => true,
        Some((_, value)) => {
            matches!(&value.value, Value::Array(pair) if pair.first().is_some_and(|n| matches!(n.value, Value::Array(_))))
        }
    };
    let mut rows = Vec::new();
    if grouped {
        for (key, value) in members.iter() {
            let path = format!("$[{key:?}]");
            let group = key
                .parse::<i64>()
                .map_err(|_| bad(value, path.clone(), format!("group key `{key}` is not a number")))?;
            let (names, frames) = match &value.value {
                Value::Array(pair) if pair.len() == 2 => (&pair[0], &pair[1]),
                other => {
                    return Err(bad(
                        value,
                        path,
                        format!("a stack group must be [[names], [frames]], found {}", other.type_name()),
                    ))
                }
            };
            let frames = strings(frames, &format!("{path}[1]"), "stack frames")?;
            for name in strings(names, &format!("{path}[0]"), "stack names")? {
                rows.push(StackRow { group, name, frames: frames.clone() });
            }
        }
        Ok((StackFormat::Grouped, rows))
    } else {
        for (i, (key, value)) in members.iter().enumerate() {
            let frames = strings(value, &format!("$[{key:?}]"), "stack frames")?;
            rows.push(StackRow { group: i as i64, name: Cow::Borrowed(key.as_ref()), frames });
        }
        Ok((StackFormat::ByName, rows))
    }
}

/// Lays out stack.json from its rows (in group order).
pub fn render_stack(format: StackFormat, layout: Layout, rows: &[StackRow<'_>], out: &mut Vec<u8>) {
    let mut obj = ObjectWriter::begin(out, layout, 0);
    let string_array = |out: &mut Vec<u8>, items: &mut dyn Iterator<Item = &str>, depth: usize| {
        let mut arr = ArrayWriter::begin(out, layout, depth);
        for s in items {
            arr.item(out);
            write_str(out, s);
        }
        arr.end(out);
    };
    match format {
        StackFormat::ByName => {
            for row in rows {
                obj.key(out, &row.name);
                string_array(out, &mut row.frames.iter().map(|f| f.as_ref()), 1);
            }
        }
        StackFormat::Grouped => {
            let mut start = 0;
            while start < rows.len() {
                let group = rows[start].group;
                let end = rows[start..].iter().position(|r| r.group != group).map_or(rows.len(), |n| start + n);
                obj.key(out, &group.to_string());
                let mut pair = ArrayWriter::begin(out, layout, 1);
                pair.item(out);
                string_array(out, &mut rows[start..end].iter().map(|r| r.name.as_ref()), 2);
                pair.item(out);
                string_array(out, &mut rows[start].frames.iter().map(|f| f.as_ref()), 2);
                pair.end(out);
                start = end;
            }
        }
    }
    obj.end(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Arena};

    fn read(text: &str) -> (StackFormat, Vec<(i64, String, usize)>) {
        let arena = Arena::new();
        let doc = parse(text.as_bytes(), &arena).expect("json");
        let (format, rows) = take_apart_stack(&doc).expect("stack");
        (format, rows.into_iter().map(|r| (r.group, r.name.into_owned(), r.frames.len())).collect())
    }

    #[test]
    fn grouped_files_are_told_by_their_shape_not_by_a_group_zero() {
        // A dump cut after its first APIs keeps the later groups' numbers.
        let (format, rows) = read(r#"{"5": [["Tensor.__add__.1.forward"], ["File a.py, line 1, in f"]]}"#);
        assert_eq!(format, StackFormat::Grouped);
        assert_eq!(rows, [(5, "Tensor.__add__.1.forward".to_string(), 1)]);
        let (format, rows) = read(r#"{"Functional.linear.0.forward": ["File a.py, line 1, in f", "File b.py"]}"#);
        assert_eq!(format, StackFormat::ByName);
        assert_eq!(rows, [(0, "Functional.linear.0.forward".to_string(), 2)]);
        assert_eq!(read("{}").0, StackFormat::Grouped);
        // A stack of no frames in the by-name format stays by name.
        assert_eq!(read(r#"{"Functional.relu.0.forward": []}"#).0, StackFormat::ByName);
    }
}
