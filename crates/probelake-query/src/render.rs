//! An error as people read it, rendered once for the command line and for Python: its chain of
//! causes joined by `: ` without repeats, each part clipped, control characters escaped, and
//! every credential the process knows replaced by `***` (`docs/security.md`).
//!
//! ```
//! use probelake_query::render::{clip, render};
//!
//! let err = std::io::Error::other("disk full");
//! assert_eq!(render(&err), "disk full");
//! assert!(clip(&"x".repeat(10_000)).len() < 2100);
//! ```

use std::borrow::Cow;
use std::error::Error;

use datafusion::sql::sqlparser::parser::ParserError;
use probelake_format::storage::redact;

/// Longest part of an error message printed whole. Messages quote input (entry names, paths),
/// and a hostile input's 100 MB name must not become a 100 MB error.
pub const MAX_PART: usize = 2000;

/// `err` as people read it: [`chain_text`], then [`for_people`].
pub fn render(err: &(dyn Error + 'static)) -> String {
    for_people(&chain_text(err))
}

/// Text about to reach a person (a terminal, a Python exception): credentials as `***`,
/// control characters written as `\u{…}`.
pub fn for_people(text: &str) -> String {
    printable(&redact(text)).into_owned()
}

/// The error and its causes joined by `: `, each part [`clip`]ped, leaving out a cause whose
/// text the part before already holds and a part that the next one repeats (DataFusion and
/// transparent wrappers repeat their source in their own message).
pub fn chain_text(err: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(cause) = next {
        next = cause.source();
        let text = cause.to_string();
        if parts.last().is_some_and(|prev| prev.contains(text.as_str())) {
            continue;
        }
        // DataFusion prints a parser error as `SQL error: ParserError("…")`, the Debug form of
        // its source, which comes next in the chain and says the same in plain words.
        let parser_repeat =
            cause.is::<ParserError>() && parts.last().is_some_and(|prev| prev.starts_with("SQL error: "));
        if parser_repeat || parts.last().is_some_and(|prev| text.contains(prev.as_str())) {
            parts.pop();
        }
        parts.push(text);
    }
    parts.iter().map(|p| clip(p)).collect::<Vec<_>>().join(": ")
}

/// `text`, or its head and tail with the middle cut out when longer than [`MAX_PART`]: the head
/// names the file, the tail says what is wrong and where.
pub fn clip(text: &str) -> String {
    if text.len() <= MAX_PART {
        return text.to_string();
    }
    let head = floor_char_boundary(text, MAX_PART * 2 / 3);
    let tail = ceil_char_boundary(text, text.len() - MAX_PART / 3);
    format!("{} […{} bytes cut…] {}", &text[..head], tail - head, &text[tail..])
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `text` with control characters (but newlines and tabs) written as `\u{…}`, so that input
/// quoted in a message cannot send escape sequences to the terminal.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` as one shell word, for a command a message suggests: as it is when it holds nothing
/// a shell treats specially, else in single quotes.
pub fn shell_word(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-:=+@%,".contains(&b)) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
        assert_eq!(shell_word("./lake/run-a"), "./lake/run-a");
        assert_eq!(shell_word("s3://bucket/run=1"), "s3://bucket/run=1");
        assert_eq!(shell_word("my lake"), "'my lake'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Context(String, #[source] Box<dyn Error + Send + Sync>);

    #[test]
    fn long_messages_keep_head_and_tail() {
        let text = format!("file.json: {} must be a number (byte 7)", "é".repeat(100_000));
        let clipped = clip(&text);
        assert!(clipped.len() < MAX_PART + 100, "{}", clipped.len());
        assert!(clipped.starts_with("file.json: ") && clipped.ends_with("must be a number (byte 7)"));
        assert_eq!(clip("short"), "short");
    }

    #[test]
    fn a_sql_syntax_error_is_said_once() {
        let parser = ParserError::ParserError("Expected: an expression, found: EOF".into());
        let err = datafusion::error::DataFusionError::SQL(Box::new(parser), None);
        let err = Context("in -c".into(), Box::new(crate::QueryError::from(err)));
        assert_eq!(chain_text(&err), "in -c: sql parser error: Expected: an expression, found: EOF");
    }

    #[test]
    fn a_cause_repeated_by_its_wrapper_is_said_once() {
        let err = Context("opening x: disk full".into(), Box::new(std::io::Error::other("disk full")));
        assert_eq!(chain_text(&err), "opening x: disk full");
        let err = Context("disk".into(), Box::new(std::io::Error::other("disk full")));
        assert_eq!(chain_text(&err), "disk full");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\u{1b}[2Jb\nc"), "a\\u{1b}[2Jb\nc");
        assert_eq!(printable("plain é"), "plain é");
    }
}
