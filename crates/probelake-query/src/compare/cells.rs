//! The rows of a comparison table, every cell's text in one buffer.
//!
//! A 10 MB dump pair gives about 40,000 rows of 30-odd cells. Held as `Vec<Vec<String>>`,
//! allocating and freeing those 1.2 million strings took a third of a comparison's time.

use std::fmt;

/// The rows of a comparison table: `len()` rows of `width()` cells each.
///
/// ```
/// use probelake_query::compare::Rows;
///
/// let rows = Rows::from_cells(2, ["a", "1", "b", "2"]);
/// assert_eq!(rows.len(), 2);
/// assert_eq!(rows.row(1).and_then(|r| r.get(0)), Some("b"));
/// assert_eq!(rows.iter().map(|r| r.iter().collect::<Vec<_>>().join("=")).collect::<Vec<_>>(), ["a=1", "b=2"]);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Rows {
    text: String,
    /// The end of each cell in `text`, row after row.
    ends: Vec<usize>,
    width: usize,
}

impl Rows {
    /// An empty table of rows `width` cells wide.
    pub fn new(width: usize) -> Self {
        Rows { text: String::new(), ends: Vec::new(), width }
    }

    /// An empty table of rows `width` cells wide, with room for `rows` rows of `bytes` bytes
    /// of text in all.
    pub fn with_capacity(width: usize, rows: usize, bytes: usize) -> Self {
        Rows { text: String::with_capacity(bytes), ends: Vec::with_capacity(rows * width), width }
    }

    /// A table `width` cells wide holding `cells`, row after row. A last row with fewer than
    /// `width` cells is not counted until it is complete.
    pub fn from_cells<S: AsRef<str>>(width: usize, cells: impl IntoIterator<Item = S>) -> Self {
        let mut rows = Rows::new(width);
        for cell in cells {
            rows.push(cell.as_ref());
        }
        rows
    }

    /// Cells per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The number of complete rows.
    pub fn len(&self) -> usize {
        self.ends.len().checked_div(self.width).unwrap_or(0)
    }

    /// The bytes of text of all cells together.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// The bytes of text of the cells of `rows` (complete rows only).
    pub(crate) fn text_len_of(&self, rows: std::ops::Range<usize>) -> usize {
        let end_of = |row: usize| match row.min(self.len()) {
            0 => 0,
            r => self.ends.get(r * self.width - 1).copied().unwrap_or(0),
        };
        end_of(rows.end).saturating_sub(end_of(rows.start))
    }

    /// Whether there is no complete row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> Option<Row<'_>> {
        (i < self.len()).then(|| self.row_at(i))
    }

    /// The rows in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { rows: self, range: 0..self.len() }
    }

    /// Row `i`, which is below `len()`.
    fn row_at(&self, i: usize) -> Row<'_> {
        let ends = &self.ends[i * self.width..(i + 1) * self.width];
        let start = if i == 0 { 0 } else { self.ends[i * self.width - 1] };
        Row { text: &self.text, start, ends }
    }

    /// Appends a cell to the row being filled.
    pub(crate) fn push(&mut self, cell: &str) {
        self.text.push_str(cell);
        self.ends.push(self.text.len());
    }

    /// Appends a cell that `write` writes into the buffer itself (no string of its own).
    pub(crate) fn push_with(&mut self, write: impl FnOnce(&mut String)) {
        write(&mut self.text);
        self.ends.push(self.text.len());
    }

    /// Removes every cell, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// Appends the rows of `other`, which must be as wide; takes its buffers when this table
    /// is empty.
    pub(crate) fn append(&mut self, other: Rows) {
        debug_assert_eq!(self.width, other.width);
        if self.ends.is_empty() {
            *self = other;
            return;
        }
        let base = self.text.len();
        self.text.push_str(&other.text);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }
}

/// The rows of [`Rows`] in order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    rows: &'a Rows,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Row<'a>;

    fn next(&mut self) -> Option<Row<'a>> {
        self.range.next().map(|i| self.rows.row_at(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Rows {
    type Item = Row<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Rows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One row of [`Rows`].
#[derive(Clone, Copy)]
pub struct Row<'a> {
    text: &'a str,
    /// Where the row's first cell starts.
    start: usize,
    ends: &'a [usize],
}

impl<'a> Row<'a> {
    /// Cell `i`.
    pub fn get(&self, i: usize) -> Option<&'a str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { self.start } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the row has no cell.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The cells in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a str> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }
}

impl fmt::Debug for Row<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_cells_apart() {
        let mut a = Rows::from_cells(3, ["", "x", "yz", "1", "", "2"]);
        a.push("partial");
        assert_eq!(a.len(), 2);
        let b = Rows::from_cells(3, ["p", "q", "r"]);
        let mut c = Rows::from_cells(3, ["", "x", "yz", "1", "", "2"]);
        c.append(b);
        assert_eq!(format!("{c:?}"), r#"[["", "x", "yz"], ["1", "", "2"], ["p", "q", "r"]]"#);
        assert_eq!(c.row(2).and_then(|r| r.get(2)), Some("r"));
        assert!(c.row(3).is_none() && c.row(0).is_some_and(|r| r.get(3).is_none()));
        assert!(Rows::new(0).is_empty());
        assert_eq!((c.text_len_of(0..1), c.text_len_of(1..3), c.text_len_of(0..9)), (3, 5, 8));
        a.push("x");
        assert_eq!(a.text_len_of(0..3), 5, "the unfinished row is not counted");
    }
}
