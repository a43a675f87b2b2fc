//! Reading the columns of a query result into plain vectors, whatever Arrow type DataFusion
//! chose for them (`Utf8` or `Utf8View`, `Int32` or `Int64`): each is cast first.

use probelake_query::datafusion::arrow::array::{Array, AsArray, RecordBatch};
use probelake_query::datafusion::arrow::compute::cast;
use probelake_query::datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};

use crate::error::{PlotError, Result};

fn column(batch: &RecordBatch, name: &str, to: &DataType) -> Result<std::sync::Arc<dyn Array>> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| PlotError::Internal(format!("no column `{name}` in {:?}", batch.schema())))?;
    cast(col, to).map_err(|e| PlotError::Internal(format!("column `{name}`: {e}")))
}

/// Column `name` as float64 values (null → `None`).
pub(crate) fn floats(batch: &RecordBatch, name: &str) -> Result<Vec<Option<f64>>> {
    let col = column(batch, name, &DataType::Float64)?;
    Ok(col.as_primitive::<Float64Type>().iter().collect())
}

/// Column `name` as int64 values (null → `None`).
pub(crate) fn ints(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let col = column(batch, name, &DataType::Int64)?;
    Ok(col.as_primitive::<Int64Type>().iter().collect())
}

/// Column `name` as strings (null → `None`).
pub(crate) fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let col = column(batch, name, &DataType::Utf8)?;
    Ok(col.as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect())
}

/// Column `name` as booleans (null → `None`).
pub(crate) fn flags(batch: &RecordBatch, name: &str) -> Result<Vec<Option<bool>>> {
    let col = column(batch, name, &DataType::Boolean)?;
    Ok(col.as_boolean().iter().collect())
}
