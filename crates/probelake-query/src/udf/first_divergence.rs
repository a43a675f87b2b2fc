//! `first_divergence(threshold [, 'target', 'golden'])`: the rows of
//! `sql/first_divergence.sql` as a table, found by reading each unit pair in execution order
//! and stopping at its first divergence.
//!
//! ```sql
//! SELECT * FROM first_divergence(0.5);                    -- runs `target` and `golden`
//! SELECT stage, count(*) FROM first_divergence(0, 'npu', 'gpu') GROUP BY stage;
//! ```
//!
//! The query text reads every output row of both runs, numbers the backward ones with a
//! window and joins the two sides before it can pick the first row of a unit: that is what a
//! SQL engine can see. This function answers the same question knowing that the rows of a unit
//! are stored in execution order, so where the runs part early it decodes a small prefix of
//! each unit. Sessions whose plans run on a cluster do not have it (it reads the datasets in
//! the client process); the query text runs there.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;

use crate::msprobe::divergence::{first_divergences, schema};
use crate::table::RunUnits;

/// The `first_divergence` table function of a session, over its runs.
#[derive(Debug)]
pub struct FirstDivergenceFunction {
    runs: Vec<(String, RunUnits)>,
}

impl FirstDivergenceFunction {
    /// The function over `runs` (name, dataset and units shown).
    pub(crate) fn new(runs: Vec<(String, RunUnits)>) -> Self {
        FirstDivergenceFunction { runs }
    }

    fn run(&self, name: &str) -> Result<RunUnits> {
        match self.runs.iter().find(|(n, _)| n == name) {
            Some((_, run)) => Ok(run.clone()),
            None => {
                let names: Vec<&str> = self.runs.iter().map(|(n, _)| n.as_str()).collect();
                plan_err!(
                    "first_divergence: no run named `{name}` (the runs are {}); \
                     give the target and golden runs' names: first_divergence(0.5, 'npu', 'gpu')",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                )
            }
        }
    }
}

const USAGE: &str = "first_divergence(threshold [, 'target', 'golden']): threshold a number ≥ 0 \
                     (0.5 is msprobe's rule, 0 the first difference at all), runs named as given (--run NAME=...)";

impl TableFunctionImpl for FirstDivergenceFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let threshold = match exprs.first() {
            Some(Expr::Literal(value, _)) => number(value),
            _ => None,
        };
        let Some(threshold) = threshold.filter(|t| *t >= 0.0 && t.is_finite()) else {
            return plan_err!("{USAGE}");
        };
        let name = |i: usize, default: &'static str| match exprs.get(i) {
            None => Ok(default.to_string()),
            Some(Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _)) => Ok(s.clone()),
            Some(_) => plan_err!("{USAGE}"),
        };
        if exprs.len() > 3 {
            return plan_err!("{USAGE}");
        }
        let (target, golden) = (self.run(&name(1, "target")?)?, self.run(&name(2, "golden")?)?);
        let stream = Arc::new(Search { target, golden, threshold, schema: schema() });
        Ok(Arc::new(StreamingTable::try_new(schema(), vec![stream])?))
    }
}

/// A numeric literal as f64.
fn number(value: &ScalarValue) -> Option<f64> {
    match value {
        ScalarValue::Float64(Some(v)) => Some(*v),
        ScalarValue::Float32(Some(v)) => Some(f64::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(*v as f64),
        ScalarValue::Int32(Some(v)) => Some(f64::from(*v)),
        ScalarValue::Decimal128(Some(v), _, scale) => Some(*v as f64 / 10f64.powi(i32::from(*scale))),
        _ => None,
    }
}

/// The search, run when the plan runs.
#[derive(Debug)]
struct Search {
    target: RunUnits,
    golden: RunUnits,
    threshold: f64,
    schema: SchemaRef,
}

impl PartitionStream for Search {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (target, golden, threshold) = (self.target.clone(), self.golden.clone(), self.threshold);
        let rows = futures::stream::once(async move {
            first_divergences(&target, &golden, threshold).await.map_err(|e| DataFusionError::External(Box::new(e)))
        });
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), rows))
    }
}
