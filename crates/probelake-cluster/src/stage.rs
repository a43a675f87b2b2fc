//! How an executor runs a task: Ballista's default engine, reporting no operator metrics.
//!
//! Ballista 55 gives each task of a stage its own copy of the stage's plan with the leaves it
//! does not read cut away, and for a `UNION` the branches a task does not read become
//! `EmptyExec`: tasks of one stage then report different numbers of operator metrics. The
//! scheduler refuses such a task status ("task metrics array size … does not equal the stage
//! metrics array size"), the task is never marked done and the job hangs; with its two `UNION
//! ALL` branches, `sql/first_divergence.sql` hung that way on two executors. Tasks here report
//! no operator metrics, which the scheduler accepts for any stage. What is lost: the per-operator
//! metrics of a cluster job (the scheduler's job metrics and a distributed `EXPLAIN ANALYZE`).

use std::fmt;
use std::sync::Arc;

use ballista_core::serde::protobuf::{RuntimeStatsReport, ShuffleWritePartition, TaskColumnStats, WindowStateReport};
use ballista_core::JobId;
use ballista_executor::execution_engine::{DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;

/// [`DefaultExecutionEngine`] whose stages report no operator metrics.
#[derive(Default)]
pub struct StageEngine {
    inner: DefaultExecutionEngine,
}

impl ExecutionEngine for StageEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        let stage = self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )?;
        Ok(Arc::new(Stage(stage)))
    }
}

/// A stage of [`StageEngine`].
#[derive(Debug)]
struct Stage(Arc<dyn QueryStageExecutor>);

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[async_trait::async_trait]
impl QueryStageExecutor for Stage {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        self.0.execute_query_stage(task_id, context).await
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        Vec::new()
    }

    fn collect_runtime_stats_reports(&self) -> Vec<RuntimeStatsReport> {
        self.0.collect_runtime_stats_reports()
    }

    fn collect_window_state_reports(&self) -> Result<Vec<WindowStateReport>> {
        self.0.collect_window_state_reports()
    }

    fn collect_column_stats(&self) -> Vec<TaskColumnStats> {
        self.0.collect_column_stats()
    }
}
