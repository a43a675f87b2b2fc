//! Trend charts: how an op's (or one item's) statistics move across training steps, one line
//! per run.
//!
//! The data comes from one SQL query per run over its `dump` table. An *op*
//! (`Functional.layer_norm`) is the first output of its forward calls; an *item*
//! (`Functional.layer_norm.3.forward.output.0`) is that one leaf. When several leaves meet at a
//! step (every call of the op, every rank unless one is chosen) they are combined into what one
//! tensor holding them all would show: the largest max, the smallest min, the mean weighted by
//! element counts and the L2 norm of the norms (√Σ‖xᵢ‖²). A statistic that is NaN or infinite
//! in any of them makes the point non-finite: it is drawn as a mark at the top of its panel,
//! never as a number.

use probelake_query::RunSession;

use crate::columns::{flags, floats, ints, strings};
use crate::error::{PlotError, Result};
use crate::figure::{render, Figure};
use crate::stat::{nearest, sql_string, Stat};

/// What a trend follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// Every forward call of an op (`Functional.linear`, `Module.layers.0.Attention`): the
    /// first output of each, combined per step.
    Op(String),
    /// One leaf, by the `item` name msprobe compare uses
    /// (`Functional.linear.3.forward.output.0`).
    Item(String),
}

impl Subject {
    /// The name followed.
    pub fn name(&self) -> &str {
        match self {
            Subject::Op(n) | Subject::Item(n) => n,
        }
    }

    fn filter(&self) -> String {
        match self {
            Subject::Op(op) => {
                format!("op = {} AND direction = 'forward' AND section = 'output' AND path = '0'", sql_string(op))
            }
            Subject::Item(item) => format!("item = {}", sql_string(item)),
        }
    }

    fn column(&self) -> &'static str {
        match self {
            Subject::Op(_) => "op",
            Subject::Item(_) => "item",
        }
    }
}

/// What to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendQuery {
    /// The op or item followed.
    pub subject: Subject,
    /// One panel per statistic, in this order (at least one).
    pub stats: Vec<Stat>,
    /// Only this stage; by default every stage, one line per (run, stage) when there are
    /// several.
    pub stage: Option<String>,
    /// Only this rank; by default every rank, combined.
    pub rank: Option<i64>,
    /// A logarithmic value axis (every plotted value must be positive).
    pub log_y: bool,
}

impl TrendQuery {
    /// The norm of an op's forward output, all stages and ranks, linear axis.
    pub fn op(op: impl Into<String>) -> Self {
        TrendQuery { subject: Subject::Op(op.into()), stats: vec![Stat::Norm], stage: None, rank: None, log_y: false }
    }
}

/// One value of one statistic at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A finite number.
    Finite(f64),
    /// NaN or ±infinity in at least one of the leaves combined.
    NonFinite,
    /// No value (the leaves carry no statistics, e.g. non-tensor arguments).
    Missing,
}

/// One step of one line.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The training step.
    pub step: i64,
    /// The four statistics, indexed by [`Stat::index`].
    pub values: [Value; 4],
    /// How many leaves were combined.
    pub leaves: i64,
}

/// One line: a run (and a stage, when several are drawn).
#[derive(Debug, Clone, PartialEq)]
pub struct TrendSeries {
    /// The run's name in the session.
    pub run: String,
    /// The stage, when the chart holds several.
    pub stage: Option<String>,
    /// Its points, in step order.
    pub points: Vec<TrendPoint>,
}

impl TrendSeries {
    /// How the legend names the line.
    pub fn label(&self) -> String {
        match &self.stage {
            Some(stage) => format!("{} · {stage}", self.run),
            None => self.run.clone(),
        }
    }
}

/// The data of a trend chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    /// What was asked.
    pub query: TrendQuery,
    /// The lines, by run in session order, then stage.
    pub series: Vec<TrendSeries>,
    /// Runs of the session that hold nothing for the subject.
    pub empty_runs: Vec<String>,
}

impl Trend {
    /// Draws the chart as SVG and PNG.
    pub fn render(&self) -> Result<Figure> {
        render(&crate::trend_chart::TrendChart::new(self)?)
    }

    /// Every step of any line, sorted.
    pub fn steps(&self) -> Vec<i64> {
        let mut steps: Vec<i64> = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.step)).collect();
        steps.sort_unstable();
        steps.dedup();
        steps
    }
}

/// Fetches the data of a trend chart from every run of `session`.
///
/// # Errors
///
/// [`PlotError::NoData`] (with the nearest op or item names) when no run holds the subject
/// under the filters; [`PlotError::Query`] when the SQL fails.
pub async fn fetch_trend(session: &RunSession, query: &TrendQuery) -> Result<Trend> {
    if query.stats.is_empty() {
        return Err(PlotError::Option("ask for at least one statistic (max, min, mean, norm)".into()));
    }
    let mut rows = Vec::new();
    let mut empty_runs = Vec::new();
    for run in session.runs() {
        let found = fetch_run(session, &run.name, query).await?;
        if found.is_empty() {
            empty_runs.push(run.name.clone());
        }
        rows.extend(found);
    }
    if rows.is_empty() {
        return Err(no_data(session, query).await);
    }
    let several_stages = {
        let mut stages: Vec<&str> = rows.iter().map(|r| r.stage.as_str()).collect();
        stages.sort_unstable();
        stages.dedup();
        stages.len() > 1
    };
    let mut series: Vec<TrendSeries> = Vec::new();
    for row in rows {
        let stage = several_stages.then(|| row.stage.clone());
        match series.iter_mut().find(|s| s.run == row.run && s.stage == stage) {
            Some(s) => s.points.push(row.point),
            None => series.push(TrendSeries { run: row.run, stage, points: vec![row.point] }),
        }
    }
    for s in &mut series {
        s.points.sort_by_key(|p| p.step);
    }
    Ok(Trend { query: query.clone(), series, empty_runs })
}

struct Row {
    run: String,
    stage: String,
    point: TrendPoint,
}

fn run_sql(run: &str, query: &TrendQuery) -> String {
    let mut filter = query.subject.filter();
    if let Some(stage) = &query.stage {
        filter.push_str(&format!(" AND stage = {}", sql_string(stage)));
    }
    if let Some(rank) = query.rank {
        filter.push_str(&format!(" AND rank = {rank}"));
    }
    let bad = |c: &str| format!("bool_or(NOT coalesce(is_finite_stats({c}, {c}, {c}, {c}), true)) AS {c}_bad");
    format!(
        "SELECT step, stage, max(max) AS max, min(min) AS min,
                sum(mean * n) / sum(CASE WHEN mean IS NOT NULL THEN n END) AS mean,
                sqrt(sum(norm * norm)) AS norm, {}, {}, {}, {}, count(*) AS leaves
         FROM (SELECT step, stage, max, min, mean, norm,
                      CAST(coalesce(shape_numel(shape), 1) AS DOUBLE) AS n
               FROM {run}.dump WHERE {filter}) AS d
         GROUP BY step, stage ORDER BY step, stage",
        bad("max"),
        bad("min"),
        bad("mean"),
        bad("norm")
    )
}

async fn fetch_run(session: &RunSession, run: &str, query: &TrendQuery) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for batch in session.collect(&run_sql(run, query)).await? {
        let (steps, stages, leaves) = (ints(&batch, "step")?, strings(&batch, "stage")?, ints(&batch, "leaves")?);
        let mut stats = Vec::with_capacity(4);
        for stat in Stat::ALL {
            stats.push((floats(&batch, stat.column())?, flags(&batch, &format!("{}_bad", stat.column()))?));
        }
        for i in 0..batch.num_rows() {
            let value =
                |(v, bad): &(Vec<Option<f64>>, Vec<Option<bool>>)| match (v.get(i).copied().flatten(), bad.get(i)) {
                    (_, Some(Some(true))) => Value::NonFinite,
                    (Some(x), _) if x.is_finite() => Value::Finite(x),
                    (Some(_), _) => Value::NonFinite,
                    (None, _) => Value::Missing,
                };
            let values = [value(&stats[0]), value(&stats[1]), value(&stats[2]), value(&stats[3])];
            let (Some(Some(step)), Some(Some(stage))) = (steps.get(i), stages.get(i)) else {
                return Err(PlotError::Internal("a trend row without step or stage".into()));
            };
            let leaves = leaves.get(i).copied().flatten().unwrap_or(0);
            rows.push(Row {
                run: run.to_owned(),
                stage: stage.clone(),
                point: TrendPoint { step: *step, values, leaves },
            });
        }
    }
    Ok(rows)
}

async fn no_data(session: &RunSession, query: &TrendQuery) -> PlotError {
    let column = query.subject.column();
    let mut names = Vec::new();
    if let Some(run) = session.runs().first() {
        let sql = format!("SELECT DISTINCT {column} AS name FROM {}.dump ORDER BY 1", run.name);
        if let Ok(batches) = session.collect(&sql).await {
            for b in &batches {
                names.extend(strings(b, "name").unwrap_or_default().into_iter().flatten());
            }
        }
    }
    let mut what = match &query.subject {
        Subject::Op(op) => format!("no forward output of op `{op}` in the runs"),
        Subject::Item(item) => format!("no item `{item}` in the runs"),
    };
    if let Some(stage) = &query.stage {
        what.push_str(&format!(" at stage `{stage}`"));
    }
    if let Some(rank) = query.rank {
        what.push_str(&format!(" on rank {rank}"));
    }
    PlotError::NoData { what, near: nearest(query.subject.name(), &names, 5) }
}
