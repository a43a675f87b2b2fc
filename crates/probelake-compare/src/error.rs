//! What can go wrong comparing two units.

use probelake_format::FormatError;
use probelake_msprobe::MsprobeError;

/// Why a comparison failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Reading a dataset failed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A data file does not have the columns the format promises.
    #[error("unexpected dataset schema: {0}")]
    Schema(String),
    /// A batch lacks a column, or has it with another type.
    #[error("unexpected dataset schema: {0}")]
    Column(#[from] probelake_format::columns::ColumnError),
    /// Arrow failed while reading columns.
    #[error(transparent)]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// The comparison plan failed.
    #[error(transparent)]
    Query(#[from] probelake_query::QueryError),
    /// A unit holds no dump file.
    #[error("{side} unit {unit} holds no dump file")]
    NoData {
        /// `target` or `golden`.
        side: &'static str,
        /// The unit.
        unit: String,
    },
    /// The two units hold different numbers of dump files.
    #[error("target unit holds {target} dump files, golden unit {golden}; msprobe pairs them by position")]
    FileCount {
        /// Dump files on the target side.
        target: usize,
        /// Dump files on the golden side.
        golden: usize,
    },
    /// The two sides were dumped with different tasks or one has md5 fields and the other not.
    #[error("cannot compare a {target} dump with a {golden} dump")]
    ModeMismatch {
        /// The target's mode or task.
        target: String,
        /// The golden's mode or task.
        golden: String,
    },
    /// msprobe cannot compare this task (e.g. `structure`).
    #[error("msprobe compare does not support task `{0}`")]
    Unsupported(String),
    /// Writing the table failed.
    #[error("writing the table: {0}")]
    Write(#[from] std::io::Error),
    /// A comparison's task ended without a result (it panicked or was cancelled).
    #[error("a comparison task stopped: {0}")]
    Stopped(String),
    /// Encoding an .xlsx workbook failed.
    #[error("writing the workbook: {0}")]
    Xlsx(String),
    /// msprobe files read in place could not be read.
    #[error(transparent)]
    Read(Box<MsprobeError>),
    /// Mapping options with plans that run on a cluster (its executors have no such function).
    #[error("the mapping options (data and cell mappings) apply in this process only: compare without the cluster")]
    MappingsOnCluster,
    /// `-fm` without `-dm` in statistics or md5 mode, where msprobe 26.2's fuzzy walk misplaces
    /// its columns.
    #[error(
        "--fuzzy-match pairs rows in tensor mode only: in {0} mode msprobe 26.2's fuzzy match misplaces \
         the golden columns (statistics: every row N/A or a crash on the first unmatched row; md5: every \
         pair an error), so there is no result to reproduce; compare without it, or add --data-mapping, \
         whose join msprobe then uses"
    )]
    FuzzyMatchMode(crate::mode::CompareMode),
    /// One side is a dataset and the other msprobe files read in place.
    #[error("a dataset cannot be compared with msprobe files read in place: open both runs with `RunPair::open`")]
    MixedSources,
}
