//! Printing errors: `probelake: <the chain>`, then a `hint:` where we know what fixes it.

use std::process::ExitCode;

use probelake_format::storage::{redact, StoreFailure};
use probelake_format::FormatError;

/// Prints `err` to stderr and returns exit code 2 (0 for a closed pipe).
pub fn error(err: &anyhow::Error) -> ExitCode {
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
    }
    if let Some(line) = storage_failure(err) {
        eprintln!("probelake: {}", redact(&line));
        return ExitCode::from(2);
    }
    eprintln!("probelake: {}", redact(&chain_text(err)));
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
        parts.push(text);
    }
    parts.join(": ")
}

/// One line for a storage request that failed in a way we can explain: the object or dataset
/// and what to check. Store errors are long (request URL, retries, the server's XML) and the
/// user needs none of it.
fn storage_failure(err: &anyhow::Error) -> Option<String> {
    let store_error = err.chain().find(|e| e.is::<object_store::Error>())?;
    tracing::debug!("storage error in full: {}", redact(&chain_text(err)));
    let advice = StoreFailure::of(store_error).advice()?;
    let location = err
        .chain()
        .find_map(|e| match e.downcast_ref::<FormatError>() {
            Some(FormatError::Store { location, .. }) => Some(location.clone()),
            _ => None,
        })
        .unwrap_or_else(|| err.to_string());
    Some(format!("{location}: {advice}"))
}

fn hint(err: &anyhow::Error) -> Option<String> {
    if let Some(probelake_plot::PlotError::NoData { near, .. }) =
        err.chain().find_map(|e| e.downcast_ref::<probelake_plot::PlotError>())
    {
        return (!near.is_empty()).then(|| format!("the nearest names there are: {}", near.join(", ")));
    }
    let format = err.chain().find_map(|e| e.downcast_ref::<FormatError>())?;
    Some(match format {
        FormatError::Syntax { .. } | FormatError::Schema { .. } => {
            "the file is not what msprobe writes; nothing was imported, and the dataset is unchanged".into()
        }
        FormatError::NoDumps { .. } => {
            "point import at an msprobe dump_path, a verl save_path, a folder below them, or one dump.json".into()
        }
        FormatError::Layout { .. } => {
            "--layout msprobe|verl|single and --step/--stage/--rank set what the folder names do not say".into()
        }
        FormatError::Exists { .. } => "choose an empty folder, or add --force".into(),
        FormatError::Corrupt { .. } => "re-import the run; `probelake info` shows which units are readable".into(),
        _ => return None,
    })
}
