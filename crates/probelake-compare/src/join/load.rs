//! Reading the per-file context of one side of a comparison out of a dataset: the task, level
//! and stacks of a unit's dump files, and their tensors. The dump rows themselves go through the
//! DataFusion plan (`plan.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, LargeBinaryArray, ListArray, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use probelake_format::{CommitRecord, Lake, Table};
use probelake_msprobe::{Origin, StackFrames};

use crate::error::CompareError;
use probelake_format::columns::{column, strings, typed};
use probelake_query::msprobe::pyfmt::push_py_str_list;

/// One dump file of a side.
#[derive(Debug, Default)]
pub(crate) struct DumpFile {
    pub task: Option<String>,
    pub level: Option<String>,
    /// Whether a stack.json sat next to the dump.json (adds `NPU_Stack_Info`).
    pub has_stack: bool,
    /// Entry name → its `NPU_Stack_Info` cell, the frames as Python prints a list (read for the
    /// target side only: msprobe shows the NPU's stacks alone).
    pub stacks: HashMap<String, Arc<str>>,
}

/// A dump file's tensors: data_name → tensor.
pub(crate) type Tensors = HashMap<String, Arc<TensorData>>;

/// A tensor of the `tensor` table.
#[derive(Debug, Clone)]
pub(crate) struct TensorData {
    pub dtype: String,
    pub shape: Vec<i64>,
    pub data: Vec<u8>,
}

fn opt_str(a: &StringArray, i: usize) -> Option<&str> {
    (!a.is_null(i)).then(|| a.value(i))
}

fn opt_i64(a: &Int64Array, i: usize) -> Option<i64> {
    (!a.is_null(i)).then(|| a.value(i))
}

fn shape_at(a: &ListArray, i: usize) -> Result<Option<Vec<i64>>, CompareError> {
    if a.is_null(i) {
        return Ok(None);
    }
    let v = a.value(i);
    let v = v
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| CompareError::Schema("column `shape` is not a list of int64".into()))?;
    Ok(Some(v.values().to_vec()))
}

async fn batches(lake: &Lake, unit: &CommitRecord, table: Table) -> Result<Vec<RecordBatch>, CompareError> {
    let mut out = Vec::new();
    for file in unit.files_of(table) {
        out.extend(lake.read_file(file).await?);
    }
    Ok(out)
}

/// What of a side's stack table [`read_files`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stacks {
    /// Each entry's `NPU_Stack_Info` cell.
    Cells,
    /// Nothing (the golden side: msprobe shows the NPU's stacks only).
    Skip,
}

/// Reads the context of the dump files of a unit, keyed by (inner_step, pid).
pub(crate) async fn read_files(
    lake: &Lake,
    unit: &CommitRecord,
    stacks: Stacks,
) -> Result<BTreeMap<Origin, DumpFile>, CompareError> {
    let sources = batches(lake, unit, Table::Source).await?;
    let mut stack_batches = Vec::new();
    if stacks == Stacks::Cells {
        for stack in unit.files_of(Table::Stack) {
            // Frames as a dictionary: every name of a stack group repeats the group's frames.
            stack_batches.extend(lake.fetch_file(stack).await?.decode_columns(None, &["frames"])?);
        }
    }
    files_from_batches(&sources, &stack_batches)
}

/// The context of a unit's dump files from its `source` batches and, for the stack cells, its
/// `stack` batches (none for the golden side).
pub(crate) fn files_from_batches(
    sources: &[RecordBatch],
    stacks: &[RecordBatch],
) -> Result<BTreeMap<Origin, DumpFile>, CompareError> {
    let mut files: BTreeMap<Origin, DumpFile> = BTreeMap::new();
    for batch in sources {
        let kind = strings(batch, "kind")?;
        let task = strings(batch, "task")?;
        let level = strings(batch, "level")?;
        let stack_format = strings(batch, "stack_format")?;
        let inner = typed::<Int64Array>(batch, "inner_step")?;
        let pid = typed::<Int64Array>(batch, "pid")?;
        for i in 0..batch.num_rows() {
            let file = files.entry(Origin { inner_step: opt_i64(inner, i), pid: opt_i64(pid, i) }).or_default();
            file.task = opt_str(&task, i).map(str::to_owned);
            file.level = opt_str(&level, i).map(str::to_owned);
            file.has_stack = !stack_format.is_null(i);
            if kind.value(i) != "dump" && file.task.is_none() {
                file.task = Some(kind.value(i).to_owned());
            }
        }
    }
    let mut group_zero = BTreeSet::new();
    for batch in stacks {
        read_stack_cells(batch, &mut files, &mut group_zero)?;
    }
    // msprobe reads a stack.json as grouped only when it has a group `"0"` (`load_stack_json`);
    // otherwise it looks each entry up by name among the file's keys, which for a grouped file
    // are group numbers: no entry has a stack.
    for (origin, file) in files.iter_mut() {
        if !group_zero.contains(origin) {
            file.stacks.clear();
        }
    }
    Ok(files)
}

/// Fills the stack cells of `files` from a `stack` batch. Each distinct frame list is printed
/// once: a list copied out per entry was most of a large comparison's context read. The files
/// with a row of group 0 are added to `group_zero`.
fn read_stack_cells(
    batch: &RecordBatch,
    files: &mut BTreeMap<Origin, DumpFile>,
    group_zero: &mut BTreeSet<Origin>,
) -> Result<(), CompareError> {
    let not_frames = || CompareError::Schema("column `frames` is not a list of strings".into());
    let name = strings(batch, "name")?;
    let frames = StackFrames::new(column(batch, "frames")?.as_ref()).ok_or_else(not_frames)?;
    let inner = typed::<Int64Array>(batch, "inner_step")?;
    let pid = typed::<Int64Array>(batch, "pid")?;
    let group = typed::<Int64Array>(batch, "group")?;
    let mut printed: HashMap<&[i32], Arc<str>> = HashMap::new();
    for i in 0..batch.num_rows() {
        let origin = Origin { inner_step: opt_i64(inner, i), pid: opt_i64(pid, i) };
        if group.value(i) == 0 {
            group_zero.insert(origin);
        }
        let Some(file) = files.get_mut(&origin) else {
            continue;
        };
        let identity = frames.identity(i);
        let cell = match identity.and_then(|id| printed.get(id)) {
            Some(cell) => Arc::clone(cell),
            None => {
                let mut text = String::new();
                push_py_str_list(&mut text, &frames.row(i).ok_or_else(not_frames)?);
                let cell: Arc<str> = text.into();
                if let Some(id) = identity {
                    printed.insert(id, Arc::clone(&cell));
                }
                cell
            }
        };
        file.stacks.insert(name.value(i).to_owned(), cell);
    }
    Ok(())
}

/// Reads the `tensor` table of a unit for one dump file: data_name → tensor.
pub(crate) async fn read_tensors(lake: &Lake, unit: &CommitRecord, key: Origin) -> Result<Tensors, CompareError> {
    tensors_from_batches(&batches(lake, unit, Table::Tensor).await?, key)
}

/// The tensors of dump file `key` in a unit's `tensor` batches: data_name → tensor.
pub(crate) fn tensors_from_batches(batches: &[RecordBatch], key: Origin) -> Result<Tensors, CompareError> {
    let mut out = HashMap::new();
    for batch in batches {
        let data_name = strings(batch, "data_name")?;
        let dtype = strings(batch, "dtype")?;
        let shape = typed::<ListArray>(batch, "shape")?;
        let data = column(batch, "data")?;
        let data = cast(data, &DataType::LargeBinary)?;
        let data = data
            .as_any()
            .downcast_ref::<LargeBinaryArray>()
            .ok_or_else(|| CompareError::Schema("column `data` is not binary".into()))?;
        let inner = typed::<Int64Array>(batch, "inner_step")?;
        let pid = typed::<Int64Array>(batch, "pid")?;
        for i in 0..batch.num_rows() {
            if (Origin { inner_step: opt_i64(inner, i), pid: opt_i64(pid, i) }) != key {
                continue;
            }
            let t = TensorData {
                dtype: dtype.value(i).to_owned(),
                shape: shape_at(shape, i)?.unwrap_or_default(),
                data: data.value(i).to_vec(),
            };
            out.insert(data_name.value(i).to_owned(), Arc::new(t));
        }
    }
    Ok(out)
}
