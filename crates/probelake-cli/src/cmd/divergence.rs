//! `probelake divergence TARGET GOLDEN`: where two runs first part, for every unit at once.

use crate::ExitCode;

use probelake_compare::DivergenceJob;
use probelake_query::datafusion::arrow::array::RecordBatch;

use super::Context;
use crate::output::{write_batches, write_batches_to_file, OutputFormat};
use crate::unit_pairs::{UnitArgs, PAIRING_HELP};

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
    /// Where the query runs.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArg,
}

fn after_help() -> String {
    format!(
        "\
For every pair of units (below): the first entry, in execution order, with an output whose max,
min, mean or norm has a relative error above --threshold (msprobe's -da rule; 0 finds the first
difference of any size), with the statistics on both sides and the chain of modules above it
(from construct.json; empty for L1 dumps). msprobe does this per step folder of one stage; this
does all pairs at once. The rows are those of sql/first_divergence.sql, with each golden unit
shown under its target unit's key: the step, stage and rank of a row are the target's. Each
unit pair is read in execution order and only up to its first divergence (the SQL table
function first_divergence(threshold), docs/sql.md).

With --cluster HOST:PORT the query text and the module chains' lookups run on a probelake
cluster (docs/cluster.md); pairing the units and joining the chains happen here.

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
    let units = args.units.choice()?;
    // The scheduler first: an unreachable one fails before msprobe folders are imported.
    let engine = args.cluster.engine().await?;
    let job = DivergenceJob::new(&args.target, &args.golden)
        .storage(ctx.storage.clone())
        .threshold(args.threshold)
        .units(units)
        .engine(engine);
    let report = args.cluster.within(async { Ok(job.run().await?) }).await?;
    for note in &report.notes {
        ctx.note(note);
    }
    let (schema, mut batches) = (report.schema, report.batches);
    let found: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if batches.is_empty() {
        // A header (or a Parquet file) with the result's columns all the same.
        batches.push(RecordBatch::new_empty(schema));
    }
    match &args.output {
        Some(path) => write_batches_to_file(path, &batches, args.format)?,
        None => write_batches(&mut std::io::stdout().lock(), &batches, args.format, 0)?,
    }
    ctx.note(&format!("{found} unit(s) where the runs part (threshold {})", args.threshold));
    Ok(if found > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
