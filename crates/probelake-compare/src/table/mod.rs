//! The table msprobe compare writes: header and modes, metric cells, verdict rules, row
//! buffers.

pub(crate) mod build;
pub(crate) mod cells;
pub(crate) mod columns;
pub(crate) mod md5;
pub(crate) mod rules;
pub(crate) mod stats;
pub(crate) mod tensor;
