//! One comparison of two runs' units: [`Comparison`] opens both sides' plans and files once and
//! compares unit pairs; [`compare_unit`] compares one pair; [`UnitComparison`] is one pair's
//! table, msprobe's CSV cell for cell.

pub(crate) mod planned;

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::runtime::SpawnedTask;
use datafusion::error::DataFusionError;
use probelake_format::{CommitRecord, Lake, Unit};
use probelake_msprobe::{MsprobeError, Origin, UnitTables};
use probelake_query::session::{Engine, LocalEngine, Run, RunSession};
use probelake_query::QueryError;

use crate::comparison::planned::PlannedUnit;
use crate::error::CompareError;
use crate::join::load::{files_from_batches, read_files, read_tensors, tensors_from_batches, DumpFile, Stacks};
use crate::join::mapping::{Mappings, TargetKey};
use crate::join::plan::PlanOutput;
use crate::join::prepared::{PairFiles, PreparedPlans};
use crate::mode::CompareMode;
use crate::runs::{DumpTree, OpenedRun, RunSource};
use crate::table::build::header;
use crate::table::cells::Rows;
use crate::table::csv;
use probelake_format::output_tree::Parts;

/// How to compare.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// The mode; `None` detects it from the dumps as msprobe does.
    pub mode: Option<CompareMode>,
    /// msprobe's `-dm` and `-cm` (none by default).
    pub mappings: Arc<Mappings>,
}

/// msprobe's result table for one unit.
#[derive(Debug, Clone)]
pub struct UnitComparison {
    /// The target unit that was compared.
    pub unit: Unit,
    /// The mode used.
    pub mode: CompareMode,
    /// Column names, as msprobe's CSV header.
    pub header: Vec<String>,
    /// Rows, each cell exactly as msprobe's CSV holds it (unquoted), as wide as `header`.
    pub rows: Rows,
    /// `(inner_step, pid)` of each target dump file compared, in pairing order (msprobe names
    /// a step folder's result after its `proc{pid}` folder).
    pub target_files: Vec<Origin>,
}

impl UnitComparison {
    /// Writes the table as `msprobe compare` writes its CSV (pandas `to_csv(index=False)`).
    /// A large table is rendered on every core while earlier rows are written.
    pub fn write_csv(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(&csv::header_line(&self.header))?;
        csv::write_rows(&self.rows, &mut csv::Whole(out))
    }

    /// Writes the table as [`write_csv`](Self::write_csv) does, into files of at most
    /// [`csv::MAX_CSV_ROWS`] rows each, as msprobe cuts a long table.
    pub(crate) fn write_csv_files(&self, parts: &mut Parts) -> std::io::Result<()> {
        csv::write_rows(&self.rows, &mut csv::CutFiles::as_msprobe(parts, &self.header)?)
    }

    /// The rows whose `Result` is `verdict` (`pass`, `warning`, `error`, …).
    pub fn rows_with_result(&self, verdict: &str) -> usize {
        rows_with_result(&self.rows, result_column(&self.header), verdict)
    }
}

/// Where `Result` is in a table's header.
pub(crate) fn result_column(header: &[String]) -> Option<usize> {
    header.iter().position(|h| h == "Result")
}

/// The rows of `rows` whose cell `result` (the `Result` column) is `verdict`.
pub(crate) fn rows_with_result(rows: &Rows, result: Option<usize>, verdict: &str) -> usize {
    result.map_or(0, |c| rows.iter().filter(|r| r.get(c) == Some(verdict)).count())
}

fn unit_text(u: &Unit) -> String {
    format!("step={}/stage={}/rank={}", u.step, u.stage, u.rank)
}

/// The mode of one side, from its task and whether any compared leaf has an md5 field.
fn side_mode(file: Option<&DumpFile>, has_md5: bool) -> Result<CompareMode, CompareError> {
    match file.and_then(|f| f.task.as_deref()) {
        Some("tensor") => Ok(CompareMode::Tensor),
        Some("statistics") | None => Ok(if has_md5 { CompareMode::Md5 } else { CompareMode::Statistics }),
        Some(other) => Err(CompareError::Unsupported(other.to_owned())),
    }
}

/// The context of both sides' dump files: the target's with its stack cells.
async fn read_contexts(
    target: Lake,
    t: CommitRecord,
    golden: Lake,
    g: CommitRecord,
) -> Result<[BTreeMap<Origin, DumpFile>; 2], CompareError> {
    let started = std::time::Instant::now();
    let read = [read_files(&target, &t, Stacks::Cells).await?, read_files(&golden, &g, Stacks::Skip).await?];
    tracing::debug!(unit = %t.unit, elapsed = ?started.elapsed(), "compare context read");
    Ok(read)
}

/// Compares one unit of `target` (NPU side) with the same unit of `golden` (bench side).
///
/// For one pair; to compare many pairs of two datasets, a [`Comparison`] plans them faster.
/// `t` and `g` are committed units of the two datasets (from [`Lake::units`]).
///
/// ```no_run
/// # async fn demo(target: probelake_format::Lake, golden: probelake_format::Lake) -> Result<(), Box<dyn std::error::Error>> {
/// use probelake_compare::{compare_unit, CompareOptions};
///
/// let (t, g) = (&target.units().await?[0], &golden.units().await?[0]);
/// compare_unit(&target, t, &golden, g, &CompareOptions::default()).await?.write_csv(&mut std::io::stdout())?;
/// # Ok(()) }
/// ```
pub async fn compare_unit(
    target: &Lake,
    t: &CommitRecord,
    golden: &Lake,
    g: &CommitRecord,
    opts: &CompareOptions,
) -> Result<UnitComparison, CompareError> {
    Comparison::new(target.clone(), golden.clone(), opts.clone()).unit(t, g).await
}

/// The comparison of two datasets, unit pair by unit pair.
///
/// A unit can hold several dump files (inner steps, processes); they are paired by position
/// in (inner_step, pid) order, as msprobe pairs rank folders, and their rows concatenated.
///
/// Each pair's plan runs in a session over that pair and nothing else: a session over the
/// whole datasets made every scan weigh every file, so a unit's cost grew with the dataset.
/// Plans are made once per shape of pair and
/// reused for the pairs that follow (`prepared.rs`). Pairs may be compared at once, from
/// several tasks sharing one `Comparison`.
///
/// ```no_run
/// # async fn demo(target: probelake_format::Lake, golden: probelake_format::Lake) -> Result<(), Box<dyn std::error::Error>> {
/// use probelake_compare::{CompareOptions, Comparison};
///
/// let (t_units, g_units) = (target.units().await?, golden.units().await?);
/// let comparison = Comparison::new(target, golden, CompareOptions::default());
/// for (t, g) in t_units.iter().zip(&g_units) {
///     comparison.unit(t, g).await?.write_csv(&mut std::io::stdout())?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Comparison {
    target: RunSource,
    golden: RunSource,
    opts: CompareOptions,
    plans: PreparedPlans,
    engine: Arc<dyn Engine>,
}

impl Comparison {
    /// The comparison of `target` (NPU side) with `golden` (bench side).
    pub fn new(target: Lake, golden: Lake, opts: CompareOptions) -> Self {
        Comparison::of_sources(RunSource::Dataset(target), RunSource::Dataset(golden), opts)
    }

    /// The comparison of two opened runs ([`RunPair`](crate::runs::RunPair)): two datasets, or two
    /// runs of msprobe files read in place, whose unit pairs are read into memory and compared
    /// there, without a dataset or a query plan (`in_memory.rs`), to the same rows.
    pub fn of_runs(target: &OpenedRun, golden: &OpenedRun, opts: CompareOptions) -> Self {
        Comparison::of_sources(target.source.clone(), golden.source.clone(), opts)
    }

    fn of_sources(target: RunSource, golden: RunSource, opts: CompareOptions) -> Self {
        Comparison { target, golden, opts, plans: PreparedPlans::default(), engine: Arc::new(LocalEngine) }
    }

    /// The comparison with its plans run by `engine`. On a cluster each unit pair's four
    /// queries (both sides' leaves, their dump files, the join) run there as jobs of their own,
    /// planned anew for every pair; the rows and cells are built here, as locally. Runs of
    /// msprobe files read in place are compared here whatever the engine.
    pub fn with_engine(mut self, engine: Arc<dyn Engine>) -> Self {
        // A remote plan is one node that holds the job, not scans to point at other files.
        self.plans = if engine.is_remote() { PreparedPlans::never_kept() } else { PreparedPlans::default() };
        self.engine = engine;
        self
    }

    /// How many unit pairs so far needed plans of their own (pairs of one shape share them).
    pub fn pairs_planned(&self) -> usize {
        self.plans.planned()
    }

    /// Compares unit `t` of the target with unit `g` of the golden run: committed units of the
    /// two datasets (from [`Lake::units`]).
    pub async fn unit(&self, t: &CommitRecord, g: &CommitRecord) -> Result<UnitComparison, CompareError> {
        self.plan_unit(t, g).await?.collect()
    }

    /// Runs the plans of unit `t` of the target and unit `g` of the golden run and reads their
    /// context; the rows are built when the [`PlannedUnit`] is written
    /// ([`PlannedUnit::write_csv`], a few thousand rows at a time) or collected.
    pub async fn plan_unit(&self, t: &CommitRecord, g: &CommitRecord) -> Result<PlannedUnit, CompareError> {
        match (&self.target, &self.golden) {
            (RunSource::Dataset(target), RunSource::Dataset(golden)) => self.plan_datasets(target, golden, t, g).await,
            (RunSource::Dumps(target), RunSource::Dumps(golden)) => self.plan_in_memory(target, golden, t, g).await,
            _ => Err(CompareError::MixedSources),
        }
    }

    async fn plan_datasets(
        &self,
        target: &Lake,
        golden: &Lake,
        t: &CommitRecord,
        g: &CommitRecord,
    ) -> Result<PlannedUnit, CompareError> {
        let started = std::time::Instant::now();
        let runs = vec![
            Run::new("target", target.clone()).with_units(vec![t.clone()]),
            Run::new("golden", golden.clone()).with_units(vec![g.clone()]),
        ];
        // The dump files' context (tasks, stacks) does not depend on the plan: it is read beside it.
        let context = SpawnedTask::spawn(read_contexts(target.clone(), t.clone(), golden.clone(), g.clone()));
        let session = RunSession::open_on(runs, false, self.engine.as_ref()).await?;
        {
            let state = session.context().state_ref();
            let mut state = state.write();
            let optimizer = &mut state.config_mut().options_mut().optimizer;
            // Kept plans run again for other pairs, and DataFusion cannot reset a dynamic filter.
            optimizer.enable_dynamic_filter_pushdown = false;
            // The join sides as written: without statistics for the small file list, the
            // optimizer built the hash table from a side's every leaf (all its columns
            // gathered into one batch) and probed it with the file list.
            optimizer.join_reordering = false;
            // The file list is a handful of rows: collected whole, not hashed to partitions by
            // its (inner_step, pid), which sent all of a one-file unit's leaves to one core.
            optimizer.repartition_joins = false;
        }
        let mappings = &self.opts.mappings;
        if mappings.renames() {
            if self.engine.is_remote() {
                return Err(CompareError::MappingsOnCluster);
            }
            let key = TargetKey::new(Arc::clone(mappings));
            session.context().register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(key));
        }
        let files = PairFiles::new([(target, t), (golden, g)], session.context().state().config().target_partitions())?;
        let plan = crate::join::plan::run_in(&session, &files, &self.plans, &t.unit, &g.unit, mappings).await?;
        let planned = started.elapsed();
        let [tcontext, gcontext] = context
            .join_unwind()
            .await
            .map_err(|e| QueryError::from(DataFusionError::ExecutionJoin(Box::new(e))))??;
        tracing::debug!(unit = %t.unit, ?planned, total = ?started.elapsed(), "compare planned");
        let tensors = TensorSource::Datasets([(target, t), (golden, g)]);
        self.finish_unit(&t.unit, &g.unit, plan, [tcontext, gcontext], tensors).await
    }

    /// Reads both units into memory, each on a core of its own, and joins their leaves there.
    async fn plan_in_memory(
        &self,
        target: &Arc<DumpTree>,
        golden: &Arc<DumpTree>,
        t: &CommitRecord,
        g: &CommitRecord,
    ) -> Result<PlannedUnit, CompareError> {
        let started = std::time::Instant::now();
        let trees = [(Arc::clone(target), t.unit.clone()), (Arc::clone(golden), g.unit.clone())];
        let mappings = Arc::clone(&self.opts.mappings);
        let read = SpawnedTask::spawn_blocking(move || {
            let tables = crate::threads::map_scoped(&trees, |(tree, unit)| tree.read(unit));
            let [t_tables, g_tables] =
                <[_; 2]>::try_from(tables).map_err(|_| CompareError::Schema("two sides".into()))?;
            let tables = [t_tables.map_err(read_error)?, g_tables.map_err(read_error)?];
            // The target's stack.json is read and its cells printed on one core while the
            // leaves are joined on the other: read with the dump files, it was the longer
            // side's last tenth. The golden side's is not read (msprobe prints none).
            let (plan, contexts) = std::thread::scope(|scope| {
                let contexts = scope.spawn(|| {
                    let [t, g] = &tables;
                    let (tree, unit) = &trees[0];
                    let stacks = tree.read_stacks(unit).map_err(read_error)?;
                    let mut t_files = files_from_batches(std::slice::from_ref(&t.source), stacks.stack.as_slice())?;
                    for origin in &stacks.files {
                        if let Some(file) = t_files.get_mut(origin) {
                            file.has_stack = true;
                        }
                    }
                    Ok::<_, CompareError>([t_files, files_from_batches(std::slice::from_ref(&g.source), &[])?])
                });
                let plan = crate::join::in_memory::plan_in_memory(&tables[0], &tables[1], &mappings);
                let contexts =
                    contexts.join().map_err(|_| CompareError::Stopped("reading the dump files' context".into()));
                (plan, contexts)
            });
            Ok::<_, CompareError>((plan?, contexts??, tables))
        });
        let (plan, contexts, tables) =
            read.join_unwind().await.map_err(|e| QueryError::from(DataFusionError::ExecutionJoin(Box::new(e))))??;
        tracing::debug!(unit = %t.unit, elapsed = ?started.elapsed(), "compare read and joined in memory");
        self.finish_unit(&t.unit, &g.unit, plan, contexts, TensorSource::Memory(&tables)).await
    }

    /// The unit pair's table from its plans' output and both sides' context: the mode, the
    /// header and, in tensor mode, the rows (built as each file pair's tensors are read).
    async fn finish_unit(
        &self,
        t: &Unit,
        g: &Unit,
        plan: PlanOutput,
        [tcontext, gcontext]: [BTreeMap<Origin, DumpFile>; 2],
        tensors: TensorSource<'_>,
    ) -> Result<PlannedUnit, CompareError> {
        let (tfiles, gfiles) = (&plan.target_files, &plan.golden_files);
        if tfiles.is_empty() {
            return Err(CompareError::NoData { side: "target", unit: unit_text(t) });
        }
        if gfiles.is_empty() {
            return Err(CompareError::NoData { side: "golden", unit: unit_text(g) });
        }
        if tfiles.len() != gfiles.len() {
            return Err(CompareError::FileCount { target: tfiles.len(), golden: gfiles.len() });
        }
        // The first pair's mode holds for the unit; every pair must agree with itself.
        let mut mode = self.opts.mode;
        for (tfile, gfile) in tfiles.iter().zip(gfiles) {
            let tm = side_mode(tcontext.get(&tfile.key), tfile.has_md5)?;
            let gm = side_mode(gcontext.get(&gfile.key), gfile.has_md5)?;
            if tm != gm {
                return Err(CompareError::ModeMismatch { target: format!("{tm:?}"), golden: format!("{gm:?}") });
            }
            mode.get_or_insert(tm);
        }
        let mode = mode.unwrap_or(CompareMode::Statistics);
        if self.opts.mappings.walks() && mode != CompareMode::Tensor {
            return Err(CompareError::FuzzyMatchMode(mode));
        }
        let stack = tfiles.iter().any(|f| tcontext.get(&f.key).is_some_and(|c| c.has_stack));
        let header = header(mode, stack);
        let target_files = tfiles.iter().map(|f| f.key).collect();
        let golden_files: Vec<Origin> = gfiles.iter().map(|f| f.key).collect();
        let width = header.len();
        let mut unit =
            PlannedUnit { unit: t.clone(), mode, header, stack, target_files, plan, context: tcontext, built: None };
        // Tensor mode builds a file pair's rows as soon as its tensors are read, so that memory
        // holds one pair's tensors at a time.
        if mode == CompareMode::Tensor {
            let mut rows = Rows::new(width);
            for (file_no, (&tkey, &gkey)) in (1i64..).zip(unit.target_files.iter().zip(&golden_files)) {
                let tensors = tensors.read([tkey, gkey]).await?;
                unit.build_file(file_no, [&tensors[0], &tensors[1]], Ok, |chunk| {
                    rows.append(chunk);
                    Ok(())
                })?;
            }
            unit.built = Some(rows);
        }
        Ok(unit)
    }
}

fn read_error(e: MsprobeError) -> CompareError {
    CompareError::Read(Box::new(e))
}

/// Where a unit pair's tensors (tensor mode) are read from.
enum TensorSource<'a> {
    /// The `tensor` tables of two datasets' units.
    Datasets([(&'a Lake, &'a CommitRecord); 2]),
    /// The units' tables in memory.
    Memory(&'a [UnitTables; 2]),
}

impl TensorSource<'_> {
    /// The tensors of the target's dump file `keys[0]` and the golden's `keys[1]`.
    async fn read(&self, keys: [Origin; 2]) -> Result<[crate::join::load::Tensors; 2], CompareError> {
        match self {
            TensorSource::Datasets([(tl, t), (gl, g)]) => {
                Ok([read_tensors(tl, t, keys[0]).await?, read_tensors(gl, g, keys[1]).await?])
            }
            TensorSource::Memory([t, g]) => {
                Ok([tensors_from_batches(&t.tensor, keys[0])?, tensors_from_batches(&g.tensor, keys[1])?])
            }
        }
    }
}
