//! dump.json and debug.json: from bytes to a skeleton plus leaf rows, and back.
//!
//! The skeleton is the document in the one-line layout with every leaf replaced by `$`. It
//! keeps everything that is not a leaf — the header, entry names and their order, empty
//! containers, fields such as `is_recompute` — so export is: lay out the skeleton in the file's
//! indentation and write the leaves, in order, into the holes.

use std::borrow::Cow;

use crate::json::{
    parse_skeleton, write_compact, write_node, write_node_instead, write_str, Arena, Layout, Node, Value,
};

use crate::error::MsprobeError as CodecError;
use crate::leaf::{is_leaf, Leaf, LeafSource};
use crate::leaf_text::{piece_index, LeafValues, ReadLeaves};
use crate::name::{is_parameters_grad, parse_entry_name, EntryName};
use crate::stored_leaf::{Kept, LeafValue, ReadLeaf, StoredLeaf};

/// Which of msprobe's two entry files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpKind {
    /// `dump.json`: entries with input/output/parameters slots.
    Dump,
    /// `debug.json`: each entry is a saved value itself.
    Debug,
}

impl DumpKind {
    /// The file name.
    pub fn file_name(self) -> &'static str {
        match self {
            DumpKind::Dump => "dump.json",
            DumpKind::Debug => "debug.json",
        }
    }

    /// `dump` or `debug`, as the `source.kind` column stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            DumpKind::Dump => "dump",
            DumpKind::Debug => "debug",
        }
    }
}

/// The top-level fields of a dump file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// `statistics`, `tensor`, `structure`, …
    pub task: Option<String>,
    /// `L0`, `L1`, `mix`, `debug`, …
    pub level: Option<String>,
    /// `pytorch`, `mindspore`, `mindtorch`.
    pub framework: Option<String>,
    /// Where the tensors were saved.
    pub dump_data_dir: Option<String>,
}

/// One leaf with its place in the file.
#[derive(Debug, Clone)]
pub struct LeafRow<'a> {
    /// Position of the entry in the file.
    pub seq: i64,
    /// Position of the leaf inside its entry.
    pub leaf: i32,
    /// Index into [`ParsedDump::names`].
    pub entry: usize,
    /// The slot: `input_args`, `output`, …, a parameter name, or empty for debug entries.
    pub section: Cow<'a, str>,
    /// Position inside the slot: `0`, `1.0`, `weight`.
    pub path: Cow<'a, str>,
    /// The row name msprobe compare uses.
    pub item: Cow<'a, str>,
    /// Where the leaf's values are kept in the [`ParsedDump`]: read them with
    /// [`ParsedDump::value`].
    pub value: usize,
    /// The leaf as parsed.
    pub node: &'a Node<'a>,
    /// The leaf's nesting depth in the file.
    pub depth: usize,
    /// The length of the leaf's text in the file, when its columns were found to render to
    /// exactly that text at `depth` (see [`Leaf::from_source`]).
    pub exact_len: Option<usize>,
}

/// A dump file taken apart.
#[derive(Debug)]
pub struct ParsedDump<'a> {
    /// The document it was taken apart from.
    pub doc: &'a Node<'a>,
    /// The header.
    pub header: Header,
    /// The file's indentation.
    pub layout: Layout,
    /// The document with `$` for every leaf (empty where the rows were read only to be
    /// compared, which never lays them out again).
    pub skeleton: String,
    /// Entry names in file order, parsed.
    pub names: Vec<EntryName<'a>>,
    /// Every leaf, in file order.
    pub leaves: Vec<LeafRow<'a>>,
    /// The leaves' values, which [`LeafRow::value`] indexes: those read straight from the text
    /// with the document ([`parse_dump`](crate::parse_dump)), then those taken apart from its
    /// nodes (`stored_leaf.rs`). A row points at its leaf rather than holding a copy, which
    /// was most of the row's memory.
    pub(crate) values: LeafValues<'a>,
}

impl<'a> ParsedDump<'a> {
    /// The values of the leaf `row` (a row of [`ParsedDump::leaves`]).
    pub fn value(&self, row: &LeafRow<'a>) -> LeafValue<'_, 'a> {
        // Every row's index was made by the walk that filled `values`.
        self.values.get(row.value).map_or(LeafValue(Kept::Node(&EMPTY_LEAF)), LeafValue::of)
    }
}

/// What [`ParsedDump::value`] gives for an index it does not hold (none it made).
static EMPTY_LEAF: Leaf<'static> = Leaf {
    kind: None,
    dtype: None,
    shape: None,
    stats: [None; 4],
    requires_grad: None,
    md5: None,
    data_name: None,
    value: None,
    raw: None,
};

pub(crate) fn schema_error(offset: usize, path: String, message: impl Into<String>) -> CodecError {
    CodecError::Schema { file: Default::default(), offset, path, message: message.into() }
}

/// The longest entry name (a key of `data`) taken.
pub const MAX_ENTRY_NAME_BYTES: usize = 64 * 1024;

/// Takes a dump.json / debug.json apart. `doc` must come from [`parse`](crate::json::parse) of the file's bytes.
pub fn take_apart<'a>(doc: &'a Node<'a>, kind: DumpKind, layout: Layout) -> Result<ParsedDump<'a>, CodecError> {
    take_apart_source(doc, &[], kind, layout)
}

/// [`take_apart`] given also the bytes `doc` was parsed from, which makes the per-leaf `raw`
/// check cheaper (a comparison with the file instead of rendering each node) and lets
/// [`rebuilds_source`] skip over the leaves it verified.
pub fn take_apart_source<'a>(
    doc: &'a Node<'a>,
    source: &[u8],
    kind: DumpKind,
    layout: Layout,
) -> Result<ParsedDump<'a>, CodecError> {
    take_apart_read(doc, ReadLeaves::default(), source, kind, layout)
}

/// [`take_apart_source`] for a document from [`parse_dump`](crate::parse_dump), with the leaves it read.
pub fn take_apart_read<'a>(
    doc: &'a Node<'a>,
    read: ReadLeaves<'a>,
    source: &[u8],
    kind: DumpKind,
    layout: Layout,
) -> Result<ParsedDump<'a>, CodecError> {
    take_apart_walk(doc, read, source, kind, layout)
}

/// A dump file's document in its parts.
pub(crate) struct DumpParts<'a> {
    pub(crate) header: Header,
    /// The members of the top-level object, `data` among them.
    pub(crate) top: &'a [(Cow<'a, str>, Node<'a>)],
    pub(crate) data: &'a Node<'a>,
    /// The members of `data`.
    pub(crate) entries: &'a [(Cow<'a, str>, Node<'a>)],
}

/// The header of a dump file and the entries of its `data`, or the error that says why the
/// document is not a dump file.
pub(crate) fn header_and_data<'a>(doc: &'a Node<'a>, kind: DumpKind) -> Result<DumpParts<'a>, CodecError> {
    let Value::Object(top) = &doc.value else {
        return Err(schema_error(
            doc.pos,
            "$".into(),
            format!(
                "not an msprobe {}: the top level is {}, expected an object with task, level, framework, dump_data_dir and data",
                kind.file_name(),
                doc.value.type_name()
            ),
        ));
    };
    let (data, entries) = match doc.value.get("data") {
        Some(d @ Node { value: Value::Object(entries), .. }) => (d, &entries[..]),
        Some(d) => {
            return Err(schema_error(
                d.pos,
                "$.data".into(),
                format!("`data` must be an object, found {}", d.value.type_name()),
            ))
        }
        None => {
            return Err(schema_error(
                doc.pos,
                "$".into(),
                format!(
                    "not an msprobe {}: it has no `data` object (top-level keys found: {})",
                    kind.file_name(),
                    key_list(top)
                ),
            ))
        }
    };
    let mut header = Header::default();
    for (key, slot) in [
        ("task", &mut header.task),
        ("level", &mut header.level),
        ("framework", &mut header.framework),
        ("dump_data_dir", &mut header.dump_data_dir),
    ] {
        match doc.value.get(key) {
            None | Some(Node { value: Value::Null, .. }) => {}
            Some(Node { value: Value::Str(s), .. }) => *slot = Some(s.to_string()),
            Some(n) => {
                return Err(schema_error(
                    n.pos,
                    format!("$.{key}"),
                    format!("`{key}` must be a string, found {}", n.value.type_name()),
                ))
            }
        }
    }
    Ok(DumpParts { header, top, data, entries })
}

/// The checks on the name of an entry of `data` that come before its slots: the name is not
/// huge, and (where `seen` is given) it was not seen before.
pub(crate) fn check_entry_name<'a>(
    name: &'a str,
    entry: &Node<'_>,
    seen: Option<&mut EntryNames<'a>>,
) -> Result<(), CodecError> {
    if name.len() > MAX_ENTRY_NAME_BYTES {
        // Every leaf row repeats its entry's name: a huge name costs memory many times
        // its size, for a name no msprobe run writes.
        let head: String = name.chars().take(40).collect();
        return Err(schema_error(
            entry.pos,
            format!("$.data[{head:?}…]"),
            format!(
                "an entry name of {} bytes; msprobe's names are a few hundred bytes, probelake takes up to {MAX_ENTRY_NAME_BYTES}",
                name.len()
            ),
        ));
    }
    if seen.is_some_and(|seen| !seen.insert(name)) {
        return Err(schema_error(
            entry.pos,
            format!("$.data[{name:?}]"),
            format!("entry `{name}` appears twice in `data`"),
        ));
    }
    Ok(())
}

/// The entry names seen so far, to catch one that appears twice.
pub(crate) type EntryNames<'a> = std::collections::HashSet<&'a str, foldhash::fast::RandomState>;

/// [`take_apart_read`]'s walk: the rows, and the skeleton written along the way. An import on
/// several cores takes the rows apart in entry ranges instead ([`take_apart_in_ranges`]) and
/// writes the skeleton beside them ([`skeleton_of`]).
///
/// [`take_apart_in_ranges`]: crate::entry_ranges::take_apart_in_ranges
/// [`skeleton_of`]: crate::skeleton::skeleton_of
fn take_apart_walk<'a>(
    doc: &'a Node<'a>,
    mut read: ReadLeaves<'a>,
    source: &[u8],
    kind: DumpKind,
    layout: Layout,
) -> Result<ParsedDump<'a>, CodecError> {
    let DumpParts { header, top, data, entries } = header_and_data(doc, kind)?;
    let mut out = ParsedDump {
        doc,
        header,
        layout,
        skeleton: String::new(),
        names: Vec::with_capacity(entries.len()),
        leaves: Vec::with_capacity(count_leaves(data)),
        values: LeafValues::default(),
    };
    // The leaves the walk takes apart from nodes, after those read with the document: a piece
    // of their own.
    let piece = read.values.pieces.len() + 1;
    let mut taken = Vec::with_capacity(out.leaves.capacity().saturating_sub(read.len()));
    // A skeleton is about a tenth of its file (1.07 of 10.7 MB on a real mix-level dump.json):
    // one allocation rather than a dozen doublings.
    let mut skeleton = SkeletonText { text: Vec::with_capacity(source.len() / 8), keep: true };
    let mut scratch = (Vec::new(), Vec::new());
    // Sized up front: rehashing while it grew was 0.5% of an import.
    let mut seen = EntryNames::with_capacity_and_hasher(entries.len(), Default::default());
    // Grown and truncated along the walk, so a leaf costs only the two strings its row keeps.
    let (mut path, mut item) = (String::new(), String::new());
    let source = LeafSource { bytes: source, layout, depth: 0 };
    let to = WalkOut {
        rows: &mut out.leaves,
        taken: &mut taken,
        strings: read.strings,
        skeleton: &mut skeleton,
        scratch: &mut scratch,
        path: &mut path,
        item: &mut item,
    };
    let mut walk = Walk::new(source, &read.values, piece, to);
    walk.to.skeleton.push(b'{');
    for (i, (key, value)) in top.iter().enumerate() {
        walk.to.skeleton.member(i, key);
        if !std::ptr::eq(value, data) {
            walk.to.skeleton.compact(value);
            continue;
        }
        walk.to.skeleton.push(b'{');
        for (seq, (name, entry)) in entries.iter().enumerate() {
            check_entry_name(name, entry, Some(&mut seen))?;
            walk.to.skeleton.member(seq, name);
            out.names.push(parse_entry_name(name));
            walk.entry(seq, kind, name, entry)?;
        }
        walk.to.skeleton.push(b'}');
    }
    skeleton.push(b'}');
    out.skeleton =
        String::from_utf8(skeleton.text).map_err(|_| CodecError::Internal("skeleton is not UTF-8".into()))?;
    read.values.pieces.push(taken);
    out.values = read.values;
    Ok(out)
}

/// The suffix a field of a dump entry adds to its leaves' row names (msprobe's item names),
/// `None` for a field that is not a slot (its value is kept whole in the skeleton): every field
/// of a `parameters_grad` entry is a slot named after itself.
///
/// ```
/// use probelake_msprobe::slot_suffix;
/// assert_eq!(slot_suffix("input_kwargs", false), Some("input"));
/// assert_eq!(slot_suffix("weight", true), Some("weight"));
/// assert_eq!(slot_suffix("is_recompute", false), None);
/// ```
pub fn slot_suffix(field: &str, grads: bool) -> Option<&str> {
    match field {
        _ if grads => Some(field),
        "input_args" | "input_kwargs" | "input" => Some("input"),
        "output" => Some("output"),
        "parameters" => Some("parameters"),
        _ => None,
    }
}

fn key_list(members: &[(Cow<'_, str>, Node<'_>)]) -> String {
    let keys: Vec<&str> = members.iter().take(8).map(|(k, _)| k.as_ref()).collect();
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

/// The leaves under `node`, a leaf itself counting one; at least as many as [`Walk`] will
/// find. A row is ~400 bytes, and a row vector grown by doubling copied about as many bytes
/// again as its rows hold; counting the leaves first took 0.9% off an import's instructions
/// (docs/benchmarks.md).
pub(crate) fn count_leaves(node: &Node<'_>) -> usize {
    if is_leaf(node) {
        return 1;
    }
    match &node.value {
        Value::Array(items) => items.iter().map(count_leaves).sum(),
        Value::Object(members) => members.iter().map(|(_, v)| count_leaves(v)).sum(),
        _ => 0,
    }
}

/// The skeleton being written, or nothing where it is not kept.
pub(crate) struct SkeletonText {
    text: Vec<u8>,
    keep: bool,
}

impl SkeletonText {
    /// A skeleton that is not kept: a walk that only takes the rows apart.
    pub(crate) fn none() -> Self {
        SkeletonText { text: Vec::new(), keep: false }
    }

    fn push(&mut self, byte: u8) {
        if self.keep {
            self.text.push(byte);
        }
    }

    fn extend(&mut self, bytes: &[u8]) {
        if self.keep {
            self.text.extend_from_slice(bytes);
        }
    }

    /// A member name or entry name, as a JSON string.
    fn key(&mut self, key: &str) {
        if self.keep {
            write_str(&mut self.text, key);
        }
    }

    /// The `i`th member's name of an object being written, after a separator if not the first.
    fn member(&mut self, i: usize, key: &str) {
        if i > 0 {
            self.extend(b", ");
        }
        self.key(key);
        self.extend(b": ");
    }

    /// A value that holds no leaf, in the one-line layout.
    fn compact(&mut self, node: &Node<'_>) {
        if self.keep {
            write_compact(&mut self.text, node);
        }
    }
}

/// The nesting depth of an entry of `data`: the top-level object is at 0, `data` at 1.
pub(super) const ENTRY_DEPTH: usize = 2;

/// Where a [`Walk`] puts what it takes apart, and the buffers it reuses from leaf to leaf.
pub(crate) struct WalkOut<'w, 'a> {
    pub(crate) rows: &'w mut Vec<LeafRow<'a>>,
    /// The leaves taken apart from nodes.
    pub(crate) taken: &'w mut Vec<ReadLeaf<'a>>,
    /// Where the rows' `path` and `item` are kept, if not in rows of their own.
    pub(crate) strings: Option<&'a Arena>,
    pub(crate) skeleton: &'w mut SkeletonText,
    pub(crate) scratch: &'w mut (Vec<u8>, Vec<u8>),
    /// Position inside the slot of the value being walked.
    pub(crate) path: &'w mut String,
    /// Row name of the value being walked.
    pub(crate) item: &'w mut String,
}

/// One walk over entries of `data`, into a [`WalkOut`].
pub(crate) struct Walk<'w, 'a> {
    /// The file, for [`Leaf::from_source`]; `depth` is set per leaf.
    source: LeafSource<'w>,
    /// The leaves read with the document, for its [`Value::Taken`] nodes.
    read: &'w LeafValues<'a>,
    /// The piece of the values that `to.taken` is.
    piece: usize,
    /// The entry being walked: its place in `data`, and the number of its next leaf.
    seq: i64,
    next_leaf: i32,
    to: WalkOut<'w, 'a>,
}

impl<'w, 'a> Walk<'w, 'a> {
    /// A walk that writes its rows, taken-apart leaves (piece `piece` of the values) and
    /// strings where `out` says.
    pub(crate) fn new(source: LeafSource<'w>, read: &'w LeafValues<'a>, piece: usize, out: WalkOut<'w, 'a>) -> Self {
        Walk { source, read, piece, seq: 0, next_leaf: 0, to: out }
    }

    /// Walks `entry`, the `seq`th entry of `data`, named `name`: its slots' leaves become
    /// rows, and the skeleton its text with a `$` for each.
    pub(crate) fn entry(
        &mut self,
        seq: usize,
        kind: DumpKind,
        name: &str,
        entry: &'a Node<'a>,
    ) -> Result<(), CodecError> {
        self.seq = seq as i64;
        self.next_leaf = 0;
        match (kind, &entry.value) {
            (DumpKind::Debug, _) => {
                self.to.path.clear();
                self.to.item.clear();
                self.to.item.push_str(name);
                self.slot(entry, &Cow::Borrowed(""), false, ENTRY_DEPTH)
            }
            (DumpKind::Dump, Value::Object(fields)) => {
                let grads = is_parameters_grad(name);
                self.to.skeleton.push(b'{');
                for (j, (field, v)) in fields.iter().enumerate() {
                    self.to.skeleton.member(j, field);
                    match slot_suffix(field, grads) {
                        Some(suffix) => {
                            self.to.path.clear();
                            self.to.item.clear();
                            self.to.item.push_str(name);
                            self.to.item.push('.');
                            self.to.item.push_str(suffix);
                            self.slot(v, &Cow::Borrowed(field.as_ref()), grads, ENTRY_DEPTH + 1)?
                        }
                        None => self.to.skeleton.compact(v),
                    }
                }
                self.to.skeleton.push(b'}');
                Ok(())
            }
            (DumpKind::Dump, other) => Err(schema_error(
                entry.pos,
                format!("$.data[{name:?}]"),
                format!("entry `{name}` must be an object of input/output slots, found {}", other.type_name()),
            )),
        }
    }

    /// Walks a slot value, writing its skeleton and collecting its leaves; `self.to.path` and
    /// `self.to.item` name `node` and are left as they were found.
    // A `&Cow` rather than `&str`: rows keep the section borrowed from the document when it is.
    #[allow(clippy::ptr_arg)]
    fn slot(
        &mut self,
        node: &'a Node<'a>,
        section: &Cow<'a, str>,
        grads: bool,
        depth: usize,
    ) -> Result<(), CodecError> {
        if is_leaf(node) {
            let (value, read, exact_len) = match node.value {
                Value::Taken { index, .. } => {
                    let read = self.read.get(index).ok_or_else(|| {
                        CodecError::Internal(format!(
                            "leaf {index} was read with the document but is not among its leaves"
                        ))
                    })?;
                    (index, read, (read.depth == depth).then_some(read.len))
                }
                _ => {
                    let source = LeafSource { depth, ..self.source };
                    let (leaf, exact_len) =
                        Leaf::from_source(node, self.to.scratch, source).map_err(|e| CodecError::Schema {
                            file: Default::default(),
                            offset: e.offset,
                            path: format!("{} ({})", self.to.item, e.field.unwrap_or("value")),
                            message: e.message,
                        })?;
                    let index = piece_index(self.piece, self.to.taken.len())
                        .ok_or_else(|| CodecError::Internal("too many leaves for their index".into()))?;
                    self.to.taken.push(ReadLeaf {
                        leaf: StoredLeaf::Node(Box::new(leaf)),
                        len: exact_len.unwrap_or(0),
                        depth,
                    });
                    let read = self.to.taken.last().ok_or_else(|| CodecError::Internal("leaf not kept".into()))?;
                    (index, read, exact_len)
                }
            };
            let item = match read.data_name() {
                Some(dn) if !dn.is_empty() => dn.rsplit_once('.').map_or(dn, |(stem, _)| stem),
                _ => self.to.item.as_str(),
            };
            let keep = |text: &str| match self.to.strings {
                Some(arena) => Cow::Borrowed(arena.alloc_str(text)),
                None => Cow::Owned(text.to_string()),
            };
            let (path, item) = (keep(self.to.path), keep(item));
            self.to.rows.push(LeafRow {
                seq: self.seq,
                leaf: self.next_leaf,
                // Every entry has its name at its place: `names[seq]`.
                entry: self.seq as usize,
                section: section.clone(),
                path,
                item,
                value,
                node,
                depth,
                exact_len,
            });
            self.next_leaf += 1;
            self.to.skeleton.push(b'$');
            return Ok(());
        }
        let (path_len, item_len) = (self.to.path.len(), self.to.item.len());
        match &node.value {
            Value::Array(items) => {
                self.to.skeleton.push(b'[');
                for (i, child) in items.iter().enumerate() {
                    if i > 0 {
                        self.to.skeleton.extend(b", ");
                    }
                    if path_len > 0 {
                        self.to.path.push('.');
                    }
                    push_index(self.to.path, i);
                    if !grads {
                        self.to.item.push('.');
                        push_index(self.to.item, i);
                    }
                    let walked = self.slot(child, section, grads, depth + 1);
                    self.to.path.truncate(path_len);
                    self.to.item.truncate(item_len);
                    walked?;
                }
                self.to.skeleton.push(b']');
            }
            Value::Object(members) => {
                self.to.skeleton.push(b'{');
                for (i, (k, child)) in members.iter().enumerate() {
                    self.to.skeleton.member(i, k);
                    if path_len > 0 {
                        self.to.path.push('.');
                    }
                    self.to.path.push_str(k);
                    self.to.item.push('.');
                    self.to.item.push_str(k);
                    let walked = self.slot(child, section, grads, depth + 1);
                    self.to.path.truncate(path_len);
                    self.to.item.truncate(item_len);
                    walked?;
                }
                self.to.skeleton.push(b'}');
            }
            _ => self.to.skeleton.compact(node),
        }
        Ok(())
    }
}

fn push_index(out: &mut String, i: usize) {
    out.push_str(crate::json::decimal(i as u64, &mut [0; 20]));
}

/// Lays out a dump file from its skeleton and its leaves (in file order).
pub fn render<'l, I>(skeleton: &str, layout: Layout, leaves: I, out: &mut Vec<u8>) -> Result<(), CodecError>
where
    I: IntoIterator<Item = &'l Leaf<'l>>,
{
    let mut leaves = leaves.into_iter();
    fill_skeleton(skeleton, layout, out, &mut |out, depth| match leaves.next() {
        Some(leaf) => {
            leaf.render(out, layout, depth);
            true
        }
        None => false,
    })?;
    no_more_leaves(leaves.next().is_some())
}

/// Whether laying out a taken-apart file as [`render`] would from its rows gives back
/// `source`, the file it was taken apart from (as given to [`take_apart_source`]), byte for
/// byte.
///
/// Import uses this for its whole-file check. It lays out the document the file was parsed
/// into rather than the skeleton, which is the same tree with `$` for each leaf (the skeleton
/// is written from the document's nodes), so the skeleton is not parsed again. Each leaf is
/// written from its parsed node rather than its columns, which is the same text: a leaf
/// without `raw` renders from its columns to the same one-line text as its node (that is what
/// [`Leaf::from_node`] checked), so to the same token tree and the same text in any layout; a
/// leaf with `raw` renders from the node's one-line text. What the check has left to prove is
/// the skeleton and the layout, and it does so without formatting every float a second time.
///
/// The layout is compared with `source` as it is written, a piece between two leaves at a
/// time, so no second copy of the file is built. A leaf whose columns were found to render to
/// its text in the file at this very depth is that text again; where it also starts at the
/// place being compared, it is skipped over rather than written and compared.
pub fn rebuilds_source(parsed: &ParsedDump<'_>, source: &[u8]) -> Result<bool, CodecError> {
    let layout = parsed.layout;
    let mut rows = parsed.leaves.iter().peekable();
    // `source[..checked]` is equal to what has been laid out so far.
    let mut checked = 0;
    let mut pending = Vec::with_capacity(4096);
    // `Err(())` stops the layout at the first difference.
    let laid_out = write_node_instead::<()>(&mut pending, parsed.doc, layout, 0, &mut |out, node, depth| {
        // Compared as it grows, not only at the leaves: a file that declares a layout it does
        // not have (a second line of 60,000 spaces, then deep nesting) is given up on at the
        // first difference instead of being laid out whole, gigabytes of indentation.
        if out.len() > PENDING_BYTES {
            if !consume(source, &mut checked, out) {
                return Some(Err(()));
            }
            out.clear();
        }
        // The rows are the document's leaves, in the order it is written.
        let row = rows.next_if(|row| std::ptr::addr_eq(row.node, node))?;
        let before = consume(source, &mut checked, out);
        out.clear();
        let verified = match row.exact_len {
            Some(len) if row.depth == depth => source.get(row.node.pos..row.node.pos.saturating_add(len)),
            _ => None,
        };
        let leaf = before
            && match verified {
                Some(text) if row.node.pos == checked => {
                    checked += text.len();
                    true
                }
                Some(text) => consume(source, &mut checked, text),
                None => {
                    let _ = write_node::<()>(out, row.node, layout, depth, &mut |_, _| Ok(()));
                    let matched = consume(source, &mut checked, out);
                    out.clear();
                    matched
                }
            };
        Some(if leaf { Ok(()) } else { Err(()) })
    });
    if laid_out.is_err() {
        return Ok(false);
    }
    no_more_leaves(rows.next().is_some())?;
    Ok(consume(source, &mut checked, &pending) && checked == source.len())
}

/// How much layout [`rebuilds_source`] lets pile up between two comparisons with the file.
const PENDING_BYTES: usize = 64 * 1024;

/// Whether `text` comes next in `source` at `checked`; if so, moves `checked` past it.
fn consume(source: &[u8], checked: &mut usize, text: &[u8]) -> bool {
    let end = checked.saturating_add(text.len());
    let matched = source.get(*checked..end) == Some(text);
    if matched {
        *checked = end;
    }
    matched
}

/// Lays out a dump file from its skeleton as [`render`] does, with `fill` writing the next
/// leaf at the depth it is given (false when it has none left); the caller checks with
/// [`no_more_leaves`] that none is left over. Export renders leaves from its columns this way.
pub(crate) fn render_holes(
    skeleton: &str,
    layout: Layout,
    out: &mut Vec<u8>,
    fill: &mut dyn FnMut(&mut Vec<u8>, usize) -> bool,
) -> Result<(), CodecError> {
    fill_skeleton(skeleton, layout, out, fill)
}

/// Writes the skeleton with `fill` writing each hole; `fill` returns false when it has no leaf.
fn fill_skeleton(
    skeleton: &str,
    layout: Layout,
    out: &mut Vec<u8>,
    fill: &mut dyn FnMut(&mut Vec<u8>, usize) -> bool,
) -> Result<(), CodecError> {
    let arena = Arena::new();
    let tree = parse_skeleton(skeleton.as_bytes(), &arena)
        .map_err(|e| CodecError::corrupt("source.skeleton", e.to_string()))?;
    let mut missing = false;
    write_node::<()>(out, &tree, layout, 0, &mut |out, depth| {
        if !fill(out, depth) {
            missing = true;
        }
        Ok(())
    })
    .map_err(|()| CodecError::Internal("render".into()))?;
    if missing {
        return Err(CodecError::corrupt("dump", "fewer leaves than the skeleton has places for"));
    }
    Ok(())
}

pub(crate) fn no_more_leaves(more: bool) -> Result<(), CodecError> {
    if more {
        return Err(CodecError::corrupt("dump", "more leaves than the skeleton has places for"));
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::json::{detect_layout, parse};

    /// One-line text of a small dump.json: statistics leaves, an md5 leaf, a nested tuple, a
    /// `None` kwarg, a parameter's gradient and a float spelled as repr would not (`1.50`).
    const DUMP: &str = r#"{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {"Functional.linear.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -2.5, "Mean": 0.1234000027179718, "Norm": 3.0, "requires_grad": true}, [{"type": "int", "value": 3}, {"type": "float", "value": 1.50}]], "input_kwargs": {"bias": null}, "output": [{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [], "Max": 1e-05, "Min": 1e-05, "Mean": 1e-05, "Norm": 1e-05, "requires_grad": false, "md5": "0a1b2c3d"}], "is_recompute": false}, "Module.fc.Linear.forward.0": {"input": [], "output": []}, "fc.weight": {"fc.weight": {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 2.0, "Min": 0.0, "Mean": 1.0, "Norm": 2.0, "requires_grad": false}}}}"#;

    /// The file laid out as `json.dump(indent=…)` writes it.
    pub(crate) fn laid_out(layout: Layout) -> Vec<u8> {
        let arena = Arena::new();
        let doc = parse(DUMP.as_bytes(), &arena).unwrap();
        let mut out = Vec::new();
        let _ = write_node::<()>(&mut out, &doc, layout, 0, &mut |_, _| Ok(()));
        out
    }

    /// The check without its shortcuts: the whole file written from the nodes, then compared.
    fn rebuilds_naively(parsed: &ParsedDump<'_>, source: &[u8]) -> bool {
        let mut rows = parsed.leaves.iter();
        let mut out = Vec::new();
        let filled = render_holes(&parsed.skeleton, parsed.layout, &mut out, &mut |out, depth| match rows.next() {
            Some(row) => {
                let _ = write_node::<()>(out, row.node, parsed.layout, depth, &mut |_, _| Ok(()));
                true
            }
            None => false,
        });
        filled.is_ok() && rows.next().is_none() && out == source
    }

    fn check(bytes: &[u8]) -> bool {
        let arena = Arena::new();
        let doc = parse(bytes, &arena).unwrap();
        let parsed = take_apart_source(&doc, bytes, DumpKind::Dump, detect_layout(bytes)).unwrap();
        let fast = rebuilds_source(&parsed, bytes).unwrap();
        assert_eq!(fast, rebuilds_naively(&parsed, bytes), "{}", String::from_utf8_lossy(bytes));
        fast
    }

    #[test]
    fn a_declared_layout_the_file_does_not_have_is_given_up_on_early() {
        // The second line declares an indentation of 60,000 spaces; the rest is one line of
        // arrays nested 300 deep, which laid out in that indentation is ~2.7 GB.
        let nest = 300;
        let text = format!(
            "{{\n{}\"task\": \"statistics\", \"data\": {{\"Functional.f.0.forward\": {{\"input_args\": {}{}}}}}}}",
            " ".repeat(60_000),
            "[".repeat(nest),
            "]".repeat(nest)
        );
        let arena = Arena::new();
        let doc = parse(text.as_bytes(), &arena).unwrap();
        let layout = detect_layout(text.as_bytes());
        assert_eq!(layout, Layout { indent: Some(60_000) });
        let parsed = take_apart_source(&doc, text.as_bytes(), DumpKind::Dump, layout).unwrap();
        assert!(!rebuilds_source(&parsed, text.as_bytes()).unwrap());
    }

    #[test]
    fn indexes_are_written_in_decimal() {
        for i in [0, 7, 10, 99, 100, 12345, usize::MAX] {
            let mut out = String::from("x.");
            push_index(&mut out, i);
            assert_eq!(out, format!("x.{i}"));
        }
    }

    #[test]
    fn json_dump_layouts_rebuild() {
        for indent in [Some(1), Some(2), Some(4), None] {
            assert!(check(&laid_out(Layout { indent })), "indent {indent:?}");
        }
    }

    #[test]
    fn any_other_byte_is_caught() {
        let good = laid_out(Layout::MSPROBE);
        let text = String::from_utf8(good.clone()).unwrap();
        let mut variants: Vec<Vec<u8>> = vec![
            [&good[..], b"\n"].concat(),                                        // after the last brace
            [b" ", &good[..]].concat(),                                         // before the first
            text.replacen("\"task\": ", "\"task\":  ", 1).into_bytes(),         // skeleton
            text.replacen("\"Min\": -2.5", "\"Min\":  -2.5", 1).into_bytes(),   // inside a leaf
            text.replacen("\"Norm\": 2.0,", "\"Norm\": 2.0 ,", 1).into_bytes(), // last leaf
            text.replacen(",\n   \"is_recompute\"", ", \"is_recompute\"", 1).into_bytes(),
            text.replacen("\n   \"fc.weight\": {", "\n    \"fc.weight\": {", 1).into_bytes(),
        ];
        // Every line's indentation one space short, one line at a time.
        for (i, _) in text.match_indices("\n  ").step_by(5) {
            let mut v = good.clone();
            v.remove(i + 1);
            variants.push(v);
        }
        for v in variants {
            assert_ne!(v, good, "a variant that changed nothing");
            if parse(&v, &Arena::new()).is_ok() {
                assert!(!check(&v), "{}", String::from_utf8_lossy(&v));
            }
        }
    }
}
