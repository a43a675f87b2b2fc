//! Errors as Python exceptions of the `probelake.ProbelakeError` hierarchy.
//!
//! The classes are defined in Python (`probelake/_errors.py`) so that they can also derive
//! from the built-in exception a caller expects (`ValueError`, `BufferError`, `TypeError`);
//! the native module looks them up by name when it raises one.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyModule;

/// The exception classes, by name in `probelake._errors`.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A dataset could not be opened, read or written (storage, Parquet, damage).
    Dataset,
    /// msprobe's files: invalid JSON, a tree with no units, a tensor file.
    Msprobe,
    /// SQL refused or failed.
    Query,
    /// `compare` or `divergence` failed.
    Compare,
    /// A bad argument: unknown dtype, wrong nesting, a closed unit, bad options.
    Argument,
    /// An unsupported Python type in a recorded value.
    Type,
    /// The writer's staging budget is full (`backpressure="error"`).
    BudgetFull,
    /// The writer stopped, or failed to commit.
    Writer,
    /// A bug, or a state the module cannot recover from (a fork with a unit open).
    Internal,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Dataset => "DatasetError",
            Kind::Msprobe => "MsprobeError",
            Kind::Query => "QueryError",
            Kind::Compare => "CompareError",
            Kind::Argument => "ArgumentError",
            Kind::Type => "ValueTypeError",
            Kind::BudgetFull => "BudgetFullError",
            Kind::Writer => "WriterError",
            Kind::Internal => "InternalError",
        }
    }
}

/// An error on its way to Python: its class and the message the CLI would print.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The class.
    pub kind: Kind,
    /// The message.
    pub message: String,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` saying `message`.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    /// A bad argument.
    pub fn argument(message: impl Into<String>) -> Self {
        Error::new(Kind::Argument, message)
    }

    /// `err` and its causes, as the CLI prints them.
    pub fn chain(kind: Kind, err: &(dyn std::error::Error + 'static)) -> Self {
        Error::new(kind, probelake_query::render::chain_text(err))
    }

    /// The same message with `context` in front, as the CLI's `anyhow` context reads.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl From<probelake_format::FormatError> for Error {
    fn from(e: probelake_format::FormatError) -> Self {
        Error::chain(Kind::Dataset, &e)
    }
}

impl Error {
    /// The class of an msprobe error: the dataset's, or msprobe's files'.
    fn from_msprobe_kind(e: &probelake_msprobe::MsprobeError) -> Kind {
        match e {
            probelake_msprobe::MsprobeError::Dataset(_) => Kind::Dataset,
            _ => Kind::Msprobe,
        }
    }
}

impl From<probelake_msprobe::MsprobeError> for Error {
    fn from(e: probelake_msprobe::MsprobeError) -> Self {
        Error::chain(Error::from_msprobe_kind(&e), &e)
    }
}

impl From<probelake_query::QueryError> for Error {
    fn from(e: probelake_query::QueryError) -> Self {
        let kind = match &e {
            probelake_query::QueryError::Format(_) => Kind::Dataset,
            probelake_query::QueryError::RunName { .. } | probelake_query::QueryError::Argument(_) => Kind::Argument,
            _ => Kind::Query,
        };
        Error::chain(kind, &e)
    }
}

impl From<probelake_compare::CompareError> for Error {
    fn from(e: probelake_compare::CompareError) -> Self {
        // msprobe files read in place are the input's fault, as when they are imported.
        let kind = match &e {
            probelake_compare::CompareError::Read(source) => Error::from_msprobe_kind(source),
            _ => Kind::Compare,
        };
        Error::chain(kind, &e)
    }
}

impl From<probelake_compare::runs::InputError> for Error {
    fn from(e: probelake_compare::runs::InputError) -> Self {
        use probelake_compare::runs::InputError as I;
        let kind = match &e {
            I::Missing { .. } | I::Pairing(_) => Kind::Argument,
            I::Import { source, .. } | I::Read { source, .. } => Error::from_msprobe_kind(source.as_ref()),
            I::Open { .. } | I::Format(_) | I::Io { .. } | I::TempDir(_) => Kind::Dataset,
            _ => Kind::Internal,
        };
        Error::chain(kind, &e)
    }
}

impl From<probelake_compare::runs::pairing::PairingError> for Error {
    fn from(e: probelake_compare::runs::pairing::PairingError) -> Self {
        Error::chain(Kind::Argument, &e)
    }
}

impl From<probelake_compare::JobError> for Error {
    fn from(e: probelake_compare::JobError) -> Self {
        use probelake_compare::JobError as J;
        match e {
            J::Input(e) => e.into(),
            J::Pairing(e) => e.into(),
            J::Argument(message) => Error::argument(message),
            J::Compare { ref source, .. } => {
                // msprobe files read in place are the input's fault, as when they are imported.
                let kind = match source.as_ref() {
                    probelake_compare::CompareError::Read(source) => Error::from_msprobe_kind(source),
                    _ => Kind::Compare,
                };
                Error::chain(kind, &e)
            }
            J::Damaged { .. } => Error::chain(Kind::Dataset, &e),
            _ => Error::chain(Kind::Compare, &e),
        }
    }
}

impl From<probelake_report::ReportError> for Error {
    fn from(e: probelake_report::ReportError) -> Self {
        use probelake_report::ReportError as R;
        match e {
            R::Input(e) => e.into(),
            R::Pairing(e) => e.into(),
            R::Argument(message) => Error::argument(message),
            R::Format(_) | R::Column(_) | R::Schema(_) => Error::chain(Kind::Dataset, &e),
            _ => Error::chain(Kind::Compare, &e),
        }
    }
}

impl From<probelake_compare::write::results::ResultError> for Error {
    fn from(e: probelake_compare::write::results::ResultError) -> Self {
        Error::chain(Kind::Compare, &e)
    }
}

impl From<probelake_writer::WriterError> for Error {
    fn from(e: probelake_writer::WriterError) -> Self {
        use probelake_writer::WriterError as W;
        let kind = match &e {
            W::InvalidEntry { .. } | W::Options(_) => Kind::Argument,
            W::BudgetFull { .. } => Kind::BudgetFull,
            W::Open(_) => Kind::Dataset,
            W::Internal(_) => Kind::Internal,
            _ => Kind::Writer,
        };
        Error::chain(kind, &e)
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error::chain(Kind::Internal, &e)
    }
}

impl From<Error> for PyErr {
    /// The message reaches Python as it would reach the terminal: credentials as `***`,
    /// control characters escaped (`probelake_query::render::for_people`).
    fn from(e: Error) -> PyErr {
        let e = Error { message: probelake_query::render::for_people(&e.message), ..e };
        Python::attach(|py| {
            let class = PyModule::import(py, "probelake._errors").and_then(|m| m.getattr(e.kind.class_name()));
            match class {
                Ok(class) => match class.call1((e.message.clone(),)) {
                    Ok(instance) => PyErr::from_value(instance),
                    Err(err) => err,
                },
                // Only when the Python half of the package is missing or broken.
                Err(_) => PyRuntimeError::new_err(e.message),
            }
        })
    }
}
