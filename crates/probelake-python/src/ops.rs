//! The CLI's capabilities as functions: import, export, compare, divergence.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use probelake_format::layout::stage_folder_name;
use probelake_format::output_tree::OutputTree;
use probelake_format::{Lake, StorageOptions, Unit};
use probelake_msprobe::{export, import, ExportOptions, ImportOptions, NoProgress, Overrides, TreeLayout};
use probelake_query::compare::{CompareMode, CompareOptions, Comparison};
use probelake_query::{Run, RunSession};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use crate::error::{Error, Kind, Result};
use crate::lake::{display, local_dir, open_existing, open_for_write, storage_options, table};
use crate::runtime::block_on;
use crate::stream::{schema_capsule, PyArrowStream, Source};

const FIRST_DIVERGENCE: &str = include_str!("../../../sql/first_divergence.sql");

/// `probelake import SRC DST`: returns the committed units as (step, stage, rank, entries,
/// leaves, bytes) and the bytes of JSON read.
#[pyfunction]
#[pyo3(signature = (src, dst, layout=None, step=None, stage=None, rank=None, storage_options=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn import_msprobe(
    py: Python<'_>,
    src: PathBuf,
    dst: String,
    layout: Option<String>,
    step: Option<i64>,
    stage: Option<String>,
    rank: Option<i64>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(Vec<(i64, String, i64, u64, u64, u64)>, u64)> {
    let storage = self::storage_options(storage_options)?;
    let layout = match layout.as_deref() {
        None => None,
        Some("msprobe") => Some(TreeLayout::Msprobe),
        Some("verl") => Some(TreeLayout::Verl),
        Some("single") => Some(TreeLayout::Single),
        Some(other) => {
            return Err(Error::argument(format!("layout {other:?}: use \"msprobe\", \"verl\" or \"single\"")).into())
        }
    };
    let created = local_dir(&dst).filter(|d| !d.exists());
    let lake = open_for_write(&dst, &storage)?;
    let options = ImportOptions { overrides: Overrides { layout, step, stage, rank } };
    let what = src.display().to_string();
    let result = block_on(py, async move { import(&src, &lake, &options, &NoProgress).await });
    let report = match result {
        Ok(Ok(report)) => report,
        failed => {
            if let Some(dir) = created {
                // DST did not exist before: leave no trace of it.
                let _ = std::fs::remove_dir_all(dir);
            }
            return match failed {
                Ok(Err(e)) => Err(Error::from(e).context(format!("importing {what}")).into()),
                Err(interrupt) => Err(interrupt),
                Ok(Ok(_)) => Err(Error::new(Kind::Internal, "import succeeded and failed").into()),
            };
        }
    };
    let units = report
        .units
        .iter()
        .map(|r| (r.unit.step, r.unit.stage.clone(), r.unit.rank, r.counts.entries, r.counts.leaves, r.bytes()))
        .collect();
    Ok((units, report.json_bytes))
}

/// `probelake export SRC DST`: returns (units, files, bytes) written.
#[pyfunction]
#[pyo3(signature = (src, dst, step=None, stage=None, rank=None, force=false, storage_options=None))]
#[allow(clippy::too_many_arguments)]
pub fn export_msprobe(
    py: Python<'_>,
    src: String,
    dst: PathBuf,
    step: Option<i64>,
    stage: Option<String>,
    rank: Option<i64>,
    force: bool,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(usize, usize, u64)> {
    let storage = self::storage_options(storage_options)?;
    let lake = open_existing(&src, &storage)?;
    let options = ExportOptions { step, stage, rank, force };
    let what = display(&src);
    let report = block_on(py, async move { export(&lake, &dst, &options, &NoProgress).await })?
        .map_err(|e| Error::from(e).context(format!("exporting {what}")))?;
    Ok((report.units, report.files, report.bytes))
}

/// A run given as a dataset, or as msprobe files imported into a temporary dataset (kept
/// alive by the guard), as the CLI's compare and divergence take them.
struct Opened {
    lake: Lake,
    _tmp: Option<tempfile::TempDir>,
}

async fn open_run(arg: String, what: &'static str, storage: StorageOptions) -> Result<Opened> {
    if let Some(dir) = local_dir(&arg) {
        if !dir.exists() {
            return Err(Error::argument(format!("{what} {arg}: no such file or folder")));
        }
        if !dir.join("_probelake/manifest.json").exists() {
            let tmp = tempfile::tempdir()
                .map_err(|e| Error::new(Kind::Dataset, format!("creating a temporary dataset: {e}")))?;
            let lake = Lake::local(tmp.path())?;
            import(&dir, &lake, &ImportOptions::default(), &NoProgress)
                .await
                .map_err(|e| Error::from(e).context(format!("importing {what} {arg}")))?;
            return Ok(Opened { lake, _tmp: Some(tmp) });
        }
    }
    Ok(Opened { lake: open_for_write(&arg, &storage)?, _tmp: None })
}

/// `probelake compare TARGET GOLDEN`: every unit in both runs compared as msprobe compare
/// does. Returns the typed table (an Arrow stream) and the count of `error` rows; with `out`, also writes
/// msprobe's CSV per unit there (named as the CLI names them, `stamp` their timestamp).
#[pyfunction]
#[pyo3(signature = (target, golden, out=None, step=None, stage=None, rank=None, mode=None, stamp=String::new(), storage_options=None))]
#[allow(clippy::too_many_arguments)]
pub fn compare<'py>(
    py: Python<'py>,
    target: String,
    golden: String,
    out: Option<PathBuf>,
    step: Option<i64>,
    stage: Option<String>,
    rank: Option<i64>,
    mode: Option<String>,
    stamp: String,
    storage_options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(PyArrowStream, usize, Vec<PathBuf>)> {
    let storage = self::storage_options(storage_options)?;
    let mode = match mode.as_deref() {
        None | Some("auto") => None,
        Some("statistics") => Some(CompareMode::Statistics),
        Some("md5") => Some(CompareMode::Md5),
        Some("tensor") => Some(CompareMode::Tensor),
        Some(other) => {
            return Err(
                Error::argument(format!("mode {other:?}: use \"auto\", \"statistics\", \"md5\" or \"tensor\"")).into()
            )
        }
    };
    let from_file = std::path::Path::new(&target).is_file();
    let work = async move {
        let t = open_run(target, "target", storage.clone()).await?;
        let g = open_run(golden, "golden", storage).await?;
        let (t_units, g_units) = (t.lake.units().await?, g.lake.units().await?);
        let select = |u: &Unit| {
            step.is_none_or(|s| s == u.step)
                && stage.as_deref().is_none_or(|s| s == u.stage)
                && rank.is_none_or(|r| r == u.rank)
        };
        let pairs: Vec<_> = t_units
            .iter()
            .filter(|r| select(&r.unit))
            .filter_map(|tr| g_units.iter().find(|gr| gr.unit == tr.unit).map(|gr| (tr.clone(), gr.clone())))
            .collect();
        if pairs.is_empty() {
            return Err(Error::new(
                Kind::Compare,
                "no (step, stage, rank) is in both runs; `probelake info` lists each run's units",
            ));
        }
        let nested =
            pairs.iter().any(|(a, _)| (a.unit.step, &a.unit.stage) != (pairs[0].0.unit.step, &pairs[0].0.unit.stage));
        let comparison = Arc::new(Comparison::new(t.lake.clone(), g.lake.clone(), CompareOptions { mode }));
        let mut tree = out.as_ref().map(|o| OutputTree::new(o, true));
        let (mut batches, mut errors, mut written) = (Vec::new(), 0, Vec::new());
        for (tr, gr) in &pairs {
            let result = async {
                let planned = comparison.plan_unit(tr, gr).await?;
                let target_files = planned.target_files().to_vec();
                Ok::<_, probelake_query::compare::CompareError>((planned.collect()?, target_files))
            };
            let (result, target_files) = match result.await {
                Ok(r) => r,
                Err(e) => {
                    if let Some(tree) = tree.take() {
                        tree.rollback();
                    }
                    return Err(Error::from(e).context(format!("comparing {}", tr.unit)));
                }
            };
            errors += result.rows_with_result("error");
            batches.push(result.to_record_batch()?);
            if let (Some(tree), Some(out)) = (tree.as_mut(), out.as_ref()) {
                let dir = if nested {
                    PathBuf::from(format!("step{}", tr.unit.step)).join(stage_folder_name(&tr.unit.stage))
                } else {
                    PathBuf::new()
                };
                let pid = match target_files.as_slice() {
                    [(_, Some(pid))] => Some(*pid),
                    _ => None,
                };
                let name = match (from_file, tr.unit.rank, pid) {
                    (false, r, _) if r >= 0 => format!("compare_result_rank{r}_{stamp}.csv"),
                    (false, _, Some(pid)) => format!("compare_result_proc{pid}_{stamp}.csv"),
                    _ => format!("compare_result_{stamp}.csv"),
                };
                let rel = dir.join(name);
                tree.write_with(&rel, |file| result.write_csv(file))
                    .map_err(|e| Error::from(e).context(format!("writing {}", out.join(&rel).display())))?;
                written.push(out.join(rel));
            }
        }
        if let Some(tree) = tree {
            tree.finish();
        }
        Ok((batches, errors, written))
    };
    let (batches, errors, written) = block_on(py, work)??;
    Ok((batches_stream(batches), errors, written))
}

/// A stream over `batches` (the schema of the first; none when there are no batches).
fn batches_stream(batches: Vec<RecordBatch>) -> PyArrowStream {
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => Arc::new(arrow::datatypes::Schema::empty()),
    };
    PyArrowStream::new(schema, Source::Batches(batches.into_iter()), None)
}

/// `probelake divergence TARGET GOLDEN`: the first diverging entry of every unit.
#[pyfunction]
#[pyo3(signature = (target, golden, threshold=0.5, storage_options=None))]
pub fn divergence<'py>(
    py: Python<'py>,
    target: String,
    golden: String,
    threshold: f64,
    storage_options: Option<&Bound<'py, PyDict>>,
) -> PyResult<PyArrowStream> {
    if !(threshold >= 0.0 && threshold.is_finite()) {
        return Err(Error::argument(format!(
            "threshold {threshold}: give a finite number ≥ 0 (0.5 is msprobe's rule)"
        ))
        .into());
    }
    let storage = self::storage_options(storage_options)?;
    let work = async move {
        let t = open_run(target, "target", storage.clone()).await?;
        let g = open_run(golden, "golden", storage).await?;
        let session =
            RunSession::open(vec![Run::new("target", t.lake.clone()), Run::new("golden", g.lake.clone())], false)
                .await?;
        let query = FIRST_DIVERGENCE.replace("SELECT 0.5 AS threshold", &format!("SELECT {threshold:?} AS threshold"));
        let frame = session
            .sql(&query)
            .await?
            .ok_or_else(|| Error::new(Kind::Internal, "first_divergence.sql is not a query"))?;
        let schema: arrow::datatypes::Schema = frame.schema().as_arrow().clone();
        let batches = frame
            .collect()
            .await
            .map_err(|e| Error::chain(Kind::Query, &e).context("running the first-divergence query"))?;
        Ok::<_, Error>(PyArrowStream::new(Arc::new(schema), Source::Batches(batches.into_iter()), None))
    };
    Ok(block_on(py, work)??)
}

/// The typed schema of `table` as readers see it (`_probelake/schema/<table>.parquet`), as an
/// "arrow_schema" capsule.
#[pyfunction]
pub fn reader_schema<'py>(py: Python<'py>, table: &str) -> PyResult<Bound<'py, PyCapsule>> {
    let schema = probelake_format::readers::reader_schema(self::table(table)?);
    schema_capsule(py, &schema)
}
