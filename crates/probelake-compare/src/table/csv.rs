//! pandas `DataFrame.to_csv(index=False)` output: Python's csv module with QUOTE_MINIMAL,
//! `"` doubled inside quoted fields, `\n` line ends.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver};

use probelake_format::output_tree::Parts;

use crate::table::cells::{Row, Rows};
use crate::threads::cores;

/// Rows rendered at a time: a few MB of text.
const PIECE_ROWS: usize = 8192;

/// The most rows msprobe writes to one CSV file (`FileCheckConst.MAX_ROWS_PER_CSV_FILE`): a
/// longer table is cut into `…_part_1.csv`, `…_part_2.csv`, …, each with the header.
pub const MAX_CSV_ROWS: usize = 1_000_000;

/// CSV text of some rows, and where each row's text ends (to cut it between rows).
pub(crate) struct Rendered {
    text: Vec<u8>,
    ends: Vec<usize>,
}

/// Where rendered rows are written.
pub(crate) trait RowSink {
    /// Writes `rows` after those written before.
    fn write_rows(&mut self, rows: &Rendered) -> std::io::Result<()>;
}

/// One stream of rows, however many (the header is the caller's).
pub(crate) struct Whole<'w, W: Write>(pub(crate) &'w mut W);

impl<W: Write> RowSink for Whole<'_, W> {
    fn write_rows(&mut self, rows: &Rendered) -> std::io::Result<()> {
        self.0.write_all(&rows.text)
    }
}

/// Files of at most `max_rows` rows each, each starting with the header, as msprobe cuts a
/// long table ([`MAX_CSV_ROWS`]).
pub(crate) struct CutFiles<'p> {
    parts: &'p mut Parts,
    header: Vec<u8>,
    max_rows: usize,
    in_file: usize,
}

impl<'p> CutFiles<'p> {
    /// Starts the first file with `header` (a table with no rows is that file alone).
    pub(crate) fn new(parts: &'p mut Parts, header: Vec<u8>, max_rows: usize) -> std::io::Result<Self> {
        parts.current()?.write_all(&header)?;
        Ok(CutFiles { parts, header, max_rows: max_rows.max(1), in_file: 0 })
    }

    /// The files of a table with columns `header`, cut every [`MAX_CSV_ROWS`] rows.
    pub(crate) fn as_msprobe(parts: &'p mut Parts, header: &[String]) -> std::io::Result<Self> {
        Self::new(parts, header_line(header), MAX_CSV_ROWS)
    }
}

impl RowSink for CutFiles<'_> {
    fn write_rows(&mut self, rows: &Rendered) -> std::io::Result<()> {
        let (mut row, mut byte) = (0, 0);
        while row < rows.ends.len() {
            if self.in_file == self.max_rows {
                self.parts.next_file()?.write_all(&self.header)?;
                self.in_file = 0;
            }
            let take = (self.max_rows - self.in_file).min(rows.ends.len() - row);
            let end = rows.ends[row + take - 1];
            self.parts.current()?.write_all(&rows.text[byte..end])?;
            (row, byte) = (row + take, end);
            self.in_file += take;
        }
        Ok(())
    }
}

/// Appends one field, quoted where it holds a separator, a quote or a line end.
fn push_field(out: &mut Vec<u8>, field: &[u8]) {
    if field.iter().any(|&b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        push_quoted(out, field);
    } else {
        out.extend_from_slice(field);
    }
}

/// Appends one field in quotes, its quotes doubled.
fn push_quoted(out: &mut Vec<u8>, field: &[u8]) {
    out.push(b'"');
    let mut rest = field;
    while let Some(at) = memchr::memchr(b'"', rest) {
        out.extend_from_slice(&rest[..=at]);
        out.push(b'"');
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Appends one CSV record.
pub(crate) fn push_record<'a>(out: &mut Vec<u8>, fields: impl IntoIterator<Item = &'a [u8]>) {
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_field(out, field);
    }
    out.push(b'\n');
}

/// The header record of a table with columns `header`, in one buffer: written to a plain file
/// field by field, each field and comma would be a system call of its own.
pub(crate) fn header_line(header: &[String]) -> Vec<u8> {
    let mut line = Vec::with_capacity(1024);
    push_record(&mut line, header.iter().map(String::as_bytes));
    line
}

/// Writes `rows` as CSV records to `out`. Tables of several pieces are rendered on every core, piece
/// `i` by thread `i % threads`, and written in order as they come, so the writes overlap the
/// rendering; each thread renders at most one piece ahead of the writer, so memory holds a few
/// pieces rather than the whole text.
pub(crate) fn write_rows(rows: &Rows, out: &mut impl RowSink) -> std::io::Result<()> {
    let pieces = rows.len().div_ceil(PIECE_ROWS);
    let threads = cores().min(pieces);
    if threads <= 1 {
        return (0..pieces).try_for_each(|piece| out.write_rows(&render_piece(rows, piece)));
    }
    std::thread::scope(|scope| {
        let rendered: Vec<Receiver<Rendered>> = (0..threads)
            .map(|first| {
                let (tx, rx) = sync_channel(1);
                // A failed send means the writer stopped (its receivers are dropped): stop too.
                scope.spawn(move || (first..pieces).step_by(threads).try_for_each(|p| tx.send(render_piece(rows, p))));
                rx
            })
            .collect();
        for piece in 0..pieces {
            let text = rendered[piece % threads]
                .recv()
                .map_err(|_| std::io::Error::other("a thread rendering CSV rows stopped"))?;
            out.write_rows(&text)?;
        }
        Ok(())
    })
}

/// The CSV text of rows `piece * PIECE_ROWS ..`, at most `PIECE_ROWS` of them.
fn render_piece(rows: &Rows, piece: usize) -> Rendered {
    render_range(rows, piece * PIECE_ROWS..rows.len().min((piece + 1) * PIECE_ROWS))
}

/// The CSV text of every row of `rows`.
pub(crate) fn render_rows(rows: &Rows) -> Rendered {
    render_range(rows, 0..rows.len())
}

fn render_range(rows: &Rows, range: std::ops::Range<usize>) -> Rendered {
    // The cells' text, a separator per cell and room for some quotes.
    let cells = range.len() * rows.width();
    let mut text = Vec::with_capacity(rows.text_len_of(range.clone()) + cells + cells / 4);
    let mut ends = Vec::with_capacity(range.len());
    for row in range.filter_map(|i| rows.row(i)) {
        push_row(&mut text, row);
        ends.push(text.len());
    }
    Rendered { text, ends }
}

/// Appends one row as [`push_record`] does. The row's text is searched for the bytes that make
/// a field quoted in one SIMD pass (`memchr3`), where a scan field by field, byte by byte, was
/// a tenth of a comparison's instructions; a row holding a `\r` (none that msprobe writes) is
/// left to `push_record`.
fn push_row(out: &mut Vec<u8>, row: Row<'_>) {
    let text = row.cells_text().as_bytes();
    if memchr::memchr(b'\r', text).is_some() {
        return push_record(out, row.cell_bytes());
    }
    let mut specials = memchr::memchr3_iter(b',', b'"', b'\n', text).peekable();
    let mut end = 0;
    for (i, cell) in row.cell_bytes().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        end += cell.len();
        let mut quoted = false;
        while specials.next_if(|&at| at < end).is_some() {
            quoted = true;
        }
        if quoted {
            push_quoted(out, cell);
        } else {
            out.extend_from_slice(cell);
        }
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let mut v = Vec::new();
        push_record(&mut v, ["a", "[2, 8]", "[\"x\"]", " inf"].map(str::as_bytes));
        assert_eq!(String::from_utf8(v).unwrap(), "a,\"[2, 8]\",\"[\"\"x\"\"]\", inf\n");
    }

    #[test]
    fn rows_in_pieces_are_written_in_order() {
        // Several pieces, the last one short, and cells that need quotes.
        let count = 3 * PIECE_ROWS + 5;
        let cells: Vec<String> = (0..count).flat_map(|i| [format!("r{i}"), format!("[{i}, \"x\"]")]).collect();
        let rows = Rows::from_cells(2, &cells);
        let mut expected = Vec::new();
        for row in &rows {
            push_record(&mut expected, row.iter().map(str::as_bytes));
        }
        let mut written = Vec::new();
        write_rows(&rows, &mut Whole(&mut written)).unwrap();
        assert_eq!(written, expected);
        assert!(String::from_utf8(written).unwrap().ends_with(&format!(
            "r{},\"[{}, \"\"x\"\"]\"\n",
            count - 1,
            count - 1
        )));
    }

    #[test]
    fn rows_render_as_their_records() {
        let cells = ["", "a,b", "\"q\"", "x\ny", "[2, 8]", "plain", "\r", "end,", ",", "\"\""];
        for width in 1..=cells.len() {
            let rows = Rows::from_cells(width, cells.iter().cycle().take(width * 7));
            let mut expected = Vec::new();
            for row in &rows {
                push_record(&mut expected, row.iter().map(str::as_bytes));
            }
            assert_eq!(String::from_utf8(render_rows(&rows).text), String::from_utf8(expected), "width {width}");
        }
    }

    #[test]
    fn a_failing_writer_stops_the_rendering() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let rows = Rows::from_cells(1, (0..4 * PIECE_ROWS).map(|i| i.to_string()));
        let err = write_rows(&rows, &mut Whole(&mut Full)).unwrap_err();
        assert_eq!(err.to_string(), "disk full");
    }

    #[test]
    fn long_tables_are_cut_into_files_with_the_header_each() {
        use probelake_format::output_tree::OutputTree;
        // Pieces of PIECE_ROWS rows cross the cuts; cells with line ends cannot be cut by line.
        let count = 2 * PIECE_ROWS + 7;
        let cells: Vec<String> = (0..count).map(|i| format!("r{i}\n\"q\"")).collect();
        let rows = Rows::from_cells(1, &cells);
        let header = b"Name\n".to_vec();
        for max_rows in [1000, PIECE_ROWS, count, count + 1] {
            let tmp = tempfile::tempdir().unwrap();
            let mut tree = OutputTree::new(tmp.path(), false);
            let files = tree
                .write_parts(
                    |n, i| format!("t_{n}_{i}.csv").into(),
                    |parts| write_rows(&rows, &mut CutFiles::new(parts, header.clone(), max_rows)?),
                )
                .unwrap();
            assert_eq!(files.len(), count.div_ceil(max_rows), "{max_rows} rows a file");
            let mut body = Vec::new();
            for (i, file) in files.iter().enumerate() {
                let text = std::fs::read(file).unwrap();
                assert!(text.starts_with(&header), "{}", file.display());
                let rows_in = count.min((i + 1) * max_rows) - i * max_rows;
                let starts = text.windows(2).filter(|w| w == b"\"r").count();
                assert_eq!(starts, rows_in, "{}", file.display());
                body.extend_from_slice(&text[header.len()..]);
            }
            assert_eq!(body, render_rows(&rows).text, "{max_rows} rows a file");
            tree.finish();
        }
        // No rows: one file, the header alone.
        let tmp = tempfile::tempdir().unwrap();
        let mut tree = OutputTree::new(tmp.path(), false);
        let empty = Rows::from_cells(1, Vec::<String>::new());
        let files = tree
            .write_parts(
                |_, _| "t.csv".into(),
                |parts| write_rows(&empty, &mut CutFiles::new(parts, header.clone(), 2)?),
            )
            .unwrap();
        assert_eq!(std::fs::read(&files[0]).unwrap(), header);
        tree.finish();
    }
}
