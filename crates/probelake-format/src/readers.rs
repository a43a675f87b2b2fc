//! What plain Parquet readers need to type a table exactly as probelake does.
//!
//! polars, DuckDB and pyarrow read the hive folders with integer `step` and `rank` and need no
//! help. pandas (`pd.read_parquet(dir)`) does not: pyarrow's `ParquetDataset`, under it, infers
//! partition values as dictionaries, so `step` and `rank` arrive as *categoricals*, and no file
//! inside a table folder can change that without breaking `pl.scan_parquet(dir)` (polars reads
//! every file of a folder and refuses one without the `.parquet` extension, such as pyarrow's
//! `_common_metadata`). So each dataset carries, under `_probelake/schema/`, one Parquet file
//! per table with no rows whose Arrow schema is the table as a reader sees it: the file
//! columns followed by the partition columns, typed. Passing it as `schema=` gives pandas and
//! pyarrow int64 `step` and `rank`:
//!
//! ```python
//! pd.read_parquet(f"{root}/dump", schema=pq.read_schema(f"{root}/_probelake/schema/dump.parquet"))
//! ```

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::error::{FormatError, Result};
use crate::layout::{Table, SCHEMA_DIR};
use crate::schema::{partition_columns, schema_of};

/// `table` as a hive-aware reader sees it: the columns of its files, then the partition
/// columns (`step` int64, `stage` utf8, `rank` int64, and `api` utf8 for `dump` and `tensor`).
///
/// ```
/// use probelake_format::readers::reader_schema;
/// use probelake_format::Table;
/// let schema = reader_schema(Table::Dump);
/// let names: Vec<&str> = schema.fields().iter().rev().take(4).map(|f| f.name().as_str()).collect();
/// assert_eq!(names, ["api", "rank", "stage", "step"]);
/// ```
pub fn reader_schema(table: Table) -> SchemaRef {
    let files = schema_of(table);
    let mut fields: Vec<Field> = files.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(partition_columns(table).into_iter().map(|(name, ty)| Field::new(name, ty, false)));
    Arc::new(Schema::new(fields))
}

/// Where [`reader_schema`]'s file lives, relative to the dataset root:
/// `_probelake/schema/<table>.parquet`.
pub fn reader_schema_path(table: Table) -> String {
    format!("{SCHEMA_DIR}/{}.parquet", table.name())
}

/// A Parquet file with no rows and [`reader_schema`]`(table)` as its schema (pyarrow's
/// `pq.read_schema` returns it with every Arrow type intact).
pub fn encode_reader_schema(table: Table) -> Result<Vec<u8>> {
    let schema = reader_schema(table);
    let location = reader_schema_path(table);
    let parquet = |source| FormatError::Parquet { location: location.clone(), source };
    let mut buf = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buf, Arc::clone(&schema), None).map_err(parquet)?;
    writer.write(&RecordBatch::new_empty(schema)).map_err(parquet)?;
    writer.close().map_err(parquet)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn every_table_has_a_schema_file_that_reads_back() {
        for table in Table::ALL {
            let bytes = bytes::Bytes::from(encode_reader_schema(table).unwrap());
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
            let read = builder.schema().clone();
            assert_eq!(read.fields(), reader_schema(table).fields(), "{table:?}");
            assert_eq!(builder.metadata().file_metadata().num_rows(), 0);
            assert_eq!(read.field_with_name("step").unwrap().data_type(), &DataType::Int64);
            assert_eq!(read.field_with_name("rank").unwrap().data_type(), &DataType::Int64);
            assert_eq!(read.field_with_name("api").is_ok(), table.has_api_partition());
        }
    }
}
