//! # probelake-cluster
//!
//! probelake's SQL, `compare` and first-divergence search on an Apache DataFusion Ballista
//! cluster, for datasets too large for one machine.
//!
//! A cluster is one scheduler and any number of executors, each a `probelake cluster …`
//! process ([`run_scheduler`], [`run_executor`]). They are Ballista's own, built with what
//! Ballista alone does not know: probelake's tables ([`LakeCodec`]: a scan travels as the
//! committed files the client listed), its SQL functions (`rel_err`, `msprobe_*`, …) and its
//! stores ([`ClusterStores`]: `file://` and `s3://`, configured from each process's `AWS_*`
//! environment). A client runs a [`probelake_query::RunSession`] over [`Ballista`]: it plans
//! logically, the scheduler plans physically and splits the plan into stages at every
//! exchange, and executors run the stages' tasks and exchange their shuffles through Arrow
//! Flight. docs/cluster.md says how to start one and what it costs.
#![warn(missing_docs)]

mod codec;
mod engine;
mod error;
mod executor;
pub mod functions;
mod scheduler;
mod stage;
mod stores;

pub use codec::LakeCodec;
pub use engine::Ballista;
pub use error::{ClusterError, Result};
pub use executor::{run_executor, ExecutorOptions};
pub use scheduler::{run_scheduler, SchedulerOptions};
pub use stores::ClusterStores;
