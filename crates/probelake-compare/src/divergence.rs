//! Where two runs first part: the rows of `sql/first_divergence.sql` over paired units, with
//! the chain of modules above each diverging entry. `probelake divergence` and Python's
//! `probelake.divergence` are this module. In a local session the rows come from the
//! `first_divergence` table function (`probelake_query::udf::first_divergence`: it reads each
//! unit pair in execution order and stops at its first divergence, `probelake_query::msprobe::
//! divergence`); on a cluster, from the query text.
//!
//! The query joins the two sides on (step, stage, rank), so each golden unit is registered
//! under the key of the target unit it is paired with ([`divergence_session`]). A table takes
//! its partition values from the commit records, and nothing else of a record depends on its
//! unit (its files keep their paths), so a relabelled record reads its own files under the
//! target's key.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use probelake_format::{CommitRecord, Lake};

use crate::runs::pairing::UnitPair;
use probelake_query::{QueryError, Result, Run, RunSession};

/// The canned query, as kept in `sql/first_divergence.sql`: threshold 0.5 (msprobe's rule),
/// runs named `target` and `golden`.
pub const FIRST_DIVERGENCE_SQL: &str = include_str!("../sql/first_divergence.sql");

/// The line of [`FIRST_DIVERGENCE_SQL`] that holds the threshold.
const THRESHOLD_LINE: &str = "SELECT 0.5 AS threshold";

/// [`FIRST_DIVERGENCE_SQL`] with `threshold` (a fraction: 0.5 is 50 %; 0 finds the first
/// difference of any size), or an error for a negative or non-finite threshold.
///
/// ```
/// let sql = probelake_compare::divergence::first_divergence_sql(0.0).unwrap();
/// assert!(sql.contains("SELECT 0.0 AS threshold"));
/// assert!(probelake_compare::divergence::first_divergence_sql(f64::NAN).is_err());
/// ```
pub fn first_divergence_sql(threshold: f64) -> Result<String> {
    if !(threshold >= 0.0 && threshold.is_finite()) {
        return Err(QueryError::Argument(format!(
            "threshold {threshold}: give a finite number ≥ 0 (0.5 is msprobe's rule)"
        )));
    }
    Ok(FIRST_DIVERGENCE_SQL.replace(THRESHOLD_LINE, &format!("SELECT {threshold:?} AS threshold")))
}

/// A session with the runs `target` and `golden` holding exactly the paired units, each
/// golden unit under its target unit's key.
pub async fn divergence_session(target: &Lake, golden: &Lake, pairs: &[UnitPair<'_>]) -> Result<RunSession> {
    divergence_session_on(target, golden, pairs, &probelake_query::LocalEngine).await
}

/// [`divergence_session`] with plans run by `engine` (a cluster: the query and the module
/// chains' lookups run there; the chains are put together here).
pub async fn divergence_session_on(
    target: &Lake,
    golden: &Lake,
    pairs: &[UnitPair<'_>],
    engine: &dyn probelake_query::Engine,
) -> Result<RunSession> {
    let target_units: Vec<CommitRecord> = pairs.iter().map(|p| p.target.clone()).collect();
    let golden_units: Vec<CommitRecord> =
        pairs.iter().map(|p| CommitRecord { unit: p.target.unit.clone(), ..p.golden.clone() }).collect();
    RunSession::open_on(
        vec![
            Run::new("target", target.clone()).with_units(target_units),
            Run::new("golden", golden.clone()).with_units(golden_units),
        ],
        false,
        engine,
    )
    .await
}

/// The first diverging entry of every unit pair of `session` (made by [`divergence_session`]):
/// the query's columns and `modules`, the enclosing modules of the entry, outermost first,
/// joined by ` > ` (from construct.json; empty for L1 dumps). Rows are units where the runs
/// part; the schema is returned even when there are none.
///
/// In a local session the rows come from the `first_divergence` table function, which reads
/// each unit pair in execution order and stops at its first divergence; on a cluster, from the
/// query text. Both give the same rows.
pub async fn first_divergence(session: &RunSession, threshold: f64) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let query = first_divergence_sql(threshold)?;
    let rows = match (session.local_run("target"), session.local_run("golden")) {
        (Some(target), Some(golden)) => {
            vec![probelake_query::msprobe::divergence::first_divergences(target, golden, threshold).await?]
        }
        _ => {
            session
                .sql(&query)
                .await?
                .ok_or_else(|| QueryError::Argument("sql/first_divergence.sql holds no query".into()))?
                .collect()
                .await?
        }
    };
    let schema = with_modules(&rows.first().map_or_else(probelake_query::msprobe::divergence::schema, |b| b.schema()));
    let mut batches = Vec::new();
    for batch in rows {
        batches.push(add_module_chain(session, &batch, &schema).await?);
    }
    Ok((schema, batches))
}

/// `schema` with the `modules` column appended.
fn with_modules(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("modules", DataType::Utf8, true));
    Arc::new(Schema::new(fields))
}

/// `batch` with `modules` appended (`schema` is [`with_modules`] of its schema).
async fn add_module_chain(session: &RunSession, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let col = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| QueryError::Argument(format!("sql/first_divergence.sql lost its column `{name}`")))
    };
    let (step, stage, rank, name) = (col("step")?, col("stage")?, col("rank")?, col("first_divergence")?);
    let (step, rank) = (step.as_primitive::<Int64Type>(), rank.as_primitive::<Int64Type>());
    let (stage, name) = (stage.as_string::<i32>(), name.as_string::<i32>());
    let mut chains = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        if name.is_null(i) {
            chains.push(None);
            continue;
        }
        let sql = format!(
            "SELECT name, parent FROM target.construct WHERE step = {} AND stage = '{}' AND rank = {}",
            step.value(i),
            stage.value(i).replace('\'', "''"),
            rank.value(i)
        );
        let mut parents: HashMap<String, String> = HashMap::new();
        for b in &session.collect(&sql).await? {
            let (n, p) = (b.column(0).as_string::<i32>(), b.column(1).as_string::<i32>());
            for j in 0..b.num_rows() {
                if p.is_valid(j) && !p.value(j).is_empty() {
                    parents.insert(n.value(j).to_string(), p.value(j).to_string());
                }
            }
        }
        chains.push(Some(module_chain(&parents, name.value(i)).join(" > ")));
    }
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(chains)));
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| QueryError::DataFusion(e.into()))
}

/// The modules above `name`, outermost first; a cycle or a chain deeper than 256 stops it.
fn module_chain(parents: &HashMap<String, String>, name: &str) -> Vec<String> {
    let mut chain: Vec<String> = Vec::new();
    let mut at = name;
    while let Some(parent) = parents.get(at) {
        if chain.contains(parent) || chain.len() > 256 {
            break;
        }
        chain.push(parent.clone());
        at = parent;
    }
    chain.reverse();
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_stop_at_the_root_and_at_cycles() {
        let parents: HashMap<String, String> =
            [("op", "Module.layer"), ("Module.layer", "Module.model"), ("a", "b"), ("b", "a")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(module_chain(&parents, "op"), ["Module.model", "Module.layer"]);
        assert!(module_chain(&parents, "Module.model").is_empty());
        assert_eq!(module_chain(&parents, "a"), ["a", "b"]);
    }

    #[test]
    fn threshold_is_checked_and_spliced() {
        assert!(FIRST_DIVERGENCE_SQL.contains(THRESHOLD_LINE));
        assert!(first_divergence_sql(0.25).unwrap().contains("SELECT 0.25 AS threshold"));
        for bad in [-1.0, f64::INFINITY, f64::NAN] {
            let err = first_divergence_sql(bad).unwrap_err().to_string();
            assert!(err.contains("finite number ≥ 0"), "{err}");
        }
    }
}
