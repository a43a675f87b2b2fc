//! Printing errors: `probelake: <the chain>`, then a `hint:` where we know what fixes it.

use crate::ExitCode;

use probelake_format::storage::{redact, StoreFailure};
use probelake_format::FormatError;
use probelake_msprobe::MsprobeError;
use probelake_query::render::{chain_text, clip, for_people, render};

/// Prints `err` to stderr and returns exit code 2 (0 for a closed pipe).
pub fn error(err: &anyhow::Error) -> ExitCode {
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
    }
    if let Some(line) = storage_failure(err) {
        eprintln!("probelake: {}", for_people(&clip(&line)));
        return ExitCode::from(2);
    }
    eprintln!("probelake: {}", render(err.as_ref()));
    if let Some(hint) = hint(err) {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(2)
}

/// One line for a storage request that failed in a way we can explain: the object or dataset
/// and what to check. Store errors are long (request URL, retries, the server's XML) and the
/// user needs none of it.
fn storage_failure(err: &anyhow::Error) -> Option<String> {
    let store_error = err.chain().find(|e| e.is::<object_store::Error>())?;
    tracing::debug!("storage error in full: {}", redact(&chain_text(err.as_ref())));
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
