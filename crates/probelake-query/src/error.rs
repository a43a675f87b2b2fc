//! The one error type of the query crate.

use datafusion::error::DataFusionError;

/// What can go wrong opening runs or running SQL over them.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Reading a dataset failed.
    #[error(transparent)]
    Format(#[from] probelake_format::FormatError),
    /// DataFusion refused or failed the query; its message says where.
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    /// A bad argument (a threshold out of range, a canned query that lost a column).
    #[error("{0}")]
    Argument(String),
    /// Two runs were given the same name, or a name is not a valid schema name.
    #[error("run name `{name}`: {message}")]
    RunName {
        /// The name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
}

/// `Result` with [`QueryError`].
pub type Result<T, E = QueryError> = std::result::Result<T, E>;
