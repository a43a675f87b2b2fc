//! Printing errors: `probelake: <the chain>`, then a `hint:` where we know what fixes it.

use std::process::ExitCode;

use probelake_format::storage::{redact, StoreFailure};
use probelake_format::FormatError;
use probelake_msprobe::MsprobeError;
use probelake_query::datafusion::sql::sqlparser::parser::ParserError;

/// Prints `err` to stderr and returns exit code 2 (0 for a closed pipe).
pub fn error(err: &anyhow::Error) -> ExitCode {
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
    }
    if let Some(line) = storage_failure(err) {
        eprintln!("probelake: {}", printable(&redact(&clip(&line))));
        return ExitCode::from(2);
    }
    eprintln!("probelake: {}", printable(&redact(&chain_text(err))));
    if let Some(hint) = hint(err) {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(2)
}

/// The error chain joined by `: `, leaving out causes whose text the message before already
/// holds (DataFusion and transparent wrappers repeat their source in their own message).
fn chain_text(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if parts.last().is_some_and(|prev| prev.contains(text.as_str())) {
            continue;
        }
        // DataFusion prints a parser error as `SQL error: ParserError("…")`, the Debug form of
        // its source, which comes next in the chain and says the same in plain words.
        if cause.is::<ParserError>() && parts.last().is_some_and(|prev| prev.starts_with("SQL error: ")) {
            parts.pop();
        }
        parts.push(text);
    }
    parts.iter().map(|p| clip(p)).collect::<Vec<_>>().join(": ")
}

/// Longest part of an error message printed whole. Messages quote input (entry names, paths),
/// and a hostile input's 100 MB name must not become a 100 MB error.
const MAX_PART: usize = 2000;

/// `text`, or its head and tail with the middle cut out when longer than [`MAX_PART`]: the head
/// names the file, the tail says what is wrong and where.
fn clip(text: &str) -> String {
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
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One line for a storage request that failed in a way we can explain: the object or dataset
/// and what to check. Store errors are long (request URL, retries, the server's XML) and the
/// user needs none of it.
fn storage_failure(err: &anyhow::Error) -> Option<String> {
    let store_error = err.chain().find(|e| e.is::<object_store::Error>())?;
    tracing::debug!("storage error in full: {}", redact(&chain_text(err)));
    let advice = StoreFailure::of(store_error).advice()?;
    let location = match format_error(err) {
        Some(FormatError::Store { location, .. }) => location.clone(),
        _ => err.to_string(),
    };
    Some(format!("{location}: {advice}"))
}

fn hint(err: &anyhow::Error) -> Option<String> {
    if let Some(probelake_plot::PlotError::NoData { near, .. }) =
        err.chain().find_map(|e| e.downcast_ref::<probelake_plot::PlotError>())
    {
        return (!near.is_empty()).then(|| format!("the nearest names there are: {}", near.join(", ")));
    }
    if let Some(msprobe) = err.chain().find_map(|e| e.downcast_ref::<MsprobeError>()) {
        match msprobe {
            MsprobeError::Syntax { .. } | MsprobeError::Schema { .. } => {
                return Some(
                    "the file is not what msprobe writes; nothing was imported, and the dataset is unchanged".into(),
                )
            }
            MsprobeError::NoDumps { .. } => {
                return Some(
                    "point import at an msprobe dump_path, a verl save_path, a folder below them, or one dump.json"
                        .into(),
                )
            }
            MsprobeError::Layout { .. } => {
                return Some(
                    "--layout msprobe|verl|single and --step/--stage/--rank set what the folder names do not say"
                        .into(),
                )
            }
            _ => {}
        }
    }
    Some(match format_error(err)? {
        FormatError::Exists { .. } => "choose an empty folder, or add --force".into(),
        FormatError::Corrupt { location, message } => corrupt_hint(location, message)?.into(),
        _ => return None,
    })
}

/// The dataset's error behind `err`: itself in the chain, or carried by the msprobe codec's
/// error (which shows it as its own message, so the chain holds one or the other).
fn format_error(err: &anyhow::Error) -> Option<&FormatError> {
    err.chain().find_map(|e| {
        e.downcast_ref::<FormatError>().or_else(|| e.downcast_ref::<MsprobeError>().and_then(MsprobeError::as_dataset))
    })
}

/// What to do about a damaged part of a dataset, which depends on the part.
fn corrupt_hint(location: &str, message: &str) -> Option<&'static str> {
    if message.contains("upgrade probelake")
        || message.contains("no probelake dataset here")
        || message.contains("the manifest is missing")
    {
        return None; // the message already says what to do
    }
    Some(if location.ends_with("_probelake/manifest.json") {
        "the dataset's manifest is damaged; import the run again into a new folder"
    } else if location.contains("_probelake/commits/") {
        "move this commit record out of the dataset to drop its unit (the unit's files become \
         vacuumable), then import that unit again; the other units are untouched"
    } else {
        "import the unit again (`probelake import SRC DST` replaces it whole); other units are untouched"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = probelake_query::datafusion::error::DataFusionError::SQL(Box::new(parser), None);
        let text = chain_text(&anyhow::Error::new(probelake_query::QueryError::from(err)).context("in -c"));
        assert_eq!(text, "in -c: sql parser error: Expected: an expression, found: EOF");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\u{1b}[2Jb\nc"), "a\\u{1b}[2Jb\nc");
        assert_eq!(printable("plain é"), "plain é");
    }
}
