//! One unit pair's share of the page: its counts and worst error, its tree with each node's
//! colour and flags, the rows of the nodes worth showing, and the samples trends are drawn
//! from. Read from msprobe's compare table (the cells as msprobe writes them) and the target
//! unit's entries, modules and stacks.

use std::collections::{BTreeMap, HashMap};

use probelake_compare::{cell_number, CompareMode, UnitComparison};
use probelake_query::udf::rel_err::rel_err;

use crate::context::{Tree, UnitContext};
use crate::model::{
    severity, Counts, Detail, NodeColumns, Num, RowColumns, StatColumns, FLAG_CRITICAL, FLAG_NAN_INF, FLAG_ROWS,
    FLAG_UNMATCHED,
};

/// The first divergence of a unit, as the search found it.
#[derive(Debug, Clone)]
pub(crate) struct UnitFirst {
    pub op: String,
    pub rel: f64,
    /// Outermost first.
    pub chain: Vec<String>,
}

/// What a row says, for colours and choices.
#[derive(Debug, Clone, Copy)]
struct RowFacts {
    node: Option<usize>,
    output: bool,
    /// Relative error, a fraction; `None` for an unmatched row or one with nothing to compare.
    rel: Option<f64>,
    unmatched: bool,
    /// NaN or infinity in the target's statistics.
    nan_inf: bool,
}

/// A row of the worst-rows table.
#[derive(Debug, Clone)]
pub(crate) struct WorstRow {
    pub severity: f64,
    pub rel: f64,
    pub node: Option<usize>,
    pub name: String,
    pub result: Option<String>,
}

/// One statistic of one output row, for trends: (row name, target, golden, relative error).
pub(crate) type TrendSample = (String, Option<f64>, Option<f64>, Option<f64>);

/// A unit pair, summarized.
pub(crate) struct UnitSummary {
    pub counts: Counts,
    pub worst: Option<f64>,
    pub worst_op: Option<String>,
    pub first_pos: Option<f64>,
    pub detail: Detail,
    pub worst_rows: Vec<WorstRow>,
    pub trend_samples: Vec<TrendSample>,
    /// Names of the embedded output rows: those trends are drawn for.
    pub embedded_outputs: Vec<String>,
}

/// The cells of one header column, by name.
struct Columns<'t> {
    table: &'t UnitComparison,
    at: HashMap<&'t str, usize>,
}

impl<'t> Columns<'t> {
    fn new(table: &'t UnitComparison) -> Self {
        Columns { table, at: table.header.iter().enumerate().map(|(i, h)| (h.as_str(), i)).collect() }
    }

    fn text(&self, row: usize, header: &str) -> Option<&'t str> {
        let at = *self.at.get(header)?;
        self.table.rows.row(row)?.get(at)
    }

    fn number(&self, row: usize, header: &str) -> Option<f64> {
        self.text(row, header).and_then(cell_number)
    }

    fn has(&self, header: &str) -> bool {
        self.at.contains_key(header)
    }
}

const STATS: [&str; 4] = ["max", "min", "mean", "l2norm"];
const REL: [&str; 4] = ["MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"];
const DIFF: [&str; 4] = ["Max diff", "Min diff", "Mean diff", "L2norm diff"];
const TENSOR_METRICS: [&str; 6] =
    ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"];

/// A statistics row's relative error as the first-divergence search reckons it (msprobe's
/// `-da` rule, `rel_err`): the largest of its four statistics', where a token (golden 0, NaN,
/// infinity) counts for nothing; but NaN when the target's statistics hold NaN or infinity
/// that the golden run's do not, which the page colours darkest, as msprobe's graph does.
fn statistics_error(cols: &Columns<'_>, row: usize) -> Option<f64> {
    let mut rel = None;
    for s in STATS {
        let (t, g) = (cols.number(row, &format!("NPU {s}")), cols.number(row, &format!("Bench {s}")));
        match (t, g) {
            (Some(t), Some(g)) if !t.is_finite() && g.is_finite() => return Some(f64::NAN),
            (Some(t), Some(g)) => rel = worse(rel, Some(rel_err(t, g).unwrap_or(0.0))),
            _ => {}
        }
    }
    rel
}

/// The worse of two relative errors (NaN worst of all).
fn worse(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if severity(y) > severity(x) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Whether relative error `rel` is past `threshold` (NaN always is).
fn past(rel: Option<f64>, threshold: f64) -> bool {
    rel.is_some_and(|r| r.is_nan() || r.abs() > threshold)
}

/// Summarizes `table` (the unit pair's compare table) over the target unit's `context`.
/// `budget` bounds the rows embedded.
pub(crate) fn summarize(
    unit: usize,
    table: &UnitComparison,
    context: &UnitContext,
    first: Option<&UnitFirst>,
    threshold: f64,
    budget: usize,
) -> UnitSummary {
    let tree = Tree::of(context);
    let cols = Columns::new(table);
    let n = table.rows.len();
    let mut counts = Counts { units: 1, rows: n, ..Counts::default() };
    let mut facts = Vec::with_capacity(n);
    let mut node_rows: Vec<Vec<usize>> = vec![Vec::new(); tree.names.len()];
    let mut trend_samples = Vec::new();
    for i in 0..n {
        let name = cols.text(i, "NPU Name").unwrap_or_default();
        let entry = context.entry_of_row.get(name).copied();
        let node = entry.and_then(|e| tree.node_of_entry.get(e).copied());
        let output = entry.is_some_and(|e| name[context.entries[e].len().min(name.len())..].starts_with(".output"));
        let unmatched = matches!(cols.text(i, "Bench Name"), None | Some("N/A"));
        let result = cols.text(i, "Result");
        counts.errors += usize::from(result == Some("error"));
        counts.warnings += usize::from(result == Some("warning"));
        counts.unmatched += usize::from(unmatched);
        let nan_inf = STATS.iter().any(|s| cols.number(i, &format!("NPU {s}")).is_some_and(|x| !x.is_finite()));
        counts.nan_inf += usize::from(nan_inf);
        let rel = match table.mode {
            _ if unmatched => None,
            CompareMode::Statistics => statistics_error(&cols, i),
            CompareMode::Md5 => Some(if result == Some("pass") { 0.0 } else { 1.0 }),
            CompareMode::Tensor => cols.number(i, "MaxRelativeErr"),
        };
        if output && cols.has("NPU l2norm") {
            let norms = (cols.number(i, "NPU l2norm"), cols.number(i, "Bench l2norm"));
            let rel_norm = match norms {
                (Some(t), Some(g)) => rel_err(t, g),
                _ => None,
            };
            trend_samples.push((
                name.to_string(),
                cols.number(i, "NPU l2norm"),
                cols.number(i, "Bench l2norm"),
                rel_norm,
            ));
        }
        if let Some(node) = node {
            node_rows[node].push(i);
        }
        facts.push(RowFacts { node, output, rel, unmatched, nan_inf });
    }

    // Each node's colour: its outputs' worst error, or its rows' when it has no output.
    let nodes = tree.names.len();
    let mut node_worst = vec![None; nodes];
    let mut flags = vec![0u8; nodes];
    for (node, rows) in node_rows.iter().enumerate() {
        let outputs = rows.iter().any(|&r| facts[r].output);
        let mut inputs_fine = true;
        let mut any_input = false;
        for &r in rows {
            let f = facts[r];
            if f.output || !outputs {
                node_worst[node] = worse(node_worst[node], f.rel);
            }
            if !f.output {
                any_input = true;
                inputs_fine &= !past(f.rel, threshold);
            }
            if f.unmatched {
                flags[node] |= FLAG_UNMATCHED;
            }
            if f.nan_inf {
                flags[node] |= FLAG_NAN_INF;
            }
        }
        if any_input && inputs_fine && outputs && past(node_worst[node], threshold) {
            flags[node] |= FLAG_CRITICAL;
        }
    }

    // The unit's worst row and the rows of the worst-rows table.
    let (mut worst, mut worst_node) = (None, None);
    let mut worst_rows = Vec::new();
    for (i, f) in facts.iter().enumerate() {
        let Some(rel) = f.rel else { continue };
        if worst.is_none_or(|w| severity(rel) > severity(w)) {
            (worst, worst_node) = (Some(rel), f.node);
        }
        if severity(rel) > 0.0 {
            worst_rows.push(WorstRow {
                severity: severity(rel),
                rel,
                node: f.node,
                name: cols.text(i, "NPU Name").unwrap_or_default().to_string(),
                result: cols.text(i, "Result").map(str::to_string),
            });
        }
    }

    let first_node = first.and_then(|f| tree.index.get(f.op.as_str()).copied());
    let first_pos = first.and_then(|f| {
        let at = context.entries.iter().position(|e| *e == f.op)?;
        Some(at as f64 / (context.entries.len().saturating_sub(1).max(1)) as f64)
    });

    // The nodes whose rows are embedded: the first divergence and the modules around it, the
    // critical nodes, then the worst, until the budget is spent.
    let mut chosen: Vec<usize> = Vec::new();
    let mut taken = vec![false; nodes];
    let mut spent = 0;
    let mut take = |node: usize, chosen: &mut Vec<usize>| {
        if !taken[node] && (spent < budget || chosen.is_empty()) {
            taken[node] = true;
            spent += node_rows[node].len();
            chosen.push(node);
        }
    };
    if let Some(node) = first_node {
        take(node, &mut chosen);
        let mut up = tree.parents[node];
        while let Ok(p) = usize::try_from(up) {
            take(p, &mut chosen);
            up = tree.parents[p];
        }
    }
    let mut ranked: Vec<usize> = (0..nodes).filter(|&i| node_worst[i].is_some_and(|w| severity(w) > 0.0)).collect();
    ranked.sort_by(|&a, &b| {
        let critical = |i: usize| flags[i] & FLAG_CRITICAL != 0;
        let key = |i: usize| severity(node_worst[i].unwrap_or(0.0));
        critical(b).cmp(&critical(a)).then(key(b).total_cmp(&key(a))).then(a.cmp(&b))
    });
    for node in ranked {
        take(node, &mut chosen);
    }
    chosen.sort_unstable();
    let mut rows = RowColumns::default();
    let mut embedded_outputs = Vec::new();
    fill_rows(&mut rows, &cols, table.mode, &chosen, &node_rows, &mut embedded_outputs, &facts);
    for &node in &chosen {
        flags[node] |= FLAG_ROWS;
    }

    // Stacks: each distinct one once.
    let mut stacks: Vec<Vec<String>> = Vec::new();
    let mut stack_index: HashMap<&[String], usize> = HashMap::new();
    let mut node_stack = vec![-1i64; nodes];
    for (node, name) in tree.names.iter().enumerate() {
        let Some(frames) = context.stacks.get(name) else { continue };
        let next = stack_index.len();
        let at = *stack_index.entry(frames.as_slice()).or_insert(next);
        if at == stacks.len() {
            stacks.push(frames.clone());
        }
        node_stack[node] = at as i64;
    }

    let worst_op = worst_node.map(|n| tree.names[n].clone());
    let detail = Detail {
        unit,
        first_node,
        nodes: NodeColumns {
            name: tree.names,
            parent: tree.parents,
            worst: node_worst.into_iter().map(|w| w.map(Num)).collect(),
            flags,
            stack: node_stack,
        },
        rows,
        stacks,
    };
    UnitSummary { counts, worst, worst_op, first_pos, detail, worst_rows, trend_samples, embedded_outputs }
}

/// The rows of `chosen` nodes, in table order, into `rows`.
fn fill_rows(
    rows: &mut RowColumns,
    cols: &Columns<'_>,
    mode: CompareMode,
    chosen: &[usize],
    node_rows: &[Vec<usize>],
    outputs: &mut Vec<String>,
    facts: &[RowFacts],
) {
    let mut order: Vec<(usize, usize)> =
        chosen.iter().flat_map(|&node| node_rows[node].iter().map(move |&r| (r, node))).collect();
    order.sort_unstable();
    let num = |r: usize, h: &str| cols.number(r, h).map(Num);
    let text = |r: usize, h: &str| cols.text(r, h).filter(|t| *t != "N/A").map(str::to_string);
    let mut stats = StatColumns::default();
    let mut md5: (Vec<Option<String>>, Vec<Option<String>>) = (Vec::new(), Vec::new());
    let mut metrics: BTreeMap<String, Vec<Option<Num>>> = BTreeMap::new();
    for &(r, node) in &order {
        rows.node.push(node);
        let name = cols.text(r, "NPU Name").unwrap_or_default().to_string();
        if facts[r].output {
            outputs.push(name.clone());
        }
        rows.name.push(name);
        rows.golden_name.push(text(r, "Bench Name"));
        rows.dtype.push(text(r, "NPU Dtype"));
        rows.shape.push(text(r, "NPU Tensor Shape"));
        rows.result.push(text(r, "Result"));
        rows.message.push(text(r, "Err_message"));
        if cols.has("NPU max") {
            let [t_max, t_min, t_mean, t_norm] = STATS.map(|s| num(r, &format!("NPU {s}")));
            let [g_max, g_min, g_mean, g_norm] = STATS.map(|s| num(r, &format!("Bench {s}")));
            let [abs_max, abs_min, abs_mean, abs_norm] = DIFF.map(|h| num(r, h));
            let [rel_max, rel_min, rel_mean, rel_norm] = match mode {
                CompareMode::Statistics => REL.map(|h| cols.number(r, h).map(|p| Num(p / 100.0))),
                _ => [None; 4],
            };
            for (column, value) in [
                (&mut stats.t_max, t_max),
                (&mut stats.t_min, t_min),
                (&mut stats.t_mean, t_mean),
                (&mut stats.t_norm, t_norm),
                (&mut stats.g_max, g_max),
                (&mut stats.g_min, g_min),
                (&mut stats.g_mean, g_mean),
                (&mut stats.g_norm, g_norm),
                (&mut stats.abs_max, abs_max),
                (&mut stats.abs_min, abs_min),
                (&mut stats.abs_mean, abs_mean),
                (&mut stats.abs_norm, abs_norm),
                (&mut stats.rel_max, rel_max),
                (&mut stats.rel_min, rel_min),
                (&mut stats.rel_mean, rel_mean),
                (&mut stats.rel_norm, rel_norm),
            ] {
                column.push(value);
            }
        }
        if mode == CompareMode::Md5 {
            md5.0.push(text(r, "NPU MD5"));
            md5.1.push(text(r, "BENCH MD5"));
        }
        if mode == CompareMode::Tensor {
            for h in TENSOR_METRICS {
                metrics.entry(h.to_string()).or_default().push(num(r, h));
            }
        }
    }
    rows.stats = cols.has("NPU max").then_some(stats);
    if mode == CompareMode::Md5 {
        (rows.t_md5, rows.g_md5) = (Some(md5.0), Some(md5.1));
    }
    if mode == CompareMode::Tensor {
        rows.metrics = Some(metrics);
    }
}
