//! The client side: a [`probelake_query::Engine`] whose plans run on a Ballista cluster.

use std::sync::Arc;

use ballista_core::config::BALLISTA_ADAPTIVE_PLANNER_ENABLED;
use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::{job_status, GetJobStatusParams};
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::LogicalPlanNode;
use probelake_query::Engine;

use crate::codec::LakeCodec;
use crate::error::{ClusterError, Result};

/// Runs a session's plans on the cluster whose scheduler is at `host:port`.
///
/// The client plans logically (the SQL, the tables of the runs given to it, probelake's
/// functions) and sends the plan to the scheduler, which plans it physically into stages and
/// hands their tasks to executors; the result streams back here. Only committed units are
/// read: the plan carries each table's committed files as the client listed them.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use probelake_cluster::Ballista;
/// use probelake_query::{Run, RunSession};
/// let lake = probelake_format::Lake::open("s3://bucket/runs/a")?;
/// let cluster = Ballista::new("scheduler.internal:50050")?;
/// let session = RunSession::open_on(vec![Run::new("a", lake)], false, &cluster).await?;
/// let batches = session.collect("SELECT stage, count(*) FROM dump GROUP BY stage").await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Ballista {
    url: String,
}

impl Ballista {
    /// The cluster whose scheduler listens at `address` (`HOST:PORT`, or a `df://`,
    /// `ballista://` or `http://` URL of it).
    pub fn new(address: &str) -> Result<Self> {
        let rest = ["df://", "ballista://", "http://"].iter().find_map(|p| address.strip_prefix(p)).unwrap_or(address);
        let rest = rest.trim_end_matches('/');
        let valid = rest
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok());
        if !valid {
            return Err(ClusterError::Address {
                address: address.to_string(),
                message: "give the scheduler as HOST:PORT (e.g. 127.0.0.1:50050)".into(),
            });
        }
        Ok(Ballista { url: format!("http://{rest}") })
    }

    /// [`Ballista::new`], checked by connecting to the scheduler (for at most 10 s), so that
    /// a wrong address fails before any work with an error that says what to do.
    pub async fn connect(address: &str) -> Result<Self> {
        let cluster = Self::new(address)?;
        let attempt = SchedulerGrpcClient::connect(cluster.url.clone());
        let failed = |message: String| ClusterError::Scheduler {
            url: cluster.url.clone(),
            message: format!("{message}; is `probelake cluster scheduler` running there?"),
        };
        match tokio::time::timeout(std::time::Duration::from_secs(10), attempt).await {
            Ok(Ok(_)) => Ok(cluster),
            Ok(Err(e)) => Err(failed(connect_error(&e))),
            Err(_) => Err(failed("no answer within 10 s".into())),
        }
    }

    /// The scheduler's URL (`http://host:port`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the job that `plan` ran on the cluster put its results: the executor of each
    /// output partition of its last stage, in partition order, from the scheduler's job state.
    /// `None` when `plan` did not run on a cluster or has not run yet.
    pub async fn result_executors(&self, plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Vec<String>>> {
        let Some(job) = job_id(plan) else { return Ok(None) };
        let failed = |message: String| ClusterError::Scheduler { url: self.url.clone(), message };
        let mut client = SchedulerGrpcClient::connect(self.url.clone()).await.map_err(|e| failed(e.to_string()))?;
        let status = client
            .get_job_status(GetJobStatusParams { job_id: job.clone() })
            .await
            .map_err(|e| failed(e.message().to_string()))?
            .into_inner()
            .status
            .and_then(|s| s.status);
        match status {
            Some(job_status::Status::Successful(done)) => {
                let mut located: Vec<(u32, String)> = done
                    .partition_location
                    .into_iter()
                    .map(|p| {
                        let partition = p.partition_id.map_or(0, |id| id.partition_id);
                        (partition, p.executor_meta.map(|e| e.id).unwrap_or_default())
                    })
                    .collect();
                located.sort();
                Ok(Some(located.into_iter().map(|(_, executor)| executor).collect()))
            }
            other => Err(failed(format!("job {job} has not succeeded: {other:?}"))),
        }
    }
}

/// The innermost cause of a connection error ("Connection refused"), which tonic wraps twice.
fn connect_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The scheduler's id of the job `plan` submitted.
fn job_id(plan: &Arc<dyn ExecutionPlan>) -> Option<String> {
    use ballista_core::execution_plans::DistributedQueryExec;
    let exec = plan.downcast_ref::<DistributedQueryExec<LogicalPlanNode>>()?;
    exec.job_id().map(String::from)
}

impl Engine for Ballista {
    fn state(&self, config: SessionConfig) -> probelake_query::Result<SessionState> {
        let mut config = config.upgrade_for_ballista();
        // Ballista's static distributed planner: its adaptive planner re-plans from each
        // stage's operator metrics, which probelake's executors do not report (`stage.rs`
        // says why), and without them it planned sql/first_divergence.sql's stages without
        // end. `SET ballista.planner.adaptive.enabled = true` turns it back on for a session.
        config.options_mut().set(BALLISTA_ADAPTIVE_PLANNER_ENABLED, "false")?;
        let config = config.with_ballista_logical_extension_codec(Arc::new(LakeCodec::default()));
        let state = SessionStateBuilder::new().with_config(config).with_default_features().build();
        Ok(state.upgrade_for_ballista(self.url.clone())?)
    }

    fn is_remote(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for ok in ["127.0.0.1:50050", "df://h:1", "ballista://h:1/", "http://scheduler.internal:50050"] {
            assert!(Ballista::new(ok).is_ok(), "{ok}");
        }
        assert_eq!(Ballista::new("ballista://h:7").map(|b| b.url().to_string()).ok().as_deref(), Some("http://h:7"));
        for bad in ["", "h", "h:", ":1", "h:99999", "h/x:1"] {
            assert!(Ballista::new(bad).is_err(), "{bad}");
        }
    }
}
