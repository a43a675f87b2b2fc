//! Checks shared by this crate's tests and those of the crates built on it (the synthesizer
//! runs them over its own files). They panic on a disagreement, as tests do; not for use
//! outside tests.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::dump_file::{
    rebuilds_source, take_apart, take_apart_read, take_apart_source, DumpKind, LeafRow, ParsedDump,
};
use crate::entry_ranges::take_apart_cut;
use crate::json::{detect_layout, parse, Arena};
use crate::leaf::Leaf;
use crate::read_dump::{parse_dump, parse_dump_cut};
use crate::skeleton::skeleton_of;

/// Takes `bytes` apart both ways, plainly parsed and with leaves read straight from the
/// text, and checks they agree on everything: rows, skeleton, errors, the rebuild check.
/// Returns how many leaves were read straight.
pub fn both_ways_agree(bytes: &[u8], kind: DumpKind) -> usize {
    let (arena, fast_arena) = (Arena::new(), Arena::new());
    let plain = parse(bytes, &arena);
    let fast = parse_dump(bytes, &fast_arena, kind);
    // The third way: the leaves read straight, by three threads, each from a piece of `data`.
    let (cut_arena, mut piece_arenas) = (Arena::new(), [Arena::new(), Arena::new(), Arena::new()]);
    let cut = parse_dump_cut(bytes, &cut_arena, &mut piece_arenas, kind, 1);
    let (plain, fast, cut) = match (plain, fast, cut) {
        (Ok(plain), Ok(fast), Ok(cut)) => (plain, fast, cut),
        (Err(a), Err(b), Err(c)) => {
            assert_eq!(a, b);
            assert_eq!(a, c);
            return 0;
        }
        (a, b, c) => panic!("one way parses, another not: {a:?} / {b:?} / {c:?}"),
    };
    let layout = detect_layout(bytes);
    assert_eq!(fast.layout, layout);
    let read = fast.read.len();
    assert_eq!(cut.read.len(), read);
    // The fourth: the same pieces' rows walked in entry ranges on three threads, as an import
    // on several cores walks them, with the skeleton written apart.
    let (ranged_arena, mut ranged_pieces) = (Arena::new(), [Arena::new(), Arena::new(), Arena::new()]);
    let ranged = parse_dump_cut(bytes, &ranged_arena, &mut ranged_pieces, kind, 1).unwrap();
    let mut range_arenas = [Arena::new(), Arena::new(), Arena::new()];
    let a = take_apart_source(&plain, bytes, kind, layout);
    let b = take_apart_read(&fast.doc, fast.read, bytes, kind, layout);
    let c = take_apart_read(&cut.doc, cut.read, bytes, kind, layout);
    let d = take_apart_cut(&ranged.doc, ranged.read, bytes, kind, layout, &mut range_arenas, 1);
    let (a, b, c, mut d) = match (a, b, c, d) {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
        (Err(a), Err(b), Err(c), Err(d)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.to_string(), c.to_string());
            assert_eq!(a.to_string(), d.to_string());
            return read;
        }
        (a, b, c, d) => panic!("one way takes the file apart, another not: {a:?} / {b:?} / {c:?} / {d:?}"),
    };
    assert_same_rows(&a, &c, bytes);
    assert_same_rows(&a, &b, bytes);
    assert!(d.skeleton.is_empty());
    d.skeleton = skeleton_of(&ranged.doc, kind);
    assert_same_rows(&a, &d, bytes);
    // The skeleton written on its own, as an import on several cores writes it.
    assert_eq!(skeleton_of(&plain, kind), a.skeleton);
    assert_eq!(skeleton_of(&cut.doc, kind), a.skeleton);
    read
}

/// Checks that two ways of taking a file apart agree on everything: rows, values, skeleton and
/// the rebuild check.
fn assert_same_rows(a: &ParsedDump<'_>, b: &ParsedDump<'_>, bytes: &[u8]) {
    assert_eq!((&a.header, a.layout, &a.skeleton, &a.names), (&b.header, b.layout, &b.skeleton, &b.names));
    assert_eq!(a.leaves.len(), b.leaves.len());
    for (x, y) in a.leaves.iter().zip(&b.leaves) {
        let bits = |l: &Leaf<'_>| l.stats.map(|s| s.map(f64::to_bits));
        let key = |r: &LeafRow<'_>| {
            (r.seq, r.leaf, r.entry, r.section.to_string(), r.path.to_string(), r.item.to_string(), r.node.pos, r.depth)
        };
        assert_eq!(key(x), key(y));
        let (xv, yv) = (a.value(x).to_leaf(), b.value(y).to_leaf());
        assert_eq!(bits(&xv), bits(&yv));
        assert_eq!(Leaf { stats: [None; 4], ..xv }, Leaf { stats: [None; 4], ..yv });
        // A leaf read straight is its rendering by construction; the general way finds so.
        assert_eq!(x.exact_len, y.exact_len);
    }
    assert_eq!(rebuilds_source(a, bytes).unwrap(), rebuilds_source(b, bytes).unwrap());
}

/// Every file below `root`, in path order.
pub fn files_below(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path)
            } else {
                out.push(path)
            }
        }
    }
    out.sort();
    out
}

/// Every dump.json and debug.json below `dir`, in path order.
pub fn dump_files_below(dir: &Path) -> Vec<PathBuf> {
    let is_dump = |p: &PathBuf| p.file_name().is_some_and(|n| n == "dump.json" || n == "debug.json");
    files_below(dir).into_iter().filter(is_dump).collect()
}

/// Checks [`both_ways_agree`] on each file; returns how many leaves were read straight from
/// the text and how many there are in all.
pub fn read_straight(files: &[PathBuf]) -> (usize, usize) {
    let (mut read, mut leaves) = (0, 0);
    for path in files {
        let bytes = std::fs::read(path).unwrap();
        let kind = if path.ends_with("debug.json") { DumpKind::Debug } else { DumpKind::Dump };
        read += both_ways_agree(&bytes, kind);
        let arena = Arena::new();
        leaves += take_apart(&parse(&bytes, &arena).unwrap(), kind, detect_layout(&bytes)).unwrap().leaves.len();
    }
    (read, leaves)
}
