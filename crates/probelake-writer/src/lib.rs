//! # probelake-writer
//!
//! The asynchronous columnar dump writer: a training or inference process records msprobe
//! entries — tensors from host or NPU memory, scalars, `None`s — and they land in a probelake
//! dataset as the same rows `probelake import` makes from msprobe's dump.json, with no JSON in
//! the hot path. `record` returns at once; statistics (Max/Min/Mean/Norm as msprobe defines
//! them), CRC-32 or xor checksums and tensor payloads are computed on the writer's threads;
//! rows are batched into Arrow and written as Parquet through the dataset's object store; a
//! (step, stage, rank) unit becomes visible atomically at `commit`.
//!
//! ```
//! use probelake_writer::{DType, Entry, Lake, Tensor, TensorSource, Unit, Value, WriterOptions};
//!
//! # fn main() -> Result<(), probelake_writer::WriterError> {
//! # let dir = tempfile::tempdir().map_err(|e| probelake_writer::WriterError::Internal(e.to_string()))?;
//! # let uri = dir.path().join("run-42");
//! # let uri = uri.to_str().unwrap_or_default();
//! let lake = Lake::open(uri)?;
//! let unit = lake.unit(Unit::new(7, "actor_update", 3), WriterOptions::default())?;
//! let x: Vec<u8> = [1.0f32, -2.0, 0.5, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! unit.record(
//!     Entry::new("Functional.relu.0.forward")
//!         .input_args([Value::tensor(Tensor::new(DType::F32, [2, 2], TensorSource::host(x)))])
//!         .input_kwargs([("inplace", Value::bool(false))])
//!         .output([Value::null()]),
//! )?;
//! let record = unit.commit_blocking()?; // or `unit.commit().await?` in async code
//! assert_eq!((record.counts.entries, record.counts.leaves), (1, 3));
//! # Ok(()) }
//! ```
//!
//! Where to start:
//! - [`Lake`] opens a dataset and starts units; [`UnitWriter`] records and commits one;
//! - [`Entry`], [`Value`], [`Tensor`] and [`TensorSource`] describe what is recorded;
//! - [`WriterOptions`] chooses msprobe's task and summary mode and bounds memory
//!   ([`Backpressure`]); [`Metrics`] reports what happened;
//! - [`stats`] and [`checksum`] are the kernels, usable alone;
//! - [`device`] is the device-memory path: the pinned pool, the backend traits, a simulated
//!   device, and (feature `npu`) Ascend NPUs.
//!
//! The threading and memory model is described in `docs/writer.md` and on [`UnitWriter`].
#![warn(missing_docs)]

pub mod checksum;
pub mod device;
mod dtype;
mod entry;
mod error;
mod io_runtime;
mod lake;
mod leaf;
mod location;
mod metrics;
mod options;
mod pipeline;
mod source;
pub mod stats;
mod unit;

mod budget;

pub use dtype::DType;
pub use entry::{Entry, Tensor, Value};
pub use error::{Result, WriterError};
pub use lake::{Lake, WeakLake};
pub use metrics::Metrics;
pub use options::{Backpressure, SummaryMode, Task, WriterOptions};
pub use probelake_format::{CommitRecord, Unit};
pub use source::TensorSource;
pub use unit::{Recorded, UnitWriter};
