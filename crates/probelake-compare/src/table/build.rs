//! The cells of msprobe's table from the matched rows of one dump-file pair.
//!
//! Rows are written straight into [`Rows`] buffers. The rules need a whole dump key's rows
//! before they can fill `Result` and `Err_message`, so each row's cells up to
//! `Requires_grad Consistent` go into a first buffer, and the finished rows are assembled
//! after the rules ran. Files are cut into chunks at dump-key boundaries (the rules never look
//! past a key), built on all cores and handed on in order as they are done, so that a table
//! can be written while its later rows are built.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::CompareError;
use crate::join::load::{DumpFile, TensorData};
use crate::join::plan::{PlanOutput, RowRef};
use crate::mode::CompareMode;
use crate::table::cells::Rows;
use crate::table::columns::{self, ColumnKinds};
use crate::table::md5;
use crate::table::rules::{self, Cv, RuleRow, RuleSet};
use crate::table::stats;
use crate::table::tensor::{self, Metric};
use crate::threads::{cores, map_scoped, stream_scoped};
use probelake_query::msprobe::pyfmt::{push_py_str_list, PyVal};
use probelake_query::msprobe::rows::{MatchedRow, Side};

const NA: &str = "N/A";

/// Below this many rows a file's statistics are read on the calling thread alone.
const ROWS_PER_THREAD: usize = 4096;

/// Rows built at a time: a chunk's buffers are freed and taken again for the next, where the
/// whole table would be faulted in page by page.
const ROWS_PER_CHUNK: usize = 4096;

/// The column names of msprobe's table, as its CSV header.
pub(crate) fn header(mode: CompareMode, stack: bool) -> Vec<String> {
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

/// What the rows of one dump-file pair are built from.
pub(crate) struct FilePair<'a> {
    pub mode: CompareMode,
    /// Whether the table has the `NPU_Stack_Info` column.
    pub stack: bool,
    /// The target's dump file (its stacks).
    pub npu_file: &'a DumpFile,
    /// The file's rows in msprobe's order, as places in `plan`'s output.
    pub rows: &'a [RowRef],
    /// Where the rows' sides are read from.
    pub plan: &'a PlanOutput,
    pub ttensors: &'a HashMap<String, Arc<TensorData>>,
    pub gtensors: &'a HashMap<String, Arc<TensorData>>,
}

/// Builds the rows of `pair` (as wide as [`header`]`(pair.mode, pair.stack)`) in chunks of
/// about [`ROWS_PER_CHUNK`], on all cores; `map` takes each chunk on the thread that built it,
/// and `sink` gets what `map` made of the chunks in row order, on the calling thread.
pub(crate) fn build_chunks<T: Send>(
    pair: &FilePair<'_>,
    map: impl Fn(Rows) -> Result<T, CompareError> + Sync,
    sink: impl FnMut(T) -> Result<(), CompareError>,
) -> Result<(), CompareError> {
    let started = std::time::Instant::now();
    let keys: Vec<&str> = pair.rows.iter().map(|&row| pair.plan.key(row)).collect();
    let (floats, matched) = first_pass(pair, &keys)?;
    tracing::debug!(rows = keys.len(), elapsed = ?started.elapsed(), "compare first pass");
    let chunks = key_chunks(&keys, keys.len().div_ceil(ROWS_PER_CHUNK));
    let first = FirstPass { floats, matched: &matched };
    stream_scoped(&chunks, |range| map(chunk_rows(pair, &keys, range.clone(), &first)?), sink)
}

/// What the first pass over a file's rows found.
struct FirstPass<'a> {
    /// Which statistic columns of each side turn their integers into floats.
    floats: [[bool; 4]; 2],
    /// Whether each row has a bench side (the dtype gate's verdict included).
    matched: &'a [bool],
}

/// Which statistic columns of each side turn their integers into floats, and which rows are
/// matched. How pandas types a column depends on every row of the file: a first pass reads the
/// statistics alone, on all cores; it applies the dtype gate, whose verdicts the second keeps.
fn first_pass(pair: &FilePair<'_>, keys: &[&str]) -> Result<([[bool; 4]; 2], Vec<bool>), CompareError> {
    let chunks = key_chunks(keys, (keys.len() / ROWS_PER_THREAD).clamp(1, cores()));
    let parts = map_scoped(&chunks, |range| {
        let mut kinds = [ColumnKinds::default(); 2];
        let mut matched = Vec::with_capacity(range.len());
        for &row in &pair.rows[range.clone()] {
            let (npu, bench) = pair.plan.stats(row)?;
            kinds[0].add(Some(&npu));
            kinds[1].add(bench.as_ref());
            matched.push(bench.is_some());
        }
        Ok::<_, CompareError>((kinds, matched))
    });
    let mut merged = [ColumnKinds::default(); 2];
    let mut matched = Vec::with_capacity(keys.len());
    for part in parts {
        let (part, rows) = part?;
        merged = [merged[0].merge(part[0]), merged[1].merge(part[1])];
        matched.extend(rows);
    }
    Ok((merged.map(|k| k.floats()), matched))
}

/// Cuts the rows of dump keys `keys` into about `count` ranges, each ending where a key ends.
fn key_chunks(keys: &[&str], count: usize) -> Vec<std::ops::Range<usize>> {
    let count = count.max(1);
    let mut ranges = Vec::with_capacity(count);
    let mut start = 0;
    for k in 1..count {
        let mut end = (keys.len() * k / count).max(start + 1);
        while end < keys.len() && keys[end] == keys[end - 1] {
            end += 1;
        }
        if end >= keys.len() {
            break;
        }
        ranges.push(start..end);
        start = end;
    }
    ranges.push(start..keys.len());
    ranges
}

fn cv_of_metric(m: &Metric) -> Cv {
    match m {
        Metric::Num(x) if !x.is_nan() => Cv::Num(*x),
        other => Cv::Text(other.cell().into()),
    }
}

/// The rows of `pair.rows[range]`, which starts and ends at dump-key boundaries (`keys` are
/// the rows' dump keys). A key's rows are built at a time: their sides, then their cells up to
/// `Requires_grad Consistent` into a small buffer reused for every key, then, with the rules'
/// verdicts, into the rows.
fn chunk_rows(
    pair: &FilePair<'_>,
    keys: &[&str],
    range: std::ops::Range<usize>,
    first: &FirstPass<'_>,
) -> Result<Rows, CompareError> {
    let (mode, floats) = (pair.mode, first.floats);
    let (refs, keys, matched) = (&pair.rows[range.clone()], &keys[range.clone()], &first.matched[range]);
    let full_width = header(mode, pair.stack).len();
    let tail = 2 + usize::from(pair.stack) + usize::from(mode == CompareMode::Tensor);
    let mut head = Rows::new(full_width - tail);
    // Reserved, not touched: a row is a few hundred bytes, and a buffer grown by doubling
    // copies itself and faults in fresh pages at every step.
    let mut rows = Rows::with_capacity(full_width, refs.len(), refs.len() * 1024);
    let set = match mode {
        CompareMode::Statistics => RuleSet::Statistics,
        CompareMode::Tensor => RuleSet::Tensor,
        CompareMode::Md5 => RuleSet::Md5,
    };
    let mut start = 0;
    while start < refs.len() {
        let end = keys[start..].iter().position(|&k| k != keys[start]).map_or(refs.len(), |p| start + p);
        let group: Vec<MatchedRow<'_>> = (start..end)
            .map(|k| pair.plan.row(refs[k], matched[k], mode == CompareMode::Md5))
            .collect::<Result<_, _>>()?;
        head.clear();
        let rule_rows: Vec<RuleRow<'_>> =
            group.iter().map(|(n, b)| head_cells(pair, n, b.as_ref(), floats, &mut head)).collect();
        let verdicts = rules::apply(&rule_rows, set);
        for (i, ((row, verdict), (n, b))) in head.iter().zip(&verdicts).zip(group).enumerate() {
            rows.push_cells(row);
            rows.push(verdict.result());
            rows.push_with(|out| verdict.write_messages(out));
            if pair.stack {
                // msprobe prints a key's stack on its first row only.
                match (i == 0, pair.npu_file.stacks.get(n.key)) {
                    (true, Some(cell)) => rows.push(cell),
                    _ => rows.push(NA),
                }
            }
            if mode == CompareMode::Tensor {
                let names = [n.data_name.as_ref(), b.as_ref().map_or(NA, |b| b.data_name.as_ref())];
                rows.push_with(|out| push_py_str_list(out, &names));
            }
        }
        start = end;
    }
    Ok(rows)
}

/// Writes the cells of row `(n, b)` up to `Requires_grad Consistent` into `head`; returns what
/// the rules read of the row.
fn head_cells<'a>(
    pair: &FilePair<'a>,
    n: &'a Side<'a>,
    b: Option<&'a Side<'a>>,
    floats: [[bool; 4]; 2],
    head: &mut Rows,
) -> RuleRow<'a> {
    let mode = pair.mode;
    let n_stats = columns::as_table(&n.stats, floats[0]);
    let b_stats = b.map(|b| columns::as_table(&b.stats, floats[1]));
    let bench_name = b.map_or(NA, |b| b.name);
    let dtypes = [n.dtype.as_deref().unwrap_or(NA), b.and_then(|b| b.dtype.as_deref()).unwrap_or(NA)];
    let shapes = [n.shape.as_deref().unwrap_or(NA), b.and_then(|b| b.shape.as_deref()).unwrap_or(NA)];
    let rg = [n.requires_grad_cell(), b.map_or(NA, Side::requires_grad_cell)];
    for cell in [n.name, bench_name, dtypes[0], dtypes[1], shapes[0], shapes[1], rg[0], rg[1]] {
        head.push(cell);
    }
    let stat_cells = |head: &mut Rows, s: Option<&[PyVal; 4]>| match s {
        Some(s) => s.iter().for_each(|v| head.push_with(|out| v.push_cell(out))),
        None => (0..4).for_each(|_| head.push(NA)),
    };
    let (mut norm_rel, mut thousandth, mut cosine) = (Cv::NA, Cv::NA, Cv::NA);
    let mut md5 = [NA, NA];
    match mode {
        CompareMode::Statistics => {
            let pairs: [(String, String); 4] =
                std::array::from_fn(|i| stats::stat_cells(&n_stats[i], b_stats.as_ref().map(|b| &b[i])));
            pairs.iter().for_each(|(diff, _)| head.push(diff));
            pairs.iter().for_each(|(_, rel)| head.push(rel));
            let [.., (_, norm)] = pairs;
            norm_rel = Cv::Text(norm.into());
            stat_cells(head, Some(&n_stats));
            stat_cells(head, b_stats.as_ref());
        }
        CompareMode::Md5 => {
            md5 = md5::md5_cells(n, b);
            md5.iter().for_each(|cell| head.push(cell));
        }
        CompareMode::Tensor => {
            let tn = (n.data_name != "-1").then(|| pair.ttensors.get(n.data_name.as_ref())).flatten();
            let tb = b.filter(|b| b.data_name != "-1").and_then(|b| pair.gtensors.get(b.data_name.as_ref()));
            let m = tensor::metrics(tn.map(|t| &**t), tb.map(|t| &**t));
            cosine = cv_of_metric(&m[0]);
            thousandth = cv_of_metric(&m[4]);
            m.iter().for_each(|metric| head.push_with(|out| metric.push_cell(out)));
            stat_cells(head, Some(&n_stats));
            stat_cells(head, b_stats.as_ref());
        }
    }
    head.push(if rg[0] == rg[1] { "True" } else { "False" });
    let [n_max, n_min, ..] = n_stats;
    let (b_max, b_min) = match b_stats {
        Some([max, min, ..]) => (Some(max), Some(min)),
        None => (None, None),
    };
    RuleRow {
        key: n.key,
        npu_name: n.name,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_end_where_keys_end() {
        let names: Vec<String> = (0..3 * ROWS_PER_THREAD).map(|i| format!("k{}", i / 7)).collect();
        let keys: Vec<&str> = names.iter().map(String::as_str).collect();
        let chunks = key_chunks(&keys, 3);
        assert_eq!(chunks.first().map(|r| r.start), Some(0));
        assert_eq!(chunks.last().map(|r| r.end), Some(keys.len()));
        for w in chunks.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_ne!(keys[w[0].end - 1], keys[w[0].end], "a key cut in two");
        }
        // One key throughout: nowhere to cut.
        let one = vec!["k"; 3 * ROWS_PER_THREAD];
        let whole = key_chunks(&one, 3);
        assert!(whole.len() == 1 && whole[0] == (0..one.len()), "{whole:?}");
    }
}
