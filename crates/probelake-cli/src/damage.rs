//! Naming the damaged file behind a failed query. DataFusion's errors for a page that does
//! not decode say what is wrong in it, not which of a dataset's many files holds it.

use std::future::Future;

use probelake_format::FormatError;
use probelake_query::datafusion::arrow::error::ArrowError;
use probelake_query::datafusion::error::DataFusionError;
use probelake_query::datafusion::parquet::errors::ParquetError;
use probelake_query::RunSession;

/// Whether `err` is a failure to read stored data, rather than a mistake in the query.
fn is_decode_failure(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.is::<ArrowError>()
            || cause.is::<ParquetError>()
            || matches!(
                cause.downcast_ref::<DataFusionError>(),
                Some(
                    DataFusionError::ArrowError(..) | DataFusionError::ParquetError(..) | DataFusionError::External(..)
                )
            )
    })
}

/// `err`, or, when it is a failure to decode data and `find` (run only then) names a file
/// that does not decode, that file's error under `err`'s outermost context: the reader then
/// learns which file, and the report's hint says how to replace its unit.
pub async fn name_damaged_file(err: anyhow::Error, find: impl Future<Output = Option<FormatError>>) -> anyhow::Error {
    if !is_decode_failure(&err) {
        return err;
    }
    match find.await {
        Some(damage) => anyhow::Error::new(damage).context(err.to_string()),
        None => err,
    }
}

/// `result` of a query over `session`, with a failure to decode data turned into the error
/// naming the damaged file of the session's runs ([`name_damaged_file`]).
pub async fn naming_damage<T, E: Into<anyhow::Error>>(result: Result<T, E>, session: &RunSession) -> anyhow::Result<T> {
    match result {
        Ok(value) => Ok(value),
        Err(e) => Err(name_damaged_file(e.into(), session.first_damaged_file()).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn damage() -> FormatError {
        FormatError::Corrupt { location: "d/dump/x.parquet".into(), message: "cannot decode".into() }
    }

    #[tokio::test]
    async fn only_a_failure_to_decode_looks_for_the_file() {
        let decode =
            anyhow::Error::new(DataFusionError::ArrowError(Box::new(ArrowError::ParquetError("page".into())), None))
                .context("in -c");
        let named = name_damaged_file(decode, async { Some(damage()) }).await;
        assert_eq!(format!("{named:#}"), "in -c: d/dump/x.parquet: the dataset is damaged: cannot decode");

        let mistake = anyhow::Error::new(DataFusionError::Plan("no column nme".into())).context("in -c");
        let kept = name_damaged_file(mistake, async { panic!("looked for a damaged file after a plan error") }).await;
        assert!(format!("{kept:#}").contains("no column nme"));

        // When every file decodes, the error is left as it was.
        let decode = anyhow::Error::new(ParquetError::General("eof".into()));
        assert!(format!("{:#}", name_damaged_file(decode, async { None }).await).contains("eof"));
    }
}
