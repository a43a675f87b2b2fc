//! [`CompareJob`]: `msprobe compare` over every unit pair of two runs.

use std::path::PathBuf;
use std::sync::Arc;

use probelake_format::storage::StorageOptions;
use probelake_msprobe::Progress;
use probelake_query::{Engine, LocalEngine};

use super::JobError;
use crate::comparison::{CompareOptions, Comparison, UnitComparison};
use crate::join::mapping::Mappings;
use crate::mode::CompareMode;
use crate::runs::pairing::UnitChoice;
use crate::runs::{pair_text, pairing_notes, RunPair};
use crate::write::results::{
    local_timestamp, needs_folders, CompareQueue, Naming, ResultError, ResultFiles, ResultFormat,
};

/// Where a [`CompareJob`]'s tables go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Result files in a folder, named and stamped as msprobe names them, each table written
    /// while it is built (none held whole); on a failure none are left.
    Files {
        /// The folder.
        dir: PathBuf,
        /// The files' format.
        format: ResultFormat,
    },
    /// The tables, in the report.
    Tables,
}

/// `msprobe compare` of every unit pair of two runs, as one operation.
///
/// ```no_run
/// # async fn demo() -> Result<(), probelake_compare::JobError> {
/// use probelake_compare::{CompareJob, Output};
/// use probelake_compare::write::results::ResultFormat;
///
/// let report = CompareJob::new("lake/npu", "lake/gpu")
///     .output(Output::Files { dir: "cmp".into(), format: ResultFormat::Csv })
///     .run(&probelake_msprobe::NoProgress)
///     .await?;
/// println!("{} pair(s), {} row(s) with Result `error`", report.compared, report.errors);
/// # Ok(()) }
/// ```
pub struct CompareJob {
    target: String,
    golden: String,
    storage: StorageOptions,
    mode: Option<CompareMode>,
    units: UnitChoice,
    output: Output,
    engine: Arc<dyn Engine>,
    mappings: Mappings,
}

/// What a [`CompareJob`] did.
#[derive(Debug)]
pub struct CompareReport {
    /// Unit pairs compared.
    pub compared: usize,
    /// Units (or folders) left without a partner, a line each.
    pub skipped: Vec<String>,
    /// How the units were paired, and what was skipped, in lines for the user.
    pub notes: Vec<String>,
    /// Rows whose Result is `error`.
    pub errors: usize,
    /// The files written, in order.
    pub files: Vec<PathBuf>,
    /// The tables, with [`Output::Tables`].
    pub tables: Vec<UnitComparison>,
}

impl CompareJob {
    /// Compares `target` (the NPU side) with `golden` (the bench side): datasets, msprobe dump
    /// folders or dump.json files (msprobe files are read in place and compared in memory).
    pub fn new(target: impl Into<String>, golden: impl Into<String>) -> Self {
        CompareJob {
            target: target.into(),
            golden: golden.into(),
            storage: StorageOptions::default(),
            mode: None,
            units: UnitChoice::default(),
            output: Output::Tables,
            engine: Arc::new(LocalEngine),
            mappings: Mappings::default(),
        }
    }

    /// How S3 inputs are reached.
    pub fn storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The mode; `None` (the default) detects it from the dumps, as msprobe does.
    pub fn mode(mut self, mode: Option<CompareMode>) -> Self {
        self.mode = mode;
        self
    }

    /// Which units are compared with which ([`crate::runs::pairing::pair_units`]).
    pub fn units(mut self, units: UnitChoice) -> Self {
        self.units = units;
        self
    }

    /// Where the tables go (by default [`Output::Tables`]).
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// msprobe's `-dm` and `-cm`, for runs whose modules or APIs are named otherwise
    /// ([`Mappings`]; none by default).
    pub fn mappings(mut self, mappings: Mappings) -> Self {
        self.mappings = mappings;
        self
    }

    /// Where the plans over two datasets run (by default in this process, [`LocalEngine`]).
    pub fn engine(mut self, engine: Arc<dyn Engine>) -> Self {
        self.engine = engine;
        self
    }

    /// Runs the comparison, reporting progress in the target's dump.json bytes.
    pub async fn run(self, progress: &dyn Progress) -> Result<CompareReport, JobError> {
        let runs = RunPair::open_in_place(&self.target, &self.golden, &self.storage).await?;
        let pairing = runs.pair(&self.units)?;
        let notes = pairing_notes(&pairing);
        let pairs = &pairing.pairs;
        let target_is_file = runs.target_is_file();
        let options = CompareOptions { mode: self.mode, mappings: Arc::new(self.mappings) };
        let comparison = Arc::new(Comparison::of_runs(&runs.target, &runs.golden, options).with_engine(self.engine));
        // Files are written as each table is built; tables are collected whole.
        let mut files = match &self.output {
            Output::Files { dir, format } => {
                Some(ResultFiles::new(dir, *format, needs_folders(pairs), local_timestamp()))
            }
            Output::Tables => None,
        };
        let mut tables = Vec::new();
        progress.start(pairs.iter().map(|p| p.target.counts.json_bytes).sum(), pairs.len());
        let mut queue = CompareQueue::new(Arc::clone(&comparison), pairs);
        let mut failure = None;
        while let Some((pair, planned)) = queue.next().await {
            let (t, g) = (pair.target, pair.golden);
            let compare_error = |source| JobError::Compare { what: pair_text(t, g), source: Box::new(source) };
            // A failure to build the rows is the pair's; one to write them, the files'.
            let files_error = |e| match e {
                ResultError::Compare(source) => JobError::Compare { what: pair_text(t, g), source },
                e => JobError::Files(e),
            };
            let naming = Naming::of(pair, pairing.rule, target_is_file);
            let added = match (planned, files.as_mut()) {
                (Err(e), _) => Err(compare_error(e)),
                (Ok(planned), Some(files)) => files.add(planned, naming).map_err(files_error),
                (Ok(planned), None) => planned.collect().map_err(compare_error).map(|table| tables.push(table)),
            };
            if let Err(e) = added {
                // msprobe files read in place name their own damage; a dataset's is looked for.
                let damaged = async {
                    let (Ok(target), Ok(golden)) = (runs.target.lake(), runs.golden.lake()) else { return None };
                    match target.first_damaged_file(std::slice::from_ref(t)).await {
                        Some(damage) => Some(damage),
                        None => golden.first_damaged_file(std::slice::from_ref(g)).await,
                    }
                };
                failure = Some(e.naming_damage(damaged).await);
                break;
            }
            progress.advance(t.counts.json_bytes);
        }
        progress.finish();
        if let Some(e) = failure {
            if let Some(files) = files {
                files.rollback();
            }
            return Err(e);
        }
        // The files count the `error` rows of what they were written from.
        let (errors, files) = match files {
            Some(files) => files.finish(),
            None => (tables.iter().map(|t| t.rows_with_result("error")).sum(), Vec::new()),
        };
        Ok(CompareReport { compared: pairs.len(), skipped: pairing.skipped.clone(), notes, errors, files, tables })
    }
}
