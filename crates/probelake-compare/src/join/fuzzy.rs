//! msprobe compare's `-fm` (`--fuzzy-match`): rows paired by a greedy walk over both sides in
//! dump order, on names with their call counters taken out, instead of by equal keys. The rules
//! are msprobe 26.2's (`core/compare/acc_compare.py`: `Match.process_fuzzy_match`, `match_op`,
//! `check_op_item`, `rename_api`), as docs/msprobe-compare.md §5 gives them:
//!
//! - a name loses the two dot-separated parts before its first `forward` (or, without one,
//!   `backward`), and anything after a second one: `Functional.linear.3.forward.input.0` and
//!   `Functional.linear.7.forward.input.0` are both `Functional.linear.forward.input.0`;
//! - step `i` puts target row `i` and golden row `i` on two queues, then looks for a pair: the
//!   newest target row against each waiting golden row, oldest first (the newest golden row
//!   last), then each older target row against the newest golden row. A pair writes the target
//!   rows before it as unmatched, then itself, and drops both queues up to it; golden rows
//!   passed over are never written;
//! - once one side has no more rows and the other's queue is empty, the walk stops: target rows
//!   after that point are not written at all (msprobe's own output drops them too).
//!
//! Each queue is a window of its side's rows, so a lookup is a binary search among the rows of
//! the same name rather than a scan of the queue.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use crate::join::keyed::KeyedLeaf;

/// The compare rows of the fuzzy walk, target row by target row: each target leaf written, with
/// its golden partner or none. The target's and the golden's rows may come in any order; each
/// dump file (`file_no`) is walked on its own, in msprobe's row order.
pub(crate) fn fuzzy_pairs<'r, 'a>(
    t: &'r [KeyedLeaf<'a>],
    g: &'r [KeyedLeaf<'a>],
) -> Vec<(&'r KeyedLeaf<'a>, Option<&'r KeyedLeaf<'a>>)> {
    let (t, g) = (by_file(t), by_file(g));
    let mut pairs = Vec::new();
    for (file_no, t_rows) in &t {
        let g_rows = g.get(file_no).map_or(&[][..], Vec::as_slice);
        walk(t_rows, g_rows, &mut pairs);
    }
    pairs
}

/// A side's rows per dump file, each file's in msprobe's order (entry, section, leaf).
fn by_file<'r, 'a>(rows: &'r [KeyedLeaf<'a>]) -> BTreeMap<i64, Vec<&'r KeyedLeaf<'a>>> {
    let mut files: BTreeMap<i64, Vec<&KeyedLeaf<'a>>> = BTreeMap::new();
    for row in rows {
        files.entry(row.file_no).or_default().push(row);
    }
    for rows in files.values_mut() {
        rows.sort_by_key(|r| (r.seq, r.state, r.leaf));
    }
    files
}

/// One dump file's walk.
fn walk<'r, 'a>(
    t: &[&'r KeyedLeaf<'a>],
    g: &[&'r KeyedLeaf<'a>],
    out: &mut Vec<(&'r KeyedLeaf<'a>, Option<&'r KeyedLeaf<'a>>)>,
) {
    let (t_names, g_names) = (Names::new(t), Names::new(g));
    // Each queue holds its side's rows from its start up to the newest one put on it.
    let (mut t_start, mut g_start) = (0, 0);
    let (mut t_newest, mut g_newest) = (None, None);
    for i in 0..t.len().max(g.len()) {
        if i < t.len() {
            t_newest = Some(i);
        }
        if i < g.len() {
            g_newest = Some(i);
        }
        let (Some(tn), Some(gn)) = (t_newest.filter(|&n| n >= t_start), g_newest.filter(|&n| n >= g_start)) else {
            // msprobe stops once exactly one queue is empty after a step.
            break;
        };
        // The newest target row against the golden queue, oldest first (the newest golden row
        // last); then the older target rows against the newest golden row.
        let pair = match g_names.first_in(t_names.of(tn), g_start..gn + 1) {
            Some(b) => Some((tn, b)),
            None => t_names.first_in(g_names.of(gn), t_start..tn).map(|n| (n, gn)),
        };
        let Some((n, b)) = pair else { continue };
        out.extend(t[t_start..n].iter().map(|row| (*row, None)));
        out.push((t[n], Some(g[b])));
        (t_start, g_start) = (n + 1, b + 1);
    }
    if let Some(tn) = t_newest.filter(|&n| n >= t_start) {
        out.extend(t[t_start..=tn].iter().map(|row| (*row, None)));
    }
}

/// A side's rows by their fuzzy names: each row's, and for each name the rows that have it.
struct Names<'r> {
    of_row: Vec<Cow<'r, str>>,
    rows: HashMap<String, Vec<usize>>,
}

impl<'r> Names<'r> {
    fn new(rows: &[&'r KeyedLeaf<'_>]) -> Self {
        let of_row: Vec<Cow<'r, str>> = rows.iter().map(|r| fuzzy_name(r.key.as_ref())).collect();
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, name) in of_row.iter().enumerate() {
            by_name.entry(name.to_string()).or_default().push(i);
        }
        Names { of_row, rows: by_name }
    }

    fn of(&self, i: usize) -> &str {
        self.of_row.get(i).map_or("", |n| n.as_ref())
    }

    /// The first row in `range` named `name`.
    fn first_in(&self, name: &str, range: std::ops::Range<usize>) -> Option<usize> {
        let rows = self.rows.get(name)?;
        rows.get(rows.partition_point(|&r| r < range.start)).copied().filter(|r| range.contains(r))
    }
}

/// msprobe's `Match.rename_api`: `name` without the two dot-separated parts before its first
/// `forward` (or, lacking one, its first `backward`), nor anything after a second one.
pub(crate) fn fuzzy_name(name: &str) -> Cow<'_, str> {
    let process = match (name.contains("forward"), name.contains("backward")) {
        (true, _) => "forward",
        (false, true) => "backward",
        (false, false) => return Cow::Borrowed(name),
    };
    let mut parts = name.split(process);
    let (head, in_out) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    // Python's `head.rsplit('.', 2)[0]`.
    let mut end = head.len();
    for _ in 0..2 {
        match head[..end].rfind('.') {
            Some(dot) => end = dot,
            None => break,
        }
    }
    Cow::Owned(format!("{}.{process}{in_out}", &head[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_counters_as_msprobe_renames_them() {
        assert_eq!(fuzzy_name("Functional.linear.3.forward.input.0"), "Functional.linear.forward.input.0");
        assert_eq!(fuzzy_name("Functional.linear.4.backward.output.0"), "Functional.linear.backward.output.0");
        // A module loses its class and keeps its counter.
        assert_eq!(fuzzy_name("Module.blocks.0.up.Linear.forward.0.input.0"), "Module.blocks.0.up.forward.0.input.0");
        // `forward` twice: what follows the second is dropped.
        assert_eq!(fuzzy_name("Module.ffn.feedforward.Linear.forward.0.input.0"), "Module.forward.Linear.");
        assert_eq!(
            fuzzy_name("Module.head.proj.Linear.parameters_grad.weight"),
            "Module.head.proj.Linear.parameters_grad.weight"
        );
        assert_eq!(fuzzy_name("forward"), ".forward");
    }

    fn leaf(seq: i64, key: &str) -> KeyedLeaf<'_> {
        KeyedLeaf { file_no: 1, seq, leaf: 0, state: 0, name: key, item: key, key: Cow::Borrowed(key) }
    }

    fn walked<'k>(t: &'k [KeyedLeaf<'k>], g: &'k [KeyedLeaf<'k>]) -> Vec<(&'k str, Option<&'k str>)> {
        fuzzy_pairs(t, g).into_iter().map(|(t, g)| (t.item, g.map(|g| g.item))).collect()
    }

    #[test]
    fn the_walk_pairs_skips_and_stops_as_msprobe_does() {
        let names = |ns: &[&'static str]| ns.iter().enumerate().map(|(i, n)| leaf(i as i64, n)).collect::<Vec<_>>();
        // Renumbered calls pair; an extra golden op is passed over.
        let t = names(&["A.f.0.forward.input.0", "B.g.0.forward.input.0", "C.h.0.forward.input.0"]);
        let g = names(&[
            "A.f.5.forward.input.0",
            "X.x.0.forward.input.0",
            "B.g.1.forward.input.0",
            "C.h.2.forward.input.0",
        ]);
        assert_eq!(
            walked(&t, &g),
            [
                ("A.f.0.forward.input.0", Some("A.f.5.forward.input.0")),
                ("B.g.0.forward.input.0", Some("B.g.1.forward.input.0")),
                ("C.h.0.forward.input.0", Some("C.h.2.forward.input.0")),
            ]
        );
        // A target op the golden run lacks, at the end: once the golden queue is empty and the
        // golden side has no more rows, the walk stops; only the row already queued is written.
        let t = names(&[
            "A.f.0.forward.input.0",
            "Z.z.0.forward.input.0",
            "Z.z.0.forward.input.1",
            "Z.z.0.forward.output.0",
        ]);
        let g = names(&["A.f.0.forward.input.0"]);
        assert_eq!(
            walked(&t, &g),
            [("A.f.0.forward.input.0", Some("A.f.0.forward.input.0")), ("Z.z.0.forward.input.0", None)]
        );
        // An unmatched target row in the middle is written when a later one pairs.
        let t = names(&["A.f.0.forward.input.0", "Z.z.0.forward.input.0", "B.g.0.forward.input.0"]);
        let g = names(&["A.f.0.forward.input.0", "B.g.0.forward.input.0", "C.c.0.forward.input.0"]);
        assert_eq!(
            walked(&t, &g),
            [
                ("A.f.0.forward.input.0", Some("A.f.0.forward.input.0")),
                ("Z.z.0.forward.input.0", None),
                ("B.g.0.forward.input.0", Some("B.g.0.forward.input.0")),
            ]
        );
    }
}
