//! Arrow builders for the tables of one unit, filled from parsed msprobe files.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, LargeBinaryBuilder, LargeStringBuilder,
    ListBuilder, StringBuilder,
};
use arrow::record_batch::RecordBatch;

use probelake_format::schema::{construct_schema, dump_schema, source_schema, tensor_schema};
use probelake_format::Result;

use crate::construct::ConstructRow;
use crate::dump_file::LeafRow;
use crate::leaf::Leaf;
use crate::name::EntryName;
use crate::shared_frames::{shared_frames_schema, SharedFrames};
use crate::stack::StackRow;
use crate::stored_leaf::{dims, Kept, LeafValue, TextLeaf};

/// Which dump file of a unit a row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Origin {
    /// msprobe's inner `step{S}` of a verl dump.
    pub inner_step: Option<i64>,
    /// The pid of a `proc{pid}` folder.
    pub pid: Option<i64>,
}

fn shape_builder() -> ListBuilder<Int64Builder> {
    ListBuilder::new(Int64Builder::new())
}

/// Rows of the `dump` table for one API family.
#[derive(Default)]
pub struct DumpColumns {
    seq: Int64Builder,
    leaf: Int32Builder,
    name: StringBuilder,
    op: StringBuilder,
    call: Int64Builder,
    direction: StringBuilder,
    section: StringBuilder,
    path: StringBuilder,
    item: StringBuilder,
    kind: StringBuilder,
    dtype: StringBuilder,
    shape: Option<ListBuilder<Int64Builder>>,
    stats: [Float64Builder; 4],
    requires_grad: BooleanBuilder,
    md5: StringBuilder,
    data_name: StringBuilder,
    value: StringBuilder,
    raw: StringBuilder,
    inner_step: Int64Builder,
    pid: Int64Builder,
}

/// Where a leaf sits: its entry's position, its own position, slot, path and row name.
#[derive(Debug, Clone, Copy)]
pub struct LeafPlace<'r> {
    /// Position of the entry in the file.
    pub seq: i64,
    /// Position of the leaf inside its entry.
    pub leaf: i32,
    /// The slot: `input_args`, `output`, …, or a parameter name.
    pub section: &'r str,
    /// Position inside the slot.
    pub path: &'r str,
    /// The row name msprobe compare uses.
    pub item: &'r str,
}

/// What one API family of a dump file adds to its [`DumpColumns`], for sizing them up front:
/// grown by doubling, each builder's buffers were copied several times over a file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FamilySize {
    /// Leaves (rows).
    pub rows: usize,
    /// Bytes of the entry names, one per row.
    pub name_bytes: usize,
    /// Bytes of the `path` values.
    pub path_bytes: usize,
    /// Bytes of the `item` values.
    pub item_bytes: usize,
}

impl FamilySize {
    /// Counts one leaf of entry `full_name`.
    pub fn add(&mut self, full_name: &str, path: &str, item: &str) {
        self.rows += 1;
        self.name_bytes += full_name.len();
        self.path_bytes += path.len();
        self.item_bytes += item.len();
    }
}

/// Bytes per row reserved for the short repeated texts (`section`, `kind`, `dtype`,
/// `direction`): `input_args`, `torch.Tensor`, `torch.float32` fit.
const SHORT_TEXT: usize = 16;

impl DumpColumns {
    /// Empty columns with room for `size` (more can still be pushed).
    pub fn with_capacity(size: FamilySize) -> Self {
        let n = size.rows;
        let text = |bytes| StringBuilder::with_capacity(n, bytes);
        DumpColumns {
            seq: Int64Builder::with_capacity(n),
            leaf: Int32Builder::with_capacity(n),
            name: text(size.name_bytes),
            op: text(size.name_bytes),
            call: Int64Builder::with_capacity(n),
            direction: text(n * SHORT_TEXT),
            section: text(n * SHORT_TEXT),
            path: text(size.path_bytes),
            item: text(size.item_bytes),
            kind: text(n * SHORT_TEXT),
            dtype: text(n * SHORT_TEXT),
            // Three dimensions a tensor is typical of the dumps measured.
            shape: Some(ListBuilder::with_capacity(Int64Builder::with_capacity(n * 3), n)),
            stats: std::array::from_fn(|_| Float64Builder::with_capacity(n)),
            requires_grad: BooleanBuilder::with_capacity(n),
            md5: text(0),
            data_name: text(0),
            value: text(0),
            raw: text(0),
            inner_step: Int64Builder::with_capacity(n),
            pid: Int64Builder::with_capacity(n),
        }
    }

    /// Appends one leaf of entry `name`: its row and its values
    /// ([`ParsedDump::value`](crate::ParsedDump::value)).
    pub fn push(
        &mut self,
        row: &LeafRow<'_>,
        value: LeafValue<'_, '_>,
        full_name: &str,
        name: &EntryName<'_>,
        origin: Origin,
    ) {
        let place = LeafPlace { seq: row.seq, leaf: row.leaf, section: &row.section, path: &row.path, item: &row.item };
        match value.0 {
            Kept::Node(leaf) => self.push_leaf(place, leaf, full_name, name, origin),
            Kept::Text(leaf) => {
                self.push_place(place, full_name, name);
                self.push_text(leaf);
                self.push_origin(origin);
            }
        }
    }

    /// Appends one leaf given by its parts (the async writer has no parsed document to point at).
    pub fn push_leaf(
        &mut self,
        place: LeafPlace<'_>,
        leaf: &Leaf<'_>,
        full_name: &str,
        name: &EntryName<'_>,
        origin: Origin,
    ) {
        self.push_place(place, full_name, name);
        self.kind.append_option(leaf.kind.as_deref());
        self.dtype.append_option(leaf.dtype.as_deref());
        let shape = self.shape.get_or_insert_with(shape_builder);
        match &leaf.shape {
            Some(dims) => {
                shape.values().append_slice(dims);
                shape.append(true);
            }
            None => shape.append(false),
        }
        for (b, v) in self.stats.iter_mut().zip(leaf.stats) {
            b.append_option(v);
        }
        self.requires_grad.append_option(leaf.requires_grad);
        self.md5.append_option(leaf.md5.as_deref());
        self.data_name.append_option(leaf.data_name.as_deref());
        self.value.append_option(leaf.value.as_deref());
        self.raw.append_option(leaf.raw.as_deref());
        self.push_origin(origin);
    }

    /// The columns that say where a leaf is.
    fn push_place(&mut self, place: LeafPlace<'_>, full_name: &str, name: &EntryName<'_>) {
        self.seq.append_value(place.seq);
        self.leaf.append_value(place.leaf);
        self.name.append_value(full_name);
        self.op.append_value(name.op);
        self.call.append_option(name.call);
        self.direction.append_option(name.direction);
        self.section.append_value(place.section);
        self.path.append_value(place.path);
        self.item.append_value(place.item);
    }

    /// [`push_leaf`](Self::push_leaf)'s value columns for a leaf read from its text: the same
    /// values [`TextLeaf::to_leaf`] would give, without making the shape's vector.
    fn push_text(&mut self, leaf: &TextLeaf<'_>) {
        self.kind.append_value(leaf.kind);
        self.dtype.append_option(leaf.dtype);
        let shape = self.shape.get_or_insert_with(shape_builder);
        match leaf.shape {
            Some(text) => {
                dims(text).for_each(|dim| shape.values().append_value(dim));
                shape.append(true);
            }
            None => shape.append(false),
        }
        for (slot, b) in self.stats.iter_mut().enumerate() {
            b.append_option(leaf.stat(slot));
        }
        self.requires_grad.append_option(leaf.requires_grad);
        self.md5.append_option(leaf.md5);
        self.data_name.append_option(leaf.data_name);
        self.value.append_option(leaf.value);
        self.raw.append_null();
    }

    fn push_origin(&mut self, origin: Origin) {
        self.inner_step.append_option(origin.inner_step);
        self.pid.append_option(origin.pid);
    }

    /// The rows as a batch of [`dump_schema`].
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let [max, min, mean, norm] = &mut self.stats;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.seq.finish()),
            Arc::new(self.leaf.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.call.finish()),
            Arc::new(self.direction.finish()),
            Arc::new(self.section.finish()),
            Arc::new(self.path.finish()),
            Arc::new(self.item.finish()),
            Arc::new(self.kind.finish()),
            Arc::new(self.dtype.finish()),
            Arc::new(self.shape.get_or_insert_with(shape_builder).finish()),
            Arc::new(max.finish()),
            Arc::new(min.finish()),
            Arc::new(mean.finish()),
            Arc::new(norm.finish()),
            Arc::new(self.requires_grad.finish()),
            Arc::new(self.md5.finish()),
            Arc::new(self.data_name.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.raw.finish()),
            Arc::new(self.inner_step.finish()),
            Arc::new(self.pid.finish()),
        ];
        Ok(RecordBatch::try_new(dump_schema(), cols)?)
    }
}

/// Rows of the `stack` table. A stack group's frames are held once for all its names (the
/// rows of one stack.json that share them share their keys): the table repeats them on every
/// name's row, many times stack.json's size (9.6 MB of frame text for a 0.28 MB stack.json of
/// a real 10.7 MB dump). The batch has `frames` as a list of `Dictionary(Int32, Utf8)`, as a
/// dataset's `stack` file decodes with `decode_columns(_, &["frames"])` and as
/// [`StackFrames`](crate::StackFrames) reads it;
/// [`encode_batch`](probelake_format::lake::encode_batch) stores it as
/// [`stack_schema`](probelake_format::schema::stack_schema)'s plain list.
#[derive(Default)]
pub struct StackColumns {
    group: Int64Builder,
    name: StringBuilder,
    frames: SharedFrames,
    inner_step: Int64Builder,
    pid: Int64Builder,
}

impl StackColumns {
    /// Appends the rows of one stack.json: the rows of one group borrow its very texts.
    pub fn push_file(&mut self, rows: &[StackRow<'_>], origin: Origin) {
        for (i, row) in rows.iter().enumerate() {
            self.push_row(row, origin, i > 0);
        }
    }

    /// Appends one row, sharing nothing with the rows before it.
    pub fn push(&mut self, row: &StackRow<'_>, origin: Origin) {
        self.push_row(row, origin, false);
    }

    /// Appends one row; `same_file` says that the row before it came from the same parsed
    /// stack.json (see `SharedFrames::push`).
    fn push_row(&mut self, row: &StackRow<'_>, origin: Origin, same_file: bool) {
        self.group.append_value(row.group);
        self.name.append_value(&row.name);
        self.frames.push(&row.frames, same_file);
        self.inner_step.append_option(origin.inner_step);
        self.pid.append_option(origin.pid);
    }

    /// The rows as a batch of [`stack_schema`](probelake_format::schema::stack_schema) but for
    /// `frames`, a list of dictionary strings.
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.group.finish()),
            Arc::new(self.name.finish()),
            self.frames.finish()?,
            Arc::new(self.inner_step.finish()),
            Arc::new(self.pid.finish()),
        ];
        Ok(RecordBatch::try_new(shared_frames_schema(), cols)?)
    }
}

/// Rows of the `construct` table.
#[derive(Default)]
pub struct ConstructColumns {
    seq: Int64Builder,
    name: StringBuilder,
    parent: StringBuilder,
    micro_step: Int64Builder,
    raw: StringBuilder,
    inner_step: Int64Builder,
    pid: Int64Builder,
}

impl ConstructColumns {
    /// Appends one row at position `seq`.
    pub fn push(&mut self, seq: i64, row: &ConstructRow<'_>, origin: Origin) {
        self.seq.append_value(seq);
        self.name.append_value(&row.name);
        self.parent.append_option(row.parent.as_deref());
        self.micro_step.append_option(row.micro_step);
        self.raw.append_option(row.raw.as_deref());
        self.inner_step.append_option(origin.inner_step);
        self.pid.append_option(origin.pid);
    }

    /// The rows as a batch of [`construct_schema`].
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.seq.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.parent.finish()),
            Arc::new(self.micro_step.finish()),
            Arc::new(self.raw.finish()),
            Arc::new(self.inner_step.finish()),
            Arc::new(self.pid.finish()),
        ];
        Ok(RecordBatch::try_new(construct_schema(), cols)?)
    }
}

/// One tensor file, ready for the `tensor` table.
pub struct TensorRow<'a> {
    /// File name inside `dump_tensor_data/`.
    pub data_name: &'a str,
    /// The row name (file name without extension).
    pub item: &'a str,
    /// dtype, as [`crate::tensor_file::TensorData::dtype`].
    pub dtype: &'a str,
    /// Dimensions.
    pub shape: &'a [i64],
    /// Contiguous little-endian element bytes.
    pub data: &'a [u8],
    /// `pt` or `npy`.
    pub container: &'a str,
    /// Container details for a byte-exact rebuild.
    pub meta: &'a str,
    /// The original file, where rebuilding would not give the same bytes.
    pub original: Option<&'a [u8]>,
}

/// Rows of the `tensor` table for one API family.
#[derive(Default)]
pub struct TensorColumns {
    data_name: StringBuilder,
    item: StringBuilder,
    dtype: StringBuilder,
    shape: Option<ListBuilder<Int64Builder>>,
    data: LargeBinaryBuilder,
    container: StringBuilder,
    meta: StringBuilder,
    original: LargeBinaryBuilder,
    inner_step: Int64Builder,
    pid: Int64Builder,
}

impl TensorColumns {
    /// Appends one tensor.
    pub fn push(&mut self, row: &TensorRow<'_>, origin: Origin) {
        self.data_name.append_value(row.data_name);
        self.item.append_value(row.item);
        self.dtype.append_value(row.dtype);
        let shape = self.shape.get_or_insert_with(shape_builder);
        shape.values().append_slice(row.shape);
        shape.append(true);
        self.data.append_value(row.data);
        self.container.append_value(row.container);
        self.meta.append_value(row.meta);
        self.original.append_option(row.original);
        self.inner_step.append_option(origin.inner_step);
        self.pid.append_option(origin.pid);
    }

    /// The rows as a batch of [`tensor_schema`].
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let shape = self.shape.get_or_insert_with(shape_builder).finish();
        // The schema declares the list itself non-null; the builder's field is nullable.
        let shape = arrow::array::ListArray::try_new(
            Arc::new(arrow::datatypes::Field::new("item", arrow::datatypes::DataType::Int64, true)),
            shape.offsets().clone(),
            shape.values().clone(),
            None,
        )?;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.data_name.finish()),
            Arc::new(self.item.finish()),
            Arc::new(self.dtype.finish()),
            Arc::new(shape),
            Arc::new(self.data.finish()),
            Arc::new(self.container.finish()),
            Arc::new(self.meta.finish()),
            Arc::new(self.original.finish()),
            Arc::new(self.inner_step.finish()),
            Arc::new(self.pid.finish()),
        ];
        Ok(RecordBatch::try_new(tensor_schema(), cols)?)
    }
}

/// A stack.json / construct.json as the `source` row records it: format, indentation, and the
/// original bytes where the rebuild would differ.
pub type SideFileRef<'a> = (&'a str, Option<i32>, Option<&'a [u8]>);

/// One dump file's row of the `source` table.
#[derive(Default)]
pub struct SourceRow<'a> {
    /// Relative path of the dump file in its layout.
    pub file: &'a str,
    /// `dump` or `debug`.
    pub kind: &'a str,
    /// Header fields.
    pub task: Option<&'a str>,
    /// Header fields.
    pub level: Option<&'a str>,
    /// Header fields.
    pub framework: Option<&'a str>,
    /// Header fields.
    pub dump_data_dir: Option<&'a str>,
    /// Entries in `data`.
    pub entries: i64,
    /// Leaves.
    pub leaves: i64,
    /// Size of the file.
    pub bytes: i64,
    /// Indentation (`None`: one line).
    pub indent: Option<i32>,
    /// The skeleton.
    pub skeleton: &'a str,
    /// The original file, where the rebuild would differ.
    pub original: Option<&'a [u8]>,
    /// stack.json: format (`None`: absent), indentation, original where needed.
    pub stack: Option<SideFileRef<'a>>,
    /// construct.json: likewise.
    pub construct: Option<SideFileRef<'a>>,
}

/// Rows of the `source` table.
#[derive(Default)]
pub struct SourceColumns {
    file: StringBuilder,
    kind: StringBuilder,
    task: StringBuilder,
    level: StringBuilder,
    framework: StringBuilder,
    dump_data_dir: StringBuilder,
    entries: Int64Builder,
    leaves: Int64Builder,
    bytes: Int64Builder,
    indent: Int32Builder,
    skeleton: LargeStringBuilder,
    original: LargeBinaryBuilder,
    stack_format: StringBuilder,
    stack_indent: Int32Builder,
    stack_original: LargeBinaryBuilder,
    construct_format: StringBuilder,
    construct_indent: Int32Builder,
    construct_original: LargeBinaryBuilder,
    inner_step: Int64Builder,
    pid: Int64Builder,
}

impl SourceColumns {
    /// Appends one dump file.
    pub fn push(&mut self, row: &SourceRow<'_>, origin: Origin) {
        self.file.append_value(row.file);
        self.kind.append_value(row.kind);
        self.task.append_option(row.task);
        self.level.append_option(row.level);
        self.framework.append_option(row.framework);
        self.dump_data_dir.append_option(row.dump_data_dir);
        self.entries.append_value(row.entries);
        self.leaves.append_value(row.leaves);
        self.bytes.append_value(row.bytes);
        self.indent.append_option(row.indent);
        self.skeleton.append_value(row.skeleton);
        self.original.append_option(row.original);
        self.stack_format.append_option(row.stack.map(|s| s.0));
        self.stack_indent.append_option(row.stack.and_then(|s| s.1));
        self.stack_original.append_option(row.stack.and_then(|s| s.2));
        self.construct_format.append_option(row.construct.map(|s| s.0));
        self.construct_indent.append_option(row.construct.and_then(|s| s.1));
        self.construct_original.append_option(row.construct.and_then(|s| s.2));
        self.inner_step.append_option(origin.inner_step);
        self.pid.append_option(origin.pid);
    }

    /// The rows as a batch of [`source_schema`].
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.file.finish()),
            Arc::new(self.kind.finish()),
            Arc::new(self.task.finish()),
            Arc::new(self.level.finish()),
            Arc::new(self.framework.finish()),
            Arc::new(self.dump_data_dir.finish()),
            Arc::new(self.entries.finish()),
            Arc::new(self.leaves.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.indent.finish()),
            Arc::new(self.skeleton.finish()),
            Arc::new(self.original.finish()),
            Arc::new(self.stack_format.finish()),
            Arc::new(self.stack_indent.finish()),
            Arc::new(self.stack_original.finish()),
            Arc::new(self.construct_format.finish()),
            Arc::new(self.construct_indent.finish()),
            Arc::new(self.construct_original.finish()),
            Arc::new(self.inner_step.finish()),
            Arc::new(self.pid.finish()),
        ];
        Ok(RecordBatch::try_new(source_schema(), cols)?)
    }
}

/// Everything imported for one unit, before it is written.
#[derive(Default)]
pub struct UnitColumns {
    /// `dump` rows per API family.
    pub dump: BTreeMap<String, DumpColumns>,
    /// `stack` rows.
    pub stack: StackColumns,
    /// `construct` rows.
    pub construct: ConstructColumns,
    /// `tensor` rows per API family.
    pub tensor: BTreeMap<String, TensorColumns>,
    /// `source` rows.
    pub source: SourceColumns,
    /// Whether any stack / construct / tensor row was pushed.
    pub has_stack: bool,
    /// See `has_stack`.
    pub has_construct: bool,
}
