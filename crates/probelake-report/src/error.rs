//! What can go wrong writing a report.

use probelake_compare::runs::pairing::PairingError;
use probelake_compare::runs::InputError;
use probelake_compare::CompareError;
use probelake_format::columns::ColumnError;
use probelake_format::FormatError;
use probelake_query::QueryError;

/// Why a report could not be written; its text (with its sources) says what to do.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An input could not be opened or read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The units could not be paired as asked.
    #[error(transparent)]
    Pairing(#[from] PairingError),
    /// Comparing one unit pair failed.
    #[error("comparing {what}")]
    Compare {
        /// The unit pair.
        what: String,
        /// Why.
        #[source]
        source: Box<CompareError>,
    },
    /// The first-divergence search failed.
    #[error("searching for the first divergence")]
    Divergence(#[source] QueryError),
    /// Reading a unit's entries, modules or stacks failed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A table lacks a column the report reads.
    #[error("unexpected dataset schema: {0}")]
    Column(#[from] ColumnError),
    /// A table's column is not what the format says.
    #[error("unexpected dataset schema: {0}")]
    Schema(String),
    /// A bad argument (a threshold out of range).
    #[error("{0}")]
    Argument(String),
    /// The page could not be written.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The data could not be put in the page.
    #[error("encoding the report's data")]
    Encode(#[from] serde_json::Error),
}
