//! Results as Arrow C streams (the Arrow PyCapsule interface): pyarrow, polars and pandas take
//! the batches' buffers as DataFusion made them, without a copy.
//!
//! A query's stream is pulled by the consumer, batch by batch, through the stream's `get_next`
//! callback, which runs on the consumer's thread. Each call waits on the module's runtime with
//! the GIL released (see [`crate::runtime::block_on`]), looking at pending signals as it waits:
//! a Ctrl-C cancels the query. The consumer then sees an error; the exception the signal handler
//! raised is kept for `_raise_error` (the typed layer raises it in place of the consumer's), and
//! a `KeyboardInterrupt` met while an outside consumer (`pa.table(r)`) reads is re-raised for
//! Python by simulating SIGINT again, as pyarrow does when its own reads are cancelled.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchReader};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi::FFI_ArrowSchema;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use futures::StreamExt;
use probelake_query::datafusion::execution::SendableRecordBatchStream;
use pyo3::exceptions::{PyKeyboardInterrupt, PyNotImplementedError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::error::{Error, Kind};
use crate::runtime::block_on;

const STREAM_CAPSULE: &CStr = c"arrow_array_stream";
const SCHEMA_CAPSULE: &CStr = c"arrow_schema";

/// Readers handed out and not yet released by their consumer (tests look for leaks with it).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The slots of the query results alive, for [`collect_open_queries`].
static OPEN: Mutex<Vec<Weak<Mutex<Option<Source>>>>> = Mutex::new(Vec::new());

/// Where the batches come from.
pub enum Source {
    /// A running query: pulled one batch at a time.
    Query(SendableRecordBatchStream),
    /// Batches already made (compare's and divergence's tables).
    Batches(std::vec::IntoIter<RecordBatch>),
    /// A query read to its end before a fork: its batches, then its error if it failed.
    Collected(std::vec::IntoIter<RecordBatch>, Option<Error>),
}

/// The exception behind the last error a reader gave its consumer.
type Slot = Arc<Mutex<Option<PyErr>>>;

/// A result's source, shared by its Python object or its reader and the list a fork walks.
type SourceSlot = Arc<Mutex<Option<Source>>>;

fn slot(source: Source) -> SourceSlot {
    let is_query = matches!(source, Source::Query(_));
    let slot = Arc::new(Mutex::new(Some(source)));
    if is_query {
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|s| s.strong_count() > 0);
        open.push(Arc::downgrade(&slot));
    }
    slot
}

/// Reads every query result still open to its end, into memory, so that no task of a query is
/// left running when the process forks: a running task may hold a lock the child would inherit
/// held. The consumer then reads the same rows, from memory. Called by the fork with no call
/// into probelake under way, so that every result is in its slot.
pub(crate) fn collect_open_queries() {
    let open: Vec<SourceSlot> = {
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|s| s.strong_count() > 0);
        open.iter().filter_map(Weak::upgrade).collect()
    };
    for slot in open {
        let mut source = slot.lock().unwrap_or_else(|p| p.into_inner());
        if !matches!(*source, Some(Source::Query(_))) {
            continue;
        }
        // No runtime of this process, no task of the query running.
        let Some(rt) = crate::runtime::running() else { continue };
        let Some(Source::Query(mut stream)) = source.take() else { continue };
        let collected = rt.block_on(async move {
            let mut batches = Vec::new();
            while let Some(next) = stream.next().await {
                match next {
                    Ok(batch) if batch.num_rows() == 0 => {}
                    Ok(batch) => batches.push(batch),
                    Err(e) => return (batches, Some(Error::chain(Kind::Query, &e))),
                }
            }
            (batches, None)
        });
        *source = Some(Source::Collected(collected.0.into_iter(), collected.1));
    }
}

/// Rows made in Rust, readable once as an Arrow C stream.
#[pyclass(frozen, name = "ArrowStream", module = "probelake._internal")]
pub struct PyArrowStream {
    schema: SchemaRef,
    /// `None` once handed to a consumer.
    source: SourceSlot,
    error: Slot,
    query: Option<String>,
}

impl PyArrowStream {
    /// A stream of `source`'s batches of `schema`; `query` is the SQL that makes them, if any.
    pub fn new(schema: SchemaRef, source: Source, query: Option<String>) -> Self {
        PyArrowStream { schema, source: slot(source), error: Slot::default(), query }
    }

    fn capsule<'py>(
        &self,
        py: Python<'py>,
        requested: Option<&Bound<'py, PyAny>>,
        retrip_interrupt: bool,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let (schema, cast) = match requested {
            Some(capsule) if !capsule.is_none() => self.requested_schema(capsule)?,
            _ => (Arc::clone(&self.schema), false),
        };
        // A query result moves to its reader's slot: not while a fork collects them.
        let _entered = crate::fork::enter(py);
        let source = self.source.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| {
            Error::new(Kind::Query, "these rows were already read (a result is read once); run the query again")
        })?;
        LIVE.fetch_add(1, Ordering::SeqCst);
        let reader = Reader { schema, cast, source: slot(source), error: Arc::clone(&self.error), retrip_interrupt };
        PyCapsule::new_with_value(py, FFI_ArrowArrayStream::new(Box::new(reader)), STREAM_CAPSULE)
    }

    /// The schema a consumer asked for, if this result can be cast to it (the PyCapsule
    /// interface lets a producer refuse with `NotImplementedError`).
    fn requested_schema(&self, capsule: &Bound<'_, PyAny>) -> PyResult<(SchemaRef, bool)> {
        let capsule = capsule
            .cast::<PyCapsule>()
            .map_err(|_| Error::argument("requested_schema: expected an \"arrow_schema\" PyCapsule"))?;
        let ptr = capsule.pointer_checked(Some(SCHEMA_CAPSULE))?;
        // SAFETY: a capsule named "arrow_schema" holds an FFI_ArrowSchema (the interface's
        // contract), which the consumer keeps alive while it calls us; it is only read here.
        let ffi = unsafe { ptr.cast::<FFI_ArrowSchema>().as_ref() };
        let wanted = Schema::try_from(ffi).map_err(Error::from)?;
        if wanted.fields() == self.schema.fields() {
            return Ok((Arc::clone(&self.schema), false));
        }
        let castable = wanted.fields().len() == self.schema.fields().len()
            && self
                .schema
                .fields()
                .iter()
                .zip(wanted.fields())
                .all(|(have, want)| arrow::compute::can_cast_types(have.data_type(), want.data_type()));
        if !castable {
            return Err(PyNotImplementedError::new_err(format!(
                "cannot cast the result ({}) to the requested schema ({})",
                self.schema, wanted
            )));
        }
        Ok((Arc::new(wanted), true))
    }
}

#[pymethods]
impl PyArrowStream {
    /// The rows as an "arrow_array_stream" capsule, once; `requested_schema` (an
    /// "arrow_schema" capsule) is honoured by casting, or refused with `NotImplementedError`.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        self.capsule(py, requested_schema, true)
    }

    /// As `__arrow_c_stream__`, for a reader that calls `_raise_error` when the read fails
    /// (a Ctrl-C is then raised from there, not simulated again).
    fn _own_stream<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        self.capsule(py, None, false)
    }

    /// The schema as an "arrow_schema" capsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }

    /// Raises the exception behind the error the last read gave its consumer, if there is one:
    /// the query's `QueryError` with the CLI's message, or what a signal handler raised.
    fn _raise_error(&self) -> PyResult<()> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Whether the rows were handed to a consumer.
    #[getter]
    fn taken(&self) -> bool {
        self.source.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// The query that makes the rows, if any.
    #[getter]
    fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    fn __repr__(&self) -> String {
        let cols: Vec<String> =
            self.schema.fields().iter().map(|f| format!("{}: {}", f.name(), f.data_type())).collect();
        format!("ArrowStream({})", cols.join(", "))
    }
}

/// `schema` as an "arrow_schema" capsule.
pub fn schema_capsule<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyCapsule>> {
    let ffi = FFI_ArrowSchema::try_from(schema).map_err(Error::from)?;
    PyCapsule::new_with_value(py, ffi, SCHEMA_CAPSULE)
}

/// How many stream readers are alive (handed out, not yet released).
#[pyfunction]
pub fn _live_streams() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// What the C stream's callbacks call.
struct Reader {
    schema: SchemaRef,
    /// Cast every batch to `schema` (a requested schema).
    cast: bool,
    /// `None` after the last batch or an error.
    source: SourceSlot,
    error: Slot,
    retrip_interrupt: bool,
}

impl Reader {
    /// The next batch of a running query; the stream goes back into `source` unless it ended.
    fn next_query_batch(
        &self,
        source: &mut Option<Source>,
        mut stream: SendableRecordBatchStream,
    ) -> Option<Result<RecordBatch, ArrowError>> {
        let pulled = Python::attach(|py| {
            let waited = block_on(py, async move {
                loop {
                    match stream.next().await {
                        // Empty batches are left out: they carry nothing and some consumers
                        // count them as chunks.
                        Some(Ok(batch)) if batch.num_rows() == 0 => continue,
                        Some(Ok(batch)) => return Ok(Some((stream, batch))),
                        Some(Err(e)) => return Err(Error::chain(Kind::Query, &e)),
                        None => return Ok(None),
                    }
                }
            });
            match waited {
                Ok(Ok(next)) => Ok(next),
                Ok(Err(query_error)) => Err((query_error.message.clone(), PyErr::from(query_error))),
                Err(interrupt) => {
                    let name = interrupt.get_type(py).name().map(|n| n.to_string()).unwrap_or_default();
                    let message = format!("the query was interrupted ({name})");
                    if self.retrip_interrupt && interrupt.is_instance_of::<PyKeyboardInterrupt>(py) {
                        // SAFETY: called with the GIL held; it only sets the flag that Python's
                        // own SIGINT handler would set.
                        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
                    }
                    Err((message, interrupt))
                }
            }
        });
        match pulled {
            Ok(Some((stream, batch))) => {
                *source = Some(Source::Query(stream));
                Some(Ok(batch))
            }
            Ok(None) => None,
            Err((message, err)) => {
                *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                Some(Err(ArrowError::ExternalError(message.into())))
            }
        }
    }

    fn cast(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        if !self.cast {
            return Ok(batch);
        }
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(col, field)| arrow::compute::cast(col, field.data_type()))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        RecordBatch::try_new(Arc::clone(&self.schema), columns)
    }
}

impl Iterator for Reader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        // A running query is entered before it is taken out of its slot: a fork waits for
        // this call, and finds every running query in its slot. (A fork may turn it into
        // collected batches meanwhile, never the other way.)
        let running = matches!(*self.source.lock().unwrap_or_else(|p| p.into_inner()), Some(Source::Query(_)));
        let _entered = running.then(|| Python::attach(crate::fork::enter));
        let mut source = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let next = match source.take()? {
            Source::Query(stream) => self.next_query_batch(&mut source, stream),
            Source::Batches(mut batches) => {
                let next = batches.next().map(Ok);
                *source = Some(Source::Batches(batches));
                next
            }
            Source::Collected(mut batches, error) => match batches.next() {
                Some(batch) => {
                    *source = Some(Source::Collected(batches, error));
                    Some(Ok(batch))
                }
                None => error.map(|e| {
                    let message = e.message.clone();
                    *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(PyErr::from(e));
                    Err(ArrowError::ExternalError(message.into()))
                }),
            },
        };
        drop(source);
        next.map(|batch| batch.and_then(|b| self.cast(b)))
    }
}

impl RecordBatchReader for Reader {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        // A query read partly: its operators' tasks are stopped when the stream is dropped,
        // which is done on the runtime rather than in the consumer's (maybe GIL-holding) thread.
        let source = self.source.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(Source::Query(stream)) = source {
            match crate::runtime::running() {
                Some(rt) => drop(rt.spawn(async move { drop(stream) })),
                // A running query whose runtime is not this process's: a child forked without
                // the hooks (they collect every running query first). Its tasks are the
                // parent's; dropping it here would take their locks.
                None => std::mem::forget(stream),
            }
        }
    }
}
