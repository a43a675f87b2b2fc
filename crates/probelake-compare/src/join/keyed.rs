//! A compared leaf with its join key, and the compare rows made of pairs of them: the columns
//! the plans' join selects, whichever way the pairs were found (a hash join in memory, or
//! `-fm`'s walk over a dataset's leaves or msprobe files').

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder, Int64Builder, RecordBatch, StringBuilder};
use datafusion::arrow::datatypes::{Field, Schema};

use crate::error::CompareError;

/// A compared leaf: where it is, its order inside its entry and its join key.
pub(crate) struct KeyedLeaf<'a> {
    pub file_no: i64,
    pub seq: i64,
    pub leaf: i64,
    pub state: i32,
    pub name: &'a str,
    pub item: &'a str,
    /// msprobe's key: the item, or for a backward entry the item renumbered.
    pub key: Cow<'a, str>,
}

/// Compare rows as the plans' join selects them: one per (target leaf, golden leaf or none).
pub(crate) fn pairs_batch(pairs: &[(&KeyedLeaf<'_>, Option<&KeyedLeaf<'_>>)]) -> Result<RecordBatch, CompareError> {
    let n = pairs.len();
    let mut bytes = [0; 4];
    for (t, g) in pairs {
        let lens = [Some(t.name), Some(t.item), g.map(|g| g.name), g.map(|g| g.item)].map(|s| s.map_or(0, str::len));
        for (total, len) in bytes.iter_mut().zip(lens) {
            *total += len;
        }
    }
    let mut file_no = Int64Builder::with_capacity(n);
    let mut names: [StringBuilder; 4] = bytes.map(|b| StringBuilder::with_capacity(n, b));
    let mut matched = BooleanBuilder::with_capacity(n);
    let mut order: [Int64Builder; 6] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
    for &(row, b) in pairs {
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
