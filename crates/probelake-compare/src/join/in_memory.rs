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

use datafusion::arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
// hashbrown with foldhash: std's SipHash was ~2% of a comparison of two dump.json files.
use datafusion::common::HashMap;
use probelake_msprobe::{Origin, UnitTables};

use crate::error::CompareError;
use crate::join::fuzzy::fuzzy_pairs;
use crate::join::keyed::{pairs_batch, KeyedLeaf};
use crate::join::leaves::SideLeaves;
use crate::join::mapping::{Keys, Mappings};
use crate::join::plan::PlanOutput;
use crate::threads::{cores, map_scoped};
use probelake_format::columns::{cast_column, typed};
use probelake_query::msprobe::rows::KeyRules;

/// The compare rows of target unit `t` against golden unit `g`, as [`plan::run_in`] gives them
/// for the same units in two datasets.
///
/// [`plan::run_in`]: crate::join::plan::run_in
pub(crate) fn plan_in_memory(t: &UnitTables, g: &UnitTables, mappings: &Mappings) -> Result<PlanOutput, CompareError> {
    let started = std::time::Instant::now();
    let sides = map_scoped(&[(t, mappings.target_keys()), (g, mappings.golden_keys())], |(tables, keys)| {
        KeyedSide::new(tables, *keys)
    });
    let [t, g] = <[_; 2]>::try_from(sides).map_err(|_| CompareError::Schema("two sides".into()))?;
    let (t, g) = (t?, g?);
    let keyed = started.elapsed();
    let rows = match mappings.walks() {
        true => vec![pairs_batch(&fuzzy_pairs(&t.rows, &g.rows))?],
        false => join(&t, &g)?,
    };
    let joined = started.elapsed();
    let output = PlanOutput::assemble([t.files, g.files], &rows, [t.leaves, g.leaves])?;
    tracing::debug!(?keyed, ?joined, assembled = ?started.elapsed(), "compare leaves joined in memory");
    Ok(output.checking_dtypes(mappings.checks_dtypes()))
}

/// One side's compared leaves with their join keys.
struct KeyedSide<'a> {
    /// The side's dump files, in pairing order (file_no - 1).
    files: Vec<Origin>,
    /// Compared leaves, in batch order.
    rows: Vec<KeyedLeaf<'a>>,
    leaves: SideLeaves,
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
        Ok(KeyColumns {
            inner_step: typed(batch, "inner_step")?,
            pid: typed(batch, "pid")?,
            seq: typed(batch, "seq")?,
            leaf: typed(batch, "leaf")?,
            name: typed(batch, "name")?,
            section: typed(batch, "section")?,
            item: typed(batch, "item")?,
        })
    }

    fn file(&self, i: usize) -> Origin {
        let at = |a: &Int64Array| a.is_valid(i).then(|| a.value(i));
        Origin { inner_step: at(self.inner_step), pid: at(self.pid) }
    }
}

impl<'a> KeyedSide<'a> {
    /// The side's keyed leaves, their keys made as `keys` says.
    fn new(tables: &'a UnitTables, keys: Keys<'_>) -> Result<Self, CompareError> {
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
        if let Keys::Raw(mappings) = keys {
            // With `-fm` alone the key is the item as it is.
            if let Some(mappings) = mappings.filter(|m| m.renames()) {
                for row in &mut rows {
                    row.key = Cow::Owned(mappings.target_key(row.item));
                }
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
fn dump_files(tables: &UnitTables, columns: &[KeyColumns]) -> Result<Vec<Origin>, CompareError> {
    let mut files = BTreeSet::new();
    let source = &tables.source;
    let int64 =
        |c: &str| Ok::<_, CompareError>(cast_column(source, c, &DataType::Int64)?.as_primitive::<Int64Type>().clone());
    let (inner, pid) = (int64("inner_step")?, int64("pid")?);
    for i in 0..source.num_rows() {
        files.insert(Origin {
            inner_step: inner.is_valid(i).then(|| inner.value(i)),
            pid: pid.is_valid(i).then(|| pid.value(i)),
        });
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
    pairs_batch(&pairs)
}
