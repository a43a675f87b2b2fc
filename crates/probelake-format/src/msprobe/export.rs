//! `export`: a dataset back into the msprobe folder tree it came from, byte for byte.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};

use crate::error::{FormatError, Result};
use crate::json::Layout;
use crate::lake::{CommitRecord, Lake};
use crate::layout::{Table, Unit};
use crate::output_tree::OutputTree;
use crate::tensor_file::{write_tensor_file, ContainerMeta, TensorData};

use super::columns::Origin;
use super::construct::{render_construct, ConstructRow};
use super::dump_file::render;
use super::import::Progress;
use super::leaf::Leaf;
use super::stack::{render_stack, StackFormat, StackRow};

/// Which units to export, and how.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Only this step.
    pub step: Option<i64>,
    /// Only this stage.
    pub stage: Option<String>,
    /// Only this rank.
    pub rank: Option<i64>,
    /// Overwrite files that exist.
    pub force: bool,
}

impl ExportOptions {
    /// Whether `unit` passes the filters.
    pub fn selects(&self, unit: &Unit) -> bool {
        self.step.is_none_or(|s| s == unit.step)
            && self.stage.as_deref().is_none_or(|s| s == unit.stage)
            && self.rank.is_none_or(|r| r == unit.rank)
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Default)]
pub struct ExportReport {
    /// Units exported.
    pub units: usize,
    /// Files written.
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes the selected units of `lake` under `dst` as msprobe files. All or nothing: on any
/// error the files written so far are removed (and overwritten ones put back), so `dst` is left
/// as it was.
pub async fn export(lake: &Lake, dst: &Path, options: &ExportOptions, progress: &dyn Progress) -> Result<ExportReport> {
    let mut tree = OutputTree::new(dst, options.force);
    let result = export_into(lake, &mut tree, options, progress).await;
    progress.finish();
    match result {
        Ok(report) => {
            tree.finish();
            Ok(report)
        }
        Err(e) => {
            tree.rollback();
            Err(e)
        }
    }
}

async fn export_into(
    lake: &Lake,
    tree: &mut OutputTree,
    options: &ExportOptions,
    progress: &dyn Progress,
) -> Result<ExportReport> {
    let records: Vec<CommitRecord> = lake.units().await?.into_iter().filter(|r| options.selects(&r.unit)).collect();
    progress.start(records.iter().map(|r| r.counts.json_bytes).sum(), records.len());
    let mut report = ExportReport::default();
    for record in &records {
        let files = render_unit(lake, record).await?;
        // Every file of the unit checked before any is written: an existing file (without
        // --force) or one an earlier unit wrote fails before work the rollback would undo.
        for (rel, _) in &files {
            tree.check(rel)?;
        }
        for (rel, bytes) in &files {
            tree.write(rel, bytes)?;
            report.bytes += bytes.len() as u64;
        }
        report.files += files.len();
        report.units += 1;
        progress.advance(record.counts.json_bytes);
    }
    Ok(report)
}

/// A relative path from the dataset, refused if it could leave the export folder.
fn safe_relative(location: &str, rel: &str) -> Result<PathBuf> {
    let path = Path::new(rel);
    let ok = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(path.to_path_buf())
    } else {
        Err(FormatError::Corrupt {
            location: location.into(),
            message: format!("file path {rel:?} would leave the export folder"),
        })
    }
}

async fn read_table(lake: &Lake, record: &CommitRecord, table: Table) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for file in record.files_of(table) {
        out.extend(lake.read_file(file).await?);
    }
    Ok(out)
}

fn column<'b>(batch: &'b RecordBatch, name: &str, table: Table) -> Result<&'b dyn Array> {
    batch.column_by_name(name).map(|c| c.as_ref()).ok_or_else(|| FormatError::Corrupt {
        location: table.name().into(),
        message: format!("column `{name}` is missing"),
    })
}

fn opt_i64(batch: &RecordBatch, name: &str, table: Table, row: usize) -> Result<Option<i64>> {
    let col = column(batch, name, table)?.as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(table, name))?;
    Ok(col.is_valid(row).then(|| col.value(row)))
}

fn type_error(table: Table, name: &str) -> FormatError {
    FormatError::Corrupt { location: table.name().into(), message: format!("column `{name}` has the wrong type") }
}

fn strs<'b>(batch: &'b RecordBatch, name: &str, table: Table) -> Result<impl Fn(usize) -> Option<&'b str> + 'b> {
    let col = column(batch, name, table)?.as_string_opt::<i32>().ok_or_else(|| type_error(table, name))?;
    Ok(move |i: usize| col.is_valid(i).then(|| col.value(i)))
}

/// Each row's [`Origin`], with the two columns looked up once per batch rather than per row.
fn origins(batch: &RecordBatch, table: Table) -> Result<impl Fn(usize) -> Origin + '_> {
    let int64 =
        |name: &str| column(batch, name, table)?.as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(table, name));
    let (inner_step, pid) = (int64("inner_step")?, int64("pid")?);
    Ok(move |i: usize| Origin {
        inner_step: inner_step.is_valid(i).then(|| inner_step.value(i)),
        pid: pid.is_valid(i).then(|| pid.value(i)),
    })
}

fn origin_of(batch: &RecordBatch, table: Table, row: usize) -> Result<Origin> {
    Ok(Origin { inner_step: opt_i64(batch, "inner_step", table, row)?, pid: opt_i64(batch, "pid", table, row)? })
}

fn layout_of(indent: Option<i32>) -> Layout {
    Layout { indent: indent.and_then(|i| u16::try_from(i).ok()) }
}

/// Renders every file of one unit: (relative path, bytes).
pub async fn render_unit(lake: &Lake, record: &CommitRecord) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let location = format!("{} ({})", lake.display(), record.unit);
    let sources = read_table(lake, record, Table::Source).await?;
    let dumps = read_table(lake, record, Table::Dump).await?;
    let stacks = read_table(lake, record, Table::Stack).await?;
    let constructs = read_table(lake, record, Table::Construct).await?;
    let tensors = read_table(lake, record, Table::Tensor).await?;

    // Leaves of every dump file, in (seq, leaf) order across the API-family files.
    let mut leaves: BTreeMap<Origin, Vec<(i64, i32, Leaf<'_>)>> = BTreeMap::new();
    for batch in &dumps {
        let t = Table::Dump;
        let seq = column(batch, "seq", t)?.as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(t, "seq"))?;
        let leaf_no = column(batch, "leaf", t)?.as_primitive_opt::<Int32Type>().ok_or_else(|| type_error(t, "leaf"))?;
        let (kind, dtype, md5, data_name, value, raw) = (
            strs(batch, "kind", t)?,
            strs(batch, "dtype", t)?,
            strs(batch, "md5", t)?,
            strs(batch, "data_name", t)?,
            strs(batch, "value", t)?,
            strs(batch, "raw", t)?,
        );
        let shape = column(batch, "shape", t)?.as_list_opt::<i32>().ok_or_else(|| type_error(t, "shape"))?;
        let stats: Vec<_> = ["max", "min", "mean", "norm"]
            .iter()
            .map(|c| {
                column(batch, c, t).and_then(|a| a.as_primitive_opt::<Float64Type>().ok_or_else(|| type_error(t, c)))
            })
            .collect::<Result<_>>()?;
        let rg = column(batch, "requires_grad", t)?.as_boolean_opt().ok_or_else(|| type_error(t, "requires_grad"))?;
        // Sliced out of the flat values by offset: `shape.value(i)` would build an array per row.
        let dim_values = shape.values().as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(t, "shape"))?.values();
        let dim_offsets = shape.value_offsets();
        let origin = origins(batch, t)?;
        for i in 0..batch.num_rows() {
            let dims = if shape.is_valid(i) {
                let range = dim_offsets
                    .get(i)
                    .zip(dim_offsets.get(i + 1))
                    .and_then(|(&a, &b)| dim_values.get(usize::try_from(a).ok()?..usize::try_from(b).ok()?));
                Some(range.ok_or_else(|| type_error(t, "shape"))?.to_vec())
            } else {
                None
            };
            let stat = |k: usize| stats.get(k).and_then(|a| a.is_valid(i).then(|| a.value(i)));
            let leaf = Leaf {
                kind: kind(i).map(Cow::Borrowed),
                dtype: dtype(i).map(Cow::Borrowed),
                shape: dims,
                stats: [stat(0), stat(1), stat(2), stat(3)],
                requires_grad: rg.is_valid(i).then(|| rg.value(i)),
                md5: md5(i).map(Cow::Borrowed),
                data_name: data_name(i).map(Cow::Borrowed),
                value: value(i).map(Cow::Borrowed),
                raw: raw(i).map(Cow::Borrowed),
            };
            leaves.entry(origin(i)).or_default().push((seq.value(i), leaf_no.value(i), leaf));
        }
    }
    for list in leaves.values_mut() {
        list.sort_by_key(|(s, l, _)| (*s, *l));
    }

    let mut stack_rows: BTreeMap<Origin, Vec<StackRow<'_>>> = BTreeMap::new();
    for batch in &stacks {
        let t = Table::Stack;
        let name = strs(batch, "name", t)?;
        let group = column(batch, "group", t)?.as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(t, "group"))?;
        let frames = column(batch, "frames", t)?.as_list_opt::<i32>().ok_or_else(|| type_error(t, "frames"))?;
        for i in 0..batch.num_rows() {
            let f = frames.value(i);
            let f = f.as_string_opt::<i32>().ok_or_else(|| type_error(t, "frames"))?;
            let f: Vec<Cow<'_, str>> = f.iter().map(|s| Cow::Owned(s.unwrap_or_default().to_string())).collect();
            let row = StackRow { group: group.value(i), name: Cow::Borrowed(name(i).unwrap_or_default()), frames: f };
            stack_rows.entry(origin_of(batch, t, i)?).or_default().push(row);
        }
    }
    let mut construct_rows: BTreeMap<Origin, Vec<(i64, ConstructRow<'_>)>> = BTreeMap::new();
    for batch in &constructs {
        let t = Table::Construct;
        let (name, parent, raw) = (strs(batch, "name", t)?, strs(batch, "parent", t)?, strs(batch, "raw", t)?);
        for i in 0..batch.num_rows() {
            let row = ConstructRow {
                name: Cow::Borrowed(name(i).unwrap_or_default()),
                parent: parent(i).map(Cow::Borrowed),
                micro_step: opt_i64(batch, "micro_step", t, i)?,
                raw: raw(i).map(Cow::Borrowed),
            };
            let seq = opt_i64(batch, "seq", t, i)?.unwrap_or_default();
            construct_rows.entry(origin_of(batch, t, i)?).or_default().push((seq, row));
        }
    }

    let mut out = Vec::new();
    let mut folders: BTreeMap<Origin, PathBuf> = BTreeMap::new();
    for batch in &sources {
        let t = Table::Source;
        let file = strs(batch, "file", t)?;
        let indent =
            column(batch, "indent", t)?.as_primitive_opt::<Int32Type>().ok_or_else(|| type_error(t, "indent"))?;
        let skeleton = column(batch, "skeleton", t)?.as_string_opt::<i64>().ok_or_else(|| type_error(t, "skeleton"))?;
        let binary = |name: &str| {
            column(batch, name, t).and_then(|c| c.as_binary_opt::<i64>().ok_or_else(|| type_error(t, name)))
        };
        let (original, stack_original, construct_original) =
            (binary("original")?, binary("stack_original")?, binary("construct_original")?);
        let (stack_format, construct_format) = (strs(batch, "stack_format", t)?, strs(batch, "construct_format", t)?);
        let int = |name: &str, i: usize| -> Result<Option<i32>> {
            let c = column(batch, name, t)?.as_primitive_opt::<Int32Type>().ok_or_else(|| type_error(t, name))?;
            Ok(c.is_valid(i).then(|| c.value(i)))
        };
        for i in 0..batch.num_rows() {
            let origin = origin_of(batch, t, i)?;
            let rel = safe_relative(&location, file(i).unwrap_or_default())?;
            let folder = rel.parent().map(Path::to_path_buf).unwrap_or_default();
            let bytes = if original.is_valid(i) {
                original.value(i).to_vec()
            } else {
                let mut buf = Vec::new();
                let layout = layout_of(indent.is_valid(i).then(|| indent.value(i)));
                let list = leaves.get(&origin).map(Vec::as_slice).unwrap_or_default();
                render(skeleton.value(i), layout, list.iter().map(|(_, _, l)| l), &mut buf)?;
                buf
            };
            out.push((rel, bytes));
            if let Some(format) = stack_format(i) {
                let bytes = if stack_original.is_valid(i) {
                    stack_original.value(i).to_vec()
                } else {
                    let format = StackFormat::parse(format).ok_or_else(|| FormatError::Corrupt {
                        location: location.clone(),
                        message: format!("unknown stack format {format:?}"),
                    })?;
                    let mut buf = Vec::new();
                    render_stack(
                        format,
                        layout_of(int("stack_indent", i)?),
                        stack_rows.get(&origin).map(Vec::as_slice).unwrap_or_default(),
                        &mut buf,
                    );
                    buf
                };
                out.push((folder.join("stack.json"), bytes));
            }
            if construct_format(i).is_some() {
                let bytes = if construct_original.is_valid(i) {
                    construct_original.value(i).to_vec()
                } else {
                    let mut rows: Vec<ConstructRow<'_>> = Vec::new();
                    if let Some(list) = construct_rows.get_mut(&origin) {
                        list.sort_by_key(|(s, _)| *s);
                        rows = list.iter().map(|(_, r)| r.clone()).collect();
                    }
                    let mut buf = Vec::new();
                    render_construct(layout_of(int("construct_indent", i)?), &rows, &mut buf);
                    buf
                };
                out.push((folder.join("construct.json"), bytes));
            }
            folders.insert(origin, folder);
        }
    }

    for batch in &tensors {
        let t = Table::Tensor;
        let (data_name, dtype, meta) =
            (strs(batch, "data_name", t)?, strs(batch, "dtype", t)?, strs(batch, "meta", t)?);
        let shape = column(batch, "shape", t)?.as_list_opt::<i32>().ok_or_else(|| type_error(t, "shape"))?;
        let data = column(batch, "data", t)?.as_binary_opt::<i64>().ok_or_else(|| type_error(t, "data"))?;
        let original = column(batch, "original", t)?.as_binary_opt::<i64>().ok_or_else(|| type_error(t, "original"))?;
        for i in 0..batch.num_rows() {
            let name = data_name(i).unwrap_or_default();
            if name.contains(['/', '\\']) || name.is_empty() || name == "." || name == ".." {
                return Err(FormatError::Corrupt {
                    location: location.clone(),
                    message: format!("tensor file name {name:?} is not a plain file name"),
                });
            }
            let folder = folders.get(&origin_of(batch, t, i)?).cloned().unwrap_or_default();
            let bytes = if original.is_valid(i) {
                original.value(i).to_vec()
            } else {
                let dims = shape.value(i);
                let dims = dims.as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(t, "shape"))?;
                let tensor = TensorData {
                    dtype: dtype(i).unwrap_or_default().to_string(),
                    shape: dims.values().to_vec(),
                    data: data.value(i).to_vec(),
                };
                let meta = ContainerMeta::from_json(meta(i).unwrap_or_default())
                    .map_err(|source| FormatError::TensorFile { file: name.into(), source })?;
                write_tensor_file(&tensor, &meta)
                    .map_err(|source| FormatError::TensorFile { file: name.into(), source })?
            };
            out.push((folder.join("dump_tensor_data").join(name), bytes));
        }
    }
    Ok(out)
}
