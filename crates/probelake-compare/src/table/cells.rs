//! The rows of a comparison table, the cells' text in a few large buffers.
//!
//! A dump pair gives tens of thousands of rows of 30-odd cells; held as `Vec<Vec<String>>`,
//! allocating and freeing a string per cell dominated a comparison's time.

use std::fmt;

/// The rows of a comparison table: `len()` rows of `width()` cells each.
///
/// ```
/// use probelake_compare::Rows;
///
/// let rows = Rows::from_cells(2, ["a", "1", "b", "2"]);
/// assert_eq!(rows.len(), 2);
/// assert_eq!(rows.row(1).and_then(|r| r.get(0)), Some("b"));
/// assert_eq!(rows.iter().map(|r| r.iter().collect::<Vec<_>>().join("=")).collect::<Vec<_>>(), ["a=1", "b=2"]);
/// ```
#[derive(Clone, Default)]
pub struct Rows {
    /// Runs of rows, each in its own buffers: rows built on several cores are joined by moving
    /// their buffers rather than copying their text into one. Every piece but the last holds
    /// complete rows only.
    pieces: Vec<Piece>,
    /// The first row of each piece.
    starts: Vec<usize>,
    width: usize,
}

#[derive(Clone, Default)]
struct Piece {
    text: String,
    /// The end of each cell in `text`, row after row.
    ends: Vec<usize>,
}

impl Piece {
    fn rows(&self, width: usize) -> usize {
        self.ends.len().checked_div(width).unwrap_or(0)
    }

    /// The end in `text` of the first `rows` rows.
    fn text_end(&self, rows: usize, width: usize) -> usize {
        match rows {
            0 => 0,
            r => self.ends.get(r * width - 1).copied().unwrap_or(0),
        }
    }

    /// Row `i`, which is below `rows(width)`.
    fn row(&self, i: usize, width: usize) -> Row<'_> {
        let ends = &self.ends[i * width..(i + 1) * width];
        Row { text: &self.text, start: self.text_end(i, width), ends }
    }
}

impl Rows {
    /// An empty table of rows `width` cells wide.
    pub fn new(width: usize) -> Self {
        Rows { pieces: Vec::new(), starts: Vec::new(), width }
    }

    /// An empty table of rows `width` cells wide, with room for `rows` rows of `bytes` bytes
    /// of text in all.
    pub fn with_capacity(width: usize, rows: usize, bytes: usize) -> Self {
        let piece = Piece { text: String::with_capacity(bytes), ends: Vec::with_capacity(rows * width) };
        Rows { pieces: vec![piece], starts: vec![0], width }
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
        match (self.starts.last(), self.pieces.last()) {
            (Some(start), Some(piece)) => start + piece.rows(self.width),
            _ => 0,
        }
    }

    /// The bytes of text of all cells together.
    pub fn text_len(&self) -> usize {
        self.pieces.iter().map(|p| p.text.len()).sum()
    }

    /// The bytes of text of the cells of `rows` (complete rows only).
    pub(crate) fn text_len_of(&self, rows: std::ops::Range<usize>) -> usize {
        let width = self.width;
        self.pieces
            .iter()
            .zip(&self.starts)
            .map(|(piece, &start)| {
                let (from, to) = (rows.start.max(start), rows.end.min(start + piece.rows(width)));
                if from >= to {
                    return 0;
                }
                piece.text_end(to - start, width) - piece.text_end(from - start, width)
            })
            .sum()
    }

    /// Whether there is no complete row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> Option<Row<'_>> {
        if i >= self.len() {
            return None;
        }
        let k = self.starts.partition_point(|&start| start <= i).checked_sub(1)?;
        Some(self.pieces.get(k)?.row(i - self.starts[k], self.width))
    }

    /// The rows in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { rows: self, piece: 0, row: 0, left: self.len() }
    }

    /// The piece cells are pushed to.
    fn last_piece(&mut self) -> &mut Piece {
        if self.pieces.is_empty() {
            self.pieces.push(Piece::default());
            self.starts.push(0);
        }
        let last = self.pieces.len() - 1;
        &mut self.pieces[last]
    }

    /// Appends a cell to the row being filled.
    pub(crate) fn push(&mut self, cell: &str) {
        let piece = self.last_piece();
        piece.text.push_str(cell);
        piece.ends.push(piece.text.len());
    }

    /// Appends the cells of `row` (of another table) to the row being filled, their text in one
    /// copy.
    pub(crate) fn push_cells(&mut self, row: Row<'_>) {
        let piece = self.last_piece();
        let base = piece.text.len();
        piece.text.push_str(row.cells_text());
        piece.ends.extend(row.ends.iter().map(|&e| e - row.start + base));
    }

    /// Appends a cell that `write` writes into the buffer itself (no string of its own).
    pub(crate) fn push_with(&mut self, write: impl FnOnce(&mut String)) {
        let piece = self.last_piece();
        write(&mut piece.text);
        piece.ends.push(piece.text.len());
    }

    /// Removes every cell, keeping the first buffers.
    pub(crate) fn clear(&mut self) {
        self.pieces.truncate(1);
        self.starts.truncate(1);
        if let Some(piece) = self.pieces.first_mut() {
            piece.text.clear();
            piece.ends.clear();
        }
    }

    /// Appends the rows of `other`, which must be as wide, by taking its buffers. Only after a
    /// row left unfinished are its cells copied, to go on filling that row.
    pub(crate) fn append(&mut self, other: Rows) {
        debug_assert_eq!(self.width, other.width);
        let cells: usize = self.pieces.iter().map(|p| p.ends.len()).sum();
        if cells == 0 {
            *self = other;
            return;
        }
        let unfinished = self.pieces.last().is_some_and(|p| self.width == 0 || p.ends.len() % self.width != 0);
        for piece in other.pieces.into_iter().filter(|p| !p.ends.is_empty()) {
            if unfinished {
                let last = self.last_piece();
                let base = last.text.len();
                last.text.push_str(&piece.text);
                last.ends.extend(piece.ends.iter().map(|e| e + base));
            } else {
                self.starts.push(self.len());
                self.pieces.push(piece);
            }
        }
    }

    /// Every cell, row after row, an unfinished last row included.
    fn cells(&self) -> impl Iterator<Item = &str> + '_ {
        self.pieces.iter().flat_map(|p| {
            p.ends.iter().scan(0, |start, &end| {
                let cell = p.text.get(*start..end).unwrap_or_default();
                *start = end;
                Some(cell)
            })
        })
    }
}

impl PartialEq for Rows {
    /// Tables are equal when they hold the same cells, however their pieces were built.
    fn eq(&self, other: &Rows) -> bool {
        self.width == other.width && self.cells().eq(other.cells())
    }
}

impl Eq for Rows {}

/// The rows of [`Rows`] in order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    rows: &'a Rows,
    /// Where the next row is: its piece and its place in the piece.
    piece: usize,
    row: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Row<'a>;

    fn next(&mut self) -> Option<Row<'a>> {
        if self.left == 0 {
            return None;
        }
        let width = self.rows.width;
        let mut piece = self.rows.pieces.get(self.piece)?;
        while self.row >= piece.rows(width) {
            self.piece += 1;
            self.row = 0;
            piece = self.rows.pieces.get(self.piece)?;
        }
        let row = piece.row(self.row, width);
        self.row += 1;
        self.left -= 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
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

    /// The text of all the row's cells, one after another.
    pub(crate) fn cells_text(&self) -> &'a str {
        let end = self.ends.last().copied().unwrap_or(self.start);
        self.text.get(self.start..end).unwrap_or_default()
    }

    /// The cells' bytes in order, without `get`'s checks per cell (the CSV renders every cell).
    pub(crate) fn cell_bytes(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let text = self.text.as_bytes();
        let mut start = self.start;
        self.ends.iter().map(move |&end| {
            let cell = text.get(start..end).unwrap_or_default();
            start = end;
            cell
        })
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

    #[test]
    fn cells_of_a_row_pushed_at_once() {
        let from = Rows::from_cells(3, ["a", "", "bc", "d", "ef", ""]);
        let mut to = Rows::new(4);
        for row in &from {
            to.push("x");
            to.push_cells(row);
        }
        assert_eq!(format!("{to:?}"), r#"[["x", "a", "", "bc"], ["x", "d", "ef", ""]]"#);
    }

    #[test]
    fn appended_pieces_read_as_one_table() {
        let cells: Vec<String> = (0..30).map(|i| format!("c{i}")).collect();
        let whole = Rows::from_cells(3, &cells);
        let mut joined = Rows::new(3);
        for chunk in [&cells[..6], &cells[6..6], &cells[6..21], &cells[21..]] {
            joined.append(Rows::from_cells(3, chunk));
        }
        assert_eq!(joined.pieces.len(), 3, "moved, not copied");
        assert_eq!(joined, whole);
        assert_eq!((joined.len(), joined.text_len()), (10, whole.text_len()));
        assert_eq!(format!("{joined:?}"), format!("{whole:?}"));
        for i in 0..11 {
            assert_eq!(format!("{:?}", joined.row(i)), format!("{:?}", whole.row(i)), "row {i}");
            for j in i..12 {
                assert_eq!(joined.text_len_of(i..j), whole.text_len_of(i..j), "rows {i}..{j}");
            }
        }
        assert_eq!(joined.iter().len(), 10);
        assert!(joined.iter().zip(whole.iter()).all(|(a, b)| a.iter().eq(b.iter())));

        // After an unfinished row the next table's cells go on filling it.
        let mut open = Rows::from_cells(3, &cells[..4]);
        open.append(Rows::from_cells(3, &cells[4..]));
        assert_eq!(open, whole);
        assert_eq!(open.pieces.len(), 1);
        open.clear();
        assert!(open.is_empty() && open.text_len() == 0);
    }
}
