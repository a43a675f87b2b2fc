//! The DataFusion plan of a comparison: both sides' leaves of a unit, their join keys (with
//! msprobe's backward renumbering), the LEFT JOIN NPU → bench with the dtype gate, in msprobe's
//! row order. Per-row rules are the `msprobe_*` SQL functions of `crate::udf`.

use std::collections::HashMap;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use probelake_format::{Lake, Unit};

use super::load::FileKey;
use super::rows::{side_of, Side};
use super::CompareError;
use crate::session::{Run, RunSession};

/// `step = … AND stage = '…' AND rank = …` for a table alias.
fn unit_filter(alias: &str, unit: &Unit) -> String {
    format!(
        "{alias}.step = {} AND {alias}.stage = '{}' AND {alias}.rank = {}",
        unit.step,
        unit.stage.replace('\'', "''"),
        unit.rank
    )
}

/// The common table expressions of one side (`t` over schema `target`, `g` over `golden`):
/// `{p}_files` numbers the unit's dump files (msprobe pairs them by position), `{p}_keyed`
/// holds one row per compared leaf with its join key, state, dtype cell and JSON text.
fn side_ctes(p: &str, schema: &str, unit: &Unit) -> String {
    let (f, d) = (unit_filter("s", unit), unit_filter("d", unit));
    format!(
        "{p}_files AS (
    SELECT inner_step, pid,
           dense_rank() OVER (ORDER BY inner_step ASC NULLS FIRST, pid ASC NULLS FIRST) AS file_no
    FROM (SELECT s.inner_step, s.pid FROM {schema}.source s WHERE {f}
          UNION SELECT s.inner_step, s.pid FROM {schema}.dump s WHERE {f}) u
),
{p}_leaves AS (
    SELECT f.file_no, d.seq, d.leaf, d.name, d.item,
           msprobe_compare_state(d.name, d.section) AS state,
           msprobe_backward_group(d.name) AS backward_group,
           msprobe_leaf_json(d.kind, d.dtype, d.shape, d.max, d.min, d.mean, d.norm, d.requires_grad,
                             d.md5, d.data_name, d.value, d.raw) AS leaf_json
    FROM {schema}.dump d
    JOIN {p}_files f ON (d.inner_step IS NOT DISTINCT FROM f.inner_step) AND (d.pid IS NOT DISTINCT FROM f.pid)
    WHERE {d} AND msprobe_compare_state(d.name, d.section) IS NOT NULL
),
{p}_ranked AS (
    SELECT *, CAST(dense_rank() OVER (PARTITION BY file_no, backward_group ORDER BY seq) - 1 AS BIGINT)
              AS backward_order
    FROM {p}_leaves
),
{p}_keyed AS (
    SELECT *, msprobe_compare_key(name, item, backward_order) AS cmp_key,
           msprobe_compare_dtype(item, name, leaf_json) AS cmp_dtype,
           msprobe_leaf_has_md5(leaf_json) AS has_md5
    FROM {p}_ranked
)"
    )
}

const TORCH_FLOATS: &str = "('torch.float16', 'torch.float32', 'torch.float64', 'torch.bfloat16')";
const MS_FLOATS: &str = "('Float16', 'Float32', 'Float64', 'BFloat16')";

/// The SQL of the comparison of `t` (schema `target`) with `g` (schema `golden`): one row per
/// compare row, in msprobe's order (target parse order, then bench parse order among several
/// matches), with `matched` false where there is no bench row or the dtype gate refuses it.
pub fn compare_sql(t: &Unit, g: &Unit) -> String {
    format!(
        "WITH {},
{}
SELECT t.file_no, t.name AS t_name, t.item AS t_item, t.leaf_json AS t_json,
       g.name AS g_name, g.item AS g_item, g.leaf_json AS g_json,
       g.item IS NOT NULL AND ((t.cmp_dtype IS NOT DISTINCT FROM g.cmp_dtype)
           OR (t.cmp_dtype IN {TORCH_FLOATS} AND g.cmp_dtype IN {TORCH_FLOATS})
           OR (t.cmp_dtype IN {MS_FLOATS} AND g.cmp_dtype IN {MS_FLOATS})) AS matched
FROM t_keyed t
LEFT JOIN g_keyed g ON t.file_no = g.file_no AND t.cmp_key = g.cmp_key
ORDER BY t.file_no, t.seq, t.state, t.leaf, g.seq, g.state, g.leaf",
        side_ctes("t", "target", t),
        side_ctes("g", "golden", g)
    )
}

/// The SQL listing each side's dump files in pairing order, and whether any compared leaf of
/// the file has an md5 field (md5 mode).
fn files_sql(t: &Unit, g: &Unit) -> String {
    let side = |p: &str, name: &str| {
        format!(
            "SELECT '{name}' AS side, f.file_no, f.inner_step, f.pid, coalesce(bool_or(k.has_md5), false) AS has_md5
FROM {p}_files f LEFT JOIN {p}_keyed k ON k.file_no = f.file_no
GROUP BY f.file_no, f.inner_step, f.pid"
        )
    };
    format!(
        "WITH {},
{}
{}
UNION ALL
{}
ORDER BY side, file_no",
        side_ctes("t", "target", t),
        side_ctes("g", "golden", g),
        side("t", "target"),
        side("g", "golden")
    )
}

/// One dump file of a side as the plan lists it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanFile {
    pub key: FileKey,
    pub has_md5: bool,
}

/// What the plan returns for a unit pair.
#[derive(Debug, Default)]
pub(crate) struct PlanOutput {
    /// Target files in pairing order.
    pub target_files: Vec<PlanFile>,
    /// Golden files in pairing order.
    pub golden_files: Vec<PlanFile>,
    /// file_no (1-based) → matched rows in msprobe's order.
    pub rows: HashMap<i64, Vec<(Side, Option<Side>)>>,
}

fn column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b ArrayRef, CompareError> {
    batch.column_by_name(name).ok_or_else(|| CompareError::Schema(format!("plan column `{name}` missing")))
}

fn as_type(batch: &RecordBatch, name: &str, t: &DataType) -> Result<ArrayRef, CompareError> {
    let a = column(batch, name)?;
    Ok(if a.data_type() == t { a.clone() } else { cast(a, t)? })
}

fn opt_i64(a: &ArrayRef, i: usize) -> Option<i64> {
    let a = a.as_primitive::<Int64Type>();
    a.is_valid(i).then(|| a.value(i))
}

fn opt_str(a: &ArrayRef, i: usize) -> Option<&str> {
    let a = a.as_string::<i32>();
    a.is_valid(i).then(|| a.value(i))
}

/// Runs the comparison plan of `t` in `target` against `g` in `golden`.
pub(crate) async fn run(target: &Lake, t: &Unit, golden: &Lake, g: &Unit) -> Result<PlanOutput, CompareError> {
    let session =
        RunSession::open(vec![Run::new("target", target.clone()), Run::new("golden", golden.clone())], false).await?;
    run_in(&session, t, g).await
}

/// Runs the comparison plan in a session where the two runs are named `target` and `golden`.
pub(crate) async fn run_in(session: &RunSession, t: &Unit, g: &Unit) -> Result<PlanOutput, CompareError> {
    let mut out = PlanOutput::default();
    for batch in session.collect(&files_sql(t, g)).await? {
        let side = as_type(&batch, "side", &DataType::Utf8)?;
        let inner = as_type(&batch, "inner_step", &DataType::Int64)?;
        let pid = as_type(&batch, "pid", &DataType::Int64)?;
        let md5 = as_type(&batch, "has_md5", &DataType::Boolean)?;
        let md5 = md5.as_boolean();
        for i in 0..batch.num_rows() {
            let file =
                PlanFile { key: (opt_i64(&inner, i), opt_i64(&pid, i)), has_md5: md5.is_valid(i) && md5.value(i) };
            match opt_str(&side, i) {
                Some("target") => out.target_files.push(file),
                _ => out.golden_files.push(file),
            }
        }
    }
    for batch in session.collect(&compare_sql(t, g)).await? {
        let file_no = as_type(&batch, "file_no", &DataType::Int64)?;
        let texts =
            ["t_name", "t_item", "t_json", "g_name", "g_item", "g_json"].map(|c| as_type(&batch, c, &DataType::Utf8));
        let [t_name, t_item, t_json, g_name, g_item, g_json] = texts;
        let (t_name, t_item, t_json) = (t_name?, t_item?, t_json?);
        let (g_name, g_item, g_json) = (g_name?, g_item?, g_json?);
        let matched = as_type(&batch, "matched", &DataType::Boolean)?;
        let matched = matched.as_boolean();
        for i in 0..batch.num_rows() {
            let side = |name: &ArrayRef, item: &ArrayRef, json: &ArrayRef| {
                Some(side_of(opt_str(item, i)?, opt_str(name, i)?, opt_str(json, i)?))
            };
            let Some(npu) = side(&t_name, &t_item, &t_json) else { continue };
            let bench = (matched.is_valid(i) && matched.value(i)).then(|| side(&g_name, &g_item, &g_json)).flatten();
            out.rows.entry(opt_i64(&file_no, i).unwrap_or_default()).or_default().push((npu, bench));
        }
    }
    Ok(out)
}
