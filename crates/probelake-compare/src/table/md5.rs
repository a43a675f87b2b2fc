//! MD5 mode (docs/msprobe-compare.md §7): msprobe's "md5" is a CRC-32, compared as text.

use probelake_query::msprobe::rows::Side;

/// The `NPU MD5` / `BENCH MD5` cells.
pub(crate) fn md5_cells<'a>(npu: &'a Side<'_>, bench: Option<&'a Side<'_>>) -> [&'a str; 2] {
    let cell = |s: Option<&'a Side<'_>>| s.and_then(|s| s.md5.as_deref()).unwrap_or("N/A");
    [cell(Some(npu)), cell(bench)]
}
