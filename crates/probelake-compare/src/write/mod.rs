//! Where compare's tables go: msprobe's .xlsx workbook, typed Arrow for Parquet and Python, and
//! the files of many unit pairs named as msprobe names them (CSV files from `table::csv`).

pub mod results;
pub(crate) mod typed;
pub mod xlsx;
