//! # probelake-compare
//!
//! `msprobe compare` (mindstudio-probe 26.2) and first-divergence search as operations over two
//! runs: datasets, msprobe dump folders or dump.json files. The rules behind every cell are in
//! `docs/msprobe-compare.md`, what each column means in `docs/compare.md`, and how this crate
//! works in `docs/compare-internals.md`; the SQL functions and the per-leaf rules they share
//! with this crate live in `probelake-query` (`probelake_query::msprobe`).
//!
//! The rooms, by concept:
//! - [`runs`]: what the user gave (a dataset, a dump folder, a dump.json), opened once, and
//!   which unit of the target is compared with which unit of the golden run
//!   ([`runs::pairing`]), with the notes on how they were paired;
//! - `join`: both sides' leaves matched as msprobe matches them: the DataFusion plan over two
//!   datasets (`join::plan`, its cache `join::prepared`), the same in memory for msprobe files
//!   read in place (`join::in_memory`), and the per-file context (task, stacks, tensors;
//!   `join::load`);
//! - `table`: the table msprobe writes: its header and modes (`table::columns`), the metric
//!   cells (`table::stats`, `table::md5`, `table::tensor`), the Result and Err_message rules
//!   (`table::rules`), rows built chunk by chunk (`table::build`) into row buffers
//!   (`table::cells`);
//! - [`write`](mod@write): CSV as pandas quotes it, msprobe's .xlsx workbook, typed Parquet, and the
//!   files of many unit pairs named as msprobe names them ([`write::results`]);
//! - [`divergence`]: where two runs first part, per unit pair.
//!
//! [`CompareJob`] and [`DivergenceJob`] are the operations the command line and Python run:
//! each opens both inputs, pairs their units, runs, streams or collects the results, rolls
//! back on failure and names a damaged file behind one. [`Comparison`] and [`compare_unit`]
//! compare one pair of units.
#![warn(missing_docs)]

mod comparison;
pub mod divergence;
mod error;
mod job;
mod join;
mod mode;
pub mod runs;
mod table;
mod threads;
pub mod write;

pub use comparison::planned::{PlannedUnit, TableCounts};
pub use comparison::*;
pub use error::CompareError;
pub use job::{CompareJob, CompareReport, DivergenceJob, DivergenceReport, JobError, ModeChoice, Output, UnknownWord};
pub use join::mapping::{read_mapping_file, MappingError, Mappings};
pub use join::plan::compare_sql;
pub use mode::CompareMode;
pub use table::cells::{Row, Rows};
pub use write::typed::cell_number;
