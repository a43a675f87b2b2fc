//! `probelake.sql`: a query over runs, its rows streamed to the consumer batch by batch.

use std::sync::Arc;

use probelake_query::{Run, RunSession};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::Error;
use crate::lake::{lake_arg, storage_options};
use crate::runtime::block_on;
use crate::stream::{PyArrowStream, Source};

/// Runs `query` over `runs` (name, URI), the first one the default schema, as
/// `probelake sql --run name=uri …` does.
#[pyfunction]
#[pyo3(signature = (query, runs, storage_options=None))]
pub fn sql(
    py: Python<'_>,
    query: String,
    runs: Vec<(String, String)>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyArrowStream> {
    // Until the result is listed for collect_open_queries: a fork waits for it.
    let _entered = crate::fork::enter(py);
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
    Ok(match stream {
        Some(stream) => PyArrowStream::new(stream.schema(), Source::Query(stream), Some(query)),
        // A statement with no rows (`SET …`): an empty stream.
        None => PyArrowStream::new(
            Arc::new(arrow::datatypes::Schema::empty()),
            Source::Batches(Vec::new().into_iter()),
            Some(query),
        ),
    })
}
