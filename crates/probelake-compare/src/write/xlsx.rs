//! `compare --xlsx`: msprobe's compare table as an Excel workbook.
//!
//! msprobe 26.2 writes the DataFrame it would write as CSV with `pandas.DataFrame.to_excel`
//! (openpyxl), without the highlighting of older versions. Each cell is stored as the Python
//! object in the DataFrame: a `str` as text, an `int`/`float` as a number, a `bool` as a
//! boolean; pandas writes a float infinity as the text `inf`/`-inf` (`inf_rep`) where the CSV
//! has ` inf`/` -inf`. probelake's table holds each cell as the CSV's text, so which object a
//! cell is comes from msprobe's table building, column by column (see [`Column`]), never from
//! the look of the text alone: the statistics differences, the md5 digests and the
//! `Requires_grad` cells are strings even where they read `0`, `12345678` or `True`.
//!
//! openpyxl writes a number as `"%.16g" % value`, so a reader gets that text back: probelake
//! rounds each number to 16 significant digits, and where `%.16g` uses an exponent that
//! `rust_xlsxwriter` would not (at 1e16 and above, where openpyxl reads an exponent back as a
//! float and plain digits as an int) it puts openpyxl's text into the sheet afterwards.
//!
//! A table of 1,048,500 rows or more is split over sheets `part_0`, `part_1`, … of equal
//! length, as msprobe's `save_excel` splits it.

use std::collections::BTreeMap;
use std::io::{Cursor, Read as _, Write as _};

use rust_xlsxwriter::Workbook;

use crate::error::CompareError;
use crate::mode::CompareMode;
use crate::table::cells::Rows;

/// A workbook's failure, with what was being written.
trait Context<T> {
    fn context(self, what: &str) -> Result<T, CompareError>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, CompareError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, CompareError> {
        self.map_err(|e| CompareError::Xlsx(format!("{what}: {e}")))
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, CompareError> {
        self.map_err(|e| CompareError::Xlsx(format!("{}: {e}", what())))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: &str) -> Result<T, CompareError> {
        self.ok_or_else(|| CompareError::Xlsx(what.to_owned()))
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, CompareError> {
        self.ok_or_else(|| CompareError::Xlsx(what()))
    }
}

/// msprobe's `CompareConst.MAX_EXCEL_LENGTH`: a table this long or longer is split.
const MAX_EXCEL_LENGTH: usize = 1_048_500;

/// Excel's limit on a cell's characters; openpyxl cuts a longer string there
/// (`check_string`: `value[:32767]`, in code points) where `rust_xlsxwriter` would fail.
const MAX_CELL_CHARS: usize = 32_767;

/// The tensor-mode metric columns, which msprobe fills with the algorithms' floats (or their
/// tokens). In statistics mode `MaxRelativeErr` is a percentage string instead.
const METRIC_COLUMNS: [&str; 6] =
    ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"];

/// What msprobe 26.2's DataFrame holds in a column (mindstudio-probe
/// `msprobe/core/compare/`), which decides what each of its cells is in the workbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    /// `str` throughout: names, dtypes, shapes, `Requires_grad` (`gen_op_item` turns every
    /// boolean field of a leaf into `str(value)`), `Result`, `Err_message`, stack, `Data_name`,
    /// and in statistics mode the differences and relative errors
    /// (`CalcStatsDiff.calc_summary_diff` stores `'0'`, tokens and `diff.astype(str)`).
    Text,
    /// `NPU MD5`/`BENCH MD5`: the leaf's `md5` field as `json.load` gives it — a CRC-32 or xor
    /// digest string, or in xor mode the float a 0-d float tensor is dumped with.
    Md5,
    /// `Requires_grad Consistent`: the `bool` of `NPU == Bench` (`make_result_df`).
    Bool,
    /// A tensor-mode metric: a float, or a token such as `unsupported` or `Nan`.
    Metric,
    /// A statistic (`NPU max` … `Bench l2norm`) of the side whose dtype and name are in these
    /// columns: what it is follows from the kind of leaf (see [`stat_cell`]).
    Stat { dtype: usize, name: usize },
}

/// The columns of `header` in mode `mode`.
fn columns(header: &[String], mode: CompareMode) -> Vec<Column> {
    let at = |name: &str| header.iter().position(|h| h == name);
    header
        .iter()
        .map(|h| {
            let stat = ["max", "min", "mean", "l2norm"].iter().find_map(|s| {
                let side = h.strip_suffix(s)?.strip_suffix(' ')?;
                match (side, at(&format!("{side} Dtype")), at(&format!("{side} Name"))) {
                    ("NPU" | "Bench", Some(dtype), Some(name)) => Some(Column::Stat { dtype, name }),
                    _ => None,
                }
            });
            match h.as_str() {
                "Requires_grad Consistent" => Column::Bool,
                "NPU MD5" | "BENCH MD5" => Column::Md5,
                m if mode == CompareMode::Tensor && METRIC_COLUMNS.contains(&m) => Column::Metric,
                _ => stat.unwrap_or(Column::Text),
            }
        })
        .collect()
}

/// A cell of the workbook.
#[derive(Debug, Clone, PartialEq)]
enum Cell<'a> {
    Text(&'a str),
    Number(f64),
    Bool(bool),
}

/// The cell msprobe writes for CSV text `text` in a column of kind `column`; `row` is the
/// row's CSV text (a statistic looks at its side's dtype and name).
fn cell<'a>(column: Column, text: &'a str, row: &[&str]) -> Cell<'a> {
    match column {
        Column::Text => Cell::Text(text),
        Column::Bool => match text {
            "True" => Cell::Bool(true),
            "False" => Cell::Bool(false),
            _ => Cell::Text(text),
        },
        Column::Metric => value_cell(text),
        // A digest is 8 or 0x+16 hex digits, never a float as Python prints one (which has a
        // `.` or a signed exponent): `87162e58` is a digest, `5.19` and `1e-05` are floats.
        Column::Md5 => match value_cell(text) {
            Cell::Number(_) if !(text.contains('.') || text.contains("e+") || text.contains("e-")) => Cell::Text(text),
            other => other,
        },
        Column::Stat { dtype, name } => {
            stat_cell(text, row.get(dtype).copied().unwrap_or_default(), row.get(name).copied().unwrap_or_default())
        }
    }
}

/// A statistic of a leaf of dtype cell `dtype` and row name `name`. msprobe's `gen_op_item`
/// keeps a tensor's `Max`/`Min`/`Mean`/`Norm` as `json.load` gives them, except that it
/// turns booleans (a bool tensor's `Max`/`Min`) into `'True'`/`'False'` and `None` into
/// `'None'`; a scalar argument (dtype `<class '…'>`) gets its `value` in all four, a `bool`
/// staying a `bool`; a peer rank (`…src`/`…dst`, dtype its JSON `type`, e.g. `int`) gets
/// `str(value)`; `torch.Size`, `slice`, `ellipsis` and `torch.ProcessGroup` get `'None'` or
/// text. NaN becomes the string `Nan` and an unmatched side `N/A`.
fn stat_cell<'a>(text: &'a str, dtype: &str, name: &str) -> Cell<'a> {
    let rank = matches!(name.rsplit('.').next(), Some("src" | "dst" | "group_src" | "group_dst"));
    match dtype {
        "<class 'bool'>" => cell(Column::Bool, text, &[]),
        "<class 'int'>" | "<class 'float'>" => value_cell(text),
        scalar if scalar.starts_with("<class '") => Cell::Text(text),
        // A rank's type name, never a tensor's dtype (`torch.int64`, `Int64`, `int64`).
        "int" | "float" | "bool" | "str" | "NoneType" if rank => Cell::Text(text),
        _ => value_cell(text),
    }
}

/// The cell of a value that msprobe holds as a Python number when it is one: a finite number
/// as Python prints an int or a float, or a float infinity (` inf` in the CSV), which pandas
/// writes as the text `inf`; anything else (`Nan`, `None`, tokens, strings) is text.
fn value_cell(text: &str) -> Cell<'_> {
    match text {
        " inf" => Cell::Text("inf"),
        " -inf" => Cell::Text("-inf"),
        _ => number(text).map_or(Cell::Text(text), Cell::Number),
    }
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

/// `x` rounded to 16 significant digits, the value openpyxl's `"%.16g" % x` reads back as.
fn round16(x: f64) -> f64 {
    format!("{x:.15e}").parse().unwrap_or(x)
}

/// Python's `"%.16g" % x` for a finite `x`.
fn py_g16(x: f64) -> String {
    let sci = format!("{x:.15e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if (-4..16).contains(&exp) {
        // Fixed notation with 16 significant digits: 15 - exp decimals.
        let decimals = usize::try_from(15 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    }
}

/// The numbers whose text in the sheet must be openpyxl's rather than `rust_xlsxwriter`'s:
/// per sheet (0-based), the cell reference (`Q2`) and openpyxl's text.
type Respelled = BTreeMap<usize, Vec<(String, String)>>;

/// The workbook's bytes for a table of mode `mode`.
pub fn write_table(header: &[String], rows: &Rows, mode: CompareMode) -> Result<Vec<u8>, CompareError> {
    let mut workbook = Workbook::new();
    let columns = columns(header, mode);
    let all: Vec<_> = rows.iter().collect();
    let mut respelled = Respelled::new();
    for (part, chunk) in sheets(all.len()).into_iter().enumerate() {
        let sheet = workbook.add_worksheet();
        if let Some(name) = &chunk.name {
            sheet.set_name(name).context("naming a sheet")?;
        }
        for (c, name) in header.iter().enumerate() {
            sheet.write_string(0, column(c)?, name).context("writing the header")?;
        }
        for (r, row) in all[chunk.rows].iter().enumerate() {
            let at = u32::try_from(r + 1).context("too many rows for a sheet")?;
            let texts: Vec<&str> = row.iter().collect();
            for (c, (&text, &kind)) in texts.iter().zip(&columns).enumerate() {
                let col = column(c)?;
                match cell(kind, text, &texts) {
                    Cell::Text(t) => sheet.write_string(at, col, truncated(t)),
                    Cell::Bool(b) => sheet.write_boolean(at, col, b),
                    Cell::Number(n) => {
                        let n = round16(n);
                        if n.abs() >= 1e16 {
                            let at_ref = rust_xlsxwriter::utility::row_col_to_cell(at, col);
                            respelled.entry(part).or_default().push((at_ref, py_g16(n)));
                        }
                        sheet.write_number(at, col, n)
                    }
                }
                .with_context(|| format!("writing row {} column {}", r + 1, c + 1))?;
            }
        }
    }
    let bytes = workbook.save_to_buffer().context("encoding the workbook")?;
    if respelled.is_empty() {
        return Ok(bytes);
    }
    respell(bytes, &respelled)
}

/// A sheet: its rows of the table and its name (`None`: the default `Sheet1`).
struct Sheet {
    rows: std::ops::Range<usize>,
    name: Option<String>,
}

/// How msprobe's `save_excel` cuts a table of `len` rows: one sheet below
/// `MAX_EXCEL_LENGTH`, else `ceil(len / MAX)` sheets of `ceil(len / sheets)` rows.
fn sheets(len: usize) -> Vec<Sheet> {
    if len < MAX_EXCEL_LENGTH {
        return vec![Sheet { rows: 0..len, name: None }];
    }
    let count = len.div_ceil(MAX_EXCEL_LENGTH);
    let size = len.div_ceil(count);
    (0..count)
        .map(|i| Sheet { rows: (i * size).min(len)..((i + 1) * size).min(len), name: Some(format!("part_{i}")) })
        .collect()
}

/// `text` cut to its first `MAX_CELL_CHARS` characters.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(MAX_CELL_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

fn column(c: usize) -> Result<u16, CompareError> {
    u16::try_from(c).context("too many columns for a sheet")
}

/// The workbook `bytes` with the numbers of `respelled` written as openpyxl writes them; every
/// other part is copied as it is.
fn respell(bytes: Vec<u8>, respelled: &Respelled) -> Result<Vec<u8>, CompareError> {
    // The numbers of 1e16 and above, as openpyxl writes them.
    let what = "respelling numbers of 1e16 and above";
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).context(what)?;
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for i in 0..archive.len() {
        let name = archive.by_index_raw(i).context(what)?.name().to_owned();
        let sheet = name
            .strip_prefix("xl/worksheets/sheet")
            .and_then(|n| n.strip_suffix(".xml"))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| respelled.get(&n.checked_sub(1)?));
        let Some(cells) = sheet else {
            let raw = archive.by_index_raw(i).context(what)?;
            out.raw_copy_file(raw).context(what)?;
            continue;
        };
        let mut file = archive.by_index(i).context(what)?;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(file.compression())
            .unix_permissions(file.unix_mode().unwrap_or(0o600))
            .last_modified_time(file.last_modified().unwrap_or_default());
        let mut xml = String::new();
        file.read_to_string(&mut xml).context(what)?;
        drop(file);
        out.start_file(name.as_str(), options).context(what)?;
        out.write_all(respell_sheet(&xml, cells)?.as_bytes()).context(what)?;
    }
    Ok(out.finish().context(what)?.into_inner())
}

/// Sheet XML `xml` with the `<v>` text of each cell of `cells` (in sheet order) replaced.
fn respell_sheet(xml: &str, cells: &[(String, String)]) -> Result<String, CompareError> {
    let mut out = String::with_capacity(xml.len() + cells.len() * 8);
    let mut rest = xml;
    for (at, text) in cells {
        let open = format!("<c r=\"{at}\"");
        let start = rest.find(&open).with_context(|| format!("cell {at} not in the sheet"))?;
        let value =
            rest[start..].find("<v>").map(|v| start + v + 3).with_context(|| format!("cell {at} has no value"))?;
        let end = rest[value..].find("</v>").map(|e| value + e).with_context(|| format!("cell {at} has no value"))?;
        out.push_str(&rest[..value]);
        out.push_str(text);
        rest = &rest[end..];
    }
    out.push_str(rest);
    Ok(out)
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
    fn percent_16g_as_python() {
        // Each pair was printed by CPython 3.11: `"%.16g" % x`.
        for (x, want) in [
            (57.0, "57"),
            (-0.0, "-0"),
            (4.1014933586120605, "4.101493358612061"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.000000020040877e20, "1.000000020040877e+20"),
            (1e16, "1e+16"),
            (9999999999999998.0, "9999999999999998"),
            (12345678901234567.0, "1.234567890123457e+16"),
            (3.4028234663852886e38, "3.402823466385289e+38"),
            (-2.5e-300, "-2.5e-300"),
        ] {
            assert_eq!(py_g16(x), want, "{x:e}");
            assert_eq!(round16(x), want.parse::<f64>().unwrap_or(f64::NAN), "{x:e}");
        }
    }

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cells_as_msprobe_holds_them() {
        let h = header(&[
            "NPU Name",
            "NPU Dtype",
            "NPU Requires_grad",
            "Max diff",
            "MaxRelativeErr",
            "NPU max",
            "Requires_grad Consistent",
        ]);
        let kinds = columns(&h, CompareMode::Statistics);
        let row = |name, dtype, max| [name, dtype, "True", "0", "0", max, "True"];
        let cells = |r: [&'static str; 7]| -> Vec<Cell<'static>> {
            r.iter().zip(&kinds).map(|(t, k)| cell(*k, t, &r)).collect()
        };
        // Differences and relative errors are strings in statistics mode, as is Requires_grad.
        assert_eq!(
            cells(row("a.input.0", "torch.float32", "2.5")),
            [
                Cell::Text("a.input.0"),
                Cell::Text("torch.float32"),
                Cell::Text("True"),
                Cell::Text("0"),
                Cell::Text("0"),
                Cell::Number(2.5),
                Cell::Bool(true)
            ]
        );
        let max = |name, dtype, max| cells(row(name, dtype, max))[5].clone();
        // A bool tensor's Max is the string 'True'; a bool argument's the bool True.
        assert_eq!(max("a.output.0", "torch.bool", "True"), Cell::Text("True"));
        assert_eq!(max("a.input.flag", "<class 'bool'>", "True"), Cell::Bool(true));
        assert_eq!(max("a.input.1", "<class 'int'>", "3"), Cell::Number(3.0));
        assert_eq!(max("a.input.mode", "<class 'str'>", "3"), Cell::Text("3"));
        // A peer rank is str(value); a tensor called src is a tensor.
        assert_eq!(max("Distributed.send.0.forward.input.dst", "int", "1"), Cell::Text("1"));
        assert_eq!(max("Tensor.scatter_.0.forward.input.src", "torch.int64", "1"), Cell::Number(1.0));
        assert_eq!(max("a.output.0", "torch.float32", " -inf"), Cell::Text("-inf"));
        assert_eq!(max("a.output.0", "torch.float32", "Nan"), Cell::Text("Nan"));
        assert_eq!(max("a.output.0", "N/A", "N/A"), Cell::Text("N/A"));

        // In tensor mode MaxRelativeErr is a metric: a number when it is one.
        let kinds = columns(&header(&["NPU Name", "MaxRelativeErr", "NPU MD5"]), CompareMode::Tensor);
        assert_eq!(kinds, [Column::Text, Column::Metric, Column::Md5]);
        assert_eq!(cell(kinds[1], "0.01", &[]), Cell::Number(0.01));
        assert_eq!(cell(kinds[1], "unsupported", &[]), Cell::Text("unsupported"));
        // An md5 digest of digits only stays a digest; an xor-mode float is a float.
        for digest in ["12345678", "87162e58", "00000000", "0x00000000000000ff", "N/A"] {
            assert_eq!(cell(kinds[2], digest, &[]), Cell::Text(digest));
        }
        assert_eq!(cell(kinds[2], "-0.0173722505569458", &[]), Cell::Number(-0.0173722505569458));
        assert_eq!(cell(kinds[2], "1e-05", &[]), Cell::Number(1e-5));
    }

    #[test]
    fn long_text_is_cut_as_openpyxl_cuts_it() {
        let long = "é".repeat(MAX_CELL_CHARS + 5);
        assert_eq!(truncated(&long).chars().count(), MAX_CELL_CHARS);
        assert!(long.starts_with(truncated(&long)));
        assert_eq!(truncated("short"), "short");
        let exact = "x".repeat(MAX_CELL_CHARS);
        assert_eq!(truncated(&exact), exact);
    }

    #[test]
    fn sheets_as_save_excel_cuts_them() {
        let cut = |len| sheets(len).into_iter().map(|s| (s.rows, s.name)).collect::<Vec<_>>();
        assert_eq!(cut(0), [(0..0, None)]);
        assert_eq!(cut(MAX_EXCEL_LENGTH - 1), [(0..MAX_EXCEL_LENGTH - 1, None)]);
        assert_eq!(cut(MAX_EXCEL_LENGTH), [(0..MAX_EXCEL_LENGTH, Some("part_0".into()))]);
        let len = MAX_EXCEL_LENGTH + 1;
        assert_eq!(cut(len), [(0..524_251, Some("part_0".into())), (524_251..len, Some("part_1".into()))]);
    }

    #[test]
    fn big_numbers_are_spelled_as_openpyxl_spells_them() -> Result<(), Box<dyn std::error::Error>> {
        let h = header(&["NPU Name", "NPU Dtype", "NPU max", "NPU min"]);
        let rows = Rows::from_cells(4, ["a.output.0", "torch.float32", "1.0000000200408773e+20", "57"]);
        let bytes = write_table(&h, &rows, CompareMode::Statistics)?;
        assert!(bytes.starts_with(b"PK\x03\x04"), "an xlsx file is a zip archive");
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes))?;
        let mut xml = String::new();
        archive.by_name("xl/worksheets/sheet1.xml")?.read_to_string(&mut xml)?;
        assert!(xml.contains("<c r=\"C2\"><v>1.000000020040877e+20</v></c>"), "{xml}");
        assert!(xml.contains("<c r=\"D2\"><v>57</v></c>"), "{xml}");
        Ok(())
    }
}
