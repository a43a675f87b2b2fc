//! The one error type of the format crate.

use std::path::PathBuf;

use crate::json::SyntaxError;

/// Everything that can go wrong reading msprobe files or reading and writing a dataset.
///
/// Input mistakes (`Syntax`, `Schema`, `NoDumps`, …) name the file, the byte offset and the JSON
/// path; `Internal` is a bug in probelake.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
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
        source: crate::tensor_file::TensorFileError,
    },
    /// Reading or writing a local file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
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
    /// An export cannot write a file where the tree puts it: two units on one file, or a
    /// folder in the way.
    #[error("{}: {message}", path.display())]
    OutputPath {
        /// The file.
        path: PathBuf,
        /// What is in the way, and what to do instead.
        message: String,
    },
    /// An export would overwrite a file.
    #[error("{}: already exists; export into an empty folder, or pass --force to overwrite", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The object store refused or failed an operation.
    #[error("{location}: {source}")]
    Store {
        /// The object or prefix.
        location: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A Parquet file could not be written or read.
    #[error("{location}: {source}")]
    Parquet {
        /// The object.
        location: String,
        /// The Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Arrow refused data.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// The dataset is damaged or was written by an incompatible version.
    #[error("{location}: the dataset is damaged: {message}")]
    Corrupt {
        /// The object.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// A dataset location this build cannot open.
    #[error("{location}: {message}")]
    Unsupported {
        /// The URI as given.
        location: String,
        /// What is unsupported and what to use instead.
        message: String,
    },
    /// A broken invariant inside probelake.
    #[error("bug in probelake, please report it: {0}")]
    Internal(String),
}

/// `Result` with [`FormatError`].
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

impl FormatError {
    /// Names `file` in an error raised before the file was known.
    pub fn in_file(self, file: &std::path::Path) -> Self {
        match self {
            FormatError::Syntax { file: f, error } if f.as_os_str().is_empty() => {
                FormatError::Syntax { file: file.into(), error }
            }
            FormatError::Schema { file: f, offset, path, message } if f.as_os_str().is_empty() => {
                FormatError::Schema { file: file.into(), offset, path, message }
            }
            other => other,
        }
    }

    pub(crate) fn store(location: impl std::fmt::Display, source: object_store::Error) -> Self {
        FormatError::Store { location: location.to_string(), source }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FormatError::Io { path: path.into(), source }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_stays_small() {
        assert!(std::mem::size_of::<super::FormatError>() <= 128, "{}", std::mem::size_of::<super::FormatError>());
    }
}
