//! A record batch's columns by name, as the array type a reader expects. Every reader of the
//! dataset's tables looks its columns up here, so a missing or mistyped column is reported the
//! same way wherever it is met; each caller adds where (which file, which table).
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, RecordBatch, StringArray};
//! use probelake_format::columns::{typed, ColumnError};
//!
//! let batch = RecordBatch::try_from_iter([("seq", Arc::new(Int64Array::from(vec![1, 2])) as _)])?;
//! assert_eq!(typed::<Int64Array>(&batch, "seq")?.value(1), 2);
//! assert!(matches!(typed::<StringArray>(&batch, "seq"), Err(ColumnError::WrongType { .. })));
//! assert_eq!(typed::<Int64Array>(&batch, "leaf").unwrap_err().to_string(), "column `leaf` is missing");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;

/// A column that is not there, or not of a type it can be read as.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColumnError {
    /// The batch has no column of that name.
    #[error("column `{0}` is missing")]
    Missing(String),
    /// The column's type is not the one it is read as.
    #[error("column `{name}` is {found}, not {expected}")]
    WrongType {
        /// The column.
        name: String,
        /// Its type.
        found: DataType,
        /// The array type it was read as.
        expected: String,
    },
    /// The column could not be cast to the type it is read as.
    #[error("column `{name}` cannot be read as {to}: {message}")]
    Cast {
        /// The column.
        name: String,
        /// The type asked for.
        to: DataType,
        /// Arrow's reason.
        message: String,
    },
}

/// Column `name` of `batch`.
pub fn column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b ArrayRef, ColumnError> {
    batch.column_by_name(name).ok_or_else(|| ColumnError::Missing(name.to_string()))
}

/// Column `name` of `batch` as the array type `A` (no cast: the type must be `A`'s).
pub fn typed<'b, A: Array + 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b A, ColumnError> {
    let col = column(batch, name)?;
    col.as_any().downcast_ref::<A>().ok_or_else(|| ColumnError::WrongType {
        name: name.to_string(),
        found: col.data_type().clone(),
        expected: short_type_name::<A>(),
    })
}

/// Column `name` of `batch` cast to `to` (a column of that type is handed back as it is, with
/// no copy): for query results, whose engine may choose views, dictionaries or other widths.
pub fn cast_column(batch: &RecordBatch, name: &str, to: &DataType) -> Result<ArrayRef, ColumnError> {
    cast(column(batch, name)?, to).map_err(|e| ColumnError::Cast {
        name: name.to_string(),
        to: to.clone(),
        message: e.to_string(),
    })
}

/// A string column as plain `Utf8`, whatever string type it is stored or computed as.
pub fn strings(batch: &RecordBatch, name: &str) -> Result<StringArray, ColumnError> {
    let col = cast_column(batch, name, &DataType::Utf8)?;
    col.as_any().downcast_ref::<StringArray>().cloned().ok_or_else(|| ColumnError::WrongType {
        name: name.to_string(),
        found: col.data_type().clone(),
        expected: "StringArray".to_string(),
    })
}

/// `A`'s name without its paths (`PrimitiveArray<Int64Type>`), for messages.
fn short_type_name<A>() -> String {
    let full = std::any::type_name::<A>();
    let mut short = String::with_capacity(full.len());
    for part in full.split_inclusive(['<', '>', ',', ' ']) {
        let (name, delimiter) = match part.char_indices().last() {
            Some((at, '<' | '>' | ',' | ' ')) => (&part[..at], &part[at..]),
            _ => (part, ""),
        };
        short.push_str(name.rsplit("::").next().unwrap_or(name));
        short.push_str(delimiter);
    }
    short
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringViewArray};

    use super::*;

    #[test]
    fn views_read_as_strings_and_wrong_types_say_what_they_are() {
        let batch = RecordBatch::try_from_iter([
            ("name", Arc::new(StringViewArray::from(vec!["a", "b"])) as ArrayRef),
            ("leaf", Arc::new(Int32Array::from(vec![0, 1])) as ArrayRef),
        ])
        .unwrap();
        assert_eq!(strings(&batch, "name").unwrap().value(1), "b");
        let err = typed::<Int64Array>(&batch, "leaf").unwrap_err();
        assert_eq!(err.to_string(), "column `leaf` is Int32, not PrimitiveArray<Int64Type>");
        let cast = cast_column(&batch, "leaf", &DataType::Int64).unwrap();
        assert_eq!(cast.data_type(), &DataType::Int64);
        assert_eq!(cast_column(&batch, "nope", &DataType::Int64).unwrap_err(), ColumnError::Missing("nope".into()));
    }
}
