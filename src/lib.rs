//! # probelake
//!
//! msprobe precision dumps as hive-partitioned Parquet, with a byte-exact export.
//!
//! This crate is a facade: it re-exports the library crates so one dependency brings them all.
//! - [`format`](mod@format): the dataset kernel: tables, units, the commit protocol, storage;
//! - [`msprobe`]: msprobe's files: its JSON dialect, tensor files, import and byte-exact export;
//! - [`synth`]: synthetic msprobe dump trees of a toy transformer, for demos, tests and benches;
//! - [`writer`]: the asynchronous writer that records tensors into a dataset as msprobe would;
//! - [`query`]: SQL over runs with DataFusion, msprobe's metrics as functions, compare;
//! - [`plot`]: charts of runs (trends across steps, divergence heatmaps) as SVG and PNG;
//! - [`cli`]: the `probelake` command line (used by the binary).
//!
//! ```no_run
//! # async fn example() -> probelake::msprobe::Result<()> {
//! use probelake::{format::Lake, msprobe};
//! let lake = Lake::local(std::path::Path::new("lake/run-a"))?;
//! msprobe::import(std::path::Path::new("dumps/run-a"), &lake, &Default::default(), &msprobe::NoProgress).await?;
//! for unit in lake.units().await? {
//!     println!("{}: {} leaves", unit.unit, unit.counts.leaves);
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub use probelake_cli as cli;
pub use probelake_compare as compare;
pub use probelake_format as format;
pub use probelake_msprobe as msprobe;
pub use probelake_plot as plot;
pub use probelake_query as query;
pub use probelake_synth as synth;
pub use probelake_writer as writer;
