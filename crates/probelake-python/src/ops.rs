//! The CLI's capabilities as functions: import, export, compare, divergence.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use probelake_compare::runs::pairing::{Pick, UnitChoice, Words};
use probelake_compare::write::results::ResultFormat;
use probelake_compare::{
    read_mapping_file, CompareJob, DivergenceJob, MappingError, Mappings, ModeChoice, Output, UnknownWord,
};
use probelake_msprobe::{export, import, ExportOptions, ImportOptions, NoProgress, Overrides, TreeLayout};
use probelake_report::{page, ReportError, ReportJob};
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
    let words = Words::Keywords;
    Ok(UnitChoice {
        step: Pick::from_words(
            words,
            "step",
            get(units, "step")?,
            get(units, "target_step")?,
            get(units, "golden_step")?,
        )?,
        stage: Pick::from_words(
            words,
            "stage",
            get(units, "stage")?,
            get(units, "target_stage")?,
            get(units, "golden_stage")?,
        )?,
        rank: Pick::from_words(
            words,
            "rank",
            get(units, "rank")?,
            get(units, "target_rank")?,
            get(units, "golden_rank")?,
        )?,
        words,
    })
}

/// `probelake compare TARGET GOLDEN`: the units of both runs paired as the CLI pairs them and
/// compared as msprobe compare does ([`CompareJob`]). Returns the typed table (an Arrow
/// stream; none with `out`, whose files are written as each table is built, as the CLI writes
/// them), the count of `error` rows, the files written under `out` (named as the CLI names
/// them) and the notes on how the units were paired.
#[pyfunction]
#[pyo3(signature = (target, golden, out=None, mode=None, format=None, units=None, storage_options=None, data_mapping=None, cell_mapping=None, bare_cell_mapping=false, fuzzy_match=false))]
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
    data_mapping: Option<PathBuf>,
    cell_mapping: Option<PathBuf>,
    bare_cell_mapping: bool,
    fuzzy_match: bool,
) -> PyResult<(Option<PyArrowStream>, usize, Vec<PathBuf>, Vec<String>)> {
    let storage = self::storage_options(storage_options)?;
    let mapping_error = |e: MappingError| Error::argument(e.to_string());
    let mut mappings = Mappings::default();
    if let Some(file) = data_mapping {
        mappings = mappings.with_data_mapping(read_mapping_file(&file).map_err(mapping_error)?);
    }
    if let Some(file) = cell_mapping {
        mappings = mappings.with_cell_mapping(read_mapping_file(&file).map_err(mapping_error)?);
    } else if bare_cell_mapping {
        mappings = mappings.with_cell_mapping([]);
    }
    let mappings = mappings.with_fuzzy_match(fuzzy_match);
    let mode: ModeChoice =
        mode.as_deref().unwrap_or("auto").parse().map_err(|e: UnknownWord| Error::argument(e.to_string()))?;
    let format: ResultFormat =
        format.as_deref().unwrap_or("csv").parse().map_err(|e: UnknownWord| Error::argument(e.to_string()))?;
    // With a folder, each table is written as it is built, as the command line writes it, and
    // none is held; without one, the tables are returned.
    let output = match out {
        Some(dir) => Output::Files { dir, format },
        None => Output::Tables,
    };
    let job = CompareJob::new(target, golden)
        .storage(storage)
        .mode(mode.mode())
        .units(unit_choice(units)?)
        .mappings(mappings);
    let tables = matches!(output, Output::Tables);
    let report = block_on(py, async move { job.output(output).run(&NoProgress).await })?.map_err(Error::from)?;
    let batches = report.tables.iter().map(|t| t.to_record_batch()).collect::<std::result::Result<Vec<_>, _>>();
    let table = tables.then(|| batches.map(batches_stream)).transpose().map_err(Error::from)?;
    Ok((table, report.errors, report.files, report.notes))
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
/// the chain of modules above it ([`DivergenceJob`]); and the notes on how the units were
/// paired.
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
    let storage = self::storage_options(storage_options)?;
    let job = DivergenceJob::new(target, golden).storage(storage).threshold(threshold).units(unit_choice(units)?);
    // Checked before any input is opened, as the CLI checks its flags.
    job.check().map_err(Error::from)?;
    let report = block_on(py, async move { job.run().await })?.map_err(Error::from)?;
    let stream = PyArrowStream::new(report.schema, Source::Batches(report.batches.into_iter()), None);
    Ok((stream, report.notes))
}

/// `probelake report TARGET GOLDEN -o OUT`: one offline HTML page that shows where the runs
/// part ([`ReportJob`]), written to `out`. Returns the counts (units, rows, errors, warnings,
/// NaN/inf rows, unmatched rows), the earliest diverging op and the pairing notes.
#[pyfunction]
#[pyo3(signature = (target, golden, out, threshold=0.5, units=None, storage_options=None, worst=None, detail_rows=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn report<'py>(
    py: Python<'py>,
    target: String,
    golden: String,
    out: PathBuf,
    threshold: f64,
    units: Option<&Bound<'py, PyDict>>,
    storage_options: Option<&Bound<'py, PyDict>>,
    worst: Option<usize>,
    detail_rows: Option<usize>,
) -> PyResult<([usize; 6], Option<String>, Vec<String>)> {
    let storage = self::storage_options(storage_options)?;
    let job = ReportJob::new(target, golden)
        .storage(storage)
        .threshold(threshold)
        .units(unit_choice(units)?)
        .limits(worst.unwrap_or(probelake_report::WORST_ROWS), detail_rows.unwrap_or(probelake_report::DETAIL_ROWS));
    job.check().map_err(Error::from)?;
    let written = block_on(py, async move {
        let data = job.run(&NoProgress).await?;
        let html = page(&data).map_err(ReportError::from)?;
        std::fs::write(&out, html.as_bytes())
            .map_err(|source| ReportError::Write { path: out.display().to_string(), source })?;
        Ok::<_, ReportError>(data)
    })?;
    let data = written.map_err(Error::from)?;
    let c = data.counts;
    let counts = [c.units, c.rows, c.errors, c.warnings, c.nan_inf, c.unmatched];
    Ok((counts, data.first.map(|f| f.op), data.notes))
}

/// The typed schema of `table` as readers see it (`_probelake/schema/<table>.parquet`), as an
/// "arrow_schema" capsule.
#[pyfunction]
pub fn reader_schema<'py>(py: Python<'py>, table: &str) -> PyResult<Bound<'py, PyCapsule>> {
    let schema = probelake_format::readers::reader_schema(self::table(table)?);
    schema_capsule(py, &schema)
}
