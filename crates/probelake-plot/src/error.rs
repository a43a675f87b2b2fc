//! The one error type of the plot crate.

use std::path::PathBuf;

use plotters::drawing::DrawingAreaErrorKind;

/// What can go wrong fetching a chart's data, drawing it or writing it.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The SQL that fetches the data failed (a run or column missing, a store error). Boxed:
    /// DataFusion's errors are large and this one is rare.
    #[error(transparent)]
    Query(Box<probelake_query::QueryError>),
    /// The runs hold nothing to draw for what was asked.
    #[error("{what}")]
    NoData {
        /// What was asked and where nothing was found.
        what: String,
        /// Names that exist and come closest to what was asked, best first.
        near: Vec<String>,
    },
    /// An option cannot be honoured for this data (e.g. a log scale over negative values).
    #[error("{0}")]
    Option(String),
    /// A query returned columns of other types than the chart expects: a bug, please report.
    #[error("unexpected query result (bug, please report): {0}")]
    Internal(String),
    /// plotters failed to draw.
    #[error("drawing the chart: {0}")]
    Draw(String),
    /// Encoding the PNG failed.
    #[error("encoding the PNG: {0}")]
    Png(#[from] png::EncodingError),
    /// Writing an output file failed.
    #[error("writing {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl From<probelake_query::QueryError> for PlotError {
    fn from(e: probelake_query::QueryError) -> Self {
        PlotError::Query(Box::new(e))
    }
}

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for PlotError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        PlotError::Draw(e.to_string())
    }
}

/// `Result` with [`PlotError`].
pub type Result<T, E = PlotError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn the_error_stays_small() {
        assert!(std::mem::size_of::<super::PlotError>() <= 64, "{}", std::mem::size_of::<super::PlotError>());
    }
}
