//! [`ReportJob`]: both runs opened and paired as `compare` pairs them, the first-divergence
//! search over every unit pair, msprobe compare's table of each pair summarized for the page.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use probelake_compare::divergence::{divergence_session_on, first_divergence, first_divergence_sql};
use probelake_compare::runs::pairing::UnitChoice;
use probelake_compare::runs::{pair_text, pairing_notes, RunPair};
use probelake_compare::{CompareOptions, Comparison};
use probelake_format::columns::cast_column;
use probelake_format::storage::StorageOptions;
use probelake_format::Unit;
use probelake_msprobe::Progress;
use probelake_query::{Engine, LocalEngine};

use crate::context::UnitContext;
use crate::error::ReportError;
use crate::model::{severity, Counts, First, Num, ReportData, RunLabel, TrendColumns, UnitColumns, WorstColumns};
use crate::unit::{summarize, TrendSample, UnitFirst, WorstRow};

/// The data of the page that shows where `target` parts from `golden`, as one operation.
///
/// ```no_run
/// # async fn demo() -> Result<(), probelake_report::ReportError> {
/// use probelake_report::{page, ReportJob};
///
/// let data = ReportJob::new("lake/npu", "lake/gpu").run(&probelake_msprobe::NoProgress).await?;
/// std::fs::write("report.html", page(&data)?).expect("write");
/// # Ok(()) }
/// ```
pub struct ReportJob {
    target: String,
    golden: String,
    storage: StorageOptions,
    threshold: f64,
    units: UnitChoice,
    engine: Arc<dyn Engine>,
    worst_rows: usize,
    detail_rows: usize,
}

/// The most rows the worst-rows table holds by default.
pub const WORST_ROWS: usize = 1000;
/// The most compare rows embedded by default, over all unit pairs (each unit pair gets its
/// share, and at least the rows of its first divergence).
pub const DETAIL_ROWS: usize = 20_000;
/// Trends drawn at most.
const TRENDS: usize = 500;

impl ReportJob {
    /// A report of `target` (the NPU side) against `golden`: datasets, msprobe dump folders or
    /// dump.json files (msprobe files are imported into a temporary dataset first).
    pub fn new(target: impl Into<String>, golden: impl Into<String>) -> Self {
        ReportJob {
            target: target.into(),
            golden: golden.into(),
            storage: StorageOptions::default(),
            threshold: 0.5,
            units: UnitChoice::default(),
            engine: Arc::new(LocalEngine),
            worst_rows: WORST_ROWS,
            detail_rows: DETAIL_ROWS,
        }
    }

    /// How S3 inputs are reached.
    pub fn storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The first-divergence threshold: a relative error (0.5 is 50 %, msprobe's rule).
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold;
        self
    }

    /// Which units are compared with which.
    pub fn units(mut self, units: UnitChoice) -> Self {
        self.units = units;
        self
    }

    /// Where the plans run (by default in this process).
    pub fn engine(mut self, engine: Arc<dyn Engine>) -> Self {
        self.engine = engine;
        self
    }

    /// At most `worst` rows in the worst-rows table and `detail` compare rows embedded.
    pub fn limits(mut self, worst: usize, detail: usize) -> Self {
        (self.worst_rows, self.detail_rows) = (worst, detail);
        self
    }

    /// Checks the options without opening anything.
    pub fn check(&self) -> Result<(), ReportError> {
        first_divergence_sql(self.threshold).map(|_| ()).map_err(|e| ReportError::Argument(e.to_string()))
    }

    /// Gathers the page's data, reporting progress a unit pair at a time.
    pub async fn run(self, progress: &dyn Progress) -> Result<ReportData, ReportError> {
        self.check()?;
        let runs = RunPair::open(&self.target, &self.golden, &self.storage).await?;
        let pairing = runs.pair(&self.units)?;
        let notes = pairing_notes(&pairing);
        let (target, golden) = (runs.target.lake()?, runs.golden.lake()?);
        let mut pairs = pairing.pairs.clone();
        pairs.sort_by(|a, b| {
            let key = |u: &Unit| (u.stage.clone(), u.step, u.rank);
            key(&a.target.unit).cmp(&key(&b.target.unit))
        });

        let session = divergence_session_on(target, golden, &pairs, self.engine.as_ref())
            .await
            .map_err(ReportError::Divergence)?;
        let (_, found) = first_divergence(&session, self.threshold).await.map_err(ReportError::Divergence)?;
        let firsts = first_rows(&found)?;

        let comparison = Comparison::of_runs(&runs.target, &runs.golden, CompareOptions::default())
            .with_engine(Arc::clone(&self.engine));
        let budget = (self.detail_rows / pairs.len().max(1)).max(100);
        let mut units = UnitColumns::default();
        let mut details = Vec::new();
        let mut counts = Counts::default();
        let mut worst: Vec<(usize, WorstRow)> = Vec::new();
        let mut samples: Vec<Vec<TrendSample>> = Vec::new();
        let mut embedded: BTreeSet<(String, i64, String)> = BTreeSet::new();
        let mut mode = None;
        progress.start(pairs.iter().map(|p| p.target.counts.json_bytes).sum(), pairs.len());
        for (index, pair) in pairs.iter().enumerate() {
            let (t, g) = (pair.target, pair.golden);
            let what = || pair_text(t, g);
            let table =
                comparison.unit(t, g).await.map_err(|e| ReportError::Compare { what: what(), source: Box::new(e) })?;
            mode.get_or_insert(table.mode);
            let context = UnitContext::read(target, t).await?;
            let first = firsts.get(&t.unit);
            let summary = summarize(index, &table, &context, first, self.threshold, budget);
            counts += summary.counts;
            units.step.push(t.unit.step);
            units.stage.push(t.unit.stage.clone());
            units.rank.push(t.unit.rank);
            units.golden.push(format!("step {}, {}, rank {}", g.unit.step, g.unit.stage, g.unit.rank));
            units.rows.push(summary.counts.rows);
            units.errors.push(summary.counts.errors);
            units.nan_inf.push(summary.counts.nan_inf);
            units.unmatched.push(summary.counts.unmatched);
            units.worst.push(summary.worst.map(Num));
            units.worst_op.push(summary.worst_op);
            units.first_op.push(first.map(|f| f.op.clone()));
            units.first_rel.push(first.map(|f| Num(f.rel)));
            units.first_pos.push(summary.first_pos);
            units.detail.push(Some(details.len()));
            for name in summary.embedded_outputs {
                embedded.insert((t.unit.stage.clone(), t.unit.rank, name));
            }
            details.push(summary.detail);
            samples.push(summary.trend_samples);
            worst.extend(summary.worst_rows.into_iter().map(|w| (index, w)));
            keep_worst(&mut worst, self.worst_rows);
            progress.advance(t.counts.json_bytes);
        }
        progress.finish();

        // The earliest divergence: the search's rows come ordered by step, stage and rank.
        let first = found_order(&found)?.into_iter().find_map(|unit| {
            let at = pairs.iter().position(|p| p.target.unit == unit)?;
            let f = firsts.get(&unit)?;
            Some(First {
                unit: at,
                node: details.get(at).and_then(|d| d.first_node),
                op: f.op.clone(),
                rel_err: Num(f.rel),
                chain: f.chain.clone(),
            })
        });
        let trends = trends(&units, &samples, &embedded);
        worst_first(&mut worst, self.worst_rows);
        let worst = WorstColumns {
            unit: worst.iter().map(|(u, _)| *u).collect(),
            node: worst.iter().map(|(_, w)| w.node).collect(),
            name: worst.iter().map(|(_, w)| w.name.clone()).collect(),
            rel: worst.iter().map(|(_, w)| Some(Num(w.rel))).collect(),
            result: worst.iter().map(|(_, w)| w.result.clone()).collect(),
        };
        let (target_label, golden_label) = (label(&self.target), label(&self.golden));
        Ok(ReportData {
            format: 1,
            title: format!("{target_label} against {golden_label}"),
            generated: generated_at(),
            probelake: env!("CARGO_PKG_VERSION").to_string(),
            target: RunLabel { label: target_label, uri: self.target.clone() },
            golden: RunLabel { label: golden_label, uri: self.golden.clone() },
            mode: mode.map_or("statistics", |m| m.word()).to_string(),
            threshold: self.threshold,
            notes,
            counts,
            first,
            units,
            details,
            worst,
            trends,
        })
    }
}

/// Now, in local time, as `2026-12-06 04:50:00` (from the stamp compare's files are named by).
fn generated_at() -> String {
    let stamp = probelake_compare::write::results::local_timestamp();
    match (stamp.len(), stamp.is_ascii()) {
        (14, true) => {
            let s = |a: usize, b: usize| &stamp[a..b];
            format!("{}-{}-{} {}:{}:{}", s(0, 4), s(4, 6), s(6, 8), s(8, 10), s(10, 12), s(12, 14))
        }
        _ => stamp,
    }
}

/// A run's short name: its last path part (a dump.json's folder).
fn label(uri: &str) -> String {
    let path = Path::new(uri.trim_end_matches('/'));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(uri);
    match name {
        "dump.json" => path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or(name).to_string(),
        _ => name.to_string(),
    }
}

/// Keeps the `n` worst rows (twice as many are collected before they are cut).
fn keep_worst(rows: &mut Vec<(usize, WorstRow)>, n: usize) {
    if rows.len() > 2 * n {
        worst_first(rows, n);
    }
}

/// `rows`, worst first (ties in unit order), cut to `n`.
fn worst_first(rows: &mut Vec<(usize, WorstRow)>, n: usize) {
    rows.sort_by(|a, b| b.1.severity.total_cmp(&a.1.severity).then(a.0.cmp(&b.0)));
    rows.truncate(n);
}

/// The search's rows by unit.
fn first_rows(batches: &[RecordBatch]) -> Result<HashMap<Unit, UnitFirst>, ReportError> {
    let mut firsts = HashMap::new();
    for batch in batches {
        let units = units_of(batch)?;
        let op = cast_column(batch, "first_divergence", &DataType::Utf8)?;
        let rel = cast_column(batch, "rel_err", &DataType::Float64)?;
        let modules = cast_column(batch, "modules", &DataType::Utf8)?;
        let (op, rel, modules) = (
            op.as_string::<i32>(),
            rel.as_primitive::<datafusion::arrow::datatypes::Float64Type>(),
            modules.as_string::<i32>(),
        );
        for (i, unit) in units.into_iter().enumerate() {
            let chain = match modules.is_valid(i) && !modules.value(i).is_empty() {
                true => modules.value(i).split(" > ").map(str::to_string).collect(),
                false => Vec::new(),
            };
            let rel = if rel.is_valid(i) { rel.value(i) } else { f64::NAN };
            firsts.insert(unit, UnitFirst { op: op.value(i).to_string(), rel, chain });
        }
    }
    Ok(firsts)
}

/// The units of the search's rows, in its order.
fn found_order(batches: &[RecordBatch]) -> Result<Vec<Unit>, ReportError> {
    let mut order = Vec::new();
    for batch in batches {
        order.extend(units_of(batch)?);
    }
    Ok(order)
}

fn units_of(batch: &RecordBatch) -> Result<Vec<Unit>, ReportError> {
    let step = cast_column(batch, "step", &DataType::Int64)?;
    let stage = cast_column(batch, "stage", &DataType::Utf8)?;
    let rank = cast_column(batch, "rank", &DataType::Int64)?;
    let (step, stage, rank) =
        (step.as_primitive::<Int64Type>(), stage.as_string::<i32>(), rank.as_primitive::<Int64Type>());
    Ok((0..batch.num_rows())
        .map(|i| Unit { step: step.value(i), stage: stage.value(i).to_string(), rank: rank.value(i) })
        .collect())
}

/// A trend: (stage, rank, row name).
type SeriesKey<'a> = (&'a str, i64, &'a str);

/// The norm of each embedded output row across the steps of its stage and rank, where some
/// step has it; at most [`TRENDS`] series, the worst units' first.
fn trends(
    units: &UnitColumns,
    samples: &[Vec<TrendSample>],
    embedded: &BTreeSet<(String, i64, String)>,
) -> TrendColumns {
    let mut series: HashMap<SeriesKey<'_>, Vec<(i64, TrendSample)>> = HashMap::new();
    for (u, unit_samples) in samples.iter().enumerate() {
        let (stage, rank, step) = (units.stage[u].as_str(), units.rank[u], units.step[u]);
        for sample in unit_samples {
            if embedded.contains(&(stage.to_string(), rank, sample.0.clone())) {
                series.entry((stage, rank, sample.0.as_str())).or_default().push((step, sample.clone()));
            }
        }
    }
    let mut keys: Vec<_> = series.keys().copied().collect();
    // The series whose error grows most first; more than a page can list are left out.
    let peak = |k: &(&str, i64, &str)| series[k].iter().map(|(_, s)| s.3.map_or(0.0, severity)).fold(0.0, f64::max);
    keys.sort_by(|a, b| peak(b).total_cmp(&peak(a)).then(a.cmp(b)));
    keys.truncate(TRENDS);
    keys.sort();
    let mut out = TrendColumns { stat: "norm", ..TrendColumns::default() };
    for key in keys {
        let mut points = series[&key].clone();
        points.sort_by_key(|(step, _)| *step);
        out.stage.push(key.0.to_string());
        out.rank.push(key.1);
        out.name.push(key.2.to_string());
        out.step.push(points.iter().map(|(s, _)| *s).collect());
        out.t.push(points.iter().map(|(_, s)| s.1.map(Num)).collect());
        out.g.push(points.iter().map(|(_, s)| s.2.map(Num)).collect());
        out.rel.push(points.iter().map(|(_, s)| s.3.map(Num)).collect());
    }
    out
}
