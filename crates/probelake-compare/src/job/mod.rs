//! compare and first-divergence search as whole operations: [`CompareJob`] and
//! [`DivergenceJob`] open the two inputs, pair their units, run, stream the results, roll back
//! on failure, name a damaged file behind a failure, and collect the notes. The command line
//! maps its flags onto them and Python its keyword arguments; neither runs a loop of its own.

mod compare;
mod divergence;

pub use compare::{CompareJob, CompareReport, Output};
pub use divergence::{DivergenceJob, DivergenceReport};

use std::str::FromStr;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;
use probelake_format::FormatError;
use probelake_query::QueryError;

use crate::error::CompareError;
use crate::mode::CompareMode;
use crate::runs::pairing::PairingError;
use crate::runs::InputError;
use crate::write::results::{ResultError, ResultFormat};

/// Why a job failed; its text (with its sources, [`probelake_query::render`]) says what to do.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum JobError {
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
    /// Writing the result files failed (they are rolled back).
    #[error(transparent)]
    Files(ResultError),
    /// The first-divergence query failed.
    #[error("running the first-divergence query")]
    Divergence(#[source] QueryError),
    /// A failure to decode data, with the damaged file found behind it.
    #[error("{context}")]
    Damaged {
        /// What was being done, and the failure as it was reported.
        context: String,
        /// The damaged file.
        #[source]
        damage: Box<FormatError>,
    },
    /// A bad argument (a threshold out of range).
    #[error("{0}")]
    Argument(String),
}

impl JobError {
    /// `self`, or when it is a failure to decode stored data and `damaged` finds a damaged file,
    /// that file's error under this one's text: the reader learns which file to replace.
    async fn naming_damage(self, damaged: impl std::future::Future<Output = Option<FormatError>>) -> JobError {
        if !is_decode_failure(&self) {
            return self;
        }
        match damaged.await {
            Some(damage) => {
                JobError::Damaged { context: probelake_query::render::chain_text(&self), damage: Box::new(damage) }
            }
            None => self,
        }
    }
}

/// Whether `err` is a failure to read stored data, rather than a mistake in a query.
fn is_decode_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(cause) = next {
        let decode = cause.is::<ArrowError>()
            || cause.is::<ParquetError>()
            || matches!(
                cause.downcast_ref::<DataFusionError>(),
                Some(
                    DataFusionError::ArrowError(..) | DataFusionError::ParquetError(..) | DataFusionError::External(..)
                )
            );
        if decode {
            return true;
        }
        next = cause.source();
    }
    false
}

/// A value given for an option that takes one of a few words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option} {given:?}: use {}", expected.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", "))]
pub struct UnknownWord {
    /// The option (`mode`, `format`).
    pub option: &'static str,
    /// What was given.
    pub given: String,
    /// The words it takes.
    pub expected: &'static [&'static str],
}

/// compare's `mode`: detected from the dumps as msprobe does (`auto`), or one of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeChoice {
    /// Detected from the dumps.
    #[default]
    Auto,
    /// A mode given.
    Given(CompareMode),
}

impl ModeChoice {
    /// The words `mode` takes.
    pub const WORDS: &'static [&'static str] = &["auto", "statistics", "md5", "tensor"];

    /// The mode, `None` for `auto`.
    pub fn mode(self) -> Option<CompareMode> {
        match self {
            ModeChoice::Auto => None,
            ModeChoice::Given(mode) => Some(mode),
        }
    }
}

impl FromStr for ModeChoice {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => ModeChoice::Auto,
            "statistics" => ModeChoice::Given(CompareMode::Statistics),
            "md5" => ModeChoice::Given(CompareMode::Md5),
            "tensor" => ModeChoice::Given(CompareMode::Tensor),
            _ => return Err(UnknownWord { option: "mode", given: s.to_string(), expected: Self::WORDS }),
        })
    }
}

impl ResultFormat {
    /// The words a result format is named by.
    pub const WORDS: &'static [&'static str] = &["csv", "xlsx", "parquet"];
}

impl FromStr for ResultFormat {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "csv" => ResultFormat::Csv,
            "xlsx" => ResultFormat::Xlsx,
            "parquet" => ResultFormat::Parquet,
            _ => return Err(UnknownWord { option: "format", given: s.to_string(), expected: Self::WORDS }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_formats_parse_and_refuse_with_the_words_they_take() {
        assert_eq!("auto".parse(), Ok(ModeChoice::Auto));
        assert_eq!("md5".parse::<ModeChoice>().map(ModeChoice::mode), Ok(Some(CompareMode::Md5)));
        let err = "fast".parse::<ModeChoice>().unwrap_err().to_string();
        assert_eq!(err, r#"mode "fast": use "auto", "statistics", "md5", "tensor""#);
        assert_eq!("xlsx".parse(), Ok(ResultFormat::Xlsx));
        assert!("html".parse::<ResultFormat>().unwrap_err().to_string().contains(r#""csv", "xlsx", "parquet""#));
    }
}
