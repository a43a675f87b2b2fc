//! The DataFusion plans of a comparison: both sides' leaves of a unit, their join keys (with
//! msprobe's backward renumbering), the LEFT JOIN NPU → bench, and the columns of msprobe's
//! row order, which `run_in` sorts by. Per-row rules are the `msprobe_*` SQL functions of
//! `crate::udf`. The join carries each leaf's position, not its `dump` columns: those come
//! from a plain scan per side (`leaves`), `leaf_side` reads the cells from them, and the dtype
//! gate, which [`compare_sql`] writes in SQL, is applied to them here.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::physical_plan::collect;
use probelake_format::Unit;

use crate::error::CompareError;
use crate::join::fuzzy::fuzzy_pairs;
use crate::join::keyed::{pairs_batch, KeyedLeaf};
use crate::join::leaves::{leaves_sql, unit_filter, SideLeaves};
use crate::join::mapping::{Keys, Mappings, TargetKey};
use crate::join::prepared::{PairFiles, PlanHandle, PreparedPlans};
use crate::threads::map_scoped;
use probelake_format::columns::cast_column;
use probelake_msprobe::Origin;
use probelake_query::msprobe::leaf_side::{leaf_stats, side_of_leaf, text_at, LeafColumns, LEAF_COLUMNS};
use probelake_query::msprobe::pyfmt::PyVal;
use probelake_query::msprobe::rows::{dtype_gate, MatchedRow, MS_FLOATS, TORCH_FLOATS};
use probelake_query::session::RunSession;
use probelake_query::QueryError;

/// The dtype cell of a leaf (`msprobe_compare_dtype`), read from its `dump` columns (in
/// [`LEAF_COLUMNS`] order, as `LeafArrays::from_columns` reads them): a tensor
/// or a plain scalar (most leaves) without rendering its JSON. Given as a `CASE` on the columns
/// with the JSON form in the `ELSE` branch, it cost a sixth of each side's plan: one leaf in
/// seven (the scalars) was rendered to JSON and parsed back.
fn dtype_cell() -> String {
    format!("msprobe_compare_dtype(d.item, d.name, {})", LEAF_COLUMNS.map(|c| format!("d.{c}")).join(", "))
}

/// `{p}_files`: the unit's dump files, numbered (msprobe pairs them by position).
fn files_cte(p: &str, schema: &str, unit: &Unit) -> String {
    let f = unit_filter("s", unit);
    format!(
        "{p}_files AS (
    SELECT inner_step, pid,
           dense_rank() OVER (ORDER BY inner_step ASC NULLS FIRST, pid ASC NULLS FIRST) AS file_no
    FROM (SELECT s.inner_step, s.pid FROM {schema}.source s WHERE {f}
          UNION SELECT s.inner_step, s.pid FROM {schema}.dump s WHERE {f}) u
)"
    )
}

/// The common table expressions of one side (`t` over schema `target`, `g` over `golden`):
/// `{p}_files` numbers the unit's dump files, `{p}_leaves` holds one row per compared leaf
/// with its position and state (and, `with_dtype`, its dtype cell, computed where the leaf's
/// columns are read so that none of them goes further), `{p}_ranked` numbers the backward
/// entries of each group in file order (msprobe's renumbering), `{p}_keyed` adds the join key.
///
/// Only backward rows are ranked: the others' key is their item, and a window over all of them
/// sorted and partitioned three quarters of a side for nothing (the window and its sort were
/// half of the statement's time). Reading the side's leaves twice, once per branch, costs less.
fn side_ctes(p: &str, schema: &str, unit: &Unit, with_dtype: bool, key: &str) -> String {
    let d = unit_filter("d", unit);
    let (dtype, keep) = match with_dtype {
        true => (format!(",\n                 {} AS cmp_dtype", dtype_cell()), ", l.cmp_dtype"),
        false => (String::new(), ""),
    };
    format!(
        "{},
{p}_leaves AS (
    SELECT f.file_no, l.seq, l.leaf, l.name, l.item, l.state, l.backward_group{keep}
    FROM {p}_files f
    JOIN (SELECT d.inner_step, d.pid, d.seq, d.leaf, d.name, d.item,
                 msprobe_compare_state(d.name, d.section) AS state,
                 msprobe_backward_group(d.name) AS backward_group{dtype}
          FROM {schema}.dump d
          WHERE {d} AND msprobe_compare_state(d.name, d.section) IS NOT NULL) l
      ON (l.inner_step IS NOT DISTINCT FROM f.inner_step) AND (l.pid IS NOT DISTINCT FROM f.pid)
),
{p}_ranked AS (
    SELECT *, CAST(dense_rank() OVER (PARTITION BY file_no, backward_group ORDER BY seq) - 1 AS BIGINT)
              AS backward_order
    FROM {p}_leaves WHERE backward_group IS NOT NULL
    UNION ALL
    SELECT *, CAST(NULL AS BIGINT) AS backward_order
    FROM {p}_leaves WHERE backward_group IS NULL
),
{p}_keyed AS (
    SELECT *, {key} AS cmp_key
    FROM {p}_ranked
)",
        files_cte(p, schema, unit)
    )
}

/// A list of dtypes as an SQL `IN` list.
fn in_list(dtypes: &[&str]) -> String {
    format!("({})", dtypes.iter().map(|d| format!("'{d}'")).collect::<Vec<_>>().join(", "))
}

/// The order of the compare rows: target parse order, then bench parse order among several
/// matches (NULLs, an unmatched row's bench columns, last).
const ROW_ORDER: [&str; 7] = ["file_no", "t_seq", "t_state", "t_leaf", "g_seq", "g_state", "g_leaf"];

/// The SQL of the comparison of `t` (schema `target`) with `g` (schema `golden`): one row per
/// compare row, in msprobe's order (target parse order, then bench parse order among several
/// matches), with `matched` false where there is no bench row or the dtype gate refuses it,
/// and where each side's leaf is: `file_no` and (`t_seq`, `t_leaf`) / (`g_seq`, `g_leaf`)
/// (with `t_state`, `g_state`, the columns of the order). A leaf's `dump` columns are in the
/// side's `dump` table at that `seq` and `leaf` of the `file_no`-th dump file of the unit.
pub fn compare_sql(t: &Unit, g: &Unit) -> String {
    format!("{}\nORDER BY {}", joined_sql(t, g, true, &Mappings::default()), ROW_ORDER.join(", "))
}

/// [`compare_sql`] as the compare runs it: without its `ORDER BY`, since `run_in` orders the
/// rows itself (a sort in the plan would move every row once more, where ordering references
/// to the rows built from them moves nothing); and, unless `gated`, without the dtype gate:
/// `matched` is then true wherever a bench row has the key, and the compare applies the gate
/// to the dtype cells of the sides it builds (`rows::dtype_gate`), so that the statement reads
/// none of the leaves' columns.
///
/// With `mapped`, the target's key is `msprobe_target_key(item)`: its raw name under the
/// comparison's mappings, registered in the pair's session (`mapping.rs`).
fn joined_sql(t: &Unit, g: &Unit, gated: bool, mappings: &Mappings) -> String {
    let [target_key, golden_key] = key_sql(mappings);
    let matched = match gated {
        true => {
            let (torch, ms) = (in_list(&TORCH_FLOATS), in_list(&MS_FLOATS));
            format!(
                "g.item IS NOT NULL AND ((t.cmp_dtype IS NOT DISTINCT FROM g.cmp_dtype)
           OR (t.cmp_dtype IN {torch} AND g.cmp_dtype IN {torch})
           OR (t.cmp_dtype IN {ms} AND g.cmp_dtype IN {ms}))"
            )
        }
        false => "g.item IS NOT NULL".to_owned(),
    };
    format!(
        "WITH {},
{}
SELECT t.file_no, t.name AS t_name, t.item AS t_item, g.name AS g_name, g.item AS g_item,
       {matched} AS matched,
       t.seq AS t_seq, t.state AS t_state, t.leaf AS t_leaf, g.seq AS g_seq, g.state AS g_state, g.leaf AS g_leaf
FROM t_keyed t
LEFT JOIN g_keyed g ON t.file_no = g.file_no AND t.cmp_key = g.cmp_key",
        side_ctes("t", "target", t, gated, &target_key),
        side_ctes("g", "golden", g, gated, &golden_key),
    )
}

/// Each side's join key: msprobe's, with backward calls renumbered, or under the mapping
/// options the raw item, the target's through `msprobe_target_key` (`mapping.rs`).
fn key_sql(mappings: &Mappings) -> [String; 2] {
    const RENUMBERED: &str = "msprobe_compare_key(name, item, backward_order)";
    let target = match mappings.target_keys() {
        Keys::Renumbered => RENUMBERED.to_string(),
        Keys::Raw(_) if mappings.renames() => format!("{}(item)", TargetKey::NAME),
        Keys::Raw(_) => "item".to_string(),
    };
    let golden = match mappings.golden_keys() {
        Keys::Renumbered => RENUMBERED,
        Keys::Raw(_) => "item",
    };
    [target, golden.to_string()]
}

/// The SQL of `-fm`'s walk: both sides' keyed leaves, which `fuzzy.rs` pairs, in place of the
/// join of [`joined_sql`].
fn walked_sql(t: &Unit, g: &Unit, mappings: &Mappings) -> String {
    let [target_key, golden_key] = key_sql(mappings);
    format!(
        "WITH {},
{}
SELECT 'target' AS side, file_no, name, item, seq, state, leaf, cmp_key FROM t_keyed
UNION ALL
SELECT 'golden' AS side, file_no, name, item, seq, state, leaf, cmp_key FROM g_keyed",
        side_ctes("t", "target", t, false, &target_key),
        side_ctes("g", "golden", g, false, &golden_key),
    )
}

/// The SQL listing each side's dump files in pairing order.
fn files_sql(t: &Unit, g: &Unit) -> String {
    format!(
        "WITH {}, {}
SELECT 'target' AS side, file_no, inner_step, pid FROM t_files
UNION ALL
SELECT 'golden' AS side, file_no, inner_step, pid FROM g_files
ORDER BY side, file_no",
        files_cte("t", "target", t),
        files_cte("g", "golden", g),
    )
}

/// One dump file of a side as the plan lists it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanFile {
    pub key: Origin,
    pub has_md5: bool,
}

/// What the plans return for a unit pair.
pub(crate) struct PlanOutput {
    /// Target files in pairing order.
    pub target_files: Vec<PlanFile>,
    /// Golden files in pairing order.
    pub golden_files: Vec<PlanFile>,
    /// The columns of the compare rows, one per plan batch, in the order the plan returned them.
    batches: Vec<RowColumns>,
    /// The target's compared leaves, then the golden's.
    leaves: [SideLeaves; 2],
    /// file_no (1-based) → its rows, in msprobe's order.
    order: HashMap<i64, Vec<RowRef>>,
    /// Whether a pair of incompatible dtypes is no match (msprobe's check; off with `-dm`).
    checks_dtypes: bool,
}

/// A compare row: its batch and its row in that batch.
pub(crate) type RowRef = (u32, u32);

impl PlanOutput {
    /// The rows of dump file `file_no` (1-based), in msprobe's order.
    pub(crate) fn file_rows(&self, file_no: i64) -> &[RowRef] {
        self.order.get(&file_no).map_or(&[], Vec::as_slice)
    }

    /// The dump key (the target's entry name) of row `row`.
    pub(crate) fn key(&self, (b, r): RowRef) -> &str {
        self.batches.get(b as usize).and_then(|c| text_at(&c.names[0], r as usize)).unwrap_or_default()
    }

    /// Row `row`'s two sides, borrowing their texts from the plans' batches. They are built
    /// when the row's cells are, a dump key's rows at a time: built for a whole unit up front,
    /// they would be written and read back whole.
    ///
    /// `matched` is whether the row has a bench side (`stats` says so); `md5` whether the
    /// sides' md5 cells are wanted (md5 mode).
    pub(crate) fn row(&self, row: RowRef, matched: bool, md5: bool) -> Result<MatchedRow<'_>, CompareError> {
        self.columns(row)?.row(row.1 as usize, &self.leaves, matched, md5)
    }

    /// The statistics of row `row`'s target side and, where it is matched, its bench side: what
    /// `self.row(row)` gives them, without the rest of the sides.
    pub(crate) fn stats(&self, row: RowRef) -> Result<([PyVal; 4], Option<[PyVal; 4]>), CompareError> {
        self.columns(row)?.stats(row.1 as usize, &self.leaves, self.checks_dtypes)
    }

    fn columns(&self, (b, _): RowRef) -> Result<&RowColumns, CompareError> {
        self.batches.get(b as usize).ok_or_else(|| CompareError::Schema(format!("no plan batch {b}")))
    }
}

fn opt_i64(a: &ArrayRef, i: usize) -> Option<i64> {
    let a = a.as_primitive::<Int64Type>();
    a.is_valid(i).then(|| a.value(i))
}

fn opt_str(a: &ArrayRef, i: usize) -> Option<&str> {
    let a = a.as_string::<i32>();
    a.is_valid(i).then(|| a.value(i))
}

/// Runs the comparison's plans in a session where the two runs are named `target` and
/// `golden`, each holding the one unit of the pair whose scans are `files`.
pub(crate) async fn run_in(
    session: &RunSession,
    files: &PairFiles,
    prepared: &PreparedPlans,
    t: &Unit,
    g: &Unit,
    mappings: &Mappings,
) -> Result<PlanOutput, CompareError> {
    let started = std::time::Instant::now();
    // The join last: a task spawned last is the first its worker runs, and the join's
    // planning is the long one; the other core takes the three short plans and runs them.
    let joined = match mappings.walks() {
        true => walked_sql(t, g, mappings),
        false => joined_sql(t, g, false, mappings),
    };
    let sqls = [leaves_sql("target", t), leaves_sql("golden", g), files_sql(t, g), joined];
    let handles = prepared.start(session, files, &sqls.each_ref().map(String::as_str))?;
    let planning = handles.iter().any(PlanHandle::is_planning);
    let [t_leaves, g_leaves, files_plan, compare_plan] =
        <[_; 4]>::try_from(handles).map_err(|_| CompareError::Schema("the comparison has four plans".into()))?;
    // The file lists and the leaf scans are plans of their own, each run as soon as it is
    // planned: the leaf scans while the join is still being planned, and beside it, on the
    // cores the join's single-threaded stages leave idle.
    let task = session.context().task_ctx();
    let run = |handle: PlanHandle, what: &'static str| {
        let task = Arc::clone(&task);
        async move {
            let plan = handle.plan(what).await?;
            tracing::debug!(unit = %t, plan = what, elapsed = ?started.elapsed(), "compare plan made");
            let rows = collect(Arc::clone(&plan), task).await.map_err(QueryError::from)?;
            Ok::<_, CompareError>((plan, rows))
        }
    };
    let ((files_plan, file_rows), (compare_plan, batches), (t_plan, t_leaves), (g_plan, g_leaves)) = futures::try_join!(
        run(files_plan, "the file list"),
        run(compare_plan, "the compare join"),
        run(t_leaves, "the target's leaves"),
        run(g_leaves, "the golden's leaves")
    )?;
    tracing::debug!(unit = %t, elapsed = ?started.elapsed(), "compare plans ran");
    if planning {
        prepared.keep(files, &[t_plan, g_plan, files_plan, compare_plan]);
    }
    let (target_files, golden_files) = file_lists(&file_rows)?;
    let batches = match mappings.walks() {
        true => vec![walk_batches(&batches)?],
        false => batches,
    };
    let jobs = [(&t_leaves, &target_files), (&g_leaves, &golden_files)];
    let [t_leaves, g_leaves] = <[_; 2]>::try_from(map_scoped(&jobs, |(b, f)| SideLeaves::new(b, f, None)))
        .map_err(|_| CompareError::Schema("two sides".into()))?;
    let output = PlanOutput::assemble([target_files, golden_files], &batches, [t_leaves?, g_leaves?])?;
    Ok(output.checking_dtypes(mappings.checks_dtypes()))
}

impl PlanOutput {
    /// The output of a comparison's plans from its parts: each side's dump files in pairing
    /// order, the compare rows (batches of the columns [`compare_sql`] selects) and each
    /// side's compared leaves.
    pub(crate) fn assemble(
        [target_files, golden_files]: [Vec<Origin>; 2],
        batches: &[RecordBatch],
        [t_leaves, g_leaves]: [SideLeaves; 2],
    ) -> Result<PlanOutput, CompareError> {
        let listed = |keys: Vec<Origin>, side: &SideLeaves| {
            (1i64..).zip(keys).map(|(no, key)| PlanFile { key, has_md5: side.has_md5(no) }).collect()
        };
        let batches: Vec<RowColumns> = batches.iter().map(RowColumns::new).collect::<Result<_, _>>()?;
        // Each file gets the places of its rows, sorted; the rows are built from them later. A
        // unit is mostly one dump file: room for all rows up front spares the list its doublings.
        let rows: usize = batches.iter().map(|c| c.file_no.len()).sum();
        let mut by_file: HashMap<i64, Vec<(RowOrder, u32, u32)>> = HashMap::new();
        for (b, columns) in (0u32..).zip(&batches) {
            columns.order_into(b, &mut by_file, rows);
        }
        let mut order = HashMap::with_capacity(by_file.len());
        for (file_no, mut rows) in by_file {
            rows.sort_unstable();
            order.insert(file_no, rows.into_iter().map(|(_, b, r)| (b, r)).collect());
        }
        Ok(PlanOutput {
            target_files: listed(target_files, &t_leaves),
            golden_files: listed(golden_files, &g_leaves),
            batches,
            leaves: [t_leaves, g_leaves],
            order,
            checks_dtypes: true,
        })
    }

    /// The output with msprobe's dtype check on or off.
    pub(crate) fn checking_dtypes(mut self, yes: bool) -> Self {
        self.checks_dtypes = yes;
        self
    }
}

/// The target's and the golden's dump files, in pairing order, from the file-list plan.
fn file_lists(batches: &[RecordBatch]) -> Result<(Vec<Origin>, Vec<Origin>), CompareError> {
    let (mut target, mut golden) = (Vec::new(), Vec::new());
    for batch in batches {
        let side = cast_column(batch, "side", &DataType::Utf8)?;
        let inner = cast_column(batch, "inner_step", &DataType::Int64)?;
        let pid = cast_column(batch, "pid", &DataType::Int64)?;
        for i in 0..batch.num_rows() {
            let key = Origin { inner_step: opt_i64(&inner, i), pid: opt_i64(&pid, i) };
            match opt_str(&side, i) {
                Some("target") => target.push(key),
                _ => golden.push(key),
            }
        }
    }
    Ok((target, golden))
}

/// Where a row sorts inside its file: the target leaf's `(seq, state, leaf)`, then the bench
/// leaf's, each value mapped by [`sort_value`] so that the keys compare as SQL orders them.
type RowOrder = [u64; 6];

/// A value of [`ROW_ORDER`] as an unsigned number in the same order, NULL last. Two words per
/// value (`(is NULL, value)`) made the sorted list twice as large, and its sort slower.
/// `i64::MAX` would tie with NULL, and is mapped below it: no seq, state or leaf comes near.
fn sort_value(value: Option<i64>) -> u64 {
    match value {
        None => u64::MAX,
        Some(v) => ((v as u64) ^ (1 << 63)).min(u64::MAX - 1),
    }
}

/// One side of a compare row as the plans give it: row name, dump key, leaf.
type RowLeaf<'a> = (&'a str, &'a str, LeafColumns<'a>);

/// The columns of a plan batch that its rows are read from, as the types they are read as.
struct RowColumns {
    file_no: Int64Array,
    /// `t_name`, `t_item`, `g_name`, `g_item`.
    names: [StringArray; 4],
    matched: BooleanArray,
    /// The columns of [`ROW_ORDER`] after `file_no`: `t_seq`, `t_state`, `t_leaf`, `g_seq`,
    /// `g_state`, `g_leaf`.
    order: [Int64Array; 6],
}

impl RowColumns {
    fn new(batch: &RecordBatch) -> Result<Self, CompareError> {
        let int64 = |c: &str| {
            Ok::<_, CompareError>(cast_column(batch, c, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
        };
        let utf8 = |c: &str| Ok::<_, CompareError>(cast_column(batch, c, &DataType::Utf8)?.as_string::<i32>().clone());
        let [t_name, t_item, g_name, g_item] = ["t_name", "t_item", "g_name", "g_item"].map(utf8);
        let [o1, o2, o3, o4, o5, o6] =
            [ROW_ORDER[1], ROW_ORDER[2], ROW_ORDER[3], ROW_ORDER[4], ROW_ORDER[5], ROW_ORDER[6]].map(int64);
        Ok(RowColumns {
            file_no: int64(ROW_ORDER[0])?,
            names: [t_name?, t_item?, g_name?, g_item?],
            matched: cast_column(batch, "matched", &DataType::Boolean)?.as_boolean().clone(),
            order: [o1?, o2?, o3?, o4?, o5?, o6?],
        })
    }

    /// Adds the batch's rows (`b`) to their files' lists, with their sort keys. A row without
    /// a target name has no place in the table.
    /// `rows` (all batches' rows) is the room the first file's list is made with.
    fn order_into(&self, b: u32, by_file: &mut HashMap<i64, Vec<(RowOrder, u32, u32)>>, rows: usize) {
        let [t_name, t_item, ..] = &self.names;
        for (r, i) in (0u32..).zip(0..self.matched.len()) {
            if t_name.is_null(i) || t_item.is_null(i) {
                continue;
            }
            let order = self.order.each_ref().map(|key| sort_value(key.is_valid(i).then(|| key.value(i))));
            let file_no = if self.file_no.is_valid(i) { self.file_no.value(i) } else { 0 };
            let room = if by_file.is_empty() { rows } else { 0 };
            by_file.entry(file_no).or_insert_with(|| Vec::with_capacity(room)).push((order, b, r));
        }
    }

    /// The leaves of row `i`: the target's, and the golden's where it is matched, looked up in
    /// `leaves`. `gated` is the dtype gate's verdict where it is known already (it reads both
    /// leaves' dtype cells, a JSON parse for a scalar).
    fn leaves_of<'a>(
        &'a self,
        i: usize,
        leaves: &'a [SideLeaves; 2],
        gated: Option<bool>,
    ) -> Result<(RowLeaf<'a>, Option<RowLeaf<'a>>), CompareError> {
        let [t_name, t_item, g_name, g_item] = &self.names;
        let [t_seq, _, t_leaf, g_seq, _, g_leaf] = &self.order;
        let file_no = if self.file_no.is_valid(i) { self.file_no.value(i) } else { 0 };
        let leaf_at = |side: usize, seq: &Int64Array, leaf: &Int64Array| {
            leaves[side].get(file_no, seq.value(i), leaf.value(i)).ok_or_else(|| {
                CompareError::Schema(format!(
                    "{} leaf {}/{} of dump file {file_no} missing from its scan",
                    ["target", "golden"][side],
                    seq.value(i),
                    leaf.value(i)
                ))
            })
        };
        let (Some(item), Some(name)) = (text_at(t_item, i), text_at(t_name, i)) else {
            return Err(CompareError::Schema(format!("compare row {i} has no target name")));
        };
        let npu = (item, name, leaf_at(0, t_seq, t_leaf)?);
        let joined = self.matched.is_valid(i) && self.matched.value(i) && gated != Some(false);
        let bench = match (joined, text_at(g_item, i), text_at(g_name, i)) {
            (true, Some(item), Some(name)) => Some((item, name, leaf_at(1, g_seq, g_leaf)?)),
            _ => None,
        };
        // The statement leaves the dtype gate to here: a refused bench leaf is no match.
        let bench = bench.filter(|(item, _, leaf)| {
            gated.unwrap_or_else(|| {
                dtype_gate(npu.2.compare_dtype(npu.0).as_deref(), leaf.compare_dtype(item).as_deref())
            })
        });
        Ok((npu, bench))
    }

    fn row<'a>(
        &'a self,
        i: usize,
        leaves: &'a [SideLeaves; 2],
        matched: bool,
        md5: bool,
    ) -> Result<MatchedRow<'a>, CompareError> {
        let (npu, bench) = self.leaves_of(i, leaves, Some(matched))?;
        let side = |(item, name, leaf): RowLeaf<'a>| side_of_leaf(item, name, &leaf, md5);
        Ok((side(npu), bench.map(side)))
    }

    fn stats(
        &self,
        i: usize,
        leaves: &[SideLeaves; 2],
        checks_dtypes: bool,
    ) -> Result<([PyVal; 4], Option<[PyVal; 4]>), CompareError> {
        let (npu, bench) = self.leaves_of(i, leaves, if checks_dtypes { None } else { Some(true) })?;
        let stats = |(item, _, leaf): RowLeaf<'_>| leaf_stats(item, &leaf);
        Ok((stats(npu), bench.map(stats)))
    }
}

/// The compare rows of `-fm`: the walk over both sides' keyed leaves ([`walked_sql`]'s rows).
fn walk_batches(batches: &[RecordBatch]) -> Result<RecordBatch, CompareError> {
    let mut columns = Vec::with_capacity(batches.len());
    for batch in batches {
        let int64 = |c: &str| {
            Ok::<_, CompareError>(cast_column(batch, c, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
        };
        let utf8 = |c: &str| Ok::<_, CompareError>(cast_column(batch, c, &DataType::Utf8)?.as_string::<i32>().clone());
        let texts = [utf8("side")?, utf8("name")?, utf8("item")?, utf8("cmp_key")?];
        let numbers = [int64("file_no")?, int64("seq")?, int64("state")?, int64("leaf")?];
        columns.push((texts, numbers));
    }
    let (mut t, mut g) = (Vec::new(), Vec::new());
    for ([side, name, item, key], [file_no, seq, state, leaf]) in &columns {
        for i in 0..side.len() {
            let row = KeyedLeaf {
                file_no: file_no.value(i),
                seq: seq.value(i),
                leaf: leaf.value(i),
                state: i32::try_from(state.value(i)).unwrap_or_default(),
                name: name.value(i),
                item: item.value(i),
                key: std::borrow::Cow::Borrowed(key.value(i)),
            };
            match side.value(i) {
                "target" => t.push(row),
                _ => g.push(row),
            }
        }
    }
    pairs_batch(&fuzzy_pairs(&t, &g))
}

#[cfg(test)]
mod tests {
    use super::sort_value;

    #[test]
    fn sort_values_order_as_sql_with_nulls_last() {
        let values = [Some(3), None, Some(-5), Some(0), Some(i64::MIN), Some(i64::MAX - 1), Some(1 << 40)];
        let mut by_key = values.to_vec();
        by_key.sort_by_key(|&v| sort_value(v));
        let mut expected: Vec<Option<i64>> = values.iter().copied().flatten().map(Some).collect();
        expected.sort();
        expected.push(None);
        assert_eq!(by_key, expected);
        assert!(sort_value(Some(i64::MAX)) < sort_value(None));
    }
}
