//! The comparison of two units whose tables are in memory (msprobe files read in place, see
//! [`inputs::DumpTree`](crate::runs::DumpTree)): what `plan.rs`'s DataFusion plans give for
//! a unit pair in a dataset, made by a hash join in plain Rust. Both build the same
//! [`PlanOutput`], so the rows, cells and files that follow are made by one code path.
//!
//! For two dump.json files this is the whole comparison: no dataset is written and no plan is
//! made, where importing both sides first spent more time encoding and decoding Parquet than
//! comparing.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Int32Array, Int64Array, Int64Builder, RecordBatch, StringArray,
    StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
// hashbrown with foldhash: std's SipHash was ~2% of a comparison of two dump.json files.
use datafusion::common::HashMap;
use probelake_msprobe::UnitTables;

use crate::join::columns::as_type;
use crate::join::leaves::SideLeaves;
use crate::join::load::FileKey;
use crate::join::mapping::Mappings;
use crate::join::plan::PlanOutput;
use crate::threads::{cores, map_scoped};
use crate::CompareError;
use probelake_query::msprobe::rows::KeyRules;

/// The compare rows of target unit `t` against golden unit `g`, as [`plan::run_in`] gives them
/// for the same units in two datasets.
///
/// [`plan::run_in`]: crate::join::plan::run_in
pub(crate) fn plan_in_memory(t: &UnitTables, g: &UnitTables, mappings: &Mappings) -> Result<PlanOutput, CompareError> {
    let started = std::time::Instant::now();
    let mapped = (!mappings.is_empty()).then_some(mappings);
    let sides = map_scoped(&[(t, mapped), (g, None)], |(tables, mappings)| KeyedSide::new(tables, *mappings));
    let [t, g] = <[_; 2]>::try_from(sides).map_err(|_| CompareError::Schema("two sides".into()))?;
    let (t, g) = (t?, g?);
    let keyed = started.elapsed();
    let rows = join(&t, &g)?;
    let joined = started.elapsed();
    let output = PlanOutput::assemble([t.files, g.files], &rows, [t.leaves, g.leaves])?;
    tracing::debug!(?keyed, ?joined, assembled = ?started.elapsed(), "compare leaves joined in memory");
    Ok(output.checking_dtypes(mappings.checks_dtypes()))
}

/// One side's compared leaves with their join keys.
struct KeyedSide<'a> {
    /// The side's dump files, in pairing order (file_no - 1).
    files: Vec<FileKey>,
    /// Compared leaves, in batch order.
    rows: Vec<KeyedLeaf<'a>>,
    leaves: SideLeaves,
}

/// A compared leaf: where it is, its order inside its entry and its join key.
struct KeyedLeaf<'a> {
    file_no: i64,
    seq: i64,
    leaf: i64,
    state: i32,
    name: &'a str,
    item: &'a str,
    /// msprobe's key: the item, or for a backward entry the item renumbered.
    key: Cow<'a, str>,
}

/// The columns of a `dump` batch the keys are made from, borrowed from the batch (read in
/// memory, they have the types of `probelake_format::schema::dump_schema`).
struct KeyColumns<'a> {
    inner_step: &'a Int64Array,
    pid: &'a Int64Array,
    seq: &'a Int64Array,
    leaf: &'a Int32Array,
    name: &'a StringArray,
    section: &'a StringArray,
    item: &'a StringArray,
}

impl<'a> KeyColumns<'a> {
    fn new(batch: &'a RecordBatch) -> Result<Self, CompareError> {
        let column =
            |c: &str| batch.column_by_name(c).ok_or_else(|| CompareError::Schema(format!("dump column `{c}` missing")));
        let wrong = |c: &str| CompareError::Schema(format!("dump column `{c}` has an unexpected type"));
        let int64 = |c: &str| column(c)?.as_primitive_opt::<Int64Type>().ok_or_else(|| wrong(c));
        let utf8 = |c: &str| column(c)?.as_string_opt::<i32>().ok_or_else(|| wrong(c));
        Ok(KeyColumns {
            inner_step: int64("inner_step")?,
            pid: int64("pid")?,
            seq: int64("seq")?,
            leaf: column("leaf")?.as_primitive_opt::<Int32Type>().ok_or_else(|| wrong("leaf"))?,
            name: utf8("name")?,
            section: utf8("section")?,
            item: utf8("item")?,
        })
    }

    fn file(&self, i: usize) -> FileKey {
        let at = |a: &Int64Array| a.is_valid(i).then(|| a.value(i));
        (at(self.inner_step), at(self.pid))
    }
}

impl<'a> KeyedSide<'a> {
    /// The side's keyed leaves; with `mappings` (the target's, when a comparison has some),
    /// every key is its raw item under them, none renumbered (msprobe's rule).
    fn new(tables: &'a UnitTables, mappings: Option<&Mappings>) -> Result<Self, CompareError> {
        let columns: Vec<KeyColumns> = tables.dump.iter().map(KeyColumns::new).collect::<Result<_, _>>()?;
        let files = dump_files(tables, &columns)?;
        let mut rules = KeyRules::default();
        let mut rows = Vec::new();
        let mut compared = Vec::with_capacity(columns.len());
        // Backward entries are renumbered within their group, by file order (`dense_rank`
        // over their seq): their rows wait for the ranks, the others are keyed at once.
        let mut backward: Vec<(usize, &'a str)> = Vec::new();
        let mut groups: HashMap<(i64, &'a str), Vec<i64>> = HashMap::new();
        for c in &columns {
            let mut kept = Vec::with_capacity(c.name.len());
            for i in 0..c.name.len() {
                let (Some(name), Some(item)) = (text(c.name, i), text(c.item, i)) else {
                    kept.push(false);
                    continue;
                };
                let Some(state) = rules.compare_state(name, text(c.section, i).unwrap_or_default()) else {
                    kept.push(false);
                    continue;
                };
                let key = c.file(i);
                let Some(file_no) = files.iter().position(|f| *f == key).map(|k| k as i64 + 1) else {
                    kept.push(false);
                    continue;
                };
                kept.push(true);
                let (seq, leaf) = (c.seq.value(i), i64::from(c.leaf.value(i)));
                if let Some(group) = rules.backward_group(name) {
                    backward.push((rows.len(), group));
                    groups.entry((file_no, group)).or_default().push(seq);
                }
                rows.push(KeyedLeaf { file_no, seq, leaf, state, name, item, key: Cow::Borrowed(item) });
            }
            compared.push(kept);
        }
        for seqs in groups.values_mut() {
            seqs.sort_unstable();
            seqs.dedup();
        }
        if let Some(mappings) = mappings {
            for row in &mut rows {
                row.key = Cow::Owned(mappings.target_key(row.item));
            }
            let leaves = SideLeaves::new(&tables.dump, &files, Some(&compared))?;
            return Ok(KeyedSide { files, rows, leaves });
        }
        // Other rows' key is their item, as they were made; a backward row's is written anew.
        for (i, group) in backward {
            let Some(row) = rows.get_mut(i) else { continue };
            let order = groups.get(&(row.file_no, group)).and_then(|seqs| seqs.binary_search(&row.seq).ok());
            let mut key = String::with_capacity(row.item.len() + 4);
            let keyed = rules.write_compare_key(&mut key, row.name, row.item, order.unwrap_or(0) as i64);
            if order.is_none() || keyed != Ok(true) {
                return Err(CompareError::Schema(format!("no compare key for {}", row.item)));
            }
            row.key = Cow::Owned(key);
        }
        let leaves = SideLeaves::new(&tables.dump, &files, Some(&compared))?;
        Ok(KeyedSide { files, rows, leaves })
    }
}

fn text(a: &StringArray, i: usize) -> Option<&str> {
    a.is_valid(i).then(|| a.value(i))
}

/// A side's dump files in pairing order: every `(inner_step, pid)` of its `source` and `dump`
/// rows, sorted with NULLs first (as the plans' `dense_rank` numbers them).
fn dump_files(tables: &UnitTables, columns: &[KeyColumns]) -> Result<Vec<FileKey>, CompareError> {
    let mut files = BTreeSet::new();
    let source = &tables.source;
    let int64 =
        |c: &str| Ok::<_, CompareError>(as_type(source, c, &DataType::Int64)?.as_primitive::<Int64Type>().clone());
    let (inner, pid) = (int64("inner_step")?, int64("pid")?);
    for i in 0..source.num_rows() {
        files.insert((inner.is_valid(i).then(|| inner.value(i)), pid.is_valid(i).then(|| pid.value(i))));
    }
    for c in columns {
        for i in 0..c.name.len() {
            files.insert(c.file(i));
        }
    }
    Ok(files.into_iter().collect())
}

/// `LEFT JOIN` of the target's keyed leaves with the golden's on `(file_no, key)`: a row per
/// match, or one without a bench side, as batches of the columns the plans' join selects. The
/// golden's index is built on one core, and the target's rows are probed in runs on all of
/// them, a batch per run, in the target's order.
fn join(t: &KeyedSide<'_>, g: &KeyedSide<'_>) -> Result<Vec<RecordBatch>, CompareError> {
    let mut index: Index<'_, '_> = HashMap::with_capacity(g.rows.len());
    for row in &g.rows {
        index.entry((row.file_no, row.key.as_ref())).or_default().push(row);
    }
    let (n, runs) = (t.rows.len(), (t.rows.len() / MIN_PROBE_ROWS).clamp(1, cores()));
    let size = n.div_ceil(runs);
    // As many runs as that, the first one (empty) for a target without rows.
    let runs: Vec<&[KeyedLeaf<'_>]> = (0..runs).map(|r| &t.rows[(r * size).min(n)..((r + 1) * size).min(n)]).collect();
    map_scoped(&runs, |rows| probe(rows, &index)).into_iter().collect()
}

/// Each run of the probe has at least this many target rows: fewer are not worth a thread.
const MIN_PROBE_ROWS: usize = 8192;

/// The golden's leaves by `(file_no, key)`.
type Index<'i, 'a> = HashMap<(i64, &'i str), Vec<&'i KeyedLeaf<'a>>>;

/// The joined rows of the target's leaves `rows` against the golden's `index`.
fn probe(rows: &[KeyedLeaf<'_>], index: &Index<'_, '_>) -> Result<RecordBatch, CompareError> {
    // The pairs first, so that each column is sized to what it gets: the texts, sized by
    // guess, were copied again as they grew.
    let mut pairs: Vec<(&KeyedLeaf<'_>, Option<&KeyedLeaf<'_>>)> = Vec::with_capacity(rows.len());
    for row in rows {
        let bench: &[&KeyedLeaf<'_>] = index.get(&(row.file_no, &*row.key)).map_or(&[], Vec::as_slice);
        pairs.extend(bench.iter().map(|b| (row, Some(*b))).chain(bench.is_empty().then_some((row, None))));
    }
    let n = pairs.len();
    let mut bytes = [0; 4];
    for (t, g) in &pairs {
        let lens = [Some(t.name), Some(t.item), g.map(|g| g.name), g.map(|g| g.item)].map(|s| s.map_or(0, str::len));
        for (total, len) in bytes.iter_mut().zip(lens) {
            *total += len;
        }
    }
    let mut file_no = Int64Builder::with_capacity(n);
    let mut names: [StringBuilder; 4] = bytes.map(|b| StringBuilder::with_capacity(n, b));
    let mut matched = BooleanBuilder::with_capacity(n);
    let mut order: [Int64Builder; 6] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
    for &(row, b) in &pairs {
        file_no.append_value(row.file_no);
        names[0].append_value(row.name);
        names[1].append_value(row.item);
        names[2].append_option(b.map(|b| b.name));
        names[3].append_option(b.map(|b| b.item));
        matched.append_value(b.is_some());
        let sides = [Some(row), b];
        for (side, cols) in sides.iter().zip(order.chunks_mut(3)) {
            cols[0].append_option(side.map(|s| s.seq));
            cols[1].append_option(side.map(|s| i64::from(s.state)));
            cols[2].append_option(side.map(|s| s.leaf));
        }
    }
    let [t_name, t_item, g_name, g_item] = names.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let [t_seq, t_state, t_leaf, g_seq, g_state, g_leaf] = order.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("file_no", Arc::new(file_no.finish())),
        ("t_name", t_name),
        ("t_item", t_item),
        ("g_name", g_name),
        ("g_item", g_item),
        ("matched", Arc::new(matched.finish())),
        ("t_seq", t_seq),
        ("t_state", t_state),
        ("t_leaf", t_leaf),
        ("g_seq", g_seq),
        ("g_state", g_state),
        ("g_leaf", g_leaf),
    ];
    let schema =
        Schema::new(columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect::<Vec<_>>());
    Ok(RecordBatch::try_new(Arc::new(schema), columns.into_iter().map(|(_, a)| a).collect())?)
}
