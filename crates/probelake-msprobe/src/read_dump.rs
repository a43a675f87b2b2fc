//! A dump file parsed with its leaves read straight from the text ([`LeafReader`]): what
//! import takes apart. [`take_apart_read`] gives the same rows from it as
//! [`take_apart_source`] gives from a plainly parsed document; the tests here hold the two
//! ways to that on real and edited files (the synthesizer's tests, on its own files).
//!
//! [`take_apart_read`]: crate::take_apart_read
//! [`take_apart_source`]: crate::take_apart_source
//! [`Value::Taken`]: crate::json::Value::Taken

use crate::json::{detect_layout, parse_taking, Arena, Layout, Node, ObjectStart, SyntaxError, TakenObject, MAX_DEPTH};

use crate::dump_file::{DumpKind, ENTRY_DEPTH};
use crate::leaf_text::{LeafReader, ReadLeaf, ReadLeaves};

/// A dump file parsed for [`take_apart_read`](crate::take_apart_read): the document, its
/// layout, and the leaves read straight from the text as it was parsed.
#[derive(Debug)]
pub struct DumpDoc<'a> {
    /// The document; each leaf read straight from the text is a
    /// [`Value::Taken`](crate::json::Value::Taken) in it.
    pub doc: Node<'a>,
    /// The file's indentation.
    pub layout: Layout,
    /// The leaves read from the text.
    pub read: ReadLeaves<'a>,
}

/// Parses a dump.json or debug.json, reading every leaf whose text is exactly
/// [`Leaf::render`](crate::Leaf::render)'s straight into columns on the way (the bulk of an
/// import's work otherwise: see [`LeafReader`]). [`take_apart_read`](crate::take_apart_read)
/// takes the result apart to the same rows as [`take_apart_source`](crate::take_apart_source)
/// takes a plainly [`parse`](crate::json::parse)d document.
pub fn parse_dump<'a>(bytes: &'a [u8], arena: &'a Arena, kind: DumpKind) -> Result<DumpDoc<'a>, SyntaxError> {
    let layout = detect_layout(bytes);
    // Leaves are values inside the slots of dump.json's entries, and debug.json's entries
    // themselves; above those, an object is never a leaf, whatever it holds.
    let first = match kind {
        DumpKind::Dump => ENTRY_DEPTH + 1,
        DumpKind::Debug => ENTRY_DEPTH,
    };
    // msprobe's leaves take ~290 bytes each in its layout: room for all but an odd file's, so
    // that a file's leaves (~200 bytes each) are not copied over again as the vector grows.
    let mut read = Vec::with_capacity(bytes.len() / 256);
    let mut reader = LeafReader::new(layout);
    let doc = parse_taking(bytes, arena, &mut |at: ObjectStart<'a, '_>| {
        // A `tensor` member may be a `class_type` record's tensor, which `Leaf::from_node`
        // looks into; and a shape one level below the parser's depth limit is that limit's
        // error to give.
        if at.depth < first || at.depth + 1 >= MAX_DEPTH || at.key == Some("tensor") {
            return None;
        }
        let (leaf, len) = reader.read(at.text, at.pos, at.depth)?;
        read.push(ReadLeaf { leaf, len, depth: at.depth });
        Some(TakenObject { len, index: read.len() - 1 })
    })?;
    Ok(DumpDoc { doc, layout, read: ReadLeaves { leaves: read, strings: Some(arena) } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump_file::tests::laid_out;
    use crate::testing::{both_ways_agree, dump_files_below, read_straight};

    #[test]
    fn leaves_read_straight_from_the_text_take_apart_as_parsed_ones() {
        for indent in [Some(1), Some(2), Some(4), None] {
            let good = laid_out(Layout { indent });
            // The three tensors and both scalars (a scalar's value is kept as written, `1.50` too).
            assert_eq!(both_ways_agree(&good, DumpKind::Dump), 5, "indent {indent:?}");
            // One edit at every place: whatever each way makes of it, they agree.
            for i in 0..good.len() {
                for edit in [b' ', b'0', b'"', b'{', b'}'] {
                    let mut v = good.clone();
                    v[i] = edit;
                    both_ways_agree(&v, DumpKind::Dump);
                }
                both_ways_agree(&[&good[..i], &good[i + 1..]].concat(), DumpKind::Dump);
            }
            both_ways_agree(&good, DumpKind::Debug);
        }
    }

    /// Real msprobe output (`../shared/fixtures`, when it is beside the clone): both ways agree
    /// on every file, and most leaves are read straight. Synthesized files of every task, level
    /// and dtype are checked the same way by the synthesizer's tests.
    #[test]
    fn real_dump_files_take_apart_the_same_both_ways() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
        if !fixtures.is_dir() {
            eprintln!("skipping: ../shared/fixtures not found (real msprobe output needs it beside the clone)");
            return;
        }
        let files = dump_files_below(&fixtures);
        assert!(!files.is_empty(), "no dump files in {}", fixtures.display());
        let (read, leaves) = read_straight(&files);
        // Integer statistics, `class_type` records and container values are left to the
        // general way; the rest, most of every file, is read straight.
        assert!(read * 10 > leaves * 8, "{read} of {leaves} leaves read straight from {} files", files.len());
    }
}
