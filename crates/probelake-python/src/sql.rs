//! `probelake.sql`: a query over runs, streamed to pyarrow batch by batch.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use probelake_query::datafusion::execution::SendableRecordBatchStream;
use probelake_query::{Run, RunSession};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::error::{Error, Kind};
use crate::ipc;
use crate::lake::{lake_arg, storage_options};
use crate::runtime::block_on;

/// The rows of a query, read batch by batch.
#[pyclass(frozen, name = "SqlStream", module = "probelake._internal")]
pub struct PySqlStream {
    schema: arrow::datatypes::SchemaRef,
    /// `None` once the rows are read (or a read was interrupted).
    stream: Mutex<Option<SendableRecordBatchStream>>,
    query: String,
}

/// Runs `query` over `runs` (name, URI), the first one the default schema, as
/// `probelake sql --run name=uri …` does.
#[pyfunction]
#[pyo3(signature = (query, runs, storage_options=None))]
pub fn sql(
    py: Python<'_>,
    query: String,
    runs: Vec<(String, String)>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PySqlStream> {
    let storage = self::storage_options(storage_options)?;
    if runs.is_empty() {
        return Err(
            Error::argument("no dataset given: name at least one run, e.g. sql(query, base=\"lake/run-a\")").into()
        );
    }
    let mut opened = Vec::with_capacity(runs.len());
    for (name, uri) in runs {
        probelake_query::check_run_name(&name).map_err(Error::from)?;
        opened.push(Run::new(name, lake_arg(&uri, &storage)?));
    }
    let text = query.clone();
    let stream = block_on(py, async move {
        let session = RunSession::open(opened, false).await?;
        let Some(frame) = session.sql(&text).await? else {
            return Ok(None);
        };
        Ok::<_, probelake_query::QueryError>(Some(frame.execute_stream().await?))
    })?
    .map_err(Error::from)?;
    let schema = match &stream {
        Some(s) => s.schema(),
        None => Arc::new(arrow::datatypes::Schema::empty()),
    };
    Ok(PySqlStream { schema, stream: Mutex::new(stream), query })
}

#[pymethods]
impl PySqlStream {
    /// The result's schema, as an IPC stream with no batches.
    fn schema_ipc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &ipc::stream(&self.schema, &[])?))
    }

    /// The next batches (up to `max_batches`) as one IPC stream, or `None` at the end. The query
    /// runs with the GIL released; Ctrl-C interrupts it and ends the stream.
    #[pyo3(signature = (max_batches=16))]
    fn next_ipc<'py>(&self, py: Python<'py>, max_batches: usize) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let Some(mut stream) = self.stream.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(None);
        };
        let (stream, batches) = block_on(py, async move {
            let mut batches = Vec::new();
            while batches.len() < max_batches.max(1) {
                match stream.next().await {
                    Some(Ok(batch)) if batch.num_rows() == 0 => continue,
                    Some(Ok(batch)) => batches.push(batch),
                    Some(Err(e)) => return (None, Err(e)),
                    None => return (None, Ok(batches)),
                }
            }
            (Some(stream), Ok(batches))
        })?;
        *self.stream.lock().unwrap_or_else(|p| p.into_inner()) = stream;
        let batches = batches.map_err(|e| Error::chain(Kind::Query, &e))?;
        if batches.is_empty() {
            return Ok(None);
        }
        // Encoding copies every buffer once: done without the GIL.
        let schema = Arc::clone(&self.schema);
        let bytes = py.detach(move || ipc::stream(&schema, &batches))?;
        Ok(Some(PyBytes::new(py, &bytes)))
    }

    /// The query.
    #[getter]
    fn query(&self) -> &str {
        &self.query
    }

    fn __repr__(&self) -> String {
        let cols: Vec<String> =
            self.schema.fields().iter().map(|f| format!("{}: {}", f.name(), f.data_type())).collect();
        format!("SqlStream({})", cols.join(", "))
    }
}
