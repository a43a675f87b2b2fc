//! Checks shared by this crate's tests and those of the crates built on it (the synthesizer
//! runs them over its own files). They panic on a disagreement, as tests do; not for use
//! outside tests.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::dump_file::{rebuilds_source, take_apart, take_apart_read, take_apart_source, DumpKind, LeafRow};
use crate::json::{detect_layout, parse, Arena};
use crate::leaf::Leaf;
use crate::read_dump::parse_dump;

/// Takes `bytes` apart both ways, plainly parsed and with leaves read straight from the
/// text, and checks they agree on everything: rows, skeleton, errors, the rebuild check.
/// Returns how many leaves were read straight.
pub fn both_ways_agree(bytes: &[u8], kind: DumpKind) -> usize {
    let (arena, fast_arena) = (Arena::new(), Arena::new());
    let plain = parse(bytes, &arena);
    let fast = parse_dump(bytes, &fast_arena, kind);
    let (plain, fast) = match (plain, fast) {
        (Ok(plain), Ok(fast)) => (plain, fast),
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            return 0;
        }
        (a, b) => panic!("one way parses, the other not: {a:?} / {b:?}"),
    };
    let layout = detect_layout(bytes);
    assert_eq!(fast.layout, layout);
    let read = fast.read.leaves.len();
    let a = take_apart_source(&plain, bytes, kind, layout);
    let b = take_apart_read(&fast.doc, fast.read, bytes, kind, layout);
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            return read;
        }
        (a, b) => panic!("one way takes the file apart, the other not: {a:?} / {b:?}"),
    };
    assert_eq!((&a.header, a.layout, &a.skeleton, &a.names), (&b.header, b.layout, &b.skeleton, &b.names));
    assert_eq!(a.leaves.len(), b.leaves.len());
    for (x, y) in a.leaves.iter().zip(&b.leaves) {
        let bits = |l: &Leaf<'_>| l.stats.map(|s| s.map(f64::to_bits));
        let key = |r: &LeafRow<'_>| {
            (r.seq, r.leaf, r.entry, r.section.to_string(), r.path.to_string(), r.item.to_string(), r.node.pos, r.depth)
        };
        assert_eq!(key(x), key(y));
        let (xv, yv) = (a.value(x), b.value(y));
        assert_eq!(Leaf { stats: [None; 4], ..xv.clone() }, Leaf { stats: [None; 4], ..yv.clone() });
        assert_eq!(bits(xv), bits(yv));
        // A leaf read straight is its rendering by construction; the general way finds so.
        assert_eq!(x.exact_len, y.exact_len);
    }
    assert_eq!(rebuilds_source(&a, bytes).unwrap(), rebuilds_source(&b, bytes).unwrap());
    read
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
