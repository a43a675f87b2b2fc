//! The executor process: Ballista's, knowing probelake's functions and stores.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};

use datafusion::prelude::SessionConfig;
use probelake_format::StorageOptions;

use crate::codec::LakeCodec;
use crate::error::{ClusterError, Result};
use crate::stores::ClusterStores;

/// How an executor runs.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's host.
    pub scheduler_host: String,
    /// The scheduler's port.
    pub scheduler_port: u16,
    /// The address it binds.
    pub bind_host: String,
    /// The host the scheduler and other executors reach it at, when not `bind_host`.
    pub external_host: Option<String>,
    /// Port of its Arrow Flight service (shuffle reads); 0 picks a free one.
    pub flight_port: u16,
    /// Port of its gRPC service (task launches); 0 picks a free one.
    pub grpc_port: u16,
    /// Where it keeps shuffle files; a fresh temporary folder when `None`.
    pub work_dir: Option<PathBuf>,
    /// Tasks it runs at once.
    pub slots: usize,
    /// Seconds between heartbeats to the scheduler.
    pub heartbeat_seconds: u64,
    /// How it reaches `s3://` datasets.
    pub storage: StorageOptions,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            scheduler_host: "127.0.0.1".into(),
            scheduler_port: 50050,
            bind_host: "0.0.0.0".into(),
            external_host: None,
            flight_port: 50051,
            grpc_port: 50052,
            work_dir: None,
            slots: std::thread::available_parallelism().map_or(1, |n| n.get()),
            heartbeat_seconds: 60,
            storage: StorageOptions::default(),
        }
    }
}

/// `port`, or a free port when 0 (found by binding it and letting it go).
fn port_or_free(host: &str, port: u16) -> Result<u16> {
    if port != 0 {
        return Ok(port);
    }
    let address = format!("{host}:0");
    let free = TcpListener::bind(&address)
        .and_then(|l| l.local_addr())
        .map_err(|e| ClusterError::Address { address, message: format!("no free port: {e}") })?;
    Ok(free.port())
}

/// Runs an executor until the process ends. `ready` is called with its Flight and gRPC ports
/// before it registers with the scheduler.
pub async fn run_executor(options: ExecutorOptions, ready: impl FnOnce(u16, u16)) -> Result<()> {
    let flight_port = port_or_free(&options.bind_host, options.flight_port)?;
    let mut grpc_port = port_or_free(&options.bind_host, options.grpc_port)?;
    while grpc_port == flight_port {
        grpc_port = port_or_free(&options.bind_host, 0)?;
    }
    let work_dir = match &options.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| ClusterError::Io { path: dir.display().to_string(), source: e })?;
            Some(dir.display().to_string())
        }
        None => None,
    };
    // One registry for every task: stores (and their connections) are opened once.
    let stores = Arc::new(ClusterStores::new(options.storage.clone()));
    let config = ExecutorProcessConfig {
        bind_host: options.bind_host.clone(),
        external_host: options.external_host.clone(),
        port: flight_port,
        grpc_port,
        scheduler_host: options.scheduler_host.clone(),
        scheduler_port: options.scheduler_port,
        scheduler_connect_timeout_seconds: 30,
        vcores: options.slots.max(1),
        work_dir,
        executor_heartbeat_interval_seconds: options.heartbeat_seconds.max(1),
        override_function_registry: Some(Arc::new(crate::functions::registry())),
        override_runtime_producer: Some(Arc::new(move |_config: &SessionConfig| crate::functions::runtime(&stores))),
        override_logical_codec: Some(Arc::new(LakeCodec::default())),
        // Shuffle reads then open a connection each (Ballista's pool is private to its default
        // engine); see `stage` for why the default engine is wrapped.
        override_execution_engine: Some(Arc::new(crate::stage::StageEngine::default())),
        ..ExecutorProcessConfig::default()
    };
    ready(flight_port, grpc_port);
    start_executor_process(Arc::new(config)).await?;
    Ok(())
}
