//! The CLI's capabilities as functions: import, export, compare, divergence.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use probelake_msprobe::{export, import, ExportOptions, ImportOptions, NoProgress, Overrides, TreeLayout};
use probelake_query::compare::inputs::{pair_text, pairing_notes, RunPair};
use probelake_query::compare::pairing::{Pick, UnitChoice};
use probelake_query::compare::results::{
    local_timestamp, needs_folders, CompareQueue, Naming, ResultFiles, ResultFormat,
};
use probelake_query::compare::{CompareMode, CompareOptions, Comparison, PlannedUnit};
use probelake_query::divergence::{divergence_session, first_divergence, first_divergence_sql};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use crate::error::{Error, Kind, Result};
use crate::lake::{display, local_dir, open_existing, open_for_write, storage_options, table};
use crate::runtime::block_on;
use crate::stream::{schema_capsule, PyArrowStream, Source};

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

/// The units to compare, from `units` (keys `step`, `stage`, `rank`, `target_step`,
/// `golden_step`, … as the CLI's flags).
fn unit_choice(units: Option<&Bound<'_, PyDict>>) -> Result<UnitChoice> {
    let Some(units) = units else { return Ok(UnitChoice::default()) };
    for key in units.keys() {
        let key: String = key.extract().map_err(|_| Error::argument("unit choices are keyed by name"))?;
        let known = ["step", "stage", "rank"]
            .iter()
            .any(|d| key == *d || key == format!("target_{d}") || key == format!("golden_{d}"));
        if !known {
            return Err(Error::argument(format!(
                "unknown unit choice {key:?}: use step, stage, rank, or target_/golden_ before one"
            )));
        }
    }
    fn get<'py, T: FromPyObjectOwned<'py>>(units: &Bound<'py, PyDict>, key: &str) -> Result<Option<T>> {
        match units.get_item(key).map_err(|e| Error::argument(e.to_string()))? {
            None => Ok(None),
            Some(v) if v.is_none() => Ok(None),
            Some(v) => v.extract().map(Some).map_err(|_| Error::argument(format!("{key}: wrong type"))),
        }
    }
    Ok(UnitChoice {
        step: Pick::from_flags("step", get(units, "step")?, get(units, "target_step")?, get(units, "golden_step")?)?,
        stage: Pick::from_flags(
            "stage",
            get(units, "stage")?,
            get(units, "target_stage")?,
            get(units, "golden_stage")?,
        )?,
        rank: Pick::from_flags("rank", get(units, "rank")?, get(units, "target_rank")?, get(units, "golden_rank")?)?,
    })
}

/// `probelake compare TARGET GOLDEN`: the units of both runs paired as the CLI pairs them and
/// compared as msprobe compare does. Returns the typed table (an Arrow stream), the count of
/// `error` rows, the files written under `out` (named as the CLI names them) and the notes on
/// how the units were paired.
#[pyfunction]
#[pyo3(signature = (target, golden, out=None, mode=None, format=None, units=None, storage_options=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn compare<'py>(
    py: Python<'py>,
    target: String,
    golden: String,
    out: Option<PathBuf>,
    mode: Option<String>,
    format: Option<String>,
    units: Option<&Bound<'py, PyDict>>,
    storage_options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(PyArrowStream, usize, Vec<PathBuf>, Vec<String>)> {
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
    let format = match format.as_deref() {
        None | Some("csv") => ResultFormat::Csv,
        Some("xlsx") => ResultFormat::Xlsx,
        Some("parquet") => ResultFormat::Parquet,
        Some(other) => {
            return Err(Error::argument(format!("format {other:?}: use \"csv\", \"xlsx\" or \"parquet\"")).into())
        }
    };
    let choice = unit_choice(units)?;
    let work = async move {
        let runs = RunPair::open_in_place(&target, &golden, &storage).await?;
        let pairing = runs.pair(&choice)?;
        let notes = pairing_notes(&pairing);
        let target_is_file = runs.target_is_file();
        let options = CompareOptions { mode };
        let comparison = Arc::new(Comparison::of_runs(&runs.target, &runs.golden, options));
        let mut files = out.map(|o| ResultFiles::new(&o, format, needs_folders(&pairing.pairs), local_timestamp()));
        let (mut batches, mut errors) = (Vec::new(), 0);
        let mut queue = CompareQueue::new(comparison, &pairing.pairs);
        while let Some((pair, planned)) = queue.next().await {
            let what = pair_text(pair.target, pair.golden);
            let added =
                planned.and_then(PlannedUnit::collect).map_err(|e| Error::from(e).context(format!("comparing {what}")));
            let added = added.and_then(|result| {
                errors += result.rows_with_result("error");
                batches.push(result.to_record_batch()?);
                if let Some(files) = files.as_mut() {
                    files.add_table(&result, &result.target_files, Naming::of(pair, pairing.rule, target_is_file))?;
                }
                Ok::<_, Error>(())
            });
            if let Err(e) = added {
                if let Some(files) = files {
                    files.rollback();
                }
                return Err(e);
            }
        }
        let written = files.map(|f| f.finish().1).unwrap_or_default();
        Ok::<_, Error>((batches, errors, written, notes))
    };
    let (batches, errors, written, notes) = block_on(py, work)??;
    Ok((batches_stream(batches), errors, written, notes))
}

/// A stream over `batches` (the schema of the first; none when there are no batches).
fn batches_stream(batches: Vec<RecordBatch>) -> PyArrowStream {
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => Arc::new(arrow::datatypes::Schema::empty()),
    };
    PyArrowStream::new(schema, Source::Batches(batches.into_iter()), None)
}

/// `probelake divergence TARGET GOLDEN`: the first diverging entry of every unit pair, with
/// the chain of modules above it; and the notes on how the units were paired.
#[pyfunction]
#[pyo3(signature = (target, golden, threshold=0.5, units=None, storage_options=None))]
pub fn divergence<'py>(
    py: Python<'py>,
    target: String,
    golden: String,
    threshold: f64,
    units: Option<&Bound<'py, PyDict>>,
    storage_options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(PyArrowStream, Vec<String>)> {
    // Checked before any input is opened, as the CLI checks its flags.
    first_divergence_sql(threshold).map_err(Error::from)?;
    let storage = self::storage_options(storage_options)?;
    let choice = unit_choice(units)?;
    let work = async move {
        let runs = RunPair::open(&target, &golden, &storage).await?;
        let pairing = runs.pair(&choice)?;
        let notes = pairing_notes(&pairing);
        let session = divergence_session(runs.target.lake()?, runs.golden.lake()?, &pairing.pairs).await?;
        let (schema, batches) = match first_divergence(&session, threshold).await {
            Ok(found) => found,
            Err(e) => {
                let e = Error::from(e).context("running the first-divergence query");
                return Err(match session.first_damaged_file().await {
                    Some(damage) => Error::from(damage).context(e.message),
                    None => e,
                });
            }
        };
        Ok::<_, Error>((PyArrowStream::new(schema, Source::Batches(batches.into_iter()), None), notes))
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
