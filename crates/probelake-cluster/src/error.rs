//! What can go wrong starting or reaching a cluster.

/// A cluster error.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// An address that does not parse or cannot be bound.
    #[error("{address}: {message}")]
    Address {
        /// The address as given.
        address: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Ballista reported an error (starting a process, running a job).
    #[error("{0}")]
    Ballista(#[from] ballista_core::error::BallistaError),
    /// DataFusion reported an error (building a session, decoding a plan).
    #[error("{0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// The scheduler could not be reached or answered with an error.
    #[error("scheduler at {url}: {message}")]
    Scheduler {
        /// The scheduler's URL.
        url: String,
        /// What it said, or why it could not be asked.
        message: String,
    },
    /// A file or folder of the process (its work directory) could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// `Result` with [`ClusterError`].
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;
