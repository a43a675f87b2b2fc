//! The one error type of the msprobe codec.

use std::path::PathBuf;

use probelake_format::FormatError;

use crate::json::SyntaxError;
use crate::tensor_file::TensorFileError;

/// Everything that can go wrong reading msprobe's files or turning them into a dataset and back.
///
/// Input mistakes (`Syntax`, `Schema`, `NoDumps`, …) name the file, the byte offset and the JSON
/// path; what the dataset side refused (storage, Parquet, a damaged dataset) is a
/// [`FormatError`] in `Dataset`; `Internal` is a bug in probelake.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum MsprobeError {
    /// A file is not valid JSON (msprobe's dialect, with `NaN`/`Infinity`).
    #[error("{}: invalid JSON: {error}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// Where and what.
        error: SyntaxError,
    },
    /// A file is JSON but not what msprobe writes.
    #[error("{}: {message} (byte {offset}, at {path})", file.display())]
    Schema {
        /// The file.
        file: PathBuf,
        /// Byte offset of the offending value.
        offset: usize,
        /// JSON path of the offending value.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor file could not be read.
    #[error("{}: {source}", file.display())]
    TensorFile {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        #[source]
        source: TensorFileError,
    },
    /// Nothing to import was found.
    #[error("{}: no msprobe dump found (no dump.json or debug.json in it or below it)", path.display())]
    NoDumps {
        /// Where we looked.
        path: PathBuf,
    },
    /// A dump folder's place in the tree does not say which step, stage or rank it is.
    #[error("{}: {message}", path.display())]
    Layout {
        /// The folder.
        path: PathBuf,
        /// What could not be worked out, and which flag sets it.
        message: String,
    },
    /// The dataset side: a local file, the object store, Parquet, or a damaged dataset.
    #[error(transparent)]
    Dataset(#[from] FormatError),
    /// A broken invariant inside probelake.
    #[error("bug in probelake, please report it: {0}")]
    Internal(String),
}

/// `Result` with [`MsprobeError`].
pub type Result<T, E = MsprobeError> = std::result::Result<T, E>;

impl From<arrow::error::ArrowError> for MsprobeError {
    fn from(e: arrow::error::ArrowError) -> Self {
        MsprobeError::Dataset(FormatError::Arrow(e))
    }
}

impl MsprobeError {
    /// Names `file` in an error raised before the file was known.
    pub fn in_file(self, file: &std::path::Path) -> Self {
        match self {
            MsprobeError::Syntax { file: f, error } if f.as_os_str().is_empty() => {
                MsprobeError::Syntax { file: file.into(), error }
            }
            MsprobeError::Schema { file: f, offset, path, message } if f.as_os_str().is_empty() => {
                MsprobeError::Schema { file: file.into(), offset, path, message }
            }
            other => other,
        }
    }

    /// The dataset's error, if this is one (a damaged file, the store refusing).
    pub fn as_dataset(&self) -> Option<&FormatError> {
        match self {
            MsprobeError::Dataset(e) => Some(e),
            _ => None,
        }
    }

    /// A local file or folder could not be read or written.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MsprobeError::Dataset(FormatError::io(path, source))
    }

    /// The dataset does not hold what msprobe's files need: damaged, or written by another
    /// version.
    pub(crate) fn corrupt(location: impl Into<String>, message: impl Into<String>) -> Self {
        MsprobeError::Dataset(FormatError::Corrupt { location: location.into(), message: message.into() })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_stays_small() {
        assert!(std::mem::size_of::<super::MsprobeError>() <= 136, "{}", std::mem::size_of::<super::MsprobeError>());
    }
}
