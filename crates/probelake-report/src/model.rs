//! The data a report page embeds, as the page's script reads it (`assets/report.js`): columnar
//! objects of equal-length arrays, numbers that are not finite spelled `"nan"`, `"inf"` and
//! `"-inf"` (JSON has no such numbers), and `null` for no value.

use serde::{Serialize, Serializer};

/// A number as the page reads it: finite as a JSON number, NaN and ±infinity as strings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            x if x.is_finite() => s.serialize_f64(x),
            x if x.is_nan() => s.serialize_str("nan"),
            x if x > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }
}

/// A relative error's order: NaN and infinity above every number, as the page colours them.
pub(crate) fn severity(x: f64) -> f64 {
    if x.is_nan() {
        f64::INFINITY
    } else {
        x.abs()
    }
}

/// Everything a page shows.
#[derive(Debug, Serialize)]
pub struct ReportData {
    /// The data's format: the page refuses others.
    pub format: u32,
    /// The page's title.
    pub title: String,
    /// When it was written (UTC).
    pub generated: String,
    /// probelake's version.
    pub probelake: String,
    /// The target run.
    pub target: RunLabel,
    /// The golden run.
    pub golden: RunLabel,
    /// `statistics`, `md5` or `tensor` (the first unit pair's).
    pub mode: String,
    /// The first-divergence threshold (a fraction).
    pub threshold: f64,
    /// How the units were paired, and what was left out.
    pub notes: Vec<String>,
    /// Totals over every unit pair.
    pub counts: Counts,
    /// The earliest divergence over all unit pairs.
    pub first: Option<First>,
    /// One entry per unit pair.
    pub units: UnitColumns,
    /// The unit pairs whose tree and rows are embedded.
    pub details: Vec<Detail>,
    /// The worst rows over all unit pairs.
    pub worst: WorstColumns,
    /// Series of one statistic across steps.
    pub trends: TrendColumns,
}

/// A run as the page names it.
#[derive(Debug, Clone, Serialize)]
pub struct RunLabel {
    /// A short name (the folder's or file's).
    pub label: String,
    /// Where it is.
    pub uri: String,
}

/// Row counts over all unit pairs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Unit pairs compared.
    pub units: usize,
    /// Rows of compare's tables.
    pub rows: usize,
    /// Rows whose Result is `error`.
    pub errors: usize,
    /// Rows whose Result is `warning`.
    pub warnings: usize,
    /// Rows whose target statistics hold NaN or infinity.
    pub nan_inf: usize,
    /// Rows without a golden partner.
    pub unmatched: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.units += o.units;
        self.rows += o.rows;
        self.errors += o.errors;
        self.warnings += o.warnings;
        self.nan_inf += o.nan_inf;
        self.unmatched += o.unmatched;
    }
}

/// The earliest divergence: the first (step, stage, rank) in order where the runs part.
#[derive(Debug, Clone, Serialize)]
pub struct First {
    /// Index into `units`.
    pub unit: usize,
    /// Index into the unit's detail nodes, when its detail is embedded.
    pub node: Option<usize>,
    /// The diverging entry (`probelake divergence`'s `first_divergence`).
    pub op: String,
    /// Its relative error.
    pub rel_err: Num,
    /// The modules around it, outermost first.
    pub chain: Vec<String>,
}

/// Per unit pair, ordered by stage, step and rank.
#[derive(Debug, Default, Serialize)]
pub struct UnitColumns {
    /// The target unit's step.
    pub step: Vec<i64>,
    /// Its stage.
    pub stage: Vec<String>,
    /// Its rank.
    pub rank: Vec<i64>,
    /// The golden unit it was compared with, in words.
    pub golden: Vec<String>,
    /// Rows of its compare table.
    pub rows: Vec<usize>,
    /// Rows whose Result is `error`.
    pub errors: Vec<usize>,
    /// Rows whose target statistics hold NaN or infinity.
    pub nan_inf: Vec<usize>,
    /// Rows without a golden partner.
    pub unmatched: Vec<usize>,
    /// The worst relative error of the unit's matched rows.
    pub worst: Vec<Option<Num>>,
    /// The entry of that row.
    pub worst_op: Vec<Option<String>>,
    /// The unit's first diverging entry, its relative error, and where it falls in execution
    /// order (0 first, 1 last).
    pub first_op: Vec<Option<String>>,
    /// The first divergence's relative error.
    pub first_rel: Vec<Option<Num>>,
    /// Where the first divergence falls in execution order: 0 first, 1 last.
    pub first_pos: Vec<Option<f64>>,
    /// Index into `details`.
    pub detail: Vec<Option<usize>>,
}

/// One unit pair's tree of nodes (modules and the API calls under them) and the compare rows
/// of the nodes worth showing.
#[derive(Debug, Serialize)]
pub struct Detail {
    /// Index into `units`.
    pub unit: usize,
    /// The node of the unit's first divergence.
    pub first_node: Option<usize>,
    /// Values.
    pub nodes: NodeColumns,
    /// Rows of its compare table.
    pub rows: RowColumns,
    /// Distinct call stacks, frames innermost first.
    pub stacks: Vec<Vec<String>>,
}

/// Node flag: NaN or infinity in the target's statistics.
pub const FLAG_NAN_INF: u8 = 1;
/// Node flag: some row has no golden partner.
pub const FLAG_UNMATCHED: u8 = 2;
/// Node flag: inputs within the threshold, an output past it (msprobe's critical level).
pub const FLAG_CRITICAL: u8 = 4;
/// Node flag: the node's rows are embedded.
pub const FLAG_ROWS: u8 = 8;

/// The nodes of a unit, in execution order.
#[derive(Debug, Default, Serialize)]
pub struct NodeColumns {
    /// Names.
    pub name: Vec<String>,
    /// Index of the parent node, -1 for a root.
    pub parent: Vec<i64>,
    /// The worst relative error of the node's own outputs (of its rows, with no outputs).
    pub worst: Vec<Option<Num>>,
    /// `FLAG_*` bits.
    pub flags: Vec<u8>,
    /// Index into `stacks`, -1 for none.
    pub stack: Vec<i64>,
}

/// Compare rows, by the node they belong to. Columns a mode does not have are left out.
#[derive(Debug, Default, Serialize)]
pub struct RowColumns {
    /// The node of each row.
    pub node: Vec<usize>,
    /// Names.
    pub name: Vec<String>,
    /// Bench Name; `None` for an unmatched row.
    pub golden_name: Vec<Option<String>>,
    /// NPU Dtype.
    pub dtype: Vec<Option<String>>,
    /// NPU Tensor Shape, as msprobe prints it.
    pub shape: Vec<Option<String>>,
    /// Statistics mode's and tensor mode's statistics.
    #[serde(flatten)]
    pub stats: Option<StatColumns>,
    /// The target's CRC-32 (md5 mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_md5: Option<Vec<Option<String>>>,
    /// The golden run's CRC-32 (md5 mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub g_md5: Option<Vec<Option<String>>>,
    /// Tensor mode's metric columns, by msprobe's header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<std::collections::BTreeMap<String, Vec<Option<Num>>>>,
    /// Result.
    pub result: Vec<Option<String>>,
    /// Err_message.
    pub message: Vec<Option<String>>,
}

/// The statistics of both sides and their differences.
#[derive(Debug, Default, Serialize)]
pub struct StatColumns {
    /// Target max.
    pub t_max: Vec<Option<Num>>,
    /// Target min.
    pub t_min: Vec<Option<Num>>,
    /// Target mean.
    pub t_mean: Vec<Option<Num>>,
    /// Target L2 norm.
    pub t_norm: Vec<Option<Num>>,
    /// Golden max.
    pub g_max: Vec<Option<Num>>,
    /// Golden min.
    pub g_min: Vec<Option<Num>>,
    /// Golden mean.
    pub g_mean: Vec<Option<Num>>,
    /// Golden L2 norm.
    pub g_norm: Vec<Option<Num>>,
    /// Max difference.
    pub abs_max: Vec<Option<Num>>,
    /// Min difference.
    pub abs_min: Vec<Option<Num>>,
    /// Mean difference.
    pub abs_mean: Vec<Option<Num>>,
    /// L2 norm difference.
    pub abs_norm: Vec<Option<Num>>,
    /// Max relative error (a fraction).
    pub rel_max: Vec<Option<Num>>,
    /// Min relative error.
    pub rel_min: Vec<Option<Num>>,
    /// Mean relative error.
    pub rel_mean: Vec<Option<Num>>,
    /// L2 norm relative error.
    pub rel_norm: Vec<Option<Num>>,
}

/// The worst rows over all unit pairs, worst first.
#[derive(Debug, Default, Serialize)]
pub struct WorstColumns {
    /// Index into `units`.
    pub unit: Vec<usize>,
    /// The node of each row.
    pub node: Vec<Option<usize>>,
    /// Names.
    pub name: Vec<String>,
    /// Relative errors.
    pub rel: Vec<Option<Num>>,
    /// Result.
    pub result: Vec<Option<String>>,
}

/// One series per (stage, rank, row name), steps ascending.
#[derive(Debug, Default, Serialize)]
pub struct TrendColumns {
    /// Its stage.
    pub stage: Vec<String>,
    /// Its rank.
    pub rank: Vec<i64>,
    /// Names.
    pub name: Vec<String>,
    /// The statistic the series follow.
    pub stat: &'static str,
    /// The target unit's step.
    pub step: Vec<Vec<i64>>,
    /// The target's values.
    pub t: Vec<Vec<Option<Num>>>,
    /// The golden run's values.
    pub g: Vec<Vec<Option<Num>>>,
    /// Relative errors.
    pub rel: Vec<Vec<Option<Num>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_json_lacks_are_words() {
        let nums = [Num(1.5), Num(f64::NAN), Num(f64::INFINITY), Num(f64::NEG_INFINITY)];
        assert_eq!(serde_json::to_string(&nums).unwrap(), r#"[1.5,"nan","inf","-inf"]"#);
        assert!(severity(f64::NAN) > severity(1e300) && severity(-2.0) == 2.0);
    }
}
