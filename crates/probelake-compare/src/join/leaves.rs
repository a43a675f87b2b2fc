//! Each side's compared leaves as their `dump` columns, found by `(file_no, seq, leaf)`.
//!
//! The join plan carries only what it keys and orders by (names, dtype cells, positions); the
//! twelve columns a side's cells are read from come from a plain scan of each side
//! ([`leaves_sql`]) and are looked up here for the rows the join returns. Carried through the
//! join, they were copied by every operator on the way (the file-list join, the window's
//! repartition and sort, the final join).

use datafusion::arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::HashMap;
use probelake_format::Unit;

use crate::error::CompareError;
use probelake_format::columns::cast_column;
use probelake_msprobe::Origin;
use probelake_query::msprobe::leaf_side::{LeafArrays, LeafColumns, LEAF_COLUMNS};

/// The SQL of one side's compared leaves (schema `target` or `golden`): where they are and
/// their [`LEAF_COLUMNS`].
/// `step = … AND stage = '…' AND rank = …` for a table alias.
pub(crate) fn unit_filter(alias: &str, unit: &Unit) -> String {
    format!(
        "{alias}.step = {} AND {alias}.stage = '{}' AND {alias}.rank = {}",
        unit.step,
        unit.stage.replace('\'', "''"),
        unit.rank
    )
}

pub(crate) fn leaves_sql(schema: &str, unit: &Unit) -> String {
    format!(
        "SELECT d.inner_step, d.pid, d.seq, d.leaf, {}
FROM {schema}.dump d
WHERE {} AND msprobe_compare_state(d.name, d.section) IS NOT NULL",
        LEAF_COLUMNS.map(|c| format!("d.{c}")).join(", "),
        unit_filter("d", unit)
    )
}

/// One side's compared leaves, as its leaf plan returned them.
pub(crate) struct SideLeaves {
    arrays: Vec<LeafArrays>,
    at: Places,
    /// By file_no - 1: whether a compared leaf of the file has an `md5` field.
    md5: Vec<bool>,
}

/// Where each leaf is in the batches: (batch, row) by `(file_no, seq, leaf)`.
enum Places {
    /// By file (file_no - 1). Entries are numbered from 0 in parse order, so a file's slots
    /// are as many as its leaves, and a lookup is two reads where a hash table missed the cache.
    Dense(Vec<FileSlots>),
    /// For numbers that are not that dense.
    Hashed(HashMap<(i64, i64, i64), (u32, u32)>),
}

/// The leaves of one dump file: entry `seq`'s are `slots[starts[seq]..starts[seq + 1]]`.
struct FileSlots {
    starts: Vec<u32>,
    slots: Vec<Option<(u32, u32)>>,
}

/// One row's place: its file (file_no - 1), seq and leaf.
type Place = (usize, i64, i64);

impl SideLeaves {
    /// The leaves of `batches` (a plan of [`leaves_sql`]) in the side's dump files `files`,
    /// which are numbered 1, 2, … in that order. With `compared`, batch `b`'s row `i` is a
    /// leaf of the side only where `compared[b][i]` holds (batches of all a unit's leaves, read
    /// without a plan to filter them).
    pub(crate) fn new(
        batches: &[RecordBatch],
        files: &[Origin],
        compared: Option<&[Vec<bool>]>,
    ) -> Result<Self, CompareError> {
        let mut places: Vec<Vec<Place>> = Vec::with_capacity(batches.len());
        let mut arrays = Vec::with_capacity(batches.len());
        let mut md5 = vec![false; files.len()];
        for (b, batch) in batches.iter().enumerate() {
            let compared = compared.and_then(|c| c.get(b));
            let [inner, pid, seq, leaf] =
                ["inner_step", "pid", "seq", "leaf"].map(|c| cast_column(batch, c, &DataType::Int64));
            let (inner, pid, seq, leaf) = (inner?, pid?, seq?, leaf?);
            let [inner, pid, seq, leaf] = [&inner, &pid, &seq, &leaf].map(|a| a.as_primitive::<Int64Type>());
            let leaves = LeafArrays::new(batch, "")?;
            let opt = |a: &Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
            let mut batch_places = Vec::with_capacity(batch.num_rows());
            for i in 0..batch.num_rows() {
                let key = Origin { inner_step: opt(inner, i), pid: opt(pid, i) };
                // A unit's files are few: a linear search beats hashing the key. A leaf of no
                // listed file cannot be asked for; `usize::MAX` skips it.
                let k = match compared.is_none_or(|c| c.get(i).copied().unwrap_or(false)) {
                    true => files.iter().position(|f| *f == key).unwrap_or(usize::MAX),
                    false => usize::MAX,
                };
                if k != usize::MAX && !md5[k] && leaves.has_md5(i) {
                    md5[k] = true;
                }
                batch_places.push((k, seq.value(i), leaf.value(i)));
            }
            places.push(batch_places);
            arrays.push(leaves);
        }
        Ok(SideLeaves { arrays, at: Places::new(&places, files.len()), md5 })
    }

    /// The leaf at `seq`, `leaf` of dump file `file_no`.
    pub(crate) fn get(&self, file_no: i64, seq: i64, leaf: i64) -> Option<LeafColumns<'_>> {
        let (b, r) = self.at.get(file_no, seq, leaf)?;
        Some(self.arrays.get(b as usize)?.get(r as usize))
    }

    /// Whether a compared leaf of dump file `file_no` has an `md5` field (md5 mode).
    pub(crate) fn has_md5(&self, file_no: i64) -> bool {
        usize::try_from(file_no - 1).ok().and_then(|k| self.md5.get(k)).copied().unwrap_or(false)
    }
}

impl Places {
    /// The places of `places[batch][row]` in `files` dump files.
    fn new(places: &[Vec<Place>], files: usize) -> Places {
        let rows: usize = places.iter().map(Vec::len).sum();
        // Entries with leaves, by file: how many slots each needs.
        let mut widths: Vec<Vec<u32>> = vec![Vec::new(); files];
        let mut dense = true;
        for &(k, seq, leaf) in places.iter().flatten() {
            let Some(widths) = widths.get_mut(k) else { continue };
            let (Ok(seq), Ok(leaf)) = (usize::try_from(seq), u32::try_from(leaf)) else {
                dense = false;
                break;
            };
            // Numbers far beyond the row count would make the slots larger than the rows.
            if seq > rows + 1024 || leaf as usize > rows + 1024 {
                dense = false;
                break;
            }
            if widths.len() <= seq {
                widths.resize(seq + 1, 0);
            }
            widths[seq] = widths[seq].max(leaf + 1);
        }
        let slots: usize = widths.iter().flatten().map(|&w| w as usize).sum();
        if !dense || slots > 4 * rows + 1024 {
            let mut at = HashMap::with_capacity(rows);
            for (b, batch) in (0u32..).zip(places) {
                for (r, &(k, seq, leaf)) in (0u32..).zip(batch) {
                    if k < files {
                        at.insert((k as i64 + 1, seq, leaf), (b, r));
                    }
                }
            }
            return Places::Hashed(at);
        }
        let mut by_file: Vec<FileSlots> = widths
            .into_iter()
            .map(|widths| {
                let mut starts = Vec::with_capacity(widths.len() + 1);
                let mut next = 0u32;
                for w in widths {
                    starts.push(next);
                    next += w;
                }
                starts.push(next);
                FileSlots { starts, slots: vec![None; next as usize] }
            })
            .collect();
        for (b, batch) in (0u32..).zip(places) {
            for (r, &(k, seq, leaf)) in (0u32..).zip(batch) {
                let Some(FileSlots { starts, slots }) = by_file.get_mut(k) else { continue };
                if let Some(slot) = starts.get(seq as usize).and_then(|&s| slots.get_mut(s as usize + leaf as usize)) {
                    *slot = Some((b, r));
                }
            }
        }
        Places::Dense(by_file)
    }

    fn get(&self, file_no: i64, seq: i64, leaf: i64) -> Option<(u32, u32)> {
        match self {
            Places::Hashed(at) => at.get(&(file_no, seq, leaf)).copied(),
            Places::Dense(by_file) => {
                let FileSlots { starts, slots } = by_file.get(usize::try_from(file_no - 1).ok()?)?;
                let (seq, leaf) = (usize::try_from(seq).ok()?, usize::try_from(leaf).ok()?);
                let (start, end) = (*starts.get(seq)? as usize, *starts.get(seq + 1)? as usize);
                if start + leaf >= end {
                    return None;
                }
                *slots.get(start + leaf)?
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both layouts find every leaf where it is and nothing else.
    #[test]
    fn places_dense_and_hashed_agree() {
        // Two files; batch 1 starts inside file 1's entry 2; a leaf of no listed file.
        let dense = vec![
            vec![(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 2, 0)],
            vec![(0, 2, 1), (1, 0, 0), (1, 3, 2), (usize::MAX, 5, 0)],
        ];
        let mut sparse = dense.clone();
        sparse[1].push((1, 1 << 40, 0));
        let expect = |places: &Places, batches: &[Vec<Place>]| {
            for (b, batch) in (0u32..).zip(batches) {
                for (r, &(k, seq, leaf)) in (0u32..).zip(batch) {
                    if k != usize::MAX {
                        assert_eq!(places.get(k as i64 + 1, seq, leaf), Some((b, r)), "{k} {seq} {leaf}");
                    }
                }
            }
            for (file_no, seq, leaf) in [(1, 0, 2), (1, 1, 1), (2, 1, 0), (2, 3, 0), (3, 0, 0), (0, 5, 0), (1, -1, 0)] {
                assert_eq!(places.get(file_no, seq, leaf), None, "{file_no} {seq} {leaf}");
            }
        };
        let d = Places::new(&dense, 2);
        assert!(matches!(d, Places::Dense(_)));
        expect(&d, &dense);
        let h = Places::new(&sparse, 2);
        assert!(matches!(h, Places::Hashed(_)));
        expect(&h, &sparse);
    }
}
