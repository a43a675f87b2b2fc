//! A dump file parsed with its leaves read straight from the text ([`LeafReader`]): what
//! import takes apart. [`take_apart_read`] gives the same rows from it as
//! [`take_apart_source`] gives from a plainly parsed document; the tests here hold the two
//! ways to that on real, synthesized and edited files.
//!
//! [`take_apart_read`]: super::take_apart_read
//! [`take_apart_source`]: super::take_apart_source
//! [`Value::Taken`]: crate::json::Value::Taken

use crate::json::{detect_layout, parse_taking, Arena, Layout, Node, ObjectStart, SyntaxError, TakenObject, MAX_DEPTH};

use super::dump_file::{DumpKind, ENTRY_DEPTH};
use super::leaf::Leaf;
use super::leaf_text::LeafReader;

/// A dump file parsed for [`take_apart_read`](super::take_apart_read): the document, its
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

/// The leaves [`parse_dump`] read straight from a file's text, in the order it met them; the
/// document's [`Value::Taken`](crate::json::Value::Taken) nodes hold their indexes.
#[derive(Debug, Default)]
pub struct ReadLeaves<'a> {
    pub(super) leaves: Vec<ReadLeaf<'a>>,
    /// The arena the document was parsed into, which keeps the rows' `path` and `item` too:
    /// two allocations and two frees a leaf fewer.
    pub(super) strings: Option<&'a Arena>,
}

#[derive(Debug)]
pub(super) struct ReadLeaf<'a> {
    pub(super) leaf: Leaf<'a>,
    /// The length of its text, which is its rendering at `depth`.
    pub(super) len: usize,
    pub(super) depth: usize,
}

/// Parses a dump.json or debug.json, reading every leaf whose text is exactly
/// [`Leaf::render`]'s straight into columns on the way (the bulk of an import's work
/// otherwise: see [`LeafReader`]). [`take_apart_read`](super::take_apart_read) takes the
/// result apart to the same rows as [`take_apart_source`](super::take_apart_source) takes a
/// plainly [`parse`](crate::json::parse)d document.
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
    use crate::json::parse;
    use crate::msprobe::dump_file::tests::laid_out;
    use crate::msprobe::dump_file::{rebuilds_source, take_apart, take_apart_read, take_apart_source, LeafRow};

    /// Takes `bytes` apart both ways, plainly parsed and with leaves read straight from the
    /// text, and checks they agree on everything: rows, skeleton, errors, the rebuild check.
    /// Returns how many leaves were read straight.
    pub(crate) fn both_ways_agree(bytes: &[u8], kind: DumpKind) -> usize {
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
                (
                    r.seq,
                    r.leaf,
                    r.entry,
                    r.section.to_string(),
                    r.path.to_string(),
                    r.item.to_string(),
                    r.node.pos,
                    r.depth,
                )
            };
            assert_eq!(key(x), key(y));
            assert_eq!(Leaf { stats: [None; 4], ..x.value.clone() }, Leaf { stats: [None; 4], ..y.value.clone() });
            assert_eq!(bits(&x.value), bits(&y.value));
            // A leaf read straight is its rendering by construction; the general way finds so.
            assert_eq!(x.exact_len, y.exact_len);
        }
        assert_eq!(rebuilds_source(&a, bytes).unwrap(), rebuilds_source(&b, bytes).unwrap());
        read
    }

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

    /// Every dump.json and debug.json below `dir`.
    fn dump_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                dump_files(&path, out);
            } else if path.file_name().is_some_and(|n| n == "dump.json" || n == "debug.json") {
                out.push(path);
            }
        }
    }

    /// Real msprobe output (`../shared/fixtures`, when it is beside the clone) and synthesized
    /// runs of every task, level and dtype: both ways agree on every file, and most leaves
    /// are read straight.
    #[test]
    fn real_and_synthesized_dump_files_take_apart_the_same_both_ways() {
        use crate::synth::{write_run, SynthDtype, SynthLevel, SynthSpec, SynthTask};
        let mut files = Vec::new();
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
        if fixtures.is_dir() {
            dump_files(&fixtures, &mut files);
            assert!(!files.is_empty(), "no dump files in {}", fixtures.display());
        } else {
            eprintln!(
                "skipping the fixtures: ../shared/fixtures not found (real msprobe output needs it beside the clone)"
            );
        }
        let synthesized = tempfile::tempdir().unwrap();
        for (i, (task, level, dtype)) in [
            (SynthTask::Statistics, SynthLevel::Mix, SynthDtype::Fp32),
            (SynthTask::Md5, SynthLevel::L0, SynthDtype::Bf16),
            (SynthTask::Tensor, SynthLevel::L1, SynthDtype::Bf16),
        ]
        .into_iter()
        .enumerate()
        {
            let spec = SynthSpec { task, level, dtype, global_steps: vec![1], ..SynthSpec::demo() };
            write_run(&spec, &synthesized.path().join(i.to_string())).unwrap();
        }
        dump_files(synthesized.path(), &mut files);
        let (mut read, mut leaves) = (0, 0);
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let kind = if path.ends_with("debug.json") { DumpKind::Debug } else { DumpKind::Dump };
            read += both_ways_agree(&bytes, kind);
            let arena = Arena::new();
            leaves += take_apart(&parse(&bytes, &arena).unwrap(), kind, detect_layout(&bytes)).unwrap().leaves.len();
        }
        // Integer statistics, `class_type` records and container values are left to the
        // general way; the rest, most of every file, is read straight.
        assert!(read * 10 > leaves * 8, "{read} of {leaves} leaves read straight from {} files", files.len());
    }
}
