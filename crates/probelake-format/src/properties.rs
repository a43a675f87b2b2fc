//! How probelake writes Parquet: LZ4 (zstd for tensor payloads), dictionaries on string columns
//! only, BYTE_STREAM_SPLIT for the statistics, page-level statistics and page indexes for pruning
//! (not on the per-row strings and blobs, where they prune nothing).

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::layout::Table;

/// zstd level of the tensor table: 1, zstd's fastest standard level. Against level 3 (zstd's
/// default) it takes a third off the compressor's instructions (its per-page context reset is
/// much smaller) for 1.2% more bytes; see docs/performance.md, "Parquet settings".
pub const ZSTD_LEVEL: i32 = 1;
/// Rows per row group: large enough for good compression, small enough to prune.
pub const MAX_ROW_GROUP_ROWS: usize = 256 * 1024;
/// The float columns written with BYTE_STREAM_SPLIT (better zstd ratios on float data).
pub const FLOAT_COLUMNS: [&str; 4] = ["max", "min", "mean", "norm"];

/// String columns written without a dictionary: their values are all different (`item`,
/// `md5`, `data_name`, `raw`, `value`) or repeat only within one entry (`name`, `path`). A
/// dictionary of values that do not repeat costs an interning per value on write and a gather
/// per value on read, and without one (the v2 writer then prefix-encodes them,
/// `DELTA_BYTE_ARRAY`) the pages under LZ4 are smaller: the synthesized bench runs' dump tables
/// went from 33.8 to 24.8 MB, the shared fixtures' by 7–10% (docs/benchmarks.md).
pub const UNIQUE_PER_ROW: [&str; 7] = ["item", "md5", "data_name", "value", "raw", "name", "path"];

/// The codec of `table`'s files.
///
/// LZ4 (`LZ4_RAW`) for the tables that queries scan. A dataset is many small files, so a scan
/// opens thousands of column chunks, and parquet-rs 59 creates a zstd compressor *and* a
/// decompressor context for every zstd chunk it reads: with zstd, those contexts were a tenth of
/// a first-divergence query. LZ4 makes the dataset about a third larger (15% of the dump.json
/// bytes instead of 11%) and the query, export and import 5–15% faster (docs/benchmarks.md).
/// Tensor payloads are few, large chunks of float bytes, where zstd's ratio still pays.
pub fn compression(table: Table) -> Compression {
    match table {
        Table::Tensor => Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default()),
        _ => Compression::LZ4_RAW,
    }
}

/// Writer properties for `table`'s files.
pub fn writer_properties(table: Table) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(compression(table))
        .set_max_row_group_row_count(Some(MAX_ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(false)
        .set_created_by(format!("probelake {}", env!("CARGO_PKG_VERSION")));
    let schema = crate::schema::schema_of(table);
    for field in schema.fields() {
        let name = field.name().as_str();
        match field.data_type() {
            arrow::datatypes::DataType::Utf8 if !UNIQUE_PER_ROW.contains(&name) => {
                b = b.set_column_dictionary_enabled(ColumnPath::from(name), true);
            }
            // The minimum and maximum of execution-ordered names, skeletons or tensor bytes
            // prune nothing, and finding them compared every value on write.
            arrow::datatypes::DataType::Utf8
            | arrow::datatypes::DataType::LargeUtf8
            | arrow::datatypes::DataType::LargeBinary => {
                b = b.set_column_statistics_enabled(ColumnPath::from(name), EnabledStatistics::None);
            }
            arrow::datatypes::DataType::List(_) if table != Table::Tensor => {
                b = b.set_column_dictionary_enabled(
                    ColumnPath::from(vec![name.to_string(), "list".into(), "item".into()]),
                    true,
                );
            }
            _ => {}
        }
    }
    if table == Table::Dump {
        for col in FLOAT_COLUMNS {
            b = b.set_column_encoding(ColumnPath::from(col), Encoding::BYTE_STREAM_SPLIT);
        }
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_columns_get_the_intended_encodings() {
        let p = writer_properties(Table::Dump);
        assert!(p.dictionary_enabled(&ColumnPath::from("op")));
        assert!(p.dictionary_enabled(&ColumnPath::from("dtype")));
        assert!(!p.dictionary_enabled(&ColumnPath::from("name")));
        assert!(!p.dictionary_enabled(&ColumnPath::from("item")));
        assert!(!p.dictionary_enabled(&ColumnPath::from("max")));
        assert_eq!(p.statistics_enabled(&ColumnPath::from("item")), EnabledStatistics::None);
        assert_eq!(p.statistics_enabled(&ColumnPath::from("op")), EnabledStatistics::Page);
        assert_eq!(p.statistics_enabled(&ColumnPath::from("max")), EnabledStatistics::Page);
        assert_eq!(p.encoding(&ColumnPath::from("norm")), Some(Encoding::BYTE_STREAM_SPLIT));
        assert_eq!(p.compression(&ColumnPath::from("item")), Compression::LZ4_RAW);
        let tensor = writer_properties(Table::Tensor);
        assert!(matches!(tensor.compression(&ColumnPath::from("data")), Compression::ZSTD(_)));
    }
}
