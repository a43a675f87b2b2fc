//! pandas `DataFrame.to_csv(index=False)` output: Python's csv module with QUOTE_MINIMAL,
//! `"` doubled inside quoted fields, `\n` line ends.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver};

use crate::table::cells::{Row, Rows};
use crate::threads::cores;

/// Rows rendered at a time: a few MB of text.
const PIECE_ROWS: usize = 8192;

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

/// Writes `rows` as CSV records. Tables of several pieces are rendered on every core, piece
/// `i` by thread `i % threads`, and written in order as they come, so the writes overlap the
/// rendering; each thread renders at most one piece ahead of the writer, so memory holds a few
/// pieces rather than the whole text.
pub(crate) fn write_rows(rows: &Rows, out: &mut impl Write) -> std::io::Result<()> {
    let pieces = rows.len().div_ceil(PIECE_ROWS);
    let threads = cores().min(pieces);
    if threads <= 1 {
        return (0..pieces).try_for_each(|piece| out.write_all(&render_piece(rows, piece)));
    }
    std::thread::scope(|scope| {
        let rendered: Vec<Receiver<Vec<u8>>> = (0..threads)
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
            out.write_all(&text)?;
        }
        Ok(())
    })
}

/// The CSV text of rows `piece * PIECE_ROWS ..`, at most `PIECE_ROWS` of them.
fn render_piece(rows: &Rows, piece: usize) -> Vec<u8> {
    render_range(rows, piece * PIECE_ROWS..rows.len().min((piece + 1) * PIECE_ROWS))
}

/// The CSV text of every row of `rows`.
pub(crate) fn render_rows(rows: &Rows) -> Vec<u8> {
    render_range(rows, 0..rows.len())
}

fn render_range(rows: &Rows, range: std::ops::Range<usize>) -> Vec<u8> {
    // The cells' text, a separator per cell and room for some quotes.
    let cells = range.len() * rows.width();
    let mut text = Vec::with_capacity(rows.text_len_of(range.clone()) + cells + cells / 4);
    for row in range.filter_map(|i| rows.row(i)) {
        push_row(&mut text, row);
    }
    text
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
        write_rows(&rows, &mut written).unwrap();
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
            assert_eq!(String::from_utf8(render_rows(&rows)), String::from_utf8(expected), "width {width}");
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
        let err = write_rows(&rows, &mut Full).unwrap_err();
        assert_eq!(err.to_string(), "disk full");
    }
}
