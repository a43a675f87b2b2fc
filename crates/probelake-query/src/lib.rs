//! # probelake-query
//!
//! SQL over probelake datasets with DataFusion: every run is a schema (`base.dump`,
//! `new.stack`, …; the first run is also the default schema), only committed units are
//! visible, partition columns are typed (`step` and `rank` BIGINT, `stage` and `api` VARCHAR)
//! and pruned on their decoded values, and msprobe's metrics are SQL functions.
//!
//! Where to start:
//! - [`RunSession`]: open runs and run SQL;
//! - [`udf`]: `rel_err`, `is_finite_stats`, `shape_numel`, `item_slot`;
//! - [`compare`]: `msprobe compare`'s table, cell for cell;
//! - [`divergence`]: where two runs first part, per unit;
//! - [`table::LakeTable`]: how a table of a run becomes a DataFusion scan.
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

pub mod compare;
pub mod divergence;
pub mod error;
pub mod session;
pub mod table;
pub mod udf;

pub use datafusion;
pub use error::{QueryError, Result};
pub use session::{check_run_name, Engine, LocalEngine, Run, RunSession, RunSummary};
