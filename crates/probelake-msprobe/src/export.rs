//! `export`: a dataset back into the msprobe folder tree it came from, byte for byte.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Component, Path, PathBuf};

use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, LargeBinaryArray, LargeStringArray, ListArray,
    RecordBatch, StringArray,
};
use arrow::datatypes::Int64Type;
use tokio::task::{JoinError, JoinHandle};

use crate::error::{MsprobeError, Result};
use crate::json::Layout;
use crate::tensor_file::{write_tensor_file, ContainerMeta, TensorData};
use probelake_format::columns;
use probelake_format::lake::{CommitRecord, FetchedFile, Lake};
use probelake_format::layout::{Table, Unit};
use probelake_format::output_tree::OutputTree;
use probelake_format::FormatError;

use crate::columns::Origin;
use crate::construct::{render_construct, ConstructRow};
use crate::dump_file::{no_more_leaves, render_holes};
use crate::import::Progress;
use crate::leaf::Leaf;
use crate::stack::{render_stack, StackFormat, StackRow};
use crate::stack_frames::{list_range, StackFrames};

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
/// as it was. Units render on the Tokio runtime's blocking threads, so it runs inside one.
pub async fn export(lake: &Lake, dst: &Path, options: &ExportOptions, progress: &dyn Progress) -> Result<ExportReport> {
    if let Some(root) = lake.local_dir() {
        if resolved(dst).starts_with(resolved(root)) {
            return Err(FormatError::OutputPath {
                path: dst.to_path_buf(),
                message: format!("is inside the dataset {}; export into a folder outside it", lake.display()),
            }
            .into());
        }
    }
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

/// `path` made absolute through its longest existing ancestor (links resolved there), with
/// the parts that do not exist yet applied as given: a `..` after a missing folder steps back
/// out of it, since a folder that does not exist is no link.
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let parts: Vec<Component<'_>> = path.components().collect();
    for existing in (0..=parts.len()).rev() {
        let ancestor: PathBuf = parts[..existing].iter().collect();
        let here = if ancestor.as_os_str().is_empty() { Path::new(".") } else { ancestor.as_path() };
        if let Ok(mut real) = std::fs::canonicalize(here) {
            for part in &parts[existing..] {
                match part {
                    Component::ParentDir => {
                        real.pop();
                    }
                    Component::CurDir => {}
                    other => real.push(other),
                }
            }
            return real;
        }
    }
    path.to_path_buf()
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
    // Each unit renders on a blocking thread (decoding and rendering are all CPU) while this
    // task writes the units before it, in order: what is written, the checks below and the
    // first error reported are those of a one-by-one export. One more unit than there are
    // cores is in flight, so the cores keep rendering while a unit is written; memory holds
    // those units' files rather than the whole export's.
    let in_flight_max = std::thread::available_parallelism().map_or(1, |n| n.get()) + 1;
    let mut in_flight: VecDeque<(&CommitRecord, JoinHandle<Result<UnitFiles>>)> = VecDeque::new();
    let mut failed_fetch = None;
    for record in &records {
        if in_flight.len() >= in_flight_max {
            if let Some((record, files)) = in_flight.pop_front() {
                write_unit(tree, record, files.await, &mut report, progress)?;
            }
        }
        match fetch_unit(lake, record).await {
            Ok(unit) => in_flight.push_back((record, tokio::task::spawn_blocking(move || render_fetched(unit)))),
            Err(e) => {
                failed_fetch = Some(e);
                break;
            }
        }
    }
    // The units before a failed fetch still come first, with their own errors.
    while let Some((record, files)) = in_flight.pop_front() {
        write_unit(tree, record, files.await, &mut report, progress)?;
    }
    failed_fetch.map_or(Ok(report), Err)
}

/// Writes one rendered unit. Every file is checked before any is written: an existing file
/// (without --force) or one an earlier unit wrote fails before work the rollback would undo.
fn write_unit(
    tree: &mut OutputTree,
    record: &CommitRecord,
    rendered: std::result::Result<Result<UnitFiles>, JoinError>,
    report: &mut ExportReport,
    progress: &dyn Progress,
) -> Result<()> {
    let files =
        rendered.map_err(|e| MsprobeError::Internal(format!("rendering unit {} stopped: {e}", record.unit)))??;
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
    Ok(())
}

/// The most a dump file's buffer is sized to up front; the recorded length comes from the
/// dataset, which may be damaged.
const MAX_PRESIZE: usize = 1 << 30;

/// A unit's files: (relative path, bytes).
type UnitFiles = Vec<(PathBuf, Vec<u8>)>;

/// The `dump` table's leaf columns of one batch, looked up and type-checked once.
struct LeafColumns<'b> {
    kind: &'b StringArray,
    dtype: &'b StringArray,
    md5: &'b StringArray,
    data_name: &'b StringArray,
    value: &'b StringArray,
    raw: &'b StringArray,
    shape: &'b ListArray,
    dim_values: &'b [i64],
    stats: [&'b Float64Array; 4],
    requires_grad: &'b BooleanArray,
}

impl<'b> LeafColumns<'b> {
    fn new(batch: &'b RecordBatch) -> Result<Self> {
        let t = Table::Dump;
        let string = |name: &str| typed::<StringArray>(batch, name, t);
        let float = |name: &str| typed::<Float64Array>(batch, name, t);
        let shape = typed::<ListArray>(batch, "shape", t)?;
        Ok(LeafColumns {
            kind: string("kind")?,
            dtype: string("dtype")?,
            md5: string("md5")?,
            data_name: string("data_name")?,
            value: string("value")?,
            raw: string("raw")?,
            shape,
            dim_values: shape.values().as_primitive_opt::<Int64Type>().ok_or_else(|| type_error(t, "shape"))?.values(),
            stats: [float("max")?, float("min")?, float("mean")?, float("norm")?],
            requires_grad: typed::<BooleanArray>(batch, "requires_grad", t)?,
        })
    }

    /// Sets `leaf` to row `i`. The shape's vector is reused (kept in `spare` while a row has no
    /// shape) rather than allocated per row.
    fn fill(&self, i: usize, leaf: &mut Leaf<'b>, spare: &mut Vec<i64>) -> Result<()> {
        let text = |col: &'b StringArray| col.is_valid(i).then(|| Cow::Borrowed(col.value(i)));
        leaf.kind = text(self.kind);
        leaf.dtype = text(self.dtype);
        leaf.md5 = text(self.md5);
        leaf.data_name = text(self.data_name);
        leaf.value = text(self.value);
        leaf.raw = text(self.raw);
        let mut dims = leaf.shape.take().unwrap_or_else(|| std::mem::take(spare));
        if !self.shape.is_valid(i) {
            *spare = dims;
        } else {
            let range = list_range(self.shape.value_offsets(), i)
                .and_then(|r| self.dim_values.get(r))
                .ok_or_else(|| type_error(Table::Dump, "shape"))?;
            dims.clear();
            dims.extend_from_slice(range);
            leaf.shape = Some(dims);
        }
        for (slot, col) in leaf.stats.iter_mut().zip(self.stats) {
            *slot = col.is_valid(i).then(|| col.value(i));
        }
        let rg = self.requires_grad;
        leaf.requires_grad = rg.is_valid(i).then(|| rg.value(i));
        Ok(())
    }
}

/// Lays out one dump file from its skeleton, rendering the leaf at each of `places` from
/// `columns` (one entry per dump batch) into one reused [`Leaf`].
fn render_leaves(
    skeleton: &str,
    layout: Layout,
    places: &[(Origin, i64, i32, usize, usize)],
    columns: &[LeafColumns<'_>],
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut leaf = Leaf::default();
    let mut spare = Vec::new();
    let mut failure = None;
    let mut next = places.iter();
    render_holes(skeleton, layout, out, &mut |out, depth| {
        let Some(&(_, _, _, b, i)) = next.next() else { return false };
        let filled = columns.get(b).ok_or_else(|| MsprobeError::Internal("dump batch out of range".into()));
        match filled.and_then(|c| c.fill(i, &mut leaf, &mut spare)) {
            Ok(()) => leaf.render(out, layout, depth),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
        true
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    no_more_leaves(next.next().is_some())
}

/// A relative path from the dataset, refused if it could leave the export folder.
fn safe_relative(location: &str, rel: &str) -> Result<PathBuf> {
    let path = Path::new(rel);
    let ok = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(path.to_path_buf())
    } else {
        Err(MsprobeError::corrupt(location, format!("file path {rel:?} would leave the export folder")))
    }
}

/// One unit's data files, read but not decoded: [`render_fetched`] decodes them on any thread.
struct FetchedUnit {
    location: String,
    /// The files of each table, in [`TABLES`] order.
    tables: [Vec<FetchedFile>; 5],
}

const TABLES: [Table; 5] = [Table::Source, Table::Dump, Table::Stack, Table::Construct, Table::Tensor];

async fn fetch_unit(lake: &Lake, record: &CommitRecord) -> Result<FetchedUnit> {
    let mut tables: [Vec<FetchedFile>; 5] = Default::default();
    for (files, table) in tables.iter_mut().zip(TABLES) {
        for file in record.files_of(table) {
            files.push(lake.fetch_file(file).await?);
        }
    }
    Ok(FetchedUnit { location: format!("{} ({})", lake.display(), record.unit), tables })
}

/// The `dump` columns export reads. The others (the entry's name, its parts and the leaf's
/// path) are the skeleton's to lay out; `name`, `path` and `item` alone are most of a dump
/// file's decoded bytes.
pub const EXPORT_DUMP_COLUMNS: [&str; 16] = [
    "inner_step",
    "pid",
    "seq",
    "leaf",
    "kind",
    "dtype",
    "shape",
    "max",
    "min",
    "mean",
    "norm",
    "requires_grad",
    "md5",
    "data_name",
    "value",
    "raw",
];

fn decode(files: Vec<FetchedFile>, only: Option<&[&str]>, as_dictionary: &[&str]) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for file in files {
        out.extend(file.decode_columns(only, as_dictionary)?);
    }
    Ok(out)
}

/// Column `name` of a batch of `table`.
fn column<'b>(batch: &'b RecordBatch, name: &str, table: Table) -> Result<&'b dyn Array> {
    columns::column(batch, name).map(|c| c.as_ref()).map_err(|e| MsprobeError::corrupt(table.name(), e.to_string()))
}

/// Column `name` of a batch of `table`, as the array type `A`.
fn typed<'b, A: Array + 'static>(batch: &'b RecordBatch, name: &str, table: Table) -> Result<&'b A> {
    columns::typed(batch, name).map_err(|e| MsprobeError::corrupt(table.name(), e.to_string()))
}

fn opt_i64(batch: &RecordBatch, name: &str, table: Table, row: usize) -> Result<Option<i64>> {
    let col = typed::<Int64Array>(batch, name, table)?;
    Ok(col.is_valid(row).then(|| col.value(row)))
}

fn type_error(table: Table, name: &str) -> MsprobeError {
    MsprobeError::corrupt(table.name(), format!("column `{name}` has the wrong type"))
}

fn strs<'b>(batch: &'b RecordBatch, name: &str, table: Table) -> Result<impl Fn(usize) -> Option<&'b str> + 'b> {
    let col = typed::<StringArray>(batch, name, table)?;
    Ok(move |i: usize| col.is_valid(i).then(|| col.value(i)))
}

/// Each row's [`Origin`], with the two columns looked up once per batch rather than per row.
fn origins(batch: &RecordBatch, table: Table) -> Result<impl Fn(usize) -> Origin + '_> {
    let int64 = |name: &str| typed::<Int64Array>(batch, name, table);
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

fn render_fetched(unit: FetchedUnit) -> Result<UnitFiles> {
    let FetchedUnit { location, tables: [sources, dumps, stacks, constructs, tensors] } = unit;
    let (sources, dumps) = (decode(sources, None, &[])?, decode(dumps, Some(&EXPORT_DUMP_COLUMNS), &[])?);
    let (stacks, constructs, tensors) =
        (decode(stacks, None, &["frames"])?, decode(constructs, None, &[])?, decode(tensors, None, &[])?);

    // Where each dump file's leaves are: (origin, seq, leaf, batch, row) sorted, so each origin's
    // leaves are one run in (seq, leaf) order across the API-family files (ties in table order).
    // A leaf is rendered straight from its batch's columns when its place comes up.
    let leaf_columns = dumps.iter().map(LeafColumns::new).collect::<Result<Vec<_>>>()?;
    let mut places: Vec<(Origin, i64, i32, usize, usize)> = Vec::new();
    for (b, batch) in dumps.iter().enumerate() {
        let t = Table::Dump;
        let seq = typed::<Int64Array>(batch, "seq", t)?;
        let leaf_no = typed::<Int32Array>(batch, "leaf", t)?;
        let (seq, leaf_no) = (seq.values(), leaf_no.values());
        let origin = origins(batch, Table::Dump)?;
        places.extend((0..batch.num_rows()).map(|i| (origin(i), seq[i], leaf_no[i], b, i)));
    }
    places.sort_unstable();
    let mut runs: BTreeMap<Origin, std::ops::Range<usize>> = BTreeMap::new();
    for (at, place) in places.iter().enumerate() {
        runs.entry(place.0).and_modify(|r| r.end = at + 1).or_insert(at..at + 1);
    }

    let mut stack_rows: BTreeMap<Origin, Vec<StackRow<'_>>> = BTreeMap::new();
    for batch in &stacks {
        let t = Table::Stack;
        let name = strs(batch, "name", t)?;
        let group = typed::<Int64Array>(batch, "group", t)?;
        let frames = StackFrames::new(column(batch, "frames", t)?).ok_or_else(|| type_error(t, "frames"))?;
        for i in 0..batch.num_rows() {
            let f = frames.row(i).ok_or_else(|| type_error(t, "frames"))?;
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
        let indent = typed::<Int32Array>(batch, "indent", t)?;
        let lengths = typed::<Int64Array>(batch, "bytes", t).ok();
        let skeleton = typed::<LargeStringArray>(batch, "skeleton", t)?;
        let binary = |name: &str| typed::<LargeBinaryArray>(batch, name, t);
        let (original, stack_original, construct_original) =
            (binary("original")?, binary("stack_original")?, binary("construct_original")?);
        let (stack_format, construct_format) = (strs(batch, "stack_format", t)?, strs(batch, "construct_format", t)?);
        let int = |name: &str, i: usize| -> Result<Option<i32>> {
            let c = typed::<Int32Array>(batch, name, t)?;
            Ok(c.is_valid(i).then(|| c.value(i)))
        };
        for i in 0..batch.num_rows() {
            let origin = origin_of(batch, t, i)?;
            let rel = safe_relative(&location, file(i).unwrap_or_default())?;
            let folder = rel.parent().map(Path::to_path_buf).unwrap_or_default();
            let bytes = if original.is_valid(i) {
                original.value(i).to_vec()
            } else {
                let layout = layout_of(indent.is_valid(i).then(|| indent.value(i)));
                let run = runs.get(&origin).cloned().unwrap_or_default();
                // Sized once from the file's recorded length: growing by doubling copied
                // the file and faulted in fresh pages at every step.
                let expected = lengths.filter(|b| b.is_valid(i)).map_or(0, |b| b.value(i));
                let mut buf = Vec::with_capacity(usize::try_from(expected).unwrap_or(0).min(MAX_PRESIZE));
                render_leaves(skeleton.value(i), layout, &places[run], &leaf_columns, &mut buf)?;
                buf
            };
            out.push((rel, bytes));
            if let Some(format) = stack_format(i) {
                let bytes = if stack_original.is_valid(i) {
                    stack_original.value(i).to_vec()
                } else {
                    let format = StackFormat::parse(format).ok_or_else(|| {
                        MsprobeError::corrupt(location.clone(), format!("unknown stack format {format:?}"))
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
        let shape = typed::<ListArray>(batch, "shape", t)?;
        let data = typed::<LargeBinaryArray>(batch, "data", t)?;
        let original = typed::<LargeBinaryArray>(batch, "original", t)?;
        for i in 0..batch.num_rows() {
            let name = data_name(i).unwrap_or_default();
            if name.contains(['/', '\\']) || name.is_empty() || name == "." || name == ".." {
                return Err(MsprobeError::corrupt(
                    location.clone(),
                    format!("tensor file name {name:?} is not a plain file name"),
                ));
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
                    .map_err(|source| MsprobeError::TensorFile { file: name.into(), source })?;
                write_tensor_file(&tensor, &meta)
                    .map_err(|source| MsprobeError::TensorFile { file: name.into(), source })?
            };
            out.push((folder.join("dump_tensor_data").join(name), bytes));
        }
    }
    Ok(out)
}
