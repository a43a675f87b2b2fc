//! `probelake.open`: a dataset, for reading its committed units and for writing new ones.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use probelake_format::storage::{self, StorageOptions};
pub use probelake_format::storage::{display_uri as display, local_dir};
use probelake_format::{CommitRecord, Lake, Table};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::error::{Error, Kind, Result};
use crate::runtime::block_on;
use crate::writer::{writer_options, PyUnitWriter};

/// A dataset: a local path, `file://` or `s3://` URI and how to reach its store.
#[pyclass(frozen, name = "Lake", module = "probelake._internal")]
pub struct PyLake {
    uri: String,
    storage: StorageOptions,
    /// The writer's handle, with its I/O thread, made on the first `unit` of this process.
    writer: Mutex<Option<(u32, probelake_writer::Lake)>>,
}

/// Opens `uri` for writing (a local folder is created), as `probelake import` opens its DST.
pub fn open_for_write(uri: &str, options: &StorageOptions) -> Result<Lake> {
    storage::open(uri, options).map_err(|e| Error::from(e).context(format!("opening dataset {}", display(uri))))
}

/// Opens `uri` for reading: it must exist (readers create no folders).
pub fn open_existing(uri: &str, options: &StorageOptions) -> Result<Lake> {
    if let Some(dir) = local_dir(uri) {
        if !dir.exists() {
            return Err(Error::new(Kind::Dataset, format!("{uri}: no such dataset")));
        }
    }
    open_for_write(uri, options)
}

/// Storage options from a Python dict: the fields of `StorageOptions`, `AWS_*` spellings
/// accepted (`AWS_ENDPOINT_URL` → `endpoint`).
pub fn storage_options(options: Option<&Bound<'_, PyDict>>) -> Result<StorageOptions> {
    let mut out = StorageOptions::from_env();
    let Some(options) = options else { return Ok(out) };
    for (key, value) in options.iter() {
        let key: String = key.extract().map_err(|_| Error::argument("storage_options: keys must be strings"))?;
        let name = key.to_ascii_lowercase();
        let name = name.strip_prefix("aws_").unwrap_or(&name);
        let text = || -> Result<String> {
            value.extract::<String>().map_err(|_| Error::argument(format!("storage_options[{key:?}]: expected a str")))
        };
        let seconds = || -> Result<Duration> {
            let s: f64 = value
                .extract()
                .map_err(|_| Error::argument(format!("storage_options[{key:?}]: expected seconds (a number)")))?;
            Duration::try_from_secs_f64(s)
                .map_err(|_| Error::argument(format!("storage_options[{key:?}]: {s} is not a duration")))
        };
        let count = || -> Result<usize> {
            value.extract().map_err(|_| Error::argument(format!("storage_options[{key:?}]: expected an int ≥ 0")))
        };
        match name {
            "endpoint" | "endpoint_url" => out.endpoint = Some(text()?),
            "region" | "default_region" => out.region = Some(text()?),
            "access_key_id" => out.access_key_id = Some(text()?),
            "secret_access_key" => out.secret_access_key = Some(text()?),
            "session_token" | "token" => out.session_token = Some(text()?),
            "allow_http" => {
                out.allow_http = Some(match value.extract::<bool>() {
                    Ok(b) => b,
                    Err(_) => matches!(text()?.to_ascii_lowercase().as_str(), "true" | "1" | "yes"),
                })
            }
            "max_retries" => out.max_retries = count()?,
            "retry_timeout" => out.retry_timeout = seconds()?,
            "request_timeout" => out.request_timeout = seconds()?,
            "connect_timeout" => out.connect_timeout = seconds()?,
            "multipart_threshold" => out.multipart_threshold = count()?,
            _ => {
                return Err(Error::argument(format!(
                    "storage_options: unknown key {key:?}; use endpoint, region, access_key_id, secret_access_key, \
                     session_token, allow_http, max_retries, retry_timeout, request_timeout, connect_timeout, \
                     multipart_threshold"
                )))
            }
        }
    }
    Ok(out)
}

/// A table by name.
pub fn table(name: &str) -> Result<Table> {
    Table::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
        let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        Error::argument(format!("unknown table {name:?}; the tables are {}", names.join(", ")))
    })
}

/// Opens the dataset at `uri`; nothing is created until the first write.
#[pyfunction]
#[pyo3(signature = (uri, storage_options=None))]
pub fn open(uri: String, storage_options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLake> {
    let storage = self::storage_options(storage_options)?;
    if local_dir(&uri).is_none() {
        // Checks the scheme, bucket and credentials form now; no request is made.
        storage::open(&uri, &storage).map_err(Error::from)?;
    }
    Ok(PyLake { uri, storage, writer: Mutex::new(None) })
}

fn unit_tuple<'py>(py: Python<'py>, r: &CommitRecord) -> PyResult<Bound<'py, PyTuple>> {
    let c = &r.counts;
    (
        r.unit.step,
        r.unit.stage.as_str(),
        r.unit.rank,
        r.commit_id.as_str(),
        r.committed_at,
        r.writer.as_str(),
        c.entries,
        c.leaves,
        c.tensors,
        r.bytes(),
        c.task.as_deref(),
        c.level.as_deref(),
    )
        .into_pyobject(py)
}

#[pymethods]
impl PyLake {
    /// The URI as given.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The URI as it may be printed.
    #[getter]
    fn display(&self) -> String {
        display(&self.uri)
    }

    /// The dataset's folder when it is local (absolute), else `None`.
    #[getter]
    fn local_dir(&self) -> Option<PathBuf> {
        local_dir(&self.uri).map(|d| std::path::absolute(&d).unwrap_or(d))
    }

    /// The committed units, in (step, stage, rank) order: tuples of (step, stage, rank,
    /// commit_id, committed_at, writer, entries, leaves, tensors, bytes, task, level).
    fn units<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let records = self.records(py)?;
        records.iter().map(|r| unit_tuple(py, r)).collect()
    }

    /// The committed files of `table`: (path relative to the root, rows, bytes), in unit order.
    fn files(&self, py: Python<'_>, table: &str) -> PyResult<Vec<(String, u64, u64)>> {
        let table = self::table(table)?;
        let records = self.records(py)?;
        Ok(records.iter().flat_map(|r| r.files_of(table).map(|f| (f.path.clone(), f.rows, f.bytes))).collect())
    }

    /// Starts writing one (step, stage, rank) unit; see `probelake.Lake.unit`.
    #[pyo3(signature = (step, stage, rank, options))]
    fn unit(
        &self,
        py: Python<'_>,
        step: i64,
        stage: String,
        rank: i64,
        options: &Bound<'_, PyDict>,
    ) -> PyResult<PyUnitWriter> {
        // It starts the unit's threads: not while the process forks.
        let _entered = crate::fork::enter(py);
        let options = writer_options(options)?;
        if stage.is_empty() {
            return Err(Error::argument("stage must not be empty (msprobe's own dumps use `default`)").into());
        }
        let lake = self.writer_lake()?;
        let unit = probelake_writer::Unit::new(step, stage, rank);
        let writer = lake.unit(unit.clone(), options.clone()).map_err(Error::from)?;
        Ok(PyUnitWriter::new(writer, lake, unit, &options))
    }

    fn __repr__(&self) -> String {
        format!("probelake._internal.Lake({:?})", display(&self.uri))
    }
}

impl PyLake {
    /// The committed units, read with the GIL released.
    pub fn records(&self, py: Python<'_>) -> PyResult<Vec<CommitRecord>> {
        let lake = open_existing(&self.uri, &self.storage)?;
        Ok(block_on(py, async move { lake.units().await })?.map_err(Error::from)?)
    }

    fn writer_lake(&self) -> Result<probelake_writer::Lake> {
        let pid = crate::runtime::process_id();
        let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((owner, lake)) = slot.as_ref() {
            if *owner == pid {
                return Ok(lake.clone());
            }
        }
        // Made in a parent before a fork: its I/O thread does not exist here.
        if let Some(inherited) = slot.take() {
            std::mem::forget(inherited);
        }
        let lake = probelake_writer::Lake::from_format(open_for_write(&self.uri, &self.storage)?)?;
        crate::fork::register_writer(&lake);
        *slot = Some((pid, lake.clone()));
        Ok(lake)
    }
}

/// The dataset a call names, opened for reading.
pub fn lake_arg(uri: &str, storage: &StorageOptions) -> Result<Lake> {
    open_existing(uri, storage)
}
