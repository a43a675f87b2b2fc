//! A dump file parsed with its leaves read straight from the text ([`LeafReader`]): what
//! import takes apart. [`take_apart_read`] gives the same rows from it as
//! [`take_apart_source`] gives from a plainly parsed document; the tests here hold the two
//! ways to that on real and edited files (the synthesizer's tests, on its own files).
//!
//! [`take_apart_read`]: crate::take_apart_read
//! [`take_apart_source`]: crate::take_apart_source
//! [`Value::Taken`]: crate::json::Value::Taken

use crate::json::{
    detect_layout, parse_in_pieces, parse_taking, Arena, Layout, Node, ObjectStart, PieceParse, SyntaxError,
    TakenObject, MAX_DEPTH,
};

use crate::dump_file::{DumpKind, ENTRY_DEPTH};
use crate::leaf_text::{piece_index, LeafReader, LeafValues, ReadLeaves};
use crate::stored_leaf::{ReadLeaf, StoredLeaf};

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
    parse_dump_in_pieces(bytes, arena, &mut [], kind)
}

/// The most pieces a file is parsed in.
const MAX_PIECES: usize = 127;

/// Files smaller than this are parsed whole: a thread costs more than it saves on them.
pub const MIN_PIECE_BYTES: usize = 1 << 20;

/// [`parse_dump`], with the entries of an indented file's `data` parsed in up to
/// `pieces.len()` pieces of at least [`MIN_PIECE_BYTES`], one thread each (the caller's among
/// them), each piece's values in its arena of `pieces` ([`parse_in_pieces`]). The document,
/// its rows and its errors are [`parse_dump`]'s.
pub fn parse_dump_in_pieces<'a>(
    bytes: &'a [u8],
    arena: &'a Arena,
    pieces: &'a mut [Arena],
    kind: DumpKind,
) -> Result<DumpDoc<'a>, SyntaxError> {
    parse_dump_cut(bytes, arena, pieces, kind, MIN_PIECE_BYTES)
}

/// [`parse_dump_in_pieces`] with pieces of at least `min_piece_bytes` (tests cut small files).
pub(crate) fn parse_dump_cut<'a>(
    bytes: &'a [u8],
    arena: &'a Arena,
    pieces: &'a mut [Arena],
    kind: DumpKind,
    min_piece_bytes: usize,
) -> Result<DumpDoc<'a>, SyntaxError> {
    let layout = detect_layout(bytes);
    // Leaves are values inside the slots of dump.json's entries, and debug.json's entries
    // themselves; above those, an object is never a leaf, whatever it holds.
    let first = match kind {
        DumpKind::Dump => ENTRY_DEPTH + 1,
        DumpKind::Debug => ENTRY_DEPTH,
    };
    // One piece is the whole parse, with its leaves outside any piece; a file without
    // indentation has no lines to cut at.
    // At most half the pieces a leaf's index can number: the walk's ranges number the rest.
    let count = match pieces.len().min(bytes.len() / min_piece_bytes.max(1)).min(MAX_PIECES) {
        n if n >= 2 && layout.indent.is_some_and(|i| i > 0) => n,
        _ => 0,
    };
    let pieces = &mut pieces[..count];
    // msprobe's leaves take ~290 bytes each in its layout: room for all but an odd file's, so
    // that a file's kept leaves (152 bytes each) are not copied over again as the vector grows.
    let room = bytes.len() / 256 / count.max(1);
    let mut readers: Vec<PieceReader<'a>> = (0..=count)
        .map(|piece| PieceReader {
            piece,
            reader: LeafReader::new(layout),
            // Outside the pieces there is only the header.
            read: Vec::with_capacity(if piece == 0 && count > 0 { 0 } else { room }),
        })
        .collect();
    let take = |r: &mut PieceReader<'a>, at: ObjectStart<'a, '_>| {
        // A `tensor` member may be a `class_type` record's tensor, which `Leaf::from_node`
        // looks into; and a shape one level below the parser's depth limit is that limit's
        // error to give.
        if at.depth < first || at.depth + 1 >= MAX_DEPTH || at.key == Some("tensor") {
            return None;
        }
        let index = piece_index(r.piece, r.read.len())?;
        let (leaf, len) = r.reader.read_text(at.text, at.pos, at.depth)?;
        r.read.push(ReadLeaf { leaf: StoredLeaf::Text(leaf), len, depth: at.depth });
        Some(TakenObject { len, index })
    };
    let parsed = match layout.indent {
        Some(indent) if count > 0 => {
            parse_in_pieces(bytes, arena, pieces, "data", usize::from(indent), &mut readers, &take)?
        }
        _ => {
            let main = readers.first_mut().ok_or_else(|| internal("no reader"))?;
            PieceParse { doc: parse_taking(bytes, arena, &mut |at| take(main, at))?, pieces_used: false }
        }
    };
    let mut readers = readers.into_iter().map(|r| r.read);
    let leaves = readers.next().unwrap_or_default();
    let pieces = if parsed.pieces_used { readers.collect() } else { Vec::new() };
    Ok(DumpDoc {
        doc: parsed.doc,
        layout,
        read: ReadLeaves { values: LeafValues { leaves, pieces }, strings: Some(arena) },
    })
}

/// The reader of one piece of a file: its leaves, numbered by [`piece_index`].
struct PieceReader<'a> {
    piece: usize,
    reader: LeafReader,
    read: Vec<ReadLeaf<'a>>,
}

fn internal(message: &str) -> SyntaxError {
    SyntaxError { offset: 0, line: 1, column: 1, path: "$".into(), message: format!("internal error: {message}") }
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

    /// Real msprobe output (the repository's `tests/data/fixtures`): both ways agree
    /// on every file, and most leaves are read straight. Synthesized files of every task, level
    /// and dtype are checked the same way by the synthesizer's tests.
    #[test]
    fn real_dump_files_take_apart_the_same_both_ways() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures");
        if !fixtures.is_dir() {
            eprintln!("skipping: {} not found (a copy of the crate without the repository)", fixtures.display());
            return;
        }
        let files = dump_files_below(&fixtures);
        assert!(!files.is_empty(), "no dump files in {}", fixtures.display());
        let (read, leaves) = read_straight(&files);
        // Each way agreed on every file; most were cut into pieces for the third.
        let cut = files
            .iter()
            .filter(|path| {
                let bytes = std::fs::read(path).unwrap();
                let (arena, mut pieces) = (Arena::new(), [Arena::new(), Arena::new(), Arena::new()]);
                !parse_dump_cut(&bytes, &arena, &mut pieces, DumpKind::Dump, 1).unwrap().read.values.pieces.is_empty()
            })
            .count();
        assert!(cut * 2 > files.len(), "{cut} of {} files cut into pieces", files.len());
        // Integer statistics, `class_type` records and container values are left to the
        // general way; the rest, most of every file, is read straight.
        assert!(read * 10 > leaves * 8, "{read} of {leaves} leaves read straight from {} files", files.len());
    }
}
