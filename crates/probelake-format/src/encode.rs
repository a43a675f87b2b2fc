//! A batch of a table encoded as a Parquet file in memory, with probelake's writer properties:
//! the CPU-bound half of storing a file, which needs no store and so runs on any thread.

use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowWriter};

use crate::error::{FormatError, Result};
use crate::layout::Table;
use crate::properties::writer_properties;
use crate::schema::schema_of;

/// A Parquet file encoded in memory and not stored yet: the CPU-bound half of
/// [`Lake::write_batch`](crate::Lake::write_batch), which needs no store and so can run on any thread.
#[derive(Debug, Clone)]
pub struct EncodedFile {
    /// Its table.
    pub table: Table,
    /// The API family partition (`dump` and `tensor` only).
    pub api: Option<String>,
    /// Rows in the file.
    pub rows: u64,
    /// The Parquet bytes.
    pub bytes: Vec<u8>,
}

/// Encodes `batch` as a Parquet file of `table` with probelake's writer properties.
///
/// A column of `batch` may be a dictionary of its declared type (or a list of such
/// dictionaries where a list is declared): it is stored as the declared type, with the table's
/// declared Arrow schema in the file (for the `stack` table's `frames`, the file is byte for
/// byte the one the plain column gives).
pub fn encode_batch(table: Table, api: Option<&str>, batch: &RecordBatch) -> Result<EncodedFile> {
    let location = match api {
        Some(api) => format!("{} (api={api})", table.name()),
        None => table.name().to_string(),
    };
    let mut properties = writer_properties(table);
    // A column given as a dictionary of its declared type (a stack group's frames, held once
    // for all its names) is written as that type, and the file's Arrow schema says so.
    let declared = schema_of(table);
    let dictionaries_only =
        batch.schema().as_ref() != declared.as_ref() && same_but_dictionaries(&batch.schema(), &declared);
    if dictionaries_only {
        add_encoded_arrow_schema_to_metadata(&declared, &mut properties);
    }
    let options = ArrowWriterOptions::new().with_properties(properties).with_skip_arrow_metadata(dictionaries_only);
    let mut buf = Vec::with_capacity(output_room(table, batch));
    let mut writer = ArrowWriter::try_new_with_options(&mut buf, batch.schema(), options)
        .map_err(|source| FormatError::Parquet { location: location.clone(), source })?;
    writer.write(batch).map_err(|source| FormatError::Parquet { location: location.clone(), source })?;
    writer.close().map_err(|source| FormatError::Parquet { location, source })?;
    Ok(EncodedFile { table, api: api.map(str::to_string), rows: batch.num_rows() as u64, bytes: buf })
}

/// Room for the encoded file of `batch`. Its columns compress to a small part of their Arrow
/// size but for tensors' bytes; room never written is not free either: with huge pages, the
/// first byte written zeroes up to 2 MiB of it.
fn output_room(table: Table, batch: &RecordBatch) -> usize {
    let share = if table == Table::Tensor { 4 } else { 16 };
    batch.get_array_memory_size() / share + 4096
}

/// Whether `schema` is `declared` but for columns (or list items) given as dictionaries of
/// their declared type.
fn same_but_dictionaries(schema: &Schema, declared: &Schema) -> bool {
    fn same(given: &Field, declared: &Field) -> bool {
        given.name() == declared.name()
            && given.is_nullable() == declared.is_nullable()
            && given.metadata() == declared.metadata()
            && match (given.data_type(), declared.data_type()) {
                (DataType::Dictionary(_, value), want) => value.as_ref() == want,
                (DataType::List(given), DataType::List(declared)) => same(given, declared),
                (given, declared) => given == declared,
            }
    }
    schema.metadata() == declared.metadata()
        && schema.fields().len() == declared.fields().len()
        && schema.fields().iter().zip(declared.fields()).all(|(g, d)| same(g, d))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, ListBuilder, StringArray, StringBuilder};
    use arrow::compute::cast;
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::schema::stack_schema;

    /// A `stack` batch of three names, two of them of one group, with `frames` as given.
    fn stack_batch(frames_as: Option<&DataType>) -> RecordBatch {
        let mut frames = ListBuilder::new(StringBuilder::new());
        for row in [&["File a.py, line 1, in f", "File b.py, line 2, in g"][..], &["File a.py, line 1, in f"], &[]] {
            for frame in row {
                frames.values().append_value(frame);
            }
            frames.append(true);
        }
        let mut frames: ArrayRef = Arc::new(frames.finish());
        let mut schema = stack_schema().as_ref().clone();
        if let Some(data_type) = frames_as {
            frames = cast(&frames, data_type).unwrap();
            let fields = schema.fields().iter().map(|f| match f.name().as_str() {
                "frames" => Arc::new(f.as_ref().clone().with_data_type(data_type.clone())),
                _ => Arc::clone(f),
            });
            schema = Schema::new(fields.collect::<Vec<_>>());
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![0, 0, 1])),
            Arc::new(StringArray::from(vec!["Functional.a.0.forward", "Functional.b.0.forward", "Tensor.c.0.forward"])),
            frames,
            Arc::new(Int64Array::from(vec![None, None, None])),
            Arc::new(Int64Array::from(vec![Some(7), Some(7), Some(7)])),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    #[test]
    fn a_column_given_as_a_dictionary_is_stored_as_its_declared_type() {
        let plain = encode_batch(Table::Stack, None, &stack_batch(None)).unwrap();
        let item = Field::new("item", DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)), true);
        let shared = encode_batch(Table::Stack, None, &stack_batch(Some(&DataType::List(Arc::new(item))))).unwrap();
        // The very same file, Arrow schema in its metadata included.
        assert_eq!(plain.bytes, shared.bytes);
        let read = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(shared.bytes)).unwrap();
        assert_eq!(read.schema().as_ref(), stack_schema().as_ref());
        // Another type than the declared one's dictionary is stored as given.
        let other = stack_batch(Some(&DataType::List(Arc::new(Field::new("item", DataType::LargeUtf8, true)))));
        assert!(!same_but_dictionaries(&other.schema(), &stack_schema()));
        let stored = encode_batch(Table::Stack, None, &other).unwrap();
        let read = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(stored.bytes)).unwrap();
        assert_eq!(read.schema().as_ref(), other.schema().as_ref());
    }
}
