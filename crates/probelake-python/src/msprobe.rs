//! What `probelake.msprobe` needs from Rust: a dataset checked before training starts, and a
//! dump that msprobe held in memory committed as one unit.

use probelake_msprobe::{import_captured, place_dump_file, CapturedDump};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{Error, Result};
use crate::lake::{display, open_for_write, storage_options};
use crate::runtime::block_on;

/// Opens `uri` for writing and checks that it takes writes (creating the dataset if new).
#[pyfunction]
#[pyo3(signature = (uri, storage_options=None))]
pub fn check_dataset(py: Python<'_>, uri: String, storage_options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let storage = self::storage_options(storage_options)?;
    let lake = open_for_write(&uri, &storage)?;
    let result = block_on(py, async move { lake.check_takes_writes().await })?;
    result.map_err(|e| Error::from(e).context(format!("dataset {} does not take writes", display(&uri))))?;
    Ok(())
}

/// The unit (step, stage, rank) that msprobe's dump file `dump_path` belongs to.
#[pyfunction]
pub fn dump_unit(dump_path: &str) -> PyResult<(i64, String, i64)> {
    let place = place_dump_file(dump_path.as_ref()).map_err(Error::from)?;
    Ok((place.unit.step, place.unit.stage, place.unit.rank))
}

/// Commits one captured dump folder to `uri` as its unit, replacing it if present. Returns
/// (step, stage, rank, entries, tensors).
#[pyfunction]
#[pyo3(signature = (uri, dump_path, dump, stack=None, construct=None, tensors=Vec::new(), storage_options=None))]
#[allow(clippy::too_many_arguments)]
pub fn commit_captured(
    py: Python<'_>,
    uri: String,
    dump_path: String,
    dump: Vec<u8>,
    stack: Option<Vec<u8>>,
    construct: Option<Vec<u8>>,
    tensors: Vec<(String, Vec<u8>)>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(i64, String, i64, u64, u64)> {
    let storage = self::storage_options(storage_options)?;
    let lake = open_for_write(&uri, &storage)?;
    let captured = CapturedDump { dump_path, dump, stack, construct, tensors };
    let what = captured.dump_path.clone();
    let result: Result<_> = block_on(py, async move { import_captured(&lake, &captured).await })?
        .map_err(|e| Error::from(e).context(format!("committing msprobe's dump {what} to {}", display(&uri))));
    let record = result?;
    let unit = record.unit;
    Ok((unit.step, unit.stage, unit.rank, record.counts.entries, record.counts.tensors))
}
