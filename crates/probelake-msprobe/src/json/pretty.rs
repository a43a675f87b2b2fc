//! Laying out JSON the way CPython's `json.dump(obj, f, indent=N)` does.

use super::parse::{Node, Value};
use super::render::write_str;

/// How a file was laid out: CPython's `indent` argument. msprobe always writes `indent=1`;
/// users sometimes re-indent files with 2 or 4, and `None` is the one-line default layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    /// Spaces per level, or `None` for the single-line layout with `", "` and `": "`.
    pub indent: Option<u16>,
}

impl Layout {
    /// msprobe's layout: `indent=1`.
    pub const MSPROBE: Layout = Layout { indent: Some(1) };

    /// Starts a new line at `depth` (or writes the inline separator space where there is none).
    #[inline]
    pub fn newline(&self, out: &mut Vec<u8>, depth: usize) {
        if let Some(n) = self.indent {
            out.push(b'\n');
            out.resize(out.len() + usize::from(n) * depth, b' ');
        }
    }

    /// The item separator: `,` then a new line, or `, ` in the one-line layout.
    #[inline]
    pub fn separator(&self, out: &mut Vec<u8>, depth: usize) {
        out.push(b',');
        match self.indent {
            Some(_) => self.newline(out, depth),
            None => out.push(b' '),
        }
    }
}

/// Writes an object member by member: `{`, then `key(..)` + the value for each member, then
/// `end()`. Produces `{}` for an object without members.
pub struct ObjectWriter {
    layout: Layout,
    depth: usize,
    empty: bool,
}

impl ObjectWriter {
    /// Writes `{` for an object at nesting `depth`.
    #[inline]
    pub fn begin(out: &mut Vec<u8>, layout: Layout, depth: usize) -> Self {
        out.push(b'{');
        ObjectWriter { layout, depth, empty: true }
    }

    /// Writes the separator, the key and `": "`; the caller writes the value at `depth + 1`.
    #[inline]
    pub fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        if self.empty {
            self.empty = false;
            self.layout.newline(out, self.depth + 1);
        } else {
            self.layout.separator(out, self.depth + 1);
        }
        write_str(out, key);
        out.extend_from_slice(b": ");
    }

    /// Like [`ObjectWriter::key`] for a key known to need no escaping; `quoted` includes quotes.
    #[inline]
    pub fn raw_key(&mut self, out: &mut Vec<u8>, quoted: &[u8]) {
        if self.empty {
            self.empty = false;
            self.layout.newline(out, self.depth + 1);
        } else {
            self.layout.separator(out, self.depth + 1);
        }
        out.extend_from_slice(quoted);
        out.extend_from_slice(b": ");
    }

    /// Writes `}`.
    #[inline]
    pub fn end(self, out: &mut Vec<u8>) {
        if !self.empty {
            self.layout.newline(out, self.depth);
        }
        out.push(b'}');
    }
}

/// Writes an array element by element, like [`ObjectWriter`].
pub struct ArrayWriter {
    layout: Layout,
    depth: usize,
    empty: bool,
}

impl ArrayWriter {
    /// Writes `[` for an array at nesting `depth`.
    #[inline]
    pub fn begin(out: &mut Vec<u8>, layout: Layout, depth: usize) -> Self {
        out.push(b'[');
        ArrayWriter { layout, depth, empty: true }
    }

    /// Writes what goes before the next element; the caller writes it at `depth + 1`.
    #[inline]
    pub fn item(&mut self, out: &mut Vec<u8>) {
        if self.empty {
            self.empty = false;
            self.layout.newline(out, self.depth + 1);
        } else {
            self.layout.separator(out, self.depth + 1);
        }
    }

    /// Writes `]`.
    #[inline]
    pub fn end(self, out: &mut Vec<u8>) {
        if !self.empty {
            self.layout.newline(out, self.depth);
        }
        out.push(b']');
    }
}

/// Writes one leaf into a skeleton's hole at the given nesting depth.
pub type FillHole<'f, E> = dyn FnMut(&mut Vec<u8>, usize) -> Result<(), E> + 'f;

/// Writes `node` at nesting `depth` with `layout`; number tokens are written as they were read.
/// `hole` is called for every [`Value::Hole`] (skeleton placeholders) and must write one value.
pub fn write_node<E>(
    out: &mut Vec<u8>,
    node: &Node<'_>,
    layout: Layout,
    depth: usize,
    hole: &mut FillHole<'_, E>,
) -> Result<(), E> {
    write_node_instead(out, node, layout, depth, &mut |out, node, depth| match node.value {
        Value::Hole => Some(hole(out, depth)),
        _ => None,
    })
}

/// Writes a value in place of [`write_node_instead`]'s own rendering, or answers `None` to
/// leave it to it.
pub type WriteInstead<'f, E> = dyn FnMut(&mut Vec<u8>, &Node<'_>, usize) -> Option<Result<(), E>> + 'f;

/// [`write_node`] that offers every value, at every depth, to `instead` before writing it.
pub fn write_node_instead<E>(
    out: &mut Vec<u8>,
    node: &Node<'_>,
    layout: Layout,
    depth: usize,
    instead: &mut WriteInstead<'_, E>,
) -> Result<(), E> {
    if let Some(written) = instead(out, node, depth) {
        return written;
    }
    match &node.value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Hole => out.push(b'$'),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.as_bytes()),
        Value::Str(s) => write_str(out, s),
        Value::Taken { text, .. } => {
            // Laid out from its text: a reader only takes what is a whole JSON object.
            let arena = super::parse::Arena::new();
            match super::parse::parse(text.as_bytes(), &arena) {
                Ok(object) => write_node_instead(out, &object, layout, depth, instead)?,
                Err(_) => out.extend_from_slice(text.as_bytes()),
            }
        }
        Value::Array(items) => {
            let mut w = ArrayWriter::begin(out, layout, depth);
            for item in items.iter() {
                w.item(out);
                write_node_instead(out, item, layout, depth + 1, instead)?;
            }
            w.end(out);
        }
        Value::Object(members) => {
            let mut w = ObjectWriter::begin(out, layout, depth);
            for (k, v) in members.iter() {
                w.key(out, k);
                write_node_instead(out, v, layout, depth + 1, instead)?;
            }
            w.end(out);
        }
    }
    Ok(())
}

/// Writes `node` in the one-line layout (`json.dumps` defaults); a [`Value::Hole`] becomes `$`.
pub fn write_compact(out: &mut Vec<u8>, node: &Node<'_>) {
    let _ = write_node::<()>(out, node, Layout { indent: None }, 0, &mut |out, _| {
        out.push(b'$');
        Ok(())
    });
}

/// Guesses the layout of a document from its first line break: the number of spaces that
/// indent the second line, or the one-line layout when there is no line break.
pub fn detect_layout(bytes: &[u8]) -> Layout {
    match bytes.iter().position(|&b| b == b'\n') {
        None => Layout { indent: None },
        Some(nl) => {
            let spaces = bytes[nl + 1..].iter().take_while(|&&b| b == b' ').count();
            Layout { indent: Some(u16::try_from(spaces).unwrap_or(1)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Arena};

    fn pretty(text: &str, indent: Option<u16>) -> String {
        let arena = Arena::new();
        let node = parse(text.as_bytes(), &arena).unwrap();
        let mut out = Vec::new();
        write_node::<()>(&mut out, &node, Layout { indent }, 0, &mut |_, _| Ok(())).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn matches_python_indent_layouts() {
        let src = r#"{"a": [1, {"b": null}], "e": [], "o": {}}"#;
        assert_eq!(
            pretty(src, Some(1)),
            "{\n \"a\": [\n  1,\n  {\n   \"b\": null\n  }\n ],\n \"e\": [],\n \"o\": {}\n}"
        );
        assert_eq!(pretty(src, None), src);
        assert_eq!(pretty("[]", Some(2)), "[]");
    }

    #[test]
    fn detects_layout() {
        assert_eq!(detect_layout(b"{\n    \"a\": 1\n}"), Layout { indent: Some(4) });
        assert_eq!(detect_layout(b"{\"a\": 1}"), Layout { indent: None });
    }
}
