//! `probelake divergence TARGET GOLDEN`: where two runs first part, for every unit at once.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use probelake_format::CommitRecord;
use probelake_query::datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use probelake_query::datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use probelake_query::{Run, RunSession};

use super::Context;
use crate::output::{collect_keeping_schema, write_batches, write_batches_to_file, OutputFormat};
use crate::unit_pairs::{Runs, UnitArgs, PAIRING_HELP};

/// The canned query; `probelake divergence` is this query with a threshold and module chains.
const FIRST_DIVERGENCE: &str = include_str!("../../../../sql/first_divergence.sql");

/// Find the first item where two runs part, per step, stage and rank.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// The target run (dataset, msprobe folder or dump.json).
    pub target: String,
    /// The golden run (dataset, msprobe folder or dump.json).
    pub golden: String,
    /// Relative error (a fraction: 0.5 is 50 %) above which an output counts as diverging.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Write the rows to this file instead of stdout (needed for --format parquet).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Which units are compared with which.
    #[command(flatten)]
    pub units: UnitArgs,
}

fn after_help() -> String {
    format!(
        "\
For every pair of units (below): the first entry, in execution order, with an output whose max,
min, mean or norm has a relative error above --threshold (msprobe's -da rule; 0 finds the first
difference of any size), with the statistics on both sides and the chain of modules above it
(from construct.json; empty for L1 dumps). msprobe does this per step folder of one stage; this
does all pairs at once. It is sql/first_divergence.sql, with each golden unit shown under its
target unit's key: the step, stage and rank of a row are the target's.

{PAIRING_HELP}
Exit code: 0 when the runs never part, 1 when they do, 2 on errors.

Examples:
  probelake divergence ./lake/npu ./lake/gpu --threshold 0
  probelake divergence ./lake/run ./lake/run --target-step 2 --golden-step 1
  probelake divergence ./lake/npu ./lake/gpu --format parquet -o first_divergence.parquet"
    )
}

/// Runs the search.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    if args.format == OutputFormat::Parquet && args.output.is_none() {
        anyhow::bail!("--format parquet writes a file: add -o FILE");
    }
    if !(args.threshold >= 0.0 && args.threshold.is_finite()) {
        anyhow::bail!("--threshold {}: give a finite number ≥ 0 (0.5 is msprobe's rule)", args.threshold);
    }
    let choice = args.units.choice()?;
    let runs = Runs::open(&args.target, &args.golden, &ctx.storage).await?;
    let pairing = runs.pair(ctx, &choice)?;
    // The query joins the two sides on (step, stage, rank): each golden unit is shown under
    // the key of the target unit it is paired with. A table takes its partition values from
    // the commit records, and nothing else of a record depends on its unit (its files keep
    // their paths), so a relabelled record reads its own files under the target's key.
    let target_units: Vec<CommitRecord> = pairing.pairs.iter().map(|p| p.target.clone()).collect();
    let golden_units: Vec<CommitRecord> =
        pairing.pairs.iter().map(|p| CommitRecord { unit: p.target.unit.clone(), ..p.golden.clone() }).collect();
    let session = RunSession::open(
        vec![
            Run::new("target", runs.target.lake.clone()).with_units(target_units),
            Run::new("golden", runs.golden.lake.clone()).with_units(golden_units),
        ],
        false,
    )
    .await?;
    let query =
        FIRST_DIVERGENCE.replace("SELECT 0.5 AS threshold", &format!("SELECT {:?} AS threshold", args.threshold));
    let batches = collect_keeping_schema(&session, &query).await.context("running the first-divergence query");
    let batches = crate::damage::naming_damage(batches, &session).await?;
    let mut with_chain = Vec::with_capacity(batches.len());
    let mut found = 0;
    for batch in &batches {
        found += batch.num_rows();
        with_chain.push(add_module_chain(&session, batch).await?);
    }
    match &args.output {
        Some(path) => {
            write_batches_to_file(path, &with_chain, args.format)?;
        }
        None => write_batches(&mut std::io::stdout().lock(), &with_chain, args.format, 0)?,
    }
    ctx.note(&format!("{found} unit(s) where the runs part (threshold {})", args.threshold));
    Ok(if found > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Appends `modules`: the enclosing modules of each row's entry, outermost first.
async fn add_module_chain(session: &RunSession, batch: &RecordBatch) -> anyhow::Result<RecordBatch> {
    let col = |name: &str| batch.column_by_name(name).context("first_divergence.sql lost a column");
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
        let rows = session.collect(&sql).await?;
        let mut parents: HashMap<String, String> = HashMap::new();
        for b in &rows {
            let (n, p) = (b.column(0).as_string::<i32>(), b.column(1).as_string::<i32>());
            for j in 0..b.num_rows() {
                if p.is_valid(j) && !p.value(j).is_empty() {
                    parents.insert(n.value(j).to_string(), p.value(j).to_string());
                }
            }
        }
        let mut chain = Vec::new();
        let mut at = name.value(i).to_string();
        while let Some(parent) = parents.get(&at) {
            if chain.contains(parent) || chain.len() > 256 {
                break;
            }
            chain.push(parent.clone());
            at = parent.clone();
        }
        chain.reverse();
        chains.push(Some(chain.join(" > ")));
    }
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("modules", DataType::Utf8, true));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(chains)));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}
