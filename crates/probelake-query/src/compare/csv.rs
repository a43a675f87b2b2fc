//! pandas `DataFrame.to_csv(index=False)` output: Python's csv module with QUOTE_MINIMAL,
//! `"` doubled inside quoted fields, `\n` line ends.

use std::io::Write;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let mut v = Vec::new();
        write_record(&mut v, ["a", "[2, 8]", "[\"x\"]", " inf"]).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), "a,\"[2, 8]\",\"[\"\"x\"\"]\", inf\n");
    }
}
