//! A comparison's physical plans, planned once per shape of unit pair and pointed at the files
//! of every later pair of that shape.
//!
//! Planning a unit pair costs the same CPU whatever its size (its statements parsed, optimised
//! and planned), which with many small units is much of a comparison's time.
//! In a pair's session the unit filters of the SQL become file pruning inside the scans, so the
//! plans of two pairs differ only in the files their scans read. The first pair of each shape
//! (how many file groups each scan reads) is planned from SQL; every later pair of that shape
//! takes those plans with each scan's file groups replaced by its own.
//!
//! A plan is only kept when each of its scans reads exactly the file groups [`PairFiles`]
//! computes for its table (none split into byte ranges, none left out), so that replacing them
//! gives the plan the pair's own SQL would have planned, up to choices made from statistics
//! (join sides, partition counts), which change speed and not results.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::ExecutionPlan;
use probelake_format::schema::schema_of;
use probelake_format::{CommitRecord, Lake, Table};

use crate::error::CompareError;
use probelake_query::session::{run_store_url, PlanTask, RunSession};
use probelake_query::table::LakeTable;
use probelake_query::QueryError;

/// The tables a comparison's plans scan.
const SCANNED: [Table; 2] = [Table::Dump, Table::Source];

/// The file groups each scan of one unit pair's plans reads.
pub(crate) struct PairFiles {
    scans: Vec<Scan>,
}

struct Scan {
    store: ObjectStoreUrl,
    table: Table,
    groups: Vec<FileGroup>,
}

impl PairFiles {
    /// The files of `runs` (the target's unit, then the golden's), grouped as a session of
    /// `target_partitions` groups them.
    pub(crate) fn new(runs: [(&Lake, &CommitRecord); 2], target_partitions: usize) -> Result<Self, CompareError> {
        let mut scans = Vec::with_capacity(runs.len() * SCANNED.len());
        for (i, (lake, record)) in runs.into_iter().enumerate() {
            let store = run_store_url(i)?;
            for table in SCANNED {
                let provider = LakeTable::new(lake, store.clone(), table, std::slice::from_ref(record));
                let (groups, _) = provider.file_groups(&[], target_partitions).map_err(QueryError::from)?;
                scans.push(Scan { store: store.clone(), table, groups });
            }
        }
        Ok(PairFiles { scans })
    }

    fn shape(&self) -> Shape {
        self.scans.iter().map(|s| s.groups.len()).collect()
    }

    /// Which of the pair's scans `config` stands for: its run by store, its table by file schema.
    fn position_of(&self, config: &FileScanConfig) -> Option<usize> {
        let fields = config.file_schema().fields();
        self.scans.iter().position(|s| s.store == config.object_store_url && schema_of(s.table).fields() == fields)
    }

    /// The groups of the scan `config` stands for.
    fn scan_of(&self, config: &FileScanConfig) -> Option<&Scan> {
        self.scans.get(self.position_of(config)?)
    }
}

/// How many file groups each scan of a pair's plans reads, in [`PairFiles`] order.
type Shape = Vec<usize>;

/// One plan of a pair: re-bound from a kept one, or being planned.
pub(crate) enum PlanHandle {
    Ready(Arc<dyn ExecutionPlan>),
    Planning(PlanTask),
}

impl PlanHandle {
    /// Whether the plan is being planned from SQL (and so may be kept afterwards).
    pub(crate) fn is_planning(&self) -> bool {
        matches!(self, PlanHandle::Planning(_))
    }

    /// The plan, once made; `what` names it if its SQL held no statement.
    pub(crate) async fn plan(self, what: &str) -> Result<Arc<dyn ExecutionPlan>, CompareError> {
        match self {
            PlanHandle::Ready(plan) => Ok(plan),
            PlanHandle::Planning(task) => {
                task.plan().await?.ok_or_else(|| CompareError::Schema(format!("no statement in {what}")))
            }
        }
    }
}

/// The plans made so far, by pair shape.
#[derive(Debug, Default)]
pub(crate) struct PreparedPlans {
    by_shape: Mutex<HashMap<Shape, Vec<Arc<dyn ExecutionPlan>>>>,
    planned: AtomicUsize,
    never_keep: bool,
}

impl PreparedPlans {
    /// Plans that are never kept: every pair is planned from SQL.
    pub(crate) fn never_kept() -> Self {
        PreparedPlans { never_keep: true, ..Default::default() }
    }

    /// The physical plans of `sqls` for the pair whose files are `files`, in `session` (a
    /// session over that pair alone): re-bound from a kept plan of the same shape, or being
    /// planned, each to be awaited on its own. Plans are kept by shape alone, so `sqls` must be
    /// the same statements for every pair but for their unit filters, as a
    /// [`Comparison`](super::Comparison)'s are; a freshly planned set is offered back with
    /// [`PreparedPlans::keep`].
    pub(crate) fn start(
        &self,
        session: &RunSession,
        files: &PairFiles,
        sqls: &[&str],
    ) -> Result<Vec<PlanHandle>, CompareError> {
        let shape = files.shape();
        let kept = self.by_shape.lock().ok().and_then(|by_shape| by_shape.get(&shape).cloned());
        if let Some(kept) = kept {
            let rebound: Option<Vec<_>> = kept.iter().map(|plan| rebind(plan, files)).collect::<Result<_, _>>()?;
            if let Some(plans) = rebound {
                return Ok(plans.into_iter().map(PlanHandle::Ready).collect());
            }
        }
        self.planned.fetch_add(1, Ordering::Relaxed);
        Ok(session.spawn_physical_plans(sqls).into_iter().map(PlanHandle::Planning).collect())
    }

    /// Keeps `plans`, planned for the pair whose files are `files`, for later pairs of its
    /// shape (when none are kept for it yet and they read exactly its files). Plans that ran
    /// are kept reset: a plan holds its state (a join's build side) until then.
    pub(crate) fn keep(&self, files: &PairFiles, plans: &[Arc<dyn ExecutionPlan>]) {
        if self.never_keep || !reads_exactly(plans, files) {
            return;
        }
        let fresh = plans.iter().map(|p| reset_plan_states(Arc::clone(p))).collect::<Result<Vec<_>, _>>();
        if let (Ok(fresh), Ok(mut by_shape)) = (fresh, self.by_shape.lock()) {
            by_shape.entry(files.shape()).or_insert(fresh);
        }
    }

    /// How many pairs were planned from SQL (the others re-bound a kept plan).
    pub(crate) fn planned(&self) -> usize {
        self.planned.load(Ordering::Relaxed)
    }
}

fn file_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<&FileScanConfig> {
    plan.downcast_ref::<DataSourceExec>()?.data_source().downcast_ref::<FileScanConfig>()
}

/// `plan` with every scan reading `files`' groups for its table; `None` when a scan does not
/// fit them (another table, or another number of groups).
fn rebind(plan: &Arc<dyn ExecutionPlan>, files: &PairFiles) -> Result<Option<Arc<dyn ExecutionPlan>>, CompareError> {
    let mut fits = true;
    let rebound = Arc::clone(plan)
        .transform_up(|node| {
            let Some(config) = file_scan(&node) else { return Ok(Transformed::no(node)) };
            match files.scan_of(config) {
                Some(scan) if scan.groups.len() == config.file_groups.len() => {
                    let mut config = config.clone();
                    config.file_groups = scan.groups.clone();
                    Ok(Transformed::yes(DataSourceExec::from_data_source(config) as Arc<dyn ExecutionPlan>))
                }
                _ => {
                    fits = false;
                    Ok(Transformed::new(node, false, TreeNodeRecursion::Stop))
                }
            }
        })
        .map_err(QueryError::from)?
        .data;
    // Every operator anew: one that ran keeps state (a join's build side, a sort's buffers).
    Ok(if fits { Some(reset_plan_states(rebound).map_err(QueryError::from)?) } else { None })
}

/// Whether the scans of `plans` read exactly `files`: each scan the groups computed for its
/// table, file for file and whole, and every table with files scanned by one of the plans.
fn reads_exactly(plans: &[Arc<dyn ExecutionPlan>], files: &PairFiles) -> bool {
    let mut exact = true;
    let mut scanned = vec![false; files.scans.len()];
    for plan in plans {
        let walked = plan.apply(|node| {
            if let Some(config) = file_scan(node) {
                let same = files.position_of(config).is_some_and(|k| {
                    scanned[k] = true;
                    same_files(&files.scans[k].groups, &config.file_groups)
                });
                if !same {
                    exact = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        exact &= walked.is_ok();
    }
    let all_scanned = files.scans.iter().zip(&scanned).all(|(s, &scanned)| scanned || s.groups.is_empty());
    exact && all_scanned
}

fn same_files(a: &[FileGroup], b: &[FileGroup]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.len() == b.len()
                && a.iter().zip(b.iter()).all(|(a, b)| {
                    a.range.is_none() && b.range.is_none() && a.object_meta.location == b.object_meta.location
                })
        })
}
