//! pandas `DataFrame.to_csv(index=False)` output: Python's csv module with QUOTE_MINIMAL,
//! `"` doubled inside quoted fields, `\n` line ends.

use std::io::Write;

fn needs_quotes(field: &str) -> bool {
    field.contains([',', '"', '\n', '\r'])
}

/// Writes one CSV record.
pub(crate) fn write_record<S: AsRef<str>>(out: &mut impl Write, fields: &[S]) -> std::io::Result<()> {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let f = f.as_ref();
        if needs_quotes(f) {
            out.write_all(b"\"")?;
            out.write_all(f.replace('"', "\"\"").as_bytes())?;
            out.write_all(b"\"")?;
        } else {
            out.write_all(f.as_bytes())?;
        }
    }
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let mut v = Vec::new();
        write_record(&mut v, &["a", "[2, 8]", "[\"x\"]", " inf"]).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), "a,\"[2, 8]\",\"[\"\"x\"\"]\", inf\n");
    }
}
