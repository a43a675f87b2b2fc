//! `probelake cluster scheduler|executor`: the processes of a Ballista cluster that knows
//! probelake's datasets, and `--cluster`, which sends `sql`, `divergence` and `compare` there.

use crate::ExitCode;
use std::path::PathBuf;
use std::sync::Arc;

use probelake_query::{Engine, LocalEngine};

use super::Context;

/// `--cluster`, shared by the commands that can run their queries on a cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArg {
    /// Run the queries on the Ballista cluster whose scheduler is at HOST:PORT (started with
    /// `probelake cluster scheduler`); every process must reach the datasets (s3://, or a
    /// folder at the same path on every machine).
    #[arg(long, value_name = "HOST:PORT")]
    pub cluster: Option<String>,
    /// With --cluster: give up after this many seconds with an error (exit 2) instead of
    /// waiting on; a job can wait without end when executors are lost (docs/cluster.md).
    #[arg(long, value_name = "SECS", requires = "cluster")]
    pub cluster_timeout: Option<f64>,
}

impl ClusterArg {
    /// Where the command's plans run (a cluster's scheduler is reached once, here).
    pub async fn engine(&self) -> anyhow::Result<Arc<dyn Engine>> {
        match &self.cluster {
            None => Ok(Arc::new(LocalEngine)),
            Some(address) => remote(address).await,
        }
    }

    /// `work`, given up after `--cluster-timeout` with an error that says so.
    pub async fn within<T>(&self, work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
        let Some(secs) = self.cluster_timeout else { return work.await };
        if !(secs.is_finite() && secs > 0.0) {
            anyhow::bail!("--cluster-timeout {secs}: give a positive number of seconds");
        }
        match tokio::time::timeout(std::time::Duration::from_secs_f64(secs), work).await {
            Ok(done) => done,
            Err(_) => anyhow::bail!(
                "the cluster gave no answer within {secs} s (--cluster-timeout); its job may still be running there"
            ),
        }
    }
}

#[cfg(feature = "cluster")]
async fn remote(address: &str) -> anyhow::Result<Arc<dyn Engine>> {
    Ok(Arc::new(probelake_cluster::Ballista::connect(address).await?))
}

#[cfg(not(feature = "cluster"))]
async fn remote(address: &str) -> anyhow::Result<Arc<dyn Engine>> {
    anyhow::bail!("--cluster {address}: this probelake was built without its `cluster` feature; build it with `cargo build --release` (the feature is on by default)")
}

/// Run a scheduler or an executor of a probelake cluster (Apache DataFusion Ballista).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
A cluster is one scheduler and any number of executors, each a probelake process, on as many
machines as you like. Clients (`probelake sql|divergence|compare --cluster HOST:PORT`) plan their
SQL and send it to the scheduler, which splits it into stages at every exchange and hands the
tasks to executors; the executors read the datasets themselves (s3://, with their own AWS_*
environment, or folders at the same path on every machine) and exchange shuffles over Arrow
Flight. Only committed units are read: a plan carries the files the client listed.
docs/cluster.md says more.

Exit code: runs until stopped (Ctrl-C: 130); 2 when it cannot start (a port in use, no
scheduler to register with).

Examples:
  probelake cluster scheduler --bind 0.0.0.0:50050
  probelake cluster executor --scheduler sched-host:50050 --work-dir /scratch/probelake --slots 16
  probelake sql --cluster sched-host:50050 --run a=s3://dumps/run-a -c \"SELECT count(*) FROM dump\"")]
pub struct Args {
    /// The process to run.
    #[command(subcommand)]
    pub role: Role,
}

/// The processes of a cluster.
#[derive(Debug, clap::Subcommand)]
pub enum Role {
    /// Run the scheduler: clients send it plans, executors register with it.
    Scheduler(SchedulerArgs),
    /// Run an executor: it registers with the scheduler and runs the tasks it is given.
    Executor(ExecutorArgs),
}

/// Run the scheduler.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints `scheduler listening on HOST:PORT` on stdout once it listens (with --bind …:0, the port
it picked), then runs until stopped.

Exit code: runs until stopped (Ctrl-C: 130); 2 when it cannot listen.

Example:
  probelake cluster scheduler --bind 0.0.0.0:50050 --executor-timeout 60")]
pub struct SchedulerArgs {
    /// Address to listen on (port 0: a free port, printed).
    #[arg(long, value_name = "HOST:PORT", default_value = "0.0.0.0:50050")]
    pub bind: String,
    /// Host name executors and clients reach this scheduler at, when not the bound address.
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Seconds without a heartbeat after which an executor is lost and its tasks run elsewhere.
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    pub executor_timeout: u64,
    /// Failures of one task before its job fails.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub task_max_failures: usize,
}

/// Run an executor.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints `executor ready: flight port F, grpc port G` on stdout, registers with the scheduler,
then runs until stopped. Tasks read s3:// datasets with this process's --s3-* flags, else its
AWS_* environment.

Exit code: runs until stopped (Ctrl-C: 130); 2 when it cannot start or reach the scheduler.

Example:
  probelake cluster executor --scheduler sched-host:50050 --work-dir /scratch/probelake --slots 16")]
pub struct ExecutorArgs {
    /// The scheduler's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub scheduler: String,
    /// Folder for shuffle files (a temporary folder when not given).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Tasks run at once (default: the cores of this machine).
    #[arg(long, value_name = "N")]
    pub slots: Option<usize>,
    /// Address to bind.
    #[arg(long, value_name = "HOST", default_value = "0.0.0.0")]
    pub bind_host: String,
    /// Host name the scheduler and other executors reach this executor at.
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Port of the Arrow Flight service that serves shuffle data (0: a free port).
    #[arg(long, value_name = "PORT", default_value_t = 50051)]
    pub flight_port: u16,
    /// Port of the gRPC service the scheduler launches tasks through (0: a free port).
    #[arg(long, value_name = "PORT", default_value_t = 50052)]
    pub grpc_port: u16,
    /// Seconds between heartbeats to the scheduler.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub heartbeat: u64,
}

/// Runs the process until it stops.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    match args.role {
        Role::Scheduler(args) => scheduler(ctx, args).await,
        Role::Executor(args) => executor(ctx, args).await,
    }
}

#[cfg(feature = "cluster")]
fn socket_address(text: &str, what: &str) -> anyhow::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs as _;
    text.to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("{what} {text}: give HOST:PORT ({e})"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{what} {text}: the host has no address"))
}

#[cfg(feature = "cluster")]
async fn scheduler(ctx: &Context, args: SchedulerArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let options = probelake_cluster::SchedulerOptions {
        bind: socket_address(&args.bind, "--bind")?,
        external_host: args.external_host,
        executor_timeout_seconds: args.executor_timeout.max(1),
        expire_interval_seconds: args.executor_timeout.clamp(1, 15),
        task_max_failures: args.task_max_failures.max(1),
        storage: ctx.storage.clone(),
    };
    probelake_cluster::run_scheduler(options, |bound| {
        println!("scheduler listening on {bound}");
        let _ = std::io::stdout().flush();
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "cluster")]
async fn executor(ctx: &Context, args: ExecutorArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let scheduler = socket_address(&args.scheduler, "--scheduler")?;
    let mut options = probelake_cluster::ExecutorOptions {
        scheduler_host: scheduler.ip().to_string(),
        scheduler_port: scheduler.port(),
        bind_host: args.bind_host,
        external_host: args.external_host,
        flight_port: args.flight_port,
        grpc_port: args.grpc_port,
        work_dir: args.work_dir,
        heartbeat_seconds: args.heartbeat.max(1),
        storage: ctx.storage.clone(),
        ..Default::default()
    };
    if let Some(slots) = args.slots {
        options.slots = slots.max(1);
    }
    probelake_cluster::run_executor(options, |flight, grpc| {
        println!("executor ready: flight port {flight}, grpc port {grpc}");
        let _ = std::io::stdout().flush();
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "cluster"))]
async fn scheduler(_ctx: &Context, _args: SchedulerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("this probelake was built without its `cluster` feature (on by default)")
}

#[cfg(not(feature = "cluster"))]
async fn executor(_ctx: &Context, _args: ExecutorArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("this probelake was built without its `cluster` feature (on by default)")
}
