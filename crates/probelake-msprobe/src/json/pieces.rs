//! One large object of a document parsed in pieces, one thread each: a dump.json is a few
//! header members and one `data` object of thousands of entries, and its parse was the longest
//! part of importing one file.
//!
//! The pieces are cut where an indented layout puts a member of that object at the start of a
//! line, which only a byte scan finds; nothing is trusted from it. Each piece is parsed from a
//! member name with the parser in the state the whole document's parser would be in there,
//! and must end exactly where the next begins: the first piece starts at the object's first
//! member, found by the parser of the whole document, so by induction every piece is what the
//! whole document's parser would have read. Where a piece does not fit (a layout other than
//! the scan expects, or bad input), the document is parsed whole, and a syntax error is
//! always the one the whole parse gives.

use super::parse::{
    parse_piece, parse_text, Arena, Members, Node, ObjectStart, PieceBounds, Splice, SyntaxError, TakenObject,
};

/// Where, in the first bytes of a document, a splittable object's name may be found.
const HEADER_BYTES: usize = 4096;

/// What [`parse_in_pieces`] gives back.
#[derive(Debug)]
pub struct PieceParse<'a> {
    /// The document.
    pub doc: Node<'a>,
    /// Whether the pieces were used: where they were not, only `readers[0]` read the objects
    /// of the document, and what the other readers read is not in it.
    pub pieces_used: bool,
}

/// [`parse_taking`](super::parse_taking) of a document laid out with `indent` spaces per
/// level, with the members of its top-level object's member `key` (an object) parsed in up to
/// `pieces.len()` pieces, one thread each (the caller's among them). Piece `i` keeps its values
/// in `pieces[i]` and offers its objects to `take(&mut readers[i + 1], ..)`; the rest of the
/// document is parsed after them, into `arena`, offering its objects to `readers[0]`.
pub fn parse_in_pieces<'a, R, T>(
    input: &'a [u8],
    arena: &'a Arena,
    pieces: &'a mut [Arena],
    key: &str,
    indent: usize,
    readers: &mut [R],
    take: &T,
) -> Result<PieceParse<'a>, SyntaxError>
where
    R: Send,
    T: Fn(&mut R, ObjectStart<'a, '_>) -> Option<TakenObject> + Sync,
{
    let Some((main_reader, piece_readers)) = readers.split_first_mut() else {
        return Err(SyntaxError {
            offset: 0,
            line: 1,
            column: 1,
            path: "$".into(),
            message: "internal error: no reader for the document".into(),
        });
    };
    let whole = |reader: &mut R| -> Result<PieceParse<'a>, SyntaxError> {
        let doc = super::parse_taking(input, arena, &mut |at| take(reader, at))?;
        Ok(PieceParse { doc, pieces_used: false })
    };
    let count = pieces.len().min(piece_readers.len());
    let Ok(text) = std::str::from_utf8(input) else { return whole(main_reader) };
    let Some((first_member, starts)) = piece_starts(input, key, indent, count) else { return whole(main_reader) };

    let depth = 2;
    let starts = &starts;
    let piece = move |i: usize, arena: &'a mut Arena, reader: &mut R| {
        let arena: &'a Arena = arena;
        let bounds = PieceBounds { depth, stop: starts.get(i + 1).copied() };
        parse_piece(text, arena, starts[i], bounds, Some(&mut |at| take(reader, at)))
    };
    let mut jobs = pieces.iter_mut().zip(piece_readers.iter_mut()).take(starts.len()).enumerate();
    let Some((_, (first_arena, first_reader))) = jobs.next() else { return whole(main_reader) };
    let parsed: Vec<Option<(Members<'a>, usize)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.map(|(i, (arena, reader))| scope.spawn(move || piece(i, arena, reader))).collect();
        let first = piece(0, first_arena, first_reader);
        std::iter::once(first).chain(handles.into_iter().map(|h| h.join().ok().flatten())).collect()
    });
    // Every piece must end where the next begins; the last at the object's `}`.
    let mut members = Vec::with_capacity(parsed.len());
    let mut end = None;
    for (i, piece) in parsed.into_iter().enumerate() {
        let Some((piece_members, piece_end)) = piece else { return whole(main_reader) };
        if starts.get(i + 1).is_some_and(|next| *next != piece_end) {
            return whole(main_reader);
        }
        members.push(piece_members);
        end = Some(piece_end);
    }
    let Some(end) = end else { return whole(main_reader) };
    let splice = Splice { first_member, depth, members, end };
    let (doc, spliced) = parse_text(text, arena, false, Some(&mut |at| take(main_reader, at)), Some(splice))?;
    Ok(PieceParse { doc, pieces_used: spliced })
}

/// Where the members of the top-level object's member `key` begin, and where to cut them into
/// up to `count` pieces of about equal bytes: the first member's position, and each piece's
/// first member (the first piece's is the first member). `None` where the object is not found
/// laid out with `indent`, or is too small to cut in two.
fn piece_starts(input: &[u8], key: &str, indent: usize, count: usize) -> Option<(usize, Vec<usize>)> {
    if indent == 0 || count < 2 {
        return None;
    }
    // `\n "data": {` at the top level, then the first member's name after a newline.
    let mut opening = Vec::with_capacity(key.len() + indent + 8);
    opening.push(b'\n');
    opening.resize(1 + indent, b' ');
    opening.push(b'"');
    opening.extend_from_slice(key.as_bytes());
    opening.extend_from_slice(b"\": {");
    let head = &input[..input.len().min(HEADER_BYTES)];
    let at = head.windows(opening.len()).position(|w| w == opening.as_slice())? + opening.len();
    let first_member = at + input.get(at..)?.iter().position(|b| !b.is_ascii_whitespace())?;
    if input.get(first_member) != Some(&b'"') {
        return None;
    }
    // A member of that object starts a line after `,` and two levels of indentation.
    let mut cut = Vec::with_capacity(2 * indent + 3);
    cut.extend_from_slice(b",\n");
    cut.resize(2 + 2 * indent, b' ');
    cut.push(b'"');
    let span = input.len() - first_member;
    let mut starts = vec![first_member];
    for i in 1..count {
        let target = first_member + span / count * i;
        let from = target.max(starts.last().copied().unwrap_or(first_member) + 1);
        let Some(found) = input.get(from..).and_then(|rest| rest.windows(cut.len()).position(|w| w == cut.as_slice()))
        else {
            break;
        };
        starts.push(from + found + cut.len() - 1);
    }
    (starts.len() >= 2).then_some((first_member, starts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse_taking, Value};

    /// A document in json.dump's layout with `indent`: a header and a `data` object of `n`
    /// entries, each holding an object.
    fn document(indent: usize, n: usize) -> String {
        let pad = |level: usize| " ".repeat(indent * level);
        let mut s = format!("{{\n{}\"task\": \"statistics\",\n{}\"data\": {{", pad(1), pad(1));
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "\n{}\"entry.{i}\": {{\n{}\"output\": [\n{}{{\n{}\"Max\": {i}.5\n{}}}\n{}]\n{}}}",
                pad(2),
                pad(3),
                pad(4),
                pad(5),
                pad(4),
                pad(3),
                pad(2)
            ));
        }
        s.push_str(&format!("\n{}}},\n{}\"tail\": [1, 2]\n}}", pad(1), pad(1)));
        s
    }

    /// Takes every object holding `Max`, numbering them per reader from `reader * 1000`.
    fn taker(reader: &mut (usize, Vec<usize>), at: ObjectStart<'_, '_>) -> Option<TakenObject> {
        let rest = &at.text[at.pos..];
        if !rest[1..].trim_start().starts_with("\"Max\"") {
            return None;
        }
        let len = rest.find('}')? + 1;
        reader.1.push(at.pos);
        Some(TakenObject { len, index: reader.0 * 1000 + reader.1.len() - 1 })
    }

    fn parse_both(text: &str, indent: usize, pieces: usize) -> (Node<'static>, Node<'static>, bool, Vec<Vec<usize>>) {
        let text: &'static str = Box::leak(text.to_string().into_boxed_str());
        let arena: &'static Arena = Box::leak(Box::new(Arena::new()));
        let whole = parse_taking(text.as_bytes(), arena, &mut |at| taker(&mut (0, Vec::new()), at)).expect("parses");
        let arena: &'static Arena = Box::leak(Box::new(Arena::new()));
        let piece_arenas: &'static mut [Arena] =
            Box::leak((0..pieces).map(|_| Arena::new()).collect::<Vec<_>>().into());
        let mut readers: Vec<(usize, Vec<usize>)> = (0..=pieces).map(|i| (i, Vec::new())).collect();
        let parsed = parse_in_pieces(text.as_bytes(), arena, piece_arenas, "data", indent, &mut readers, &taker)
            .expect("parses in pieces");
        (whole, parsed.doc, parsed.pieces_used, readers.into_iter().map(|r| r.1).collect())
    }

    /// The document with each taken object's number dropped: pieces number theirs their own way.
    fn shape(node: &Node<'_>) -> String {
        match &node.value {
            Value::Taken { text, .. } => format!("T{}:{text}", node.pos),
            Value::Object(members) => {
                let inner: Vec<String> = members.iter().map(|(k, v)| format!("{k}={}", shape(v))).collect();
                format!("{}{{{}}}", node.pos, inner.join(","))
            }
            Value::Array(items) => format!("{}[{}]", node.pos, items.iter().map(shape).collect::<Vec<_>>().join(",")),
            other => format!("{}:{other:?}", node.pos),
        }
    }

    #[test]
    fn pieces_give_the_document_the_whole_parse_gives() {
        for indent in [1, 2, 4] {
            for (n, pieces) in [(1, 3), (2, 1), (7, 2), (40, 3), (100, 7)] {
                let text = document(indent, n);
                let (whole, split, used, readers) = parse_both(&text, indent, pieces);
                assert_eq!(shape(&whole), shape(&split), "indent {indent}, {n} entries, {pieces} pieces");
                // Every object is taken once, by one reader, in file order within each.
                let taken: usize = readers.iter().map(Vec::len).sum();
                assert_eq!(taken, n, "indent {indent}, {n} entries, {pieces} pieces");
                if n >= 2 * (pieces + 1) {
                    assert!(used, "indent {indent}, {n} entries, {pieces} pieces: not split");
                    assert!(readers[0].is_empty() && readers[1..].iter().all(|r| !r.is_empty()));
                }
            }
        }
    }

    #[test]
    fn a_layout_the_scan_misreads_is_parsed_whole() {
        // Declared with indent 2, laid out with 1: no cut is found, or none fits.
        let text = document(1, 40);
        let (whole, split, used, _) = parse_both(&text, 2, 3);
        assert_eq!(shape(&whole), shape(&split));
        assert!(!used);
        // A line that looks like a member of `data` but is one level deeper.
        let text = document(2, 40).replace("\"output\": [", "\"output\": [],\n    \"x\": [");
        let (whole, split, _, _) = parse_both(&text, 2, 3);
        assert_eq!(shape(&whole), shape(&split));
    }

    #[test]
    fn errors_are_the_whole_parses_wherever_they_are() {
        let good = document(1, 30);
        for at in (0..good.len()).step_by(7) {
            for edit in ["", "x", "}", "\"", ",\n  \"", "\n"] {
                let bad = format!("{}{edit}{}", &good[..at], &good[at + 1..]);
                let arena = Arena::new();
                let whole =
                    parse_taking(bad.as_bytes(), &arena, &mut |at| taker(&mut (0, Vec::new()), at)).map(|n| shape(&n));
                let arena = Arena::new();
                let mut piece_arenas: Vec<Arena> = (0..3).map(|_| Arena::new()).collect();
                let mut readers: Vec<(usize, Vec<usize>)> = (0..4).map(|i| (i, Vec::new())).collect();
                let split = parse_in_pieces(bad.as_bytes(), &arena, &mut piece_arenas, "data", 1, &mut readers, &taker)
                    .map(|p| shape(&p.doc));
                assert_eq!(whole, split, "edit {edit:?} at {at}");
            }
        }
    }
}
