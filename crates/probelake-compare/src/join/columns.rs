//! Columns of the plans' batches by name, as the type the code reads them as.

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;

use crate::CompareError;

/// Column `name` of `batch`.
pub(crate) fn column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b ArrayRef, CompareError> {
    batch.column_by_name(name).ok_or_else(|| CompareError::Schema(format!("column `{name}` missing")))
}

/// Column `name` of `batch` as type `t` (`cast` hands one of that type back as it is).
pub(crate) fn as_type(batch: &RecordBatch, name: &str, t: &DataType) -> Result<ArrayRef, CompareError> {
    Ok(cast(column(batch, name)?, t)?)
}

/// A string column as plain Utf8 (Parquet readers may hand out dictionaries or views).
pub(crate) fn strings(batch: &RecordBatch, name: &str) -> Result<StringArray, CompareError> {
    let col = column(batch, name)?;
    let col = cast(col, &DataType::Utf8)?;
    col.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| CompareError::Schema(format!("column `{name}` is not a string")))
}

/// Column `name` of `batch` as the array type `T`.
pub(crate) fn typed<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b T, CompareError> {
    column(batch, name)?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| CompareError::Schema(format!("column `{name}` has an unexpected type")))
}
