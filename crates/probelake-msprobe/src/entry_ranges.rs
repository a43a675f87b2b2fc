//! Taking one large dump file apart on several cores: the entries of its `data` in ranges of
//! about equal bytes, a thread each.
//!
//! A rank's dump.json is one file, and after its parse (itself in pieces) the walk that turns
//! its entries into rows was the longest stretch of an import on one core while the others
//! waited. Entries are independent of each other but for one rule: no name twice. So each
//! range walks its entries into rows of its own, leaves of its own (a piece of the values,
//! [`piece_index`]) and strings of its own (an arena each), while one more pass checks the
//! names of all entries in file order. The rows, values and errors are those of
//! [`take_apart_read`](crate::take_apart_read) but for the skeleton, which
//! [`skeleton_of`](crate::skeleton::skeleton_of) writes where it is wanted.

use std::borrow::Cow;

use crate::dump_file::{
    check_entry_name, count_leaves, header_and_data, DumpKind, DumpParts, EntryNames, LeafRow, ParsedDump,
    SkeletonText, Walk, WalkOut,
};
use crate::error::MsprobeError as CodecError;
use crate::json::{Arena, Layout, Node};
use crate::leaf::LeafSource;
use crate::leaf_text::{piece_index, LeafValues, ReadLeaves};
use crate::name::{parse_entry_name, EntryName};
use crate::stored_leaf::ReadLeaf;

/// Files smaller than this are walked in one range: a thread costs more than it saves on them.
pub(crate) const MIN_RANGE_BYTES: usize = 2 << 20;

/// Takes the document of a dump file apart as [`take_apart_read`](crate::take_apart_read)
/// does, without its skeleton ([`ParsedDump::skeleton`] is empty): the entries in up to
/// `arenas.len()` ranges of at least [`MIN_RANGE_BYTES`] of the file, one thread each (the
/// caller's among them), each range's strings in its arena. The error is the one the walk in
/// file order meets first.
pub(crate) fn take_apart_in_ranges<'a>(
    doc: &'a Node<'a>,
    read: ReadLeaves<'a>,
    source: &[u8],
    kind: DumpKind,
    layout: Layout,
    arenas: &'a mut [Arena],
) -> Result<ParsedDump<'a>, CodecError> {
    take_apart_cut(doc, read, source, kind, layout, arenas, MIN_RANGE_BYTES)
}

/// [`take_apart_in_ranges`] with ranges of at least `min_range_bytes` (tests cut small files).
pub(crate) fn take_apart_cut<'a>(
    doc: &'a Node<'a>,
    mut read: ReadLeaves<'a>,
    source: &[u8],
    kind: DumpKind,
    layout: Layout,
    arenas: &'a mut [Arena],
    min_range_bytes: usize,
) -> Result<ParsedDump<'a>, CodecError> {
    let DumpParts { header, entries, .. } = header_and_data(doc, kind)?;
    if arenas.is_empty() {
        return Err(CodecError::Internal("no arena for the rows' strings".into()));
    }
    // Each range's leaves are a piece of the values after those the parse read.
    let first_piece = read.values.pieces.len() + 1;
    let most = (source.len() / min_range_bytes.max(1)).min(PIECES.saturating_sub(first_piece));
    let starts = range_starts(entries, arenas.len().min(most).max(1));
    let values = &read.values;
    let place = Place { source, layout, kind, values };
    let walked: Vec<RangeRows<'a>> = {
        let mut jobs = arenas.iter_mut().zip(starts.windows(2)).enumerate().map(|(r, (arena, bounds))| {
            let (first, end) = (bounds[0], bounds[1]);
            let range = Range { entries: &entries[first..end], first, piece: first_piece + r };
            (range, arena)
        });
        let own = jobs.next();
        std::thread::scope(|scope| {
            let others: Vec<_> =
                jobs.map(|(range, arena)| scope.spawn(move || walk_range(range, arena, place, Room::Own))).collect();
            // Beside the ranges, the names' pass has a thread of its own where there are
            // others: on the first range's it made that range the last to end, the other
            // cores idle meanwhile.
            let names_pass = (!others.is_empty()).then(|| scope.spawn(|| first_bad_name(entries)));
            // The first range's rows are the start of all the rows: room for them all, so that
            // the others' are appended without a copy of the first's.
            let all: usize = entries.iter().map(|(_, e)| count_leaves(e)).sum();
            let room = Room::All { rows: all, names: entries.len() };
            let mut walked = Vec::with_capacity(others.len() + 1);
            walked.extend(own.map(|(range, arena)| walk_range(range, arena, place, room)));
            for other in others {
                walked.push(other.join().unwrap_or_else(|_| RangeRows::failed("a range's thread")));
            }
            let twice = match names_pass {
                Some(pass) => pass.join().unwrap_or_else(|_| Some((0, CodecError::Internal("names' thread".into())))),
                None => first_bad_name(entries),
            };
            // The error the walk in file order meets first: the names' at an entry come before
            // its slots'.
            let walk_error = walked.iter_mut().find_map(|w| w.error.take());
            match (twice, walk_error) {
                (Some((at, e)), Some((walk_at, _))) if at <= walk_at => Err(e),
                (_, Some((_, e))) | (Some((_, e)), None) => Err(e),
                (None, None) => Ok(walked),
            }
        })?
    };
    let mut ranges = walked.into_iter();
    let (mut names, mut leaves) = match ranges.next() {
        Some(first) => {
            read.values.pieces.push(first.taken);
            (first.names, first.leaves)
        }
        None => (Vec::new(), Vec::new()),
    };
    for mut range in ranges {
        names.append(&mut range.names);
        leaves.append(&mut range.leaves);
        read.values.pieces.push(range.taken);
    }
    Ok(ParsedDump { doc, header, layout, skeleton: String::new(), names, leaves, values: read.values })
}

/// The pieces a leaf's index can number ([`piece_index`]): the parse's and the ranges' together.
const PIECES: usize = 255;

/// Where every range walks: the file and the leaves read with the document.
#[derive(Clone, Copy)]
struct Place<'p, 'a> {
    source: &'p [u8],
    layout: Layout,
    kind: DumpKind,
    values: &'p LeafValues<'a>,
}

/// Entries `first..` of `data`, whose taken-apart leaves are piece `piece` of the values.
struct Range<'a> {
    entries: &'a [(Cow<'a, str>, Node<'a>)],
    first: usize,
    piece: usize,
}

/// What one range gave: its rows, its entries' names and the leaves it took apart, or the
/// error its walk stopped at, with the entry it was met at.
struct RangeRows<'a> {
    names: Vec<EntryName<'a>>,
    leaves: Vec<LeafRow<'a>>,
    taken: Vec<ReadLeaf<'a>>,
    error: Option<(usize, CodecError)>,
}

impl RangeRows<'_> {
    fn failed(what: &str) -> Self {
        let error = Some((0, CodecError::Internal(format!("{what} stopped"))));
        RangeRows { names: Vec::new(), leaves: Vec::new(), taken: Vec::new(), error }
    }
}

/// The first entry of each of up to `ranges` ranges of about equal bytes of the file, then the
/// end: never an empty range.
fn range_starts(entries: &[(Cow<'_, str>, Node<'_>)], ranges: usize) -> Vec<usize> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return vec![0, 0] };
    let (from, to) = (first.1.pos, last.1.pos);
    let mut starts = vec![0];
    for r in 1..ranges {
        let at = from + (to - from) * r / ranges;
        let start = entries.partition_point(|(_, e)| e.pos < at);
        if start > starts[starts.len() - 1] && start < entries.len() {
            starts.push(start);
        }
    }
    starts.push(entries.len());
    starts
}

/// How many rows and names a range's vectors have room for.
#[derive(Clone, Copy)]
enum Room {
    /// The range's own.
    Own,
    /// Those of every range: the first range's vectors are the start of all.
    All { rows: usize, names: usize },
}

/// Walks one range's entries into rows, stopping at the first error.
fn walk_range<'a>(range: Range<'a>, strings: &'a Arena, place: Place<'_, 'a>, room: Room) -> RangeRows<'a> {
    let (rows, names) = match room {
        Room::Own => (range.entries.iter().map(|(_, e)| count_leaves(e)).sum(), range.entries.len()),
        Room::All { rows, names } => (rows, names),
    };
    let mut out = RangeRows {
        names: Vec::with_capacity(names),
        leaves: Vec::with_capacity(rows),
        taken: Vec::new(),
        error: None,
    };
    if piece_index(range.piece, 0).is_none() {
        out.error = Some((range.first, CodecError::Internal("too many pieces for the leaves' index".into())));
        return out;
    }
    let (mut scratch, mut skeleton) = ((Vec::new(), Vec::new()), SkeletonText::none());
    let (mut path, mut item) = (String::new(), String::new());
    let source = LeafSource { bytes: place.source, layout: place.layout, depth: 0 };
    let to = WalkOut {
        rows: &mut out.leaves,
        taken: &mut out.taken,
        strings: Some(strings),
        skeleton: &mut skeleton,
        scratch: &mut scratch,
        path: &mut path,
        item: &mut item,
    };
    let mut walk = Walk::new(source, place.values, range.piece, to);
    for (i, (name, entry)) in range.entries.iter().enumerate() {
        let seq = range.first + i;
        // A huge name is not walked: its error comes from the names' pass.
        let walked = check_entry_name(name, entry, None).and_then(|()| {
            out.names.push(parse_entry_name(name));
            walk.entry(seq, place.kind, name, entry)
        });
        if let Err(e) = walked {
            out.error = Some((seq, e));
            break;
        }
    }
    out
}

/// The first entry whose name fails [`check_entry_name`] (too long, or seen before), with
/// its error.
fn first_bad_name<'a>(entries: &'a [(Cow<'a, str>, Node<'a>)]) -> Option<(usize, CodecError)> {
    let mut seen = EntryNames::with_capacity_and_hasher(entries.len(), Default::default());
    entries
        .iter()
        .enumerate()
        .find_map(|(seq, (name, entry))| check_entry_name(name, entry, Some(&mut seen)).err().map(|e| (seq, e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{detect_layout, parse};
    use crate::take_apart_source;
    use crate::testing::both_ways_agree;

    /// A dump.json of `names.len()` entries in json.dump's `indent=1` layout, entry `i` named
    /// `names[i]` and holding one statistics leaf, or the value `5` where `bad` says.
    fn dump(names: &[&str], bad: Option<usize>) -> Vec<u8> {
        let leaf = r#"{"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}]}"#;
        let entries: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("{name:?}: {}", if bad == Some(i) { "5" } else { leaf }))
            .collect();
        let text = format!(
            r#"{{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {{{}}}}}"#,
            entries.join(", ")
        );
        let arena = Arena::new();
        let mut out = Vec::new();
        let _ = crate::json::write_node::<()>(
            &mut out,
            &parse(text.as_bytes(), &arena).unwrap(),
            Layout { indent: Some(1) },
            0,
            &mut |_, _| Ok(()),
        );
        out
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("Functional.f{i}.0.forward")).collect()
    }

    /// The error of the walk in file order, which `both_ways_agree` checks every way gives.
    fn error_of(bytes: &[u8]) -> String {
        let arena = Arena::new();
        let doc = parse(bytes, &arena).unwrap();
        take_apart_source(&doc, bytes, DumpKind::Dump, detect_layout(bytes)).unwrap_err().to_string()
    }

    #[test]
    fn ranges_give_the_rows_of_the_walk_in_file_order() {
        let owned = names(9);
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        assert_eq!(both_ways_agree(&dump(&names, None), DumpKind::Dump), 9);
    }

    #[test]
    fn the_first_error_in_file_order_is_given_whichever_range_meets_it() {
        let owned = names(9);
        let mut names: Vec<&str> = owned.iter().map(String::as_str).collect();
        // A name seen in an earlier range, after an entry that is not an object: the entry first.
        names[7] = names[1];
        let bytes = dump(&names, Some(3));
        both_ways_agree(&bytes, DumpKind::Dump);
        assert!(error_of(&bytes).contains("must be an object"), "{}", error_of(&bytes));
        // The name twice before the bad entry: the name first.
        let bytes = dump(&names, Some(8));
        both_ways_agree(&bytes, DumpKind::Dump);
        assert!(error_of(&bytes).contains("appears twice"), "{}", error_of(&bytes));
        // Both at one entry: its name is checked before its slots.
        let bytes = dump(&names, Some(7));
        both_ways_agree(&bytes, DumpKind::Dump);
        assert!(error_of(&bytes).contains("appears twice"), "{}", error_of(&bytes));
    }

    #[test]
    fn ranges_cover_every_entry_once_and_none_is_empty() {
        let owned = names(50);
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        let bytes = dump(&names, None);
        let arena = Arena::new();
        let doc = parse(&bytes, &arena).unwrap();
        let entries = header_and_data(&doc, DumpKind::Dump).unwrap().entries;
        for ranges in [1, 2, 3, 7, 50, 80] {
            let starts = range_starts(entries, ranges);
            assert_eq!((starts[0], starts[starts.len() - 1]), (0, 50), "{ranges} ranges");
            assert!(starts.windows(2).all(|w| w[0] < w[1]), "{ranges} ranges: {starts:?}");
            // Entries of about equal bytes: as many ranges as asked for, where there are entries.
            assert!(starts.len() - 1 <= ranges.min(50), "{ranges} ranges: {starts:?}");
            if ranges <= 7 {
                assert_eq!(starts.len() - 1, ranges, "{ranges} ranges: {starts:?}");
            }
        }
        assert_eq!(range_starts(&[], 4), [0, 0]);
    }
}
