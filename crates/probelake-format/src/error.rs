//! The one error type of the format crate.

use std::path::PathBuf;

/// Everything that can go wrong reading and writing a dataset.
///
/// Each names the file or object it is about; `Internal` is a bug in probelake.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Reading or writing a local file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be written where an output tree puts it: two outputs on one file, or a
    /// folder in the way.
    #[error("{}: {message}", path.display())]
    OutputPath {
        /// The file.
        path: PathBuf,
        /// What is in the way, and what to do instead.
        message: String,
    },
    /// An output would overwrite a file.
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
    /// The object store refused or failed an operation on `location`.
    pub fn store(location: impl std::fmt::Display, source: object_store::Error) -> Self {
        FormatError::Store { location: location.to_string(), source }
    }

    /// A local file or folder could not be read or written.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
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
