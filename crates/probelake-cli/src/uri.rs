//! Dataset locations given on the command line: a path or a `file://` URL.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use probelake_format::Lake;

/// Opens (creating if needed) the dataset at `uri`.
pub fn open_lake(uri: &str) -> anyhow::Result<Lake> {
    Lake::open(uri).with_context(|| format!("opening dataset {uri}"))
}

/// The local folder of `uri`, if it names one.
pub fn local_dir(uri: &str) -> Option<PathBuf> {
    match uri.strip_prefix("file://") {
        Some(rest) => Some(PathBuf::from(rest)),
        None if !uri.contains("://") => Some(PathBuf::from(uri)),
        None => None,
    }
}

/// Opens the dataset at `uri`, which must exist already (readers must not create folders).
pub fn open_existing(uri: &str) -> anyhow::Result<Lake> {
    if let Some(dir) = local_dir(uri) {
        if !dir.exists() {
            bail!("{uri}: no such dataset");
        }
    }
    open_lake(uri)
}
