//! `probelake compare`: msprobe's two-dump comparison (`msprobe compare -tp … -gp …`,
//! mindstudio-probe 26.2) reproduced cell for cell from two probelake datasets.
//!
//! One [`compare_unit`] call (or [`RunPair::compare`], for many units) compares one unit of the
//! target (NPU) run with one unit of the golden (bench) run and returns the rows msprobe's CSV
//! would hold; [`UnitComparison::write_csv`] writes them as pandas does. The rules behind every cell are in `docs/compare.md`.
//!
//! The pieces: `plan` is the DataFusion plan that selects both sides' leaves, keys them (with
//! backward renumbering) and joins them in msprobe's order, through the SQL functions of
//! `crate::udf` built on `rows` (per-row rules); `load` reads the per-file context (task, stacks,
//! tensors); `stats`, `md5` and `tensor` compute the metric cells; `rules` the Result and
//! Err_message columns; `pyfmt` prints values as Python does; `csv` quotes like pandas; `typed`
//! turns the table into typed Arrow columns for Parquet.

mod columns;
mod csv;
mod leaf_side;
mod load;
mod md5;
mod plan;
mod pyfmt;
pub(crate) mod rows;
mod rules;
mod stats;
mod tensor;
mod typed;

use std::collections::HashMap;

use probelake_format::{CommitRecord, FormatError, Lake, Unit};

use crate::session::{Run, RunSession};

pub use self::plan::compare_sql;

use self::load::{read_files, read_tensors, DumpFile};
use self::pyfmt::{py_str_list, PyVal};
use self::rows::Side;
use self::rules::{Cv, RuleRow, RuleSet};
use self::tensor::Metric;

/// Which table msprobe writes (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareMode {
    /// `task: statistics` without md5 fields: diffs of Max/Min/Mean/Norm.
    Statistics,
    /// `task: statistics` with `md5` fields: CRC-32 equality.
    Md5,
    /// `task: tensor`: metrics over the dumped tensors.
    Tensor,
}

/// How to compare.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// The mode; `None` detects it from the dumps as msprobe does.
    pub mode: Option<CompareMode>,
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
    /// Rows, each cell exactly as msprobe's CSV holds it (unquoted).
    pub rows: Vec<Vec<String>>,
    /// `(inner_step, pid)` of each target dump file compared, in pairing order (msprobe names
    /// a step folder's result after its `proc{pid}` folder).
    pub target_files: Vec<(Option<i64>, Option<i64>)>,
}

impl UnitComparison {
    /// Writes the table as `msprobe compare` writes its CSV (pandas `to_csv(index=False)`).
    pub fn write_csv(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        csv::write_record(out, &self.header)?;
        for row in &self.rows {
            csv::write_record(out, row)?;
        }
        Ok(())
    }
}

/// Why a comparison failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Reading a dataset failed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A data file does not have the columns the format promises.
    #[error("unexpected dataset schema: {0}")]
    Schema(String),
    /// Arrow failed while reading columns.
    #[error(transparent)]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// The comparison plan failed.
    #[error(transparent)]
    Query(#[from] crate::QueryError),
    /// A unit holds no dump file.
    #[error("{side} unit {unit} holds no dump file")]
    NoData {
        /// `target` or `golden`.
        side: &'static str,
        /// The unit.
        unit: String,
    },
    /// The two units hold different numbers of dump files.
    #[error("target unit holds {target} dump files, golden unit {golden}; msprobe pairs them by position")]
    FileCount {
        /// Dump files on the target side.
        target: usize,
        /// Dump files on the golden side.
        golden: usize,
    },
    /// The two sides were dumped with different tasks or one has md5 fields and the other not.
    #[error("cannot compare a {target} dump with a {golden} dump")]
    ModeMismatch {
        /// The target's mode or task.
        target: String,
        /// The golden's mode or task.
        golden: String,
    },
    /// msprobe cannot compare this task (e.g. `structure`).
    #[error("msprobe compare does not support task `{0}`")]
    Unsupported(String),
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

fn header(mode: CompareMode, stack: bool) -> Vec<String> {
    let mut h: Vec<&str> = vec![
        "NPU Name",
        "Bench Name",
        "NPU Dtype",
        "Bench Dtype",
        "NPU Tensor Shape",
        "Bench Tensor Shape",
        "NPU Requires_grad",
        "Bench Requires_grad",
    ];
    let stats =
        ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"];
    match mode {
        CompareMode::Tensor => {
            h.extend(tensor::METRIC_COLUMNS);
            h.extend(stats);
        }
        CompareMode::Statistics => {
            h.extend(["Max diff", "Min diff", "Mean diff", "L2norm diff"]);
            h.extend(["MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]);
            h.extend(stats);
        }
        CompareMode::Md5 => h.extend(["NPU MD5", "BENCH MD5"]),
    }
    h.extend(["Requires_grad Consistent", "Result", "Err_message"]);
    if stack {
        h.push("NPU_Stack_Info");
    }
    if mode == CompareMode::Tensor {
        h.push("Data_name");
    }
    h.into_iter().map(str::to_owned).collect()
}

fn cv_of_metric(m: &Metric) -> Cv {
    match m {
        Metric::Num(x) if !x.is_nan() => Cv::Num(*x),
        other => Cv::Text(other.cell()),
    }
}

/// Compares one unit of `target` (NPU side) with the same unit of `golden` (bench side).
///
/// A unit can hold several dump files (inner steps, processes); they are paired by position
/// in (inner_step, pid) order, as msprobe pairs rank folders, and their rows concatenated.
/// To compare many units, open a [`RunPair`] once: this opens one per call.
pub async fn compare_unit(
    target: &Lake,
    t: &CommitRecord,
    golden: &Lake,
    g: &CommitRecord,
    opts: &CompareOptions,
) -> Result<UnitComparison, CompareError> {
    RunPair::open(target, golden).await?.compare(t, g, opts).await
}

/// Two datasets opened for comparing unit by unit: one SQL session over both, shared by
/// every [`RunPair::compare`]. Opening the session lists both datasets' units, so a session
/// per unit made a whole-run compare quadratic in its number of units.
///
/// ```no_run
/// # async fn demo(target: probelake_format::Lake, golden: probelake_format::Lake) -> Result<(), Box<dyn std::error::Error>> {
/// use probelake_query::compare::{CompareOptions, RunPair};
///
/// let pair = RunPair::open(&target, &golden).await?;
/// for (t, g) in target.units().await?.iter().zip(&golden.units().await?) {
///     pair.compare(t, g, &CompareOptions::default()).await?.write_csv(&mut std::io::stdout())?;
/// }
/// # Ok(()) }
/// ```
pub struct RunPair {
    target: Lake,
    golden: Lake,
    session: RunSession,
}

impl RunPair {
    /// Opens `target` (the NPU side) and `golden` (the bench side).
    pub async fn open(target: &Lake, golden: &Lake) -> Result<Self, CompareError> {
        let runs = vec![Run::new("target", target.clone()), Run::new("golden", golden.clone())];
        let session = RunSession::open(runs, false).await?;
        Ok(RunPair { target: target.clone(), golden: golden.clone(), session })
    }

    /// Compares unit `t` of the target with unit `g` of the golden run, as [`compare_unit`].
    pub async fn compare(
        &self,
        t: &CommitRecord,
        g: &CommitRecord,
        opts: &CompareOptions,
    ) -> Result<UnitComparison, CompareError> {
        let (target, golden) = (&self.target, &self.golden);
        let plan = plan::run_in(&self.session, &t.unit, &g.unit).await?;
        let (tfiles, gfiles) = (&plan.target_files, &plan.golden_files);
        if tfiles.is_empty() {
            return Err(CompareError::NoData { side: "target", unit: unit_text(&t.unit) });
        }
        if gfiles.is_empty() {
            return Err(CompareError::NoData { side: "golden", unit: unit_text(&g.unit) });
        }
        if tfiles.len() != gfiles.len() {
            return Err(CompareError::FileCount { target: tfiles.len(), golden: gfiles.len() });
        }
        let (tcontext, gcontext) = (read_files(target, t).await?, read_files(golden, g).await?);
        let mut mode = opts.mode;
        let mut stack = false;
        let mut rows = Vec::new();
        let no_rows = Vec::new();
        for (file_no, (tfile, gfile)) in (1i64..).zip(tfiles.iter().zip(gfiles)) {
            let (tctx, gctx) = (tcontext.get(&tfile.key), gcontext.get(&gfile.key));
            let (tm, gm) = (side_mode(tctx, tfile.has_md5)?, side_mode(gctx, gfile.has_md5)?);
            if tm != gm {
                return Err(CompareError::ModeMismatch { target: format!("{tm:?}"), golden: format!("{gm:?}") });
            }
            let m = *mode.get_or_insert(tm);
            stack |= tctx.is_some_and(|f| f.has_stack);
            let (ttensors, gtensors) = if m == CompareMode::Tensor {
                (read_tensors(target, t, tfile.key).await?, read_tensors(golden, g, gfile.key).await?)
            } else {
                Default::default()
            };
            let matched = plan.rows.get(&file_no).unwrap_or(&no_rows);
            let empty = DumpFile::default();
            rows.extend(build_rows(m, tctx.unwrap_or(&empty), matched, &ttensors, &gtensors));
        }
        let mode = mode.unwrap_or(CompareMode::Statistics);
        let header = header(mode, stack);
        if !stack {
            let at = header.len() - usize::from(mode == CompareMode::Tensor);
            for row in &mut rows {
                row.remove(at);
            }
        }
        let target_files = tfiles.iter().map(|f| f.key).collect();
        Ok(UnitComparison { unit: t.unit.clone(), mode, header, rows, target_files })
    }
}

/// The cells of every row of one dump-file pair (with a stack column; removed by the caller
/// when there is no stack.json).
fn build_rows(
    mode: CompareMode,
    npu_file: &DumpFile,
    matched: &[(Side, Option<Side>)],
    ttensors: &HashMap<String, std::sync::Arc<load::TensorData>>,
    gtensors: &HashMap<String, std::sync::Arc<load::TensorData>>,
) -> Vec<Vec<String>> {
    const NA: &str = "N/A";
    let mut rule_rows = Vec::with_capacity(matched.len());
    let mut cells: Vec<Vec<String>> = Vec::with_capacity(matched.len());
    let mut last_key: Option<&str> = None;
    let npu_floats = columns::float_columns(matched.iter().map(|(n, _)| Some(&n.stats)));
    let bench_floats = columns::float_columns(matched.iter().map(|(_, b)| b.as_ref().map(|b| &b.stats)));
    let width = header(mode, true).len();
    for (n, b) in matched {
        let b = b.as_ref();
        let n_stats = columns::as_table(&n.stats, npu_floats);
        let b_stats = b.map(|b| columns::as_table(&b.stats, bench_floats));
        let bench_name = b.map_or(NA, |b| b.name.as_str());
        let dtypes = [n.dtype.as_deref().unwrap_or(NA), b.and_then(|b| b.dtype.as_deref()).unwrap_or(NA)];
        let shapes = [n.shape.as_deref().unwrap_or(NA), b.and_then(|b| b.shape.as_deref()).unwrap_or(NA)];
        let rg = [n.requires_grad_cell(), b.map_or(NA, Side::requires_grad_cell)];
        let mut row = Vec::with_capacity(width);
        row.extend(
            [n.name.as_str(), bench_name, dtypes[0], dtypes[1], shapes[0], shapes[1], rg[0], rg[1]].map(str::to_owned),
        );
        let stat_cells = |row: &mut Vec<String>, s: Option<&[PyVal; 4]>| match s {
            Some(s) => row.extend(s.iter().map(PyVal::cell)),
            None => row.extend(std::iter::repeat_n(NA, 4).map(str::to_owned)),
        };
        let mut norm_rel = Cv::Text(NA.into());
        let mut thousandth = Cv::Text(NA.into());
        let mut cosine = Cv::Text(NA.into());
        let mut md5 = [NA, NA];
        match mode {
            CompareMode::Statistics => {
                let pairs: [(String, String); 4] =
                    std::array::from_fn(|i| stats::stat_cells(&n_stats[i], b_stats.as_ref().map(|b| &b[i])));
                norm_rel = Cv::Text(pairs[3].1.clone());
                let (diffs, rels): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
                row.extend(diffs);
                row.extend(rels);
                stat_cells(&mut row, Some(&n_stats));
                stat_cells(&mut row, b_stats.as_ref());
            }
            CompareMode::Md5 => {
                md5 = md5::md5_cells(n, b);
                row.extend(md5.map(str::to_owned));
            }
            CompareMode::Tensor => {
                let tn = (n.data_name != "-1").then(|| ttensors.get(&n.data_name)).flatten();
                let tb = b.filter(|b| b.data_name != "-1").and_then(|b| gtensors.get(&b.data_name));
                let m = tensor::metrics(tn.map(|t| &**t), tb.map(|t| &**t));
                cosine = cv_of_metric(&m[0]);
                thousandth = cv_of_metric(&m[4]);
                row.extend(m.iter().map(Metric::cell));
                stat_cells(&mut row, Some(&n_stats));
                stat_cells(&mut row, b_stats.as_ref());
            }
        }
        row.push(if rg[0] == rg[1] { "True" } else { "False" }.to_owned());
        let [n_max, n_min, ..] = n_stats;
        let (b_max, b_min) = match b_stats {
            Some([max, min, ..]) => (Some(max), Some(min)),
            None => (None, None),
        };
        rule_rows.push(RuleRow {
            key: &n.key,
            npu_name: &n.name,
            matched: b.is_some(),
            bench_name,
            dtypes,
            shapes,
            requires_grad: rg,
            extremes: [Some(n_max), Some(n_min), b_max, b_min],
            norm_rel,
            thousandth,
            cosine,
            md5,
        });
        // Placeholders for Result / Err_message, filled below.
        row.push(String::new());
        row.push(String::new());
        let first_of_key = last_key != Some(n.key.as_str());
        last_key = Some(n.key.as_str());
        row.push(match (first_of_key, npu_file.stacks.get(&n.key)) {
            (true, Some(frames)) => py_str_list(frames),
            _ => NA.to_owned(),
        });
        if mode == CompareMode::Tensor {
            row.push(py_str_list(&[n.data_name.as_str(), b.map_or(NA, |b| b.data_name.as_str())]));
        }
        cells.push(row);
    }
    let set = match mode {
        CompareMode::Statistics => RuleSet::Statistics,
        CompareMode::Tensor => RuleSet::Tensor,
        CompareMode::Md5 => RuleSet::Md5,
    };
    let verdicts = rules::apply(&rule_rows, set);
    for (row, (result, msg)) in cells.iter_mut().zip(verdicts) {
        let at = row.len() - 3 - usize::from(mode == CompareMode::Tensor);
        row[at] = result;
        row[at + 1] = msg;
    }
    cells
}
