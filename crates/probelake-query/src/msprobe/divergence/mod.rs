//! The first divergence of every unit pair of two runs, each pair searched on a core of its
//! own (`unit_pair`): the rows of `sql/first_divergence.sql`, in its order.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::HashMap;
use datafusion::error::DataFusionError;
use futures::{StreamExt, TryStreamExt};
use probelake_format::lake::FetchedFile;
use probelake_format::{CommitRecord, Lake, Table, Unit};

mod unit_pair;

use self::unit_pair::{first_communication, first_divergence, Diverging, COMMUNICATION_APIS};
use crate::error::{QueryError, Result};
use crate::table::RunUnits;

/// The columns of `sql/first_divergence.sql`.
pub fn schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let float = |name: &str| Field::new(name, DataType::Float64, true);
        Arc::new(Schema::new(vec![
            Field::new("step", DataType::Int64, false),
            Field::new("stage", DataType::Utf8, false),
            Field::new("rank", DataType::Int64, false),
            Field::new("first_divergence", DataType::Utf8, false),
            Field::new("item", DataType::Utf8, false),
            float("rel_err"),
            float("target_max"),
            float("golden_max"),
            float("target_norm"),
            float("golden_norm"),
            Field::new("after_communication", DataType::Boolean, false),
        ]))
    })
    .clone()
}

/// One unit pair's answer.
struct Found {
    unit: Unit,
    row: Diverging,
    after_communication: bool,
}

/// The first diverging row of every unit present in both runs (paired by equal step, stage and
/// rank), ordered by step, stage and rank: `sql/first_divergence.sql`'s rows.
pub async fn first_divergences(target: &RunUnits, golden: &RunUnits, threshold: f64) -> Result<RecordBatch> {
    let golden_units: HashMap<&Unit, &CommitRecord> = golden.units.iter().map(|g| (&g.unit, g)).collect();
    let mut pairs: Vec<(CommitRecord, CommitRecord)> =
        target.units.iter().filter_map(|t| golden_units.get(&t.unit).map(|g| (t.clone(), (*g).clone()))).collect();
    // `Unit`'s order is (step, stage, rank): the query's ORDER BY.
    pairs.sort_by(|a, b| a.0.unit.cmp(&b.0.unit));
    // Two pairs per core: one reads its files while the other searches.
    let in_flight = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
    let found: Vec<Option<Found>> = futures::stream::iter(pairs)
        .map(|(t, g)| search_pair(&target.lake, &golden.lake, t, g, threshold))
        .buffered(in_flight)
        .try_collect()
        .await?;
    batch(found.into_iter().flatten().collect())
}

async fn search_pair(
    target_lake: &Lake,
    golden_lake: &Lake,
    target: CommitRecord,
    golden: CommitRecord,
    threshold: f64,
) -> Result<Option<Found>> {
    let (target_files, golden_files) = futures::try_join!(fetch(target_lake, &target), fetch(golden_lake, &golden))?;
    // The communication-family files are among the target's: kept (their bytes are shared), not
    // fetched again for `after_communication`.
    let communication: Vec<FetchedFile> = target
        .files_of(Table::Dump)
        .zip(&target_files)
        .filter(|(file, _)| file.api.as_deref().is_some_and(|api| COMMUNICATION_APIS.contains(&api)))
        .map(|(_, fetched)| fetched.clone())
        .collect();
    let unique = golden.counts.dump_files <= 1;
    let found = blocking(move || {
        let Some(row) = first_divergence(target_files, golden_files, threshold, unique)? else { return Ok(None) };
        let first = first_communication(communication)?;
        Ok(Some((row, first)))
    })
    .await?;
    Ok(found.map(|(row, first)| Found {
        after_communication: first.is_some_and(|seq| seq < row.seq),
        unit: target.unit,
        row,
    }))
}

/// The unit's dump files, fetched, in the order of its commit record.
async fn fetch(lake: &Lake, record: &CommitRecord) -> Result<Vec<FetchedFile>> {
    Ok(futures::future::try_join_all(record.files_of(Table::Dump).map(|f| lake.fetch_file(f))).await?)
}

/// Runs `work` (decoding, all CPU) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::result::Result<T, probelake_format::FormatError> + Send + 'static,
) -> Result<T> {
    SpawnedTask::spawn_blocking(work)
        .join_unwind()
        .await
        .map_err(|e| QueryError::DataFusion(DataFusionError::ExecutionJoin(Box::new(e))))?
        .map_err(QueryError::Format)
}

fn batch(found: Vec<Found>) -> Result<RecordBatch> {
    let floats =
        |f: &dyn Fn(&Found) -> Option<f64>| -> ArrayRef { Arc::new(found.iter().map(f).collect::<Float64Array>()) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(found.iter().map(|f| f.unit.step).collect::<Int64Array>()),
        Arc::new(found.iter().map(|f| Some(f.unit.stage.as_str())).collect::<StringArray>()),
        Arc::new(found.iter().map(|f| f.unit.rank).collect::<Int64Array>()),
        Arc::new(found.iter().map(|f| Some(f.row.name.as_str())).collect::<StringArray>()),
        Arc::new(found.iter().map(|f| Some(f.row.item.as_str())).collect::<StringArray>()),
        floats(&|f| Some(f.row.rel_err)),
        floats(&|f| f.row.max.0),
        floats(&|f| f.row.max.1),
        floats(&|f| f.row.norm.0),
        floats(&|f| f.row.norm.1),
        Arc::new(found.iter().map(|f| Some(f.after_communication)).collect::<BooleanArray>()),
    ];
    RecordBatch::try_new(schema(), columns).map_err(|e| QueryError::DataFusion(e.into()))
}
