//! The one error type of the writer.

use probelake_format::{FormatError, Unit};

/// Everything that can go wrong recording into a unit or committing it.
///
/// The caller's mistakes (`InvalidEntry`, `BudgetFull`, …) are told apart from failures of the
/// store (`Format`) and from bugs (`Internal`).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// An entry cannot be written as msprobe would write it.
    #[error("entry `{name}`: {message}")]
    InvalidEntry {
        /// The entry name.
        name: String,
        /// What is wrong, and what to do instead.
        message: String,
    },
    /// The staging budget is full and the unit was opened with [`crate::Backpressure::Error`].
    #[error(
        "staging budget full: {needed} more bytes requested, {used} of {budget} in use; \
         raise WriterOptions::budget_bytes or use Backpressure::Wait"
    )]
    BudgetFull {
        /// Bytes the entry needs.
        needed: u64,
        /// Bytes staged when it was refused.
        used: u64,
        /// The budget.
        budget: u64,
    },
    /// An earlier failure stopped the unit; nothing of it will become visible.
    #[error("{unit}: the writer stopped after an earlier error: {message}")]
    Stopped {
        /// The unit.
        unit: Unit,
        /// The first error.
        message: String,
    },
    /// Reading or writing the dataset failed.
    #[error("{unit}: {source}")]
    Format {
        /// The unit.
        unit: Unit,
        /// The format crate's error.
        #[source]
        source: Box<FormatError>,
    },
    /// Opening the dataset failed.
    #[error(transparent)]
    Open(Box<FormatError>),
    /// The device could not copy a tensor.
    #[error("device copy of `{item}` failed: {message}")]
    Device {
        /// The row name of the tensor.
        item: String,
        /// The device's error.
        message: String,
    },
    /// The options make no sense.
    #[error("invalid writer options: {0}")]
    Options(String),
    /// A broken invariant inside probelake.
    #[error("bug in probelake-writer, please report it: {0}")]
    Internal(String),
}

/// `Result` with [`WriterError`].
pub type Result<T, E = WriterError> = std::result::Result<T, E>;

impl WriterError {
    pub(crate) fn format(unit: &Unit, source: FormatError) -> Self {
        WriterError::Format { unit: unit.clone(), source: Box::new(source) }
    }

    pub(crate) fn invalid(name: &str, message: impl Into<String>) -> Self {
        WriterError::InvalidEntry { name: name.to_string(), message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_stays_small() {
        assert!(std::mem::size_of::<super::WriterError>() <= 80, "{}", std::mem::size_of::<super::WriterError>());
    }
}
