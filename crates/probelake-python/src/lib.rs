//! # probelake-python
//!
//! `probelake._internal`, the native half of the `probelake` Python package: datasets opened
//! with committed units only, SQL through DataFusion, import/export/compare/divergence and the
//! asynchronous writer. It is thin on purpose: the typed API users call is Python
//! (`python/probelake/`); this module converts arguments, releases the GIL around every long
//! call and raises `probelake.ProbelakeError` subclasses with the CLI's messages.
//!
//! Results cross into pyarrow, polars and pandas as Arrow C streams (`stream.rs`): no copy.

mod cli;
mod error;
mod fork;
mod lake;
mod msprobe;
mod ops;
mod runtime;
mod sql;
mod stream;
mod values;
mod writer;

use pyo3::prelude::*;

// The writer's caller thread allocates a snapshot for every recorded tensor and its worker
// threads free it; glibc's malloc serialized them on its arena lock, the largest cost of a
// small `record` after the Python calls (docs/benchmarks.md, notes on the results, "The Python
// package"). mimalloc frees across threads without a lock. Only this module's Rust allocations
// use it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _internal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<lake::PyLake>()?;
    m.add_class::<stream::PyArrowStream>()?;
    m.add_class::<writer::PyUnitWriter>()?;
    m.add_function(wrap_pyfunction!(lake::open, m)?)?;
    m.add_function(wrap_pyfunction!(cli::main, m)?)?;
    m.add_function(wrap_pyfunction!(sql::sql, m)?)?;
    m.add_function(wrap_pyfunction!(ops::import_msprobe, m)?)?;
    m.add_function(wrap_pyfunction!(ops::export_msprobe, m)?)?;
    m.add_function(wrap_pyfunction!(ops::compare, m)?)?;
    m.add_function(wrap_pyfunction!(ops::divergence, m)?)?;
    m.add_function(wrap_pyfunction!(ops::report, m)?)?;
    m.add_function(wrap_pyfunction!(ops::reader_schema, m)?)?;
    m.add_function(wrap_pyfunction!(msprobe::check_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(msprobe::commit_captured, m)?)?;
    m.add_function(wrap_pyfunction!(msprobe::tensor_summary, m)?)?;
    m.add_function(wrap_pyfunction!(stream::_live_streams, m)?)?;
    m.add_function(wrap_pyfunction!(fork::_before_fork, m)?)?;
    m.add_function(wrap_pyfunction!(fork::_after_fork_in_parent, m)?)?;
    m.add_function(wrap_pyfunction!(fork::_after_fork_in_child, m)?)?;
    Ok(())
}
