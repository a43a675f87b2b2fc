//! The scheduler process: Ballista's, knowing probelake's tables, functions and stores.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use probelake_format::StorageOptions;

use crate::codec::LakeCodec;
use crate::error::{ClusterError, Result};
use crate::stores::ClusterStores;

/// How a scheduler runs.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Where it listens for clients and executors; port 0 picks a free port.
    pub bind: SocketAddr,
    /// The host executors and clients reach it at, when not the bound address.
    pub external_host: Option<String>,
    /// An executor that has not sent a heartbeat for this long is lost: its tasks run again
    /// elsewhere. Ballista's default is 180 s.
    pub executor_timeout_seconds: u64,
    /// How often lost executors are looked for.
    pub expire_interval_seconds: u64,
    /// How often a task may fail before its job fails.
    pub task_max_failures: usize,
    /// How it reaches `s3://` datasets when planning.
    pub storage: StorageOptions,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            bind: SocketAddr::from(([0, 0, 0, 0], 50050)),
            external_host: None,
            executor_timeout_seconds: 180,
            expire_interval_seconds: 15,
            task_max_failures: 4,
            storage: StorageOptions::default(),
        }
    }
}

/// Runs a scheduler until the process ends. `ready` is called with the bound address once it
/// listens (the address to give executors and clients when port 0 was asked for).
pub async fn run_scheduler(options: SchedulerOptions, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(options.bind).await.map_err(|e| ClusterError::Address {
        address: options.bind.to_string(),
        message: format!("cannot listen: {e}"),
    })?;
    let bound = listener.local_addr().map_err(|e| ClusterError::Io { path: options.bind.to_string(), source: e })?;
    let stores = Arc::new(ClusterStores::new(options.storage.clone()));
    let config = SchedulerConfig {
        bind_host: bound.ip().to_string(),
        bind_port: bound.port(),
        external_host: options.external_host.clone().unwrap_or_else(|| bound.ip().to_string()),
        executor_timeout_seconds: options.executor_timeout_seconds,
        no_executors_grace_period_seconds: options.executor_timeout_seconds,
        expire_dead_executor_interval_seconds: options.expire_interval_seconds,
        task_max_failures: options.task_max_failures,
        // One task per executor in turn, rather than filling the first executor's slots: the
        // scans of a stage then read from every machine at once.
        task_distribution: TaskDistributionPolicy::RoundRobin,
        override_session_builder: Some(Arc::new(move |config| crate::functions::scheduler_session(config, &stores))),
        override_logical_codec: Some(Arc::new(LakeCodec::default())),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config)).await?;
    ready(bound);
    start_grpc_service_with_listener(listener, scheduler).await?;
    Ok(())
}
