//! A dump file's skeleton on its own: the text [`take_apart`](crate::take_apart) writes beside
//! the rows (the document in the one-line layout, every leaf replaced by `$`), from the parsed
//! document alone, so that another core can write it while the rows are taken apart.
//!
//! On a real 10.7 MB dump.json the skeleton is a megabyte of entry names, slot names and
//! punctuation, about a fifth of the take-apart (~2.5 of ~13 ms). Written apart, it leaves the
//! rows' walk free of any text that must come out in file order, so that the rows can be taken
//! apart in entry ranges on several cores ([`take_apart_in_ranges`]).
//!
//! [`take_apart_in_ranges`]: crate::entry_ranges::take_apart_in_ranges

use crate::dump_file::{slot_suffix, DumpKind};
use crate::json::{write_compact, write_str, Node, Value};
use crate::leaf::is_leaf;
use crate::name::is_parameters_grad;

/// The skeleton [`take_apart`](crate::take_apart) writes for `doc`, byte for byte, where it
/// takes the document apart without an error. Where it would fail, the text is whatever the
/// document gives: the take-apart's error is the one to report.
pub(crate) fn skeleton_of(doc: &Node<'_>, kind: DumpKind) -> String {
    let mut out = Vec::with_capacity(1024);
    let data = doc.value.get("data");
    match &doc.value {
        Value::Object(top) => {
            out.push(b'{');
            for (i, (key, value)) in top.iter().enumerate() {
                separate(&mut out, i);
                member(&mut out, key);
                match data {
                    Some(data) if std::ptr::eq(value, data) => entries(&mut out, data, kind),
                    _ => write_compact(&mut out, value),
                }
            }
            out.push(b'}');
        }
        _ => write_compact(&mut out, doc),
    }
    // Built from `str`s and the writer's JSON text only; a lossy conversion never replaces a byte.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The `data` object: each entry's slots with `$` for their leaves, its other fields whole.
fn entries(out: &mut Vec<u8>, data: &Node<'_>, kind: DumpKind) {
    let Value::Object(entries) = &data.value else { return write_compact(out, data) };
    out.push(b'{');
    for (seq, (name, entry)) in entries.iter().enumerate() {
        separate(out, seq);
        member(out, name);
        match (kind, &entry.value) {
            (DumpKind::Dump, Value::Object(fields)) => {
                let grads = is_parameters_grad(name);
                out.push(b'{');
                for (j, (field, value)) in fields.iter().enumerate() {
                    separate(out, j);
                    member(out, field);
                    match slot_suffix(field, grads) {
                        Some(_) => slot(out, value),
                        None => write_compact(out, value),
                    }
                }
                out.push(b'}');
            }
            (DumpKind::Debug, _) => slot(out, entry),
            (DumpKind::Dump, _) => write_compact(out, entry),
        }
    }
    out.push(b'}');
}

/// A slot's value: `$` for a leaf, containers walked, anything else whole.
fn slot(out: &mut Vec<u8>, node: &Node<'_>) {
    if is_leaf(node) {
        return out.push(b'$');
    }
    match &node.value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                separate(out, i);
                slot(out, item);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            for (i, (key, value)) in members.iter().enumerate() {
                separate(out, i);
                member(out, key);
                slot(out, value);
            }
            out.push(b'}');
        }
        _ => write_compact(out, node),
    }
}

fn separate(out: &mut Vec<u8>, i: usize) {
    if i > 0 {
        out.extend_from_slice(b", ");
    }
}

fn member(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.extend_from_slice(b": ");
}
