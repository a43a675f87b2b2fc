//! The first divergence of one unit pair, found by reading both sides in execution order and
//! stopping there: the rows of `sql/first_divergence.sql` for that pair, without reading what
//! comes after.
//!
//! Each side's output rows come from its api-family files (each sorted by `seq`), merged by
//! `seq` and decoded a batch at a time. The side that is behind in `seq` is read next, so the
//! two stay abreast: a target row usually finds its golden row already read. One that does not
//! waits (`waiting`) until that row comes or the golden side ends. Once a target row past the
//! threshold is found, reading stops as soon as no earlier target row can still beat it: every
//! target row up to its `seq` read, none of them waiting.
//!
//! The rules are the query's, row for row: the target side drops `Torch.empty*`, `Torch.fill*`
//! and `Tensor.__setitem__*`; a backward row is keyed by its op and its order among that op's
//! backward calls (per inner step and pid); rows pair on (inner step, key); the error is the
//! largest `rel_err` of max, min, mean and norm; the first row is the least (`seq`, `item`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::common::HashMap;
use probelake_format::columns;
use probelake_format::lake::{FetchedFile, FileBatches};
use probelake_format::FormatError;
use probelake_msprobe::Origin;

use crate::msprobe::rel_err::rel_err;

/// The dump columns the search reads.
const COLUMNS: [&str; 11] =
    ["seq", "name", "op", "direction", "item", "max", "min", "mean", "norm", "inner_step", "pid"];

/// Rows decoded at a time: small, so that stopping early leaves most of a file undecoded (a
/// unit's family file holds a few hundred to a few thousand output rows). On the bench's runs
/// (docs/benchmarks.md) 256 took ~15% off where they part early against 2048, and cost
/// nothing measurable where they never part.
const BATCH_ROWS: usize = 256;

/// The api families whose calls count as communication (`after_communication`).
pub const COMMUNICATION_APIS: [&str; 3] = ["Distributed", "MintDistributed", "communication"];

/// The first diverging output row of a unit pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Diverging {
    /// Its entry's position.
    pub seq: i64,
    /// The entry's name.
    pub name: String,
    /// The output leaf.
    pub item: String,
    /// The largest relative error of its statistics.
    pub rel_err: f64,
    /// Target and golden max.
    pub max: (Option<f64>, Option<f64>),
    /// Target and golden norm.
    pub norm: (Option<f64>, Option<f64>),
}

/// The first output row of the target at which the two sides differ by more than `threshold`,
/// or `None` where they never do; each side given as its unit's dump files, fetched.
///
/// `golden_keys_unique` says the golden unit holds one dump file, so that no two of its rows
/// share a key: a target row is then settled by the first golden row with its key. Otherwise
/// (or when two golden rows turn out to share a key) the golden side is read whole first.
pub fn first_divergence(
    target: Vec<FetchedFile>,
    golden: Vec<FetchedFile>,
    threshold: f64,
    golden_keys_unique: bool,
) -> Result<Option<Diverging>, FormatError> {
    if golden_keys_unique {
        let (t, g) = (target.clone(), golden.clone());
        // `None`: two golden rows share a key after all; read golden whole.
        if let Some(found) = Search::new(threshold).abreast(Outputs::open(t, true)?, Outputs::open(g, false)?)? {
            return Ok(found);
        }
    }
    Search::new(threshold).golden_first(Outputs::open(target, true)?, Outputs::open(golden, false)?)
}

/// The first `seq` of a communication call among `files` (the target's communication-family
/// dump files), reading each only up to its first one.
pub fn first_communication(files: Vec<FetchedFile>) -> Result<Option<i64>, FormatError> {
    let mut first: Option<i64> = None;
    for file in files {
        let mut batches = file.batches(&["seq", "name"], None, BATCH_ROWS)?;
        'file: while let Some(batch) = batches.next() {
            let batch = batch?;
            let seq: Int64Array = typed(&batch, "seq", batches.location())?;
            let name: StringArray = typed(&batch, "name", batches.location())?;
            for i in 0..batch.num_rows() {
                if is_communication(name.value(i)) {
                    let s = seq.value(i);
                    first = Some(first.map_or(s, |f| f.min(s)));
                    break 'file;
                }
            }
        }
    }
    Ok(first)
}

/// The query's test for a communication call.
fn is_communication(name: &str) -> bool {
    const FAMILIES: [&str; 3] = ["Distributed.", "MintDistributed.", "communication.comm_func."];
    const CALLS: [&str; 7] = ["send", "recv", "broadcast", "reduce", "gather", "scatter", "all_to_all"];
    FAMILIES.iter().any(|f| name.starts_with(f)) && CALLS.iter().any(|c| name.contains(c))
}

/// Names the target side leaves out, as msprobe's `-da` does.
fn left_out(name: &str) -> bool {
    name.starts_with("Torch.empty") || name.starts_with("Torch.fill") || name.starts_with("Tensor.__setitem__")
}

/// One decoded output row.
struct Row<'a> {
    seq: i64,
    name: &'a str,
    op: &'a str,
    direction: Option<&'a str>,
    item: &'a str,
    stats: Stats,
    inner_step: Option<i64>,
    pid: Option<i64>,
}

/// max, min, mean, norm.
type Stats = [Option<f64>; 4];

/// The columns of one decoded batch.
struct Columns {
    seq: Int64Array,
    name: StringArray,
    op: StringArray,
    direction: StringArray,
    item: StringArray,
    stats: [Float64Array; 4],
    inner_step: Int64Array,
    pid: Int64Array,
}

impl Columns {
    fn of(batch: &RecordBatch, location: &str) -> Result<Self, FormatError> {
        let float = |name: &str| typed::<Float64Array>(batch, name, location);
        Ok(Columns {
            seq: typed(batch, "seq", location)?,
            name: typed(batch, "name", location)?,
            op: typed(batch, "op", location)?,
            direction: typed(batch, "direction", location)?,
            item: typed(batch, "item", location)?,
            stats: [float("max")?, float("min")?, float("mean")?, float("norm")?],
            inner_step: typed(batch, "inner_step", location)?,
            pid: typed(batch, "pid", location)?,
        })
    }

    fn row(&self, i: usize) -> Row<'_> {
        let float = |a: &Float64Array| a.is_valid(i).then(|| a.value(i));
        let int = |a: &Int64Array| a.is_valid(i).then(|| a.value(i));
        Row {
            seq: self.seq.value(i),
            name: self.name.value(i),
            op: self.op.value(i),
            direction: self.direction.is_valid(i).then(|| self.direction.value(i)),
            item: self.item.value(i),
            stats: [float(&self.stats[0]), float(&self.stats[1]), float(&self.stats[2]), float(&self.stats[3])],
            inner_step: int(&self.inner_step),
            pid: int(&self.pid),
        }
    }
}

fn corrupt(location: &str, message: String) -> FormatError {
    FormatError::Corrupt { location: location.to_string(), message }
}

/// The column `name` of `batch` (from the file at `location`) as an array of type `A`.
fn typed<A: Array + Clone + 'static>(batch: &RecordBatch, name: &str, location: &str) -> Result<A, FormatError> {
    columns::typed::<A>(batch, name).cloned().map_err(|e| corrupt(location, e.to_string()))
}

/// One file's output rows, a batch at a time.
struct Cursor {
    batches: FileBatches,
    columns: Option<Columns>,
    at: usize,
}

impl Cursor {
    /// Moves on to the next batch with rows when this one is used up; `columns` is `None` at
    /// the end of the file.
    fn fill(&mut self) -> Result<(), FormatError> {
        while self.columns.as_ref().is_none_or(|c| self.at >= c.seq.len()) {
            match self.batches.next() {
                Some(batch) => {
                    self.columns = Some(Columns::of(&batch?, self.batches.location())?);
                    self.at = 0;
                }
                None => {
                    self.columns = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn seq(&self) -> Option<i64> {
        self.columns.as_ref().map(|c| c.seq.value(self.at))
    }
}

/// A side's output rows over all its files, merged by `seq`.
struct Outputs {
    cursors: Vec<Cursor>,
    is_target: bool,
    numbering: Numbering,
}

impl Outputs {
    fn open(files: Vec<FetchedFile>, is_target: bool) -> Result<Self, FormatError> {
        let mut cursors = Vec::with_capacity(files.len());
        for file in files {
            let batches = file.batches(&COLUMNS, Some(("section", "output")), BATCH_ROWS)?;
            let mut cursor = Cursor { batches, columns: None, at: 0 };
            cursor.fill()?;
            cursors.push(cursor);
        }
        Ok(Outputs { cursors, is_target, numbering: Numbering::default() })
    }

    /// The file holding the next row in `seq` order, and that `seq`.
    fn peek(&self) -> Option<(usize, i64)> {
        let mut next: Option<(usize, i64)> = None;
        for (i, cursor) in self.cursors.iter().enumerate() {
            if let Some(seq) = cursor.seq() {
                if next.is_none_or(|(_, s)| seq < s) {
                    next = Some((i, seq));
                }
            }
        }
        next
    }

    /// Calls `visit` with the next row and its key (none for a row the side leaves out), then
    /// moves past it.
    fn take<R>(
        &mut self,
        file: usize,
        visit: impl FnOnce(&Row<'_>, Option<Cow<'_, str>>) -> R,
    ) -> Result<R, FormatError> {
        let cursor = &mut self.cursors[file];
        let result = match cursor.columns.as_ref() {
            Some(columns) => {
                let row = columns.row(cursor.at);
                if self.is_target && left_out(row.name) {
                    visit(&row, None)
                } else {
                    let key = self.numbering.key(&row);
                    visit(&row, Some(key))
                }
            }
            None => return Err(corrupt(cursor.batches.location(), "read past the end".into())),
        };
        cursor.at += 1;
        cursor.fill()?;
        Ok(result)
    }
}

/// The order of each backward call among the backward calls of its op, per inner step and
/// pid: `dense_rank() OVER (... ORDER BY seq) - 1` as rows come in `seq` order.
#[derive(Default)]
struct Numbering {
    /// Per (inner step, pid), per op: the last backward call's `seq` and its order.
    last: HashMap<Origin, HashMap<String, LastCall>>,
}

/// The `seq` of an op's last backward call and its order.
type LastCall = (i64, i64);

impl Numbering {
    /// The query's `key` of `row`.
    fn key<'a>(&mut self, row: &Row<'a>) -> Cow<'a, str> {
        let order = match row.direction {
            Some("backward") => self.order(row),
            Some(_) => return Cow::Borrowed(row.item),
            // A row without a direction shares the one window partition of the non-backward
            // rows, where every row ties: order 0.
            None => 0,
        };
        let suffix = after_chars(row.item, row.name.chars().count());
        Cow::Owned(if row.name.ends_with(".backward") {
            format!("{}.{order}.backward{suffix}", row.op)
        } else {
            format!("{}.backward.{order}{suffix}", row.op)
        })
    }

    fn order(&mut self, row: &Row<'_>) -> i64 {
        let ops = self.last.entry(Origin { inner_step: row.inner_step, pid: row.pid }).or_default();
        match ops.get_mut(row.op) {
            Some((seq, order)) => {
                if *seq != row.seq {
                    *seq = row.seq;
                    *order += 1;
                }
                *order
            }
            None => {
                ops.insert(row.op.to_string(), (row.seq, 0));
                0
            }
        }
    }
}

/// `substr(text, chars + 1)`: what follows the first `chars` characters.
fn after_chars(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or("", |(i, _)| &text[i..])
}

/// The largest relative error of two rows' statistics (a NULL one counts as 0).
fn largest_error(target: &Stats, golden: &Stats) -> f64 {
    target
        .iter()
        .zip(golden)
        .map(|(t, g)| match (t, g) {
            (Some(t), Some(g)) => rel_err(*t, *g).unwrap_or(0.0),
            _ => 0.0,
        })
        .fold(0.0, f64::max)
}

/// A target row waiting for its golden row.
struct Waiting {
    seq: i64,
    name: String,
    item: String,
    stats: Stats,
}

/// Golden rows read so far, by (inner step, key).
type GoldenIndex = HashMap<Option<i64>, HashMap<Box<str>, Vec<Stats>>>;

struct Search {
    threshold: f64,
    best: Option<Diverging>,
}

impl Search {
    fn new(threshold: f64) -> Self {
        Search { threshold, best: None }
    }

    /// Keeps `row` (with `golden`'s statistics) if it diverges and comes before the best so far.
    fn judge(&mut self, seq: i64, name: &str, item: &str, stats: &Stats, golden: &Stats) {
        let error = largest_error(stats, golden);
        if !(error > 0.0 && error > self.threshold) {
            return;
        }
        if self.best.as_ref().is_some_and(|b| (b.seq, b.item.as_str()) <= (seq, item)) {
            return;
        }
        self.best = Some(Diverging {
            seq,
            name: name.to_string(),
            item: item.to_string(),
            rel_err: error,
            max: (stats[0], golden[0]),
            norm: (stats[3], golden[3]),
        });
    }

    /// Judges the target `row` against the golden rows of `index` with its `key`; `false`
    /// when no golden row read so far has that key.
    fn judge_in(&mut self, index: &GoldenIndex, row: &Row<'_>, key: &str) -> bool {
        let Some(golden) = index.get(&row.inner_step).and_then(|m| m.get(key)) else { return false };
        for stats in golden {
            self.judge(row.seq, row.name, row.item, &row.stats, stats);
        }
        true
    }

    /// Reads both sides abreast; `Ok(None)` when two golden rows share a key (the caller then
    /// reads golden first).
    fn abreast(mut self, mut target: Outputs, mut golden: Outputs) -> Result<Option<Option<Diverging>>, FormatError> {
        let mut index: GoldenIndex = HashMap::default();
        let mut waiting: HashMap<Option<i64>, HashMap<Box<str>, Vec<Waiting>>> = HashMap::default();
        // seq -> how many target rows of that seq wait.
        let mut waiting_seqs: BTreeMap<i64, usize> = BTreeMap::new();
        loop {
            let next_target = target.peek();
            if let Some(best) = &self.best {
                let read_past = next_target.is_none_or(|(_, seq)| seq > best.seq);
                let settled = waiting_seqs.first_key_value().is_none_or(|(&seq, _)| seq > best.seq);
                if read_past && settled {
                    break;
                }
            }
            let next_golden = golden.peek();
            if next_golden.is_none() && !waiting_seqs.is_empty() {
                // No golden row is left to pair with: the waiting rows have no partner.
                waiting.clear();
                waiting_seqs.clear();
            }
            match (next_target, next_golden) {
                (None, None) => break,
                (None, Some(_)) if waiting_seqs.is_empty() => break,
                // The golden side has ended: nothing waits any more.
                (Some((file, _)), None) => {
                    target.take(file, |row, key| {
                        if let Some(key) = key {
                            self.judge_in(&index, row, &key);
                        }
                    })?;
                }
                (Some((file, seq)), Some((_, golden_seq))) if seq < golden_seq => {
                    target.take(file, |row, key| {
                        let Some(key) = key else { return };
                        if self.judge_in(&index, row, &key) {
                            return;
                        }
                        let waiter =
                            Waiting { seq: row.seq, name: row.name.into(), item: row.item.into(), stats: row.stats };
                        waiting.entry(row.inner_step).or_default().entry(key.into()).or_default().push(waiter);
                        *waiting_seqs.entry(row.seq).or_default() += 1;
                    })?;
                }
                (_, Some((gf, _))) => {
                    let shared_key = golden.take(gf, |row, key| {
                        let Some(key) = key else { return false };
                        let keys = index.entry(row.inner_step).or_default();
                        if keys.contains_key(key.as_ref()) {
                            return true;
                        }
                        if let Some(rows) = waiting.get_mut(&row.inner_step).and_then(|m| m.remove(key.as_ref())) {
                            for t in rows {
                                self.judge(t.seq, &t.name, &t.item, &t.stats, &row.stats);
                                if let Some(n) = waiting_seqs.get_mut(&t.seq) {
                                    *n -= 1;
                                    if *n == 0 {
                                        waiting_seqs.remove(&t.seq);
                                    }
                                }
                            }
                        }
                        keys.insert(key.into(), vec![row.stats]);
                        false
                    })?;
                    if shared_key {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(Some(self.best))
    }

    /// Reads the golden side whole, then the target up to its first diverging row.
    fn golden_first(mut self, mut target: Outputs, mut golden: Outputs) -> Result<Option<Diverging>, FormatError> {
        let mut index: GoldenIndex = HashMap::default();
        while let Some((file, _)) = golden.peek() {
            golden.take(file, |row, key| {
                if let Some(key) = key {
                    index.entry(row.inner_step).or_default().entry(key.into()).or_default().push(row.stats);
                }
            })?;
        }
        while let Some((file, seq)) = target.peek() {
            if self.best.as_ref().is_some_and(|b| seq > b.seq) {
                break;
            }
            target.take(file, |row, key| {
                if let Some(key) = key {
                    self.judge_in(&index, row, &key);
                }
            })?;
        }
        Ok(self.best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communication_is_the_query_s_test() {
        assert!(is_communication("Distributed.all_reduce.0.forward"));
        assert!(is_communication("communication.comm_func.send.1.forward"));
        assert!(is_communication("MintDistributed.all_to_all_single.0.forward"));
        assert!(!is_communication("Distributed.get_rank.0.forward"));
        assert!(!is_communication("Torch.all_reduce.0.forward"));
    }

    #[test]
    fn suffixes_count_characters() {
        assert_eq!(
            after_chars("Functional.linear.0.backward.output.0", "Functional.linear.0.backward".len()),
            ".output.0"
        );
        assert_eq!(after_chars("é.a", 1), ".a");
        assert_eq!(after_chars("ab", 5), "");
    }

    #[test]
    fn errors_take_the_largest_statistic_and_ignore_tokens() {
        let t = [Some(1.0), Some(2.0), None, Some(f64::NAN)];
        let g = [Some(1.0), Some(1.0), Some(3.0), Some(f64::NAN)];
        assert_eq!(largest_error(&t, &g), 1.0);
        assert_eq!(largest_error(&[Some(1.0), None, None, None], &[Some(0.0), None, None, None]), 0.0);
    }
}
