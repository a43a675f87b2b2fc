//! pandas `DataFrame.to_csv(index=False)` output: Python's csv module with QUOTE_MINIMAL,
//! `"` doubled inside quoted fields, `\n` line ends.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver};

use super::cells::Rows;
use super::threads::cores;

/// Rows rendered at a time: a few MB of text.
const PIECE_ROWS: usize = 8192;

fn needs_quotes(field: &str) -> bool {
    field.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
}

fn write_field(out: &mut impl Write, field: &str) -> std::io::Result<()> {
    if !needs_quotes(field) {
        return out.write_all(field.as_bytes());
    }
    out.write_all(b"\"")?;
    for (i, part) in field.split('"').enumerate() {
        if i > 0 {
            out.write_all(b"\"\"")?;
        }
        out.write_all(part.as_bytes())?;
    }
    out.write_all(b"\"")
}

/// Writes one CSV record.
pub(crate) fn write_record<S: AsRef<str>>(
    out: &mut impl Write,
    fields: impl IntoIterator<Item = S>,
) -> std::io::Result<()> {
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_field(out, f.as_ref())?;
    }
    out.write_all(b"\n")
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
        // Writing into a Vec cannot fail.
        let _ = write_record(&mut text, row.iter());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let mut v = Vec::new();
        write_record(&mut v, ["a", "[2, 8]", "[\"x\"]", " inf"]).unwrap();
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
            write_record(&mut expected, row.iter()).unwrap();
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
