//! msprobe's compare table as typed Arrow columns, for Parquet output that pandas, polars,
//! pyarrow and DuckDB read without parsing text.
//!
//! The CSV keeps msprobe's text cell for cell; the typed table keeps its numbers and says the
//! rest with types: statistics and metrics are float64 (`Nan`/`inf` stay NaN/±inf, `True`/`False`
//! of boolean tensors are 1.0/0.0, a percentage such as `0.0042%` is the number of percent
//! `0.0042`, and tokens like `N/A`, `None`, `unsupported` or `Diff` are null), shapes are
//! `list<int64>`, requires_grad columns boolean, and `N/A` in text columns is null. The unit comes
//! first as `step` (int64), `stage` and `rank` (int64), so a folder of results reads as one table.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};

use crate::comparison::UnitComparison;
use crate::error::CompareError;

/// How one column of msprobe's table is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Text,
    Number,
    Shape,
    Flag,
}

/// Columns that hold numbers (statistics, their differences and the tensor metrics); every
/// header not named here or below stays text.
const NUMBER_COLUMNS: [&str; 21] = [
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
];

fn kind_of(header: &str) -> ColumnKind {
    match header {
        "NPU Tensor Shape" | "Bench Tensor Shape" => ColumnKind::Shape,
        "NPU Requires_grad" | "Bench Requires_grad" | "Requires_grad Consistent" => ColumnKind::Flag,
        h if NUMBER_COLUMNS.contains(&h) => ColumnKind::Number,
        _ => ColumnKind::Text,
    }
}

fn data_type(kind: ColumnKind) -> DataType {
    match kind {
        ColumnKind::Text => DataType::Utf8,
        ColumnKind::Number => DataType::Float64,
        ColumnKind::Shape => DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ColumnKind::Flag => DataType::Boolean,
    }
}

/// A number cell of msprobe's table as a number: `12.5%` is 12.5, `True`/`False` are 1 and 0,
/// `nan`/`Nan` and `inf` are NaN and infinity; `None` for its other tokens (`N/A`, `None`,
/// `unsupported`, …).
///
/// ```
/// use probelake_compare::cell_number;
/// assert_eq!(cell_number("0.0042%"), Some(0.0042));
/// assert!(cell_number("Nan").is_some_and(f64::is_nan));
/// assert_eq!(cell_number("N/A"), None);
/// ```
pub fn cell_number(cell: &str) -> Option<f64> {
    let text = cell.strip_suffix('%').unwrap_or(cell);
    match text {
        "True" => Some(1.0),
        "False" => Some(0.0),
        // Rust's parser takes `inf`, `-inf` and `NaN` in any case, which covers msprobe's `Nan`.
        _ => text.parse().ok(),
    }
}

/// `[2, 8]` as a list of integers; `None` for `N/A` or anything else.
fn shape(cell: &str) -> Option<Vec<i64>> {
    let inner = cell.strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|d| d.trim().parse().ok()).collect()
}

fn flag(cell: &str) -> Option<bool> {
    match cell {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    }
}

fn column(kind: ColumnKind, cells: &[Option<&str>]) -> ArrayRef {
    match kind {
        ColumnKind::Text => Arc::new(cells.iter().map(|c| c.filter(|c| *c != "N/A")).collect::<StringArray>()),
        ColumnKind::Number => Arc::new(cells.iter().map(|c| c.and_then(cell_number)).collect::<Float64Array>()),
        ColumnKind::Flag => Arc::new(cells.iter().map(|c| c.and_then(flag)).collect::<BooleanArray>()),
        ColumnKind::Shape => {
            let mut list = ListBuilder::new(Int64Builder::new());
            for dims in cells.iter().map(|c| c.and_then(shape)) {
                match dims {
                    Some(dims) => {
                        list.values().append_slice(&dims);
                        list.append(true);
                    }
                    None => list.append(false),
                }
            }
            Arc::new(list.finish())
        }
    }
}

impl UnitComparison {
    /// The table with typed columns (see the module docs of `compare::typed` for each rule),
    /// preceded by the unit's `step`, `stage` and `rank`.
    ///
    /// # Errors
    ///
    /// [`CompareError::Arrow`] only if the columns do not fit together, which would be a bug.
    pub fn to_record_batch(&self) -> Result<RecordBatch, CompareError> {
        let n = self.rows.len();
        let mut fields = vec![
            Field::new("step", DataType::Int64, false),
            Field::new("stage", DataType::Utf8, false),
            Field::new("rank", DataType::Int64, false),
        ];
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![self.unit.step; n])),
            Arc::new(StringArray::from(vec![self.unit.stage.as_str(); n])),
            Arc::new(Int64Array::from(vec![self.unit.rank; n])),
        ];
        for (i, header) in self.header.iter().enumerate() {
            let kind = kind_of(header);
            let cells: Vec<Option<&str>> = self.rows.iter().map(|r| r.get(i)).collect();
            fields.push(Field::new(header, data_type(kind), true));
            columns.push(column(kind, &cells));
        }
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Float64Type;
    use probelake_format::Unit;

    use super::*;
    use crate::mode::CompareMode;

    #[test]
    fn cells_become_typed_values() {
        let header = ["NPU Name", "Bench Name", "NPU Tensor Shape", "NPU Requires_grad", "MaxRelativeErr", "NPU max"];
        let rows = [
            ["a.output.0", "a.output.0", "[2, 8]", "True", "0.0042%", "57"],
            ["b.output.0", "N/A", "N/A", "N/A", "N/A", "Nan"],
            ["c.output.0", "c.output.0", "[]", "False", "inf", "False"],
            ["d.output.0", "d.output.0", "[x]", "False", "Diff", "-inf"],
        ];
        let table = UnitComparison {
            unit: Unit::new(3, "actor_update", 1),
            mode: CompareMode::Statistics,
            header: header.map(String::from).to_vec(),
            rows: crate::table::cells::Rows::from_cells(header.len(), rows.iter().flatten()),
            target_files: vec![probelake_msprobe::Origin::default()],
        };
        let batch = table.to_record_batch().unwrap();
        assert_eq!(batch.schema().field(0).name(), "step");
        assert_eq!(batch.column(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>().value(3), 3);
        let bench = batch.column_by_name("Bench Name").unwrap().as_string::<i32>();
        assert!(bench.is_null(1) && bench.value(0) == "a.output.0");
        let shapes = batch.column_by_name("NPU Tensor Shape").unwrap().as_list::<i32>();
        assert_eq!(shapes.value(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>().values(), &[2, 8]);
        assert!(shapes.is_null(1) && shapes.value(2).is_empty() && shapes.is_null(3));
        let rg = batch.column_by_name("NPU Requires_grad").unwrap().as_boolean();
        assert!(rg.value(0) && rg.is_null(1) && !rg.value(2));
        let rel = batch.column_by_name("MaxRelativeErr").unwrap().as_primitive::<Float64Type>();
        assert_eq!(rel.value(0), 0.0042);
        assert!(rel.is_null(1) && rel.value(2) == f64::INFINITY && rel.is_null(3));
        let max = batch.column_by_name("NPU max").unwrap().as_primitive::<Float64Type>();
        assert_eq!(max.value(0), 57.0);
        assert!(max.value(1).is_nan() && max.value(2) == 0.0 && max.value(3) == f64::NEG_INFINITY);
    }
}
