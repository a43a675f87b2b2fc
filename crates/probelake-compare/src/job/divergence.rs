//! [`DivergenceJob`]: where two runs first part, for every unit pair at once.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use probelake_format::storage::StorageOptions;
use probelake_query::{Engine, LocalEngine};

use super::JobError;
use crate::divergence::{divergence_session_on, first_divergence, first_divergence_sql};
use crate::runs::pairing::UnitChoice;
use crate::runs::{pairing_notes, RunPair};

/// The first diverging entry of every unit pair of two runs, with the chain of modules above
/// it (`crate::divergence`), as one operation.
///
/// ```no_run
/// # async fn demo() -> Result<(), probelake_compare::JobError> {
/// let report = probelake_compare::DivergenceJob::new("lake/npu", "lake/gpu").threshold(0.0).run().await?;
/// println!("the runs part in {} unit(s)", report.found());
/// # Ok(()) }
/// ```
pub struct DivergenceJob {
    target: String,
    golden: String,
    storage: StorageOptions,
    threshold: f64,
    units: UnitChoice,
    engine: Arc<dyn Engine>,
}

/// What a [`DivergenceJob`] found.
#[derive(Debug)]
pub struct DivergenceReport {
    /// The rows' columns (those of `sql/first_divergence.sql` and `modules`), even with no rows.
    pub schema: SchemaRef,
    /// A row per unit pair where the runs part.
    pub batches: Vec<RecordBatch>,
    /// Unit pairs searched.
    pub searched: usize,
    /// How the units were paired, and what was skipped, in lines for the user.
    pub notes: Vec<String>,
}

impl DivergenceReport {
    /// Unit pairs where the runs part.
    pub fn found(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

impl DivergenceJob {
    /// Searches `target` against `golden`: datasets, msprobe dump folders or dump.json files
    /// (msprobe files are imported into a temporary dataset first).
    pub fn new(target: impl Into<String>, golden: impl Into<String>) -> Self {
        DivergenceJob {
            target: target.into(),
            golden: golden.into(),
            storage: StorageOptions::default(),
            threshold: 0.5,
            units: UnitChoice::default(),
            engine: Arc::new(LocalEngine),
        }
    }

    /// How S3 inputs are reached.
    pub fn storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The relative error (a fraction: 0.5 is 50 %, msprobe's rule; 0 finds the first
    /// difference of any size) above which an output counts as diverging.
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold;
        self
    }

    /// Which units are compared with which ([`crate::runs::pairing::pair_units`]).
    pub fn units(mut self, units: UnitChoice) -> Self {
        self.units = units;
        self
    }

    /// Where the query runs (by default in this process, [`LocalEngine`]).
    pub fn engine(mut self, engine: Arc<dyn Engine>) -> Self {
        self.engine = engine;
        self
    }

    /// Checks the options without opening anything: a threshold out of range is refused here.
    pub fn check(&self) -> Result<(), JobError> {
        first_divergence_sql(self.threshold).map(|_| ()).map_err(|e| JobError::Argument(e.to_string()))
    }

    /// Runs the search.
    pub async fn run(self) -> Result<DivergenceReport, JobError> {
        self.check()?;
        let runs = RunPair::open(&self.target, &self.golden, &self.storage).await?;
        let pairing = runs.pair(&self.units)?;
        let notes = pairing_notes(&pairing);
        let (target, golden) = (runs.target.lake()?, runs.golden.lake()?);
        let session = divergence_session_on(target, golden, &pairing.pairs, self.engine.as_ref())
            .await
            .map_err(JobError::Divergence)?;
        match first_divergence(&session, self.threshold).await {
            Ok((schema, batches)) => Ok(DivergenceReport { schema, batches, searched: pairing.pairs.len(), notes }),
            Err(e) => Err(JobError::Divergence(e).naming_damage(session.first_damaged_file()).await),
        }
    }
}
