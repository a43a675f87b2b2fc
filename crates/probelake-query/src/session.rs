//! A DataFusion session in which every run is a schema.
//!
//! ```text
//! probelake sql --run base=lake/a --run new=lake/b
//!   base.dump  base.stack  base.construct  base.tensor  base.source
//!   new.dump   new.stack   …
//!   dump, stack, …   (the first run is also the default schema)
//! ```

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider};
use datafusion::common::runtime::SpawnedTask;
use datafusion::error::DataFusionError;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{DataFrame, SQLOptions, SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use probelake_format::{CommitRecord, Lake, Table};

use crate::error::{QueryError, Result};
use crate::table::{LakeTable, RunUnits};
use crate::udf::first_divergence::FirstDivergenceFunction;

/// The catalog the runs live in.
pub const CATALOG: &str = "probelake";

/// One run given to a session.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its schema name (`[a-z_][a-z0-9_]*`).
    pub name: String,
    /// Its dataset.
    pub lake: Lake,
    /// The units the session shows; `None` lists the dataset's committed units.
    units: Option<Vec<CommitRecord>>,
}

impl Run {
    /// A run named `name`.
    pub fn new(name: impl Into<String>, lake: Lake) -> Self {
        Run { name: name.into(), lake, units: None }
    }

    /// The run restricted to `units`, committed units of its dataset (from
    /// [`Lake::units`]), without listing the dataset again. A query over one unit of a large
    /// dataset then plans over that unit's files only, not over every file of the dataset.
    pub fn with_units(mut self, units: Vec<CommitRecord>) -> Self {
        self.units = Some(units);
        self
    }
}

/// What a session knows about one of its runs.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Schema name.
    pub name: String,
    /// Where the dataset is.
    pub location: String,
    /// Committed units.
    pub units: usize,
    /// Data files per table.
    pub files: Vec<(Table, usize)>,
}

/// Where a session's plans run: in this process ([`LocalEngine`]), or on a cluster (the
/// `probelake-cluster` crate's Ballista engine). Every session is built the same way over
/// either: the same configuration, functions and tables; the engine supplies the state it
/// starts from.
pub trait Engine: std::fmt::Debug + Send + Sync {
    /// The state a session starts from, for `config` (the session's settings). The session
    /// registers probelake's functions and its runs' tables into it afterwards.
    fn state(&self, config: SessionConfig) -> Result<SessionState>;

    /// Whether plans run in other processes. Their scans then name each dataset's store by
    /// its location ([`Lake::store_location`]: `file:///`, `s3://bucket`), which every process can
    /// open, rather than by the per-run name (`probelake://run0`) only this process registers.
    fn is_remote(&self) -> bool;
}

/// Plans run in this process, on its cores: DataFusion as it comes.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalEngine;

impl Engine for LocalEngine {
    fn state(&self, config: SessionConfig) -> Result<SessionState> {
        Ok(SessionStateBuilder::new().with_config(config).with_default_features().build())
    }

    fn is_remote(&self) -> bool {
        false
    }
}

/// A SQL session over runs; read-only unless built with writes allowed.
pub struct RunSession {
    ctx: SessionContext,
    runs: Vec<RunSummary>,
    /// Each run's name, dataset and the units its tables show: to name a damaged file after a
    /// query fails on one ([`RunSession::first_damaged_file`]), and for `first_divergence`.
    datasets: Vec<(String, RunUnits)>,
    /// Whether plans run on a cluster.
    remote: bool,
    allow_write: bool,
}

/// The object store URL the `i`th run of a session is registered under (its scans name it).
pub fn run_store_url(i: usize) -> Result<ObjectStoreUrl> {
    Ok(ObjectStoreUrl::parse(format!("probelake://run{i}"))?)
}

/// Checks that `name` can be an unquoted SQL schema name.
pub fn check_run_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(QueryError::RunName {
            name: name.into(),
            message:
                "use lowercase letters, digits and `_`, starting with a letter (SQL folds unquoted names to lowercase)"
                    .into(),
        })
    }
}

impl RunSession {
    /// Registers every run (only committed units are listed); the first is the default schema.
    pub async fn open(runs: Vec<Run>, allow_write: bool) -> Result<Self> {
        Self::open_on(runs, allow_write, &LocalEngine).await
    }

    /// [`RunSession::open`] with plans run by `engine`.
    pub async fn open_on(runs: Vec<Run>, allow_write: bool, engine: &dyn Engine) -> Result<Self> {
        let default_schema = runs.first().map_or("public".to_string(), |r| r.name.clone());
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(CATALOG, &default_schema)
            // A dataset is many small files (one per unit and api family); opening each one's
            // page index cost more than it saved (docs/performance.md, "Parquet settings"), and
            // probelake writes no bloom filters. `SET` turns either back on for a query.
            .set_bool("datafusion.execution.parquet.enable_page_index", false)
            .set_bool("datafusion.execution.parquet.bloom_filter_on_read", false);
        // Functions after the engine's state: a Ballista state is rebuilt with Ballista's list.
        let ctx = SessionContext::new_with_state(engine.state(config)?);
        for f in crate::udf::functions() {
            ctx.register_udf(f.as_ref().clone());
        }
        let catalog = Arc::new(MemoryCatalogProvider::new());
        ctx.register_catalog(CATALOG, Arc::clone(&catalog) as Arc<dyn CatalogProvider>);
        let mut summaries = Vec::new();
        let mut datasets = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            check_run_name(&run.name)?;
            if summaries.iter().any(|s: &RunSummary| s.name == run.name) {
                return Err(QueryError::RunName { name: run.name.clone(), message: "given twice".into() });
            }
            let url = run_store_url(i)?;
            ctx.register_object_store(url.as_ref(), Arc::clone(run.lake.store()));
            let units = match &run.units {
                Some(units) => units.clone(),
                None => run.lake.units().await?,
            };
            let schema = Arc::new(MemorySchemaProvider::new());
            let mut files = Vec::new();
            for table in Table::ALL {
                let provider = if engine.is_remote() {
                    LakeTable::shared(&run.lake, table, &units).ok_or_else(|| {
                        QueryError::Argument(format!(
                            "{}: a cluster reads datasets by path or s3:// URL; this one has neither",
                            run.lake.display()
                        ))
                    })??
                } else {
                    LakeTable::new(&run.lake, url.clone(), table, &units)
                };
                files.push((table, provider.file_count()));
                schema.register_table(table.name().to_string(), Arc::new(provider))?;
            }
            catalog.register_schema(&run.name, schema as Arc<dyn SchemaProvider>)?;
            summaries.push(RunSummary {
                name: run.name.clone(),
                location: run.lake.display().to_string(),
                units: units.len(),
                files,
            });
            datasets.push((run.name.clone(), RunUnits { lake: run.lake.clone(), units: Arc::new(units) }));
        }
        // It reads the datasets in this process: a cluster runs the query text instead.
        if !engine.is_remote() {
            ctx.register_udtf("first_divergence", Arc::new(FirstDivergenceFunction::new(datasets.clone())));
        }
        Ok(RunSession { ctx, runs: summaries, datasets, remote: engine.is_remote(), allow_write })
    }

    /// The first data file of the session's runs that cannot be read or does not decode, as
    /// the error that names it; `None` when all decode. DataFusion's errors for a damaged page
    /// say what is wrong but not in which file: call this after a query fails on its data. It
    /// reads every file of every run.
    pub async fn first_damaged_file(&self) -> Option<probelake_format::FormatError> {
        for (_, run) in &self.datasets {
            if let Some(damage) = run.lake.first_damaged_file(&run.units).await {
                return Some(damage);
            }
        }
        None
    }

    /// The DataFusion context, for DataFrame use.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The runs, in the order given.
    pub fn runs(&self) -> &[RunSummary] {
        &self.runs
    }

    /// The run named `name` as this process reads it, or `None` when there is none or plans
    /// run on a cluster.
    pub fn local_run(&self, name: &str) -> Option<&RunUnits> {
        if self.remote {
            return None;
        }
        self.datasets.iter().find(|(n, _)| n == name).map(|(_, run)| run)
    }

    fn options(&self) -> SQLOptions {
        SQLOptions::new().with_allow_ddl(self.allow_write).with_allow_dml(self.allow_write).with_allow_statements(true)
    }

    /// Plans every statement of `sql` (`;`-separated), refusing writes unless allowed.
    ///
    /// Read-only means no DDL (`CREATE EXTERNAL TABLE`, `CREATE TABLE`, `CREATE VIEW`, `DROP`)
    /// and no DML (`INSERT`, `COPY … TO`). Nothing else can reach files outside the runs: the
    /// session resolves no paths or URLs as tables (DataFusion's URL tables stay off) and
    /// registers no file-reading table functions.
    pub async fn plan(&self, sql: &str) -> Result<Vec<LogicalPlan>> {
        plan_in(&self.ctx, self.options(), sql).await
    }

    /// Runs `sql` and returns the DataFrame of its last statement.
    pub async fn sql(&self, sql: &str) -> Result<Option<DataFrame>> {
        let mut last = None;
        for plan in self.plan(sql).await? {
            last = Some(self.ctx.execute_logical_plan(plan).await?);
        }
        Ok(last)
    }

    /// The physical plans of `sqls`, one query each, for changing before they run (`None` for
    /// no statement; of several, the last), each planned on a task of its own so that they
    /// share the cores (planning is CPU work of tens of milliseconds for a large query), and
    /// each awaited on its own, so that a plan can run while the others are being planned.
    pub fn spawn_physical_plans(&self, sqls: &[&str]) -> Vec<PlanTask> {
        sqls.iter()
            .map(|sql| {
                let (ctx, options, sql) = (self.ctx.clone(), self.options(), sql.to_string());
                PlanTask(SpawnedTask::spawn(async move { physical_plan_in(&ctx, options, &sql).await }))
            })
            .collect()
    }

    /// Runs `sql` and collects the last statement's rows.
    pub async fn collect(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        match self.sql(sql).await? {
            Some(df) => Ok(df.collect().await?),
            None => Ok(Vec::new()),
        }
    }
}

/// [`RunSession::plan`] in `ctx`, refusing what `options` does not allow.
async fn plan_in(ctx: &SessionContext, options: SQLOptions, sql: &str) -> Result<Vec<LogicalPlan>> {
    let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
    let state = ctx.state();
    let mut plans = Vec::with_capacity(statements.len());
    for statement in statements {
        let plan = state.statement_to_plan(statement).await?;
        options.verify_plan(&plan).map_err(|e| match e {
            // `message()` is the text without DataFusion's "Error during planning: ", which
            // the new `Plan` error prints again: `{e}` would say it twice.
            DataFusionError::Plan(_) => DataFusionError::Plan(format!(
                "{}; probelake sql is read-only, pass --allow-write to run it",
                e.message()
            )),
            other => other,
        })?;
        plans.push(plan);
    }
    Ok(plans)
}

/// A physical plan being made by [`RunSession::spawn_physical_plans`].
pub struct PlanTask(SpawnedTask<Result<Option<Arc<dyn ExecutionPlan>>>>);

impl PlanTask {
    /// The plan, once made (`None` for no statement).
    pub async fn plan(self) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        self.0.join_unwind().await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
    }
}

/// The physical plan of the last statement of `sql` in `ctx` (`None` for no statement).
async fn physical_plan_in(
    ctx: &SessionContext,
    options: SQLOptions,
    sql: &str,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    match plan_in(ctx, options, sql).await?.pop() {
        Some(plan) => Ok(Some(ctx.state().create_physical_plan(&plan).await?)),
        None => Ok(None),
    }
}
