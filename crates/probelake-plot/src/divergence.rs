//! Divergence heatmaps: where a target run parts from a golden run, as the relative error of
//! every op call (or op) at every step (or rank).
//!
//! The data is one SQL query over both runs' `dump` tables: forward outputs are paired by
//! (step, stage, rank, item), each pair's relative error is `rel_err(target, golden)` (msprobe's
//! `|t − g| / |g|`, as a fraction) of one statistic or the largest of the four, and a cell holds
//! the largest error of the pairs that fall in it (every output leaf of the call, every stage
//! and rank unless one is chosen). A golden value of 0 against a finite non-zero target is an
//! infinite error; a target NaN or ±inf where the golden value is finite is its own kind of
//! cell, drawn outside the colour scale.

use std::collections::{BTreeSet, HashMap};

use probelake_query::RunSession;

use crate::columns::{flags, floats, ints, strings};
use crate::error::{PlotError, Result};
use crate::figure::{render, Figure};
use crate::stat::{nearest, sql_string, Stat};

/// What the heatmap's columns are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Across {
    /// Training steps (ranks combined unless one is chosen).
    Steps,
    /// Ranks (steps combined unless one is chosen).
    Ranks,
}

/// What the heatmap's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowsBy {
    /// Every call of every op (`Functional.linear.3`): a layer's instance of an op, in
    /// execution order.
    Call,
    /// Every op (`Functional.linear`), its calls combined.
    Op,
}

/// Which error a cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorOf {
    /// The largest relative error of max, min, mean and norm (what `probelake divergence` and
    /// msprobe's `-da` look at).
    Worst,
    /// The relative error of one statistic.
    Stat(Stat),
}

/// What to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct DivergenceQuery {
    /// The run under suspicion (msprobe's NPU side), by its name in the session.
    pub target: String,
    /// The reference run (msprobe's bench side).
    pub golden: String,
    /// Columns: steps or ranks.
    pub across: Across,
    /// Rows: op calls or ops.
    pub rows: RowsBy,
    /// The error shown.
    pub error_of: ErrorOf,
    /// Only this stage.
    pub stage: Option<String>,
    /// Only this step.
    pub step: Option<i64>,
    /// Only this rank.
    pub rank: Option<i64>,
    /// At most this many rows: those with the largest errors, kept in execution order.
    pub max_rows: usize,
}

impl DivergenceQuery {
    /// Op calls × steps, the worst statistic, everything, at most 60 rows.
    pub fn new(target: impl Into<String>, golden: impl Into<String>) -> Self {
        DivergenceQuery {
            target: target.into(),
            golden: golden.into(),
            across: Across::Steps,
            rows: RowsBy::Call,
            error_of: ErrorOf::Worst,
            stage: None,
            step: None,
            rank: None,
            max_rows: 60,
        }
    }
}

/// One cell of the heatmap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// No output leaf of this row is in both runs here.
    Missing,
    /// The target is NaN or ±inf where the golden run is finite.
    NonFinite,
    /// The values cannot be compared (golden NaN/inf, or no statistics).
    Uncomparable,
    /// The largest relative error (a fraction; `inf` where golden is 0).
    Rel(f64),
}

impl Cell {
    /// How bad the cell is, for choosing which rows to keep: non-finite first, then by error.
    fn severity(self) -> f64 {
        match self {
            Cell::NonFinite => f64::MAX,
            Cell::Rel(x) if x.is_nan() => 0.0,
            Cell::Rel(x) => x.min(f64::MAX / 2.0),
            Cell::Missing | Cell::Uncomparable => -1.0,
        }
    }
}

/// One row: an op call or an op.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatRow {
    /// `Functional.linear.3` or `Functional.linear`.
    pub name: String,
    /// Where it first runs (the smallest `seq` of its leaves), for execution order.
    pub first_seq: i64,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// The data of a divergence heatmap.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// What was asked.
    pub query: DivergenceQuery,
    /// The column values (steps or ranks), sorted.
    pub columns: Vec<i64>,
    /// The rows shown, in execution order.
    pub rows: Vec<HeatRow>,
    /// How many rows there were before keeping [`DivergenceQuery::max_rows`].
    pub total_rows: usize,
}

impl Heatmap {
    /// Draws the chart as SVG and PNG.
    pub fn render(&self) -> Result<Figure> {
        render(&crate::heatmap::HeatmapChart::new(self)?)
    }
}

fn rel_of(stat: Stat) -> String {
    let c = stat.column();
    format!(
        "CASE WHEN g.{c} = 0 AND t.{c} <> 0 AND coalesce(is_finite_stats(t.{c}, t.{c}, t.{c}, t.{c}), false)
              THEN CAST('inf' AS DOUBLE) ELSE rel_err(t.{c}, g.{c}) END"
    )
}

fn sql(q: &DivergenceQuery) -> String {
    let mut filter = String::from("section = 'output' AND direction = 'forward'");
    if let Some(stage) = &q.stage {
        filter.push_str(&format!(" AND stage = {}", sql_string(stage)));
    }
    if let Some(step) = q.step {
        filter.push_str(&format!(" AND step = {step}"));
    }
    if let Some(rank) = q.rank {
        filter.push_str(&format!(" AND rank = {rank}"));
    }
    let rel = match q.error_of {
        ErrorOf::Worst => format!("greatest({})", Stat::ALL.map(rel_of).join(", ")),
        ErrorOf::Stat(s) => rel_of(s),
    };
    let row = match q.rows {
        RowsBy::Call => "CASE WHEN t.call IS NULL THEN t.op ELSE t.op || '.' || CAST(t.call AS VARCHAR) END",
        RowsBy::Op => "t.op",
    };
    let col = match q.across {
        Across::Steps => "t.step",
        Across::Ranks => "t.rank",
    };
    let (target, golden) = (&q.target, &q.golden);
    format!(
        "WITH t AS (SELECT step, stage, rank, seq, op, call, item, max, min, mean, norm
                    FROM {target}.dump WHERE {filter}),
              g AS (SELECT step, stage, rank, item, max, min, mean, norm FROM {golden}.dump WHERE {filter}),
              pairs AS (
                SELECT {row} AS row_name, {col} AS col, t.seq, {rel} AS rel,
                       NOT coalesce(is_finite_stats(t.max, t.min, t.mean, t.norm), true)
                         AND coalesce(is_finite_stats(g.max, g.min, g.mean, g.norm), true) AS broke
                FROM t JOIN g ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank AND t.item = g.item)
         SELECT row_name, col, min(seq) AS first_seq, max(rel) AS rel, bool_or(broke) AS broke
         FROM pairs GROUP BY row_name, col"
    )
}

/// Fetches the data of a divergence heatmap from the session's runs `query.target` and
/// `query.golden`.
///
/// # Errors
///
/// [`PlotError::NoData`] when no forward output is in both runs under the filters (with the
/// nearest stage names when a stage was given); [`PlotError::Query`] when the SQL fails (for
/// instance a run name the session does not have).
pub async fn fetch_divergence(session: &RunSession, query: &DivergenceQuery) -> Result<Heatmap> {
    struct Found {
        row: String,
        col: i64,
        seq: i64,
        cell: Cell,
    }
    let mut found = Vec::new();
    for batch in session.collect(&sql(query)).await? {
        let (rows, cols, seqs) = (strings(&batch, "row_name")?, ints(&batch, "col")?, ints(&batch, "first_seq")?);
        let (rels, broke) = (floats(&batch, "rel")?, flags(&batch, "broke")?);
        for i in 0..batch.num_rows() {
            let (Some(Some(row)), Some(Some(col))) = (rows.get(i), cols.get(i)) else {
                return Err(PlotError::Internal("a heatmap cell without row or column".into()));
            };
            let cell = match (broke.get(i).copied().flatten(), rels.get(i).copied().flatten()) {
                (Some(true), _) => Cell::NonFinite,
                (_, Some(x)) => Cell::Rel(x),
                (_, None) => Cell::Uncomparable,
            };
            let seq = seqs.get(i).copied().flatten().unwrap_or(i64::MAX);
            found.push(Found { row: row.clone(), col: *col, seq, cell });
        }
    }
    if found.is_empty() {
        return Err(no_data(session, query).await);
    }
    let columns: Vec<i64> = found.iter().map(|f| f.col).collect::<BTreeSet<_>>().into_iter().collect();
    let mut rows: Vec<HeatRow> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for f in found {
        let at = match index.get(&f.row) {
            Some(&at) => at,
            None => {
                index.insert(f.row.clone(), rows.len());
                rows.push(HeatRow { name: f.row, first_seq: f.seq, cells: vec![Cell::Missing; columns.len()] });
                rows.len() - 1
            }
        };
        let (Some(row), Ok(c)) = (rows.get_mut(at), columns.binary_search(&f.col)) else { continue };
        row.first_seq = row.first_seq.min(f.seq);
        if let Some(cell) = row.cells.get_mut(c) {
            *cell = f.cell;
        }
    }
    let total_rows = rows.len();
    if rows.len() > query.max_rows.max(1) {
        let worst = |r: &HeatRow| r.cells.iter().map(|c| c.severity()).fold(f64::NEG_INFINITY, f64::max);
        rows.sort_by(|a, b| worst(b).total_cmp(&worst(a)).then(a.first_seq.cmp(&b.first_seq)));
        rows.truncate(query.max_rows.max(1));
    }
    rows.sort_by(|a, b| a.first_seq.cmp(&b.first_seq).then_with(|| a.name.cmp(&b.name)));
    Ok(Heatmap { query: query.clone(), columns, rows, total_rows })
}

async fn no_data(session: &RunSession, query: &DivergenceQuery) -> PlotError {
    let mut what = format!("no forward output is in both `{}` and `{}`", query.target, query.golden);
    let mut near = Vec::new();
    if let Some(stage) = &query.stage {
        what.push_str(&format!(" at stage `{stage}`"));
        let sql = format!("SELECT DISTINCT stage FROM {}.dump", query.target);
        if let Ok(batches) = session.collect(&sql).await {
            let stages: Vec<String> =
                batches.iter().flat_map(|b| strings(b, "stage").unwrap_or_default().into_iter().flatten()).collect();
            near = nearest(stage, &stages, 5);
        }
    }
    if let Some(step) = query.step {
        what.push_str(&format!(" at step {step}"));
    }
    if let Some(rank) = query.rank {
        what.push_str(&format!(" on rank {rank}"));
    }
    PlotError::NoData { what, near }
}
