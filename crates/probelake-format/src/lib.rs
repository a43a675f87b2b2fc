//! # probelake-format
//!
//! The probelake dataset kernel: hive-partitioned Parquet tables, units and their commits.
//!
//! A dataset is one training run. Its tables (`dump`, `stack`, `construct`, `tensor`,
//! `source`) are partitioned by `step`, `stage`, `rank` (and `api` family for `dump` and
//! `tensor`), and a (step, stage, rank) *unit* becomes visible all at once when its commit
//! record is written.
//!
//! This crate knows nothing of msprobe's files: `probelake-msprobe` turns them into units and
//! back, `probelake-writer` records units from a running job, `probelake-query` reads them.
//!
//! Where to start:
//! - [`lake::Lake`]: a dataset on an object store, its commit protocol and what is visible;
//! - [`vacuum`]: removing what no commit names (crashed writers' files), after a grace period;
//! - [`schema`] and [`layout`]: the columns and paths everything else relies on;
//! - [`columns`]: a batch's columns by name, as the type a reader expects;
//! - [`readers`]: the schema files that type a table for pandas and pyarrow;
//! - [`storage`]: local folders and S3-compatible stores, configured as the CLI is;
//! - [`output_tree`]: a folder of result files written whole or not at all.
#![warn(missing_docs)]

pub mod columns;
mod encode;
pub mod error;
pub mod lake;
pub mod layout;
pub mod output_tree;
pub mod properties;
pub mod readers;
pub mod schema;
pub mod storage;
pub mod vacuum;

pub use error::{FormatError, Result};
pub use lake::{CommitRecord, DataFile, Lake, PendingCommit, UnitCounts};
pub use layout::{Table, Unit};
pub use storage::StorageOptions;
