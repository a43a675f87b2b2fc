//! # probelake-query
//!
//! SQL over probelake datasets with DataFusion: every run is a schema (`base.dump`,
//! `new.stack`, …; the first run is also the default schema), only committed units are
//! visible, partition columns are typed (`step` and `rank` BIGINT, `stage` and `api` VARCHAR)
//! and pruned on their decoded values, and msprobe's metrics are SQL functions.
//!
//! Where to start:
//! - [`RunSession`]: open runs and run SQL;
//! - [`udf`]: `rel_err`, `is_finite_stats`, `shape_numel`, `item_slot`, msprobe compare's key
//!   and cell rules, and the `first_divergence` table function;
//! - [`msprobe`]: the per-leaf rules of msprobe compare those functions apply (also used by
//!   `probelake-compare`, which builds msprobe's whole table and runs compare and
//!   first-divergence searches as operations);
//! - [`table::LakeTable`]: how a table of a run becomes a DataFusion scan;
//! - [`render`]: an error as people read it (the command line and Python render it alike).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use probelake_query::{Run, RunSession};
//! # let dir = tempfile::tempdir()?;
//! # let src = dir.path().join("src");
//! # probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src)?;
//! let lake = probelake_format::Lake::local(&dir.path().join("lake"))?;
//! probelake_msprobe::import(&src, &lake, &Default::default(), &probelake_msprobe::NoProgress).await?;
//! let session = RunSession::open(vec![Run::new("base", lake)], false).await?;
//! let batches = session.collect("SELECT count(DISTINCT stage) AS stages FROM dump").await?;
//! assert_eq!(batches[0].num_rows(), 1);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod error;
pub mod msprobe;
pub mod render;
pub mod session;
pub mod table;
pub mod udf;

pub use datafusion;
pub use error::{QueryError, Result};
pub use session::{check_run_name, Engine, LocalEngine, Run, RunSession, RunSummary};
