//! Where compare's tables go: CSV as pandas writes it, msprobe's .xlsx workbook, typed Arrow
//! for Parquet and Python, and the files of many unit pairs named as msprobe names them.

pub(crate) mod csv;
pub mod results;
pub(crate) mod typed;
pub mod xlsx;
