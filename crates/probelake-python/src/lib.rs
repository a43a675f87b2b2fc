//! # probelake-python
//!
//! `probelake._internal`, the native half of the `probelake` Python package: datasets opened
//! with committed units only, SQL through DataFusion, import/export/compare/divergence and the
//! asynchronous writer. It is thin on purpose: the typed API users call is Python
//! (`python/probelake/`); this module converts arguments, releases the GIL around every long
//! call and raises `probelake.ProbelakeError` subclasses with the CLI's messages.
//!
//! Results cross into pyarrow as Arrow IPC streams (see `Cargo.toml` for why not the C data
//! interface).

mod error;
mod ipc;
mod lake;
mod ops;
mod runtime;
mod sql;
mod values;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _internal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<lake::PyLake>()?;
    m.add_class::<sql::PySqlStream>()?;
    m.add_class::<writer::PyUnitWriter>()?;
    m.add_function(wrap_pyfunction!(lake::open, m)?)?;
    m.add_function(wrap_pyfunction!(sql::sql, m)?)?;
    m.add_function(wrap_pyfunction!(ops::import_msprobe, m)?)?;
    m.add_function(wrap_pyfunction!(ops::export_msprobe, m)?)?;
    m.add_function(wrap_pyfunction!(ops::compare, m)?)?;
    m.add_function(wrap_pyfunction!(ops::divergence, m)?)?;
    m.add_function(wrap_pyfunction!(ops::reader_schema, m)?)?;
    Ok(())
}
