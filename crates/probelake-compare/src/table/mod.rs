//! The table msprobe compare writes: header and modes, metric cells, verdict rules, row
//! buffers, and the table spelled as pandas writes it to CSV.

pub(crate) mod build;
pub(crate) mod cells;
pub(crate) mod columns;
pub(crate) mod csv;
pub(crate) mod md5;
pub(crate) mod rules;
pub(crate) mod stats;
pub(crate) mod tensor;
