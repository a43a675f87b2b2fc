//! # probelake-format
//!
//! The probelake dataset format: msprobe precision dumps as hive-partitioned Parquet.
//!
//! A dataset is one training run. Its tables (`dump`, `stack`, `construct`, `tensor`,
//! `source`) are partitioned by `step`, `stage`, `rank` (and `api` family for `dump` and
//! `tensor`), and a (step, stage, rank) *unit* becomes visible all at once when its commit
//! record is written. Everything msprobe wrote can be rebuilt byte for byte.
//!
//! Where to start:
//! - [`msprobe::import`] and [`msprobe::export`]: the codec between msprobe files and a dataset;
//! - [`lake::Lake`]: a dataset on an object store, its commit protocol and what is visible;
//! - [`vacuum`]: removing what no commit names (crashed writers' files), after a grace period;
//! - [`schema`] and [`layout`]: the columns and paths everything else relies on;
//! - [`readers`]: the schema files that type a table for pandas and pyarrow;
//! - [`json`]: msprobe's JSON dialect, read and written exactly as CPython does;
//! - [`tensor_file`]: `.pt` and `.npy` tensor files;
//! - [`synth`]: realistic msprobe dump trees of a toy transformer, for demos and benchmarks.
#![warn(missing_docs)]

pub mod error;
pub mod json;
pub mod lake;
pub mod layout;
pub mod msprobe;
pub mod output_tree;
pub mod properties;
pub mod readers;
pub mod schema;
pub mod storage;
pub mod synth;
pub mod tensor_file;
pub mod vacuum;

pub use error::{FormatError, Result};
pub use lake::{CommitRecord, DataFile, Lake, PendingCommit, UnitCounts};
pub use layout::{Table, Unit};
pub use storage::StorageOptions;
