//! `compare --xlsx`: msprobe's compare table as an Excel workbook.
//!
//! msprobe 26.2 writes the same DataFrame it writes as CSV through openpyxl, without the
//! highlighting of older versions: numbers stay numbers, the `Requires_grad Consistent` column
//! is a real boolean, everything else is text. probelake's table holds each cell as msprobe's CSV
//! text, so a cell becomes a number when that text is a finite number as Python prints one
//! (`57`, `2.0`, `1e-05`); tokens (`N/A`, `Nan`, ` inf`, `unsupported`), percentages and lists
//! stay text. Tables longer than a sheet holds are split over sheets `part_0`, `part_1`, … as
//! msprobe splits them.

use anyhow::Context as _;
use probelake_query::compare::Rows;
use rust_xlsxwriter::Workbook;

/// Rows per sheet, as msprobe cuts them (below Excel's 1,048,576 with room for the header).
const ROWS_PER_SHEET: usize = 1_048_500;

/// The column msprobe fills with Python booleans.
const BOOLEAN_COLUMN: &str = "Requires_grad Consistent";

/// The workbook's bytes.
pub fn write_table(header: &[String], rows: &Rows) -> anyhow::Result<Vec<u8>> {
    let mut workbook = Workbook::new();
    let boolean = header.iter().position(|h| h == BOOLEAN_COLUMN);
    let all: Vec<_> = rows.iter().collect();
    let chunks: Vec<&[_]> = if all.len() > ROWS_PER_SHEET { all.chunks(ROWS_PER_SHEET).collect() } else { vec![&all] };
    let split = chunks.len() > 1;
    for (part, chunk) in chunks.into_iter().enumerate() {
        let sheet = workbook.add_worksheet();
        if split {
            sheet.set_name(format!("part_{part}")).context("naming a sheet")?;
        }
        for (c, name) in header.iter().enumerate() {
            sheet.write_string(0, column(c)?, name).context("writing the header")?;
        }
        for (r, row) in chunk.iter().enumerate() {
            let at = u32::try_from(r + 1).context("too many rows for a sheet")?;
            for (c, text) in row.iter().enumerate() {
                let col = column(c)?;
                match (Some(c) == boolean, text) {
                    (true, "True") => sheet.write_boolean(at, col, true),
                    (true, "False") => sheet.write_boolean(at, col, false),
                    _ => match number(text) {
                        Some(n) => sheet.write_number(at, col, n),
                        None => sheet.write_string(at, col, text),
                    },
                }
                .with_context(|| format!("writing row {} column {}", r + 1, c + 1))?;
            }
        }
    }
    workbook.save_to_buffer().context("encoding the workbook")
}

fn column(c: usize) -> anyhow::Result<u16> {
    u16::try_from(c).context("too many columns for a sheet")
}

/// A finite number written as Python writes an int or a float; `None` for anything else.
fn number(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e'))
        && text.bytes().any(|b| b.is_ascii_digit());
    if !plain {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_python_prints_them_and_nothing_else() {
        for (text, want) in [("57", Some(57.0)), ("2.0", Some(2.0)), ("1e-05", Some(1e-5)), ("-3.5e+20", Some(-3.5e20))]
        {
            assert_eq!(number(text), want, "{text}");
        }
        for text in ["N/A", "Nan", " inf", " -inf", "inf", "0.0042%", "[2, 3]", "True", "", "unsupported", "-", "e"] {
            assert_eq!(number(text), None, "{text}");
        }
    }

    #[test]
    fn a_workbook_is_a_zip_with_one_sheet() -> anyhow::Result<()> {
        let header = ["NPU Name", "Requires_grad Consistent", "Max diff"].map(String::from).to_vec();
        let rows = Rows::from_cells(3, ["a.output.0", "True", "0.5"]);
        let bytes = write_table(&header, &rows)?;
        assert!(bytes.starts_with(b"PK\x03\x04"), "an xlsx file is a zip archive");
        Ok(())
    }
}
