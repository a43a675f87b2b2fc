//! `probelake compare TARGET GOLDEN`: msprobe's compare table for every unit in both runs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use probelake_msprobe::Progress as _;
use probelake_query::compare::inputs::{pair_text, RunPair};
use probelake_query::compare::results::{
    local_timestamp, needs_folders, CompareQueue, Naming, ResultError, ResultFiles, ResultFormat,
};
use probelake_query::compare::{CompareMode, CompareOptions, Comparison, UnitComparison};

use super::Context;
use crate::progress::Bar;
use crate::unit_pairs::{pair, UnitArgs, PAIRING_HELP};

/// The compare mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Detect it from the dumps, as msprobe does.
    Auto,
    /// Max/Min/Mean/Norm differences.
    Statistics,
    /// CRC-32 equality.
    Md5,
    /// Metrics over the dumped tensors.
    Tensor,
}

/// Where results go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// msprobe's CSV files.
    Csv,
    /// The same table as Parquet files, typed (numbers as float64, shapes as lists of int64,
    /// `N/A` as null) and led by step, stage and rank columns; see docs/compare.md.
    Parquet,
    /// A text table on stdout (the first columns).
    Table,
}

/// Compare a target run with a golden run, as `msprobe compare` does.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// The target run (dataset, msprobe folder or dump.json).
    pub target: String,
    /// The golden run (dataset, msprobe folder or dump.json).
    pub golden: String,
    /// Folder for the result files.
    #[arg(short = 'o', long = "output", default_value = "./output")]
    pub output: PathBuf,
    /// The comparison mode.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// Write msprobe's .xlsx workbooks instead of .csv files (numbers as numbers).
    #[arg(long)]
    pub xlsx: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: CompareFormat,
    /// Which units are compared with which.
    #[command(flatten)]
    pub units: UnitArgs,
    /// Where the queries run.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArg,
}

fn after_help() -> String {
    format!(
        "\
TARGET (the NPU side) and GOLDEN (the bench side) are datasets, or msprobe dump folders /
dump.json files. When both are msprobe files they are read in place, a unit pair at a time,
and compared in memory: no dataset is written. A dataset compared with msprobe files has the
files imported into a temporary dataset first.

With --cluster HOST:PORT each unit pair's queries (both sides' leaves, their dump files, the
join) run on a probelake cluster (docs/cluster.md) when both runs are datasets; the rows, cells
and files are made here. Two runs of msprobe files are compared here, in memory.

{PAIRING_HELP}
The output is msprobe 26.2's table, cell for cell, named as msprobe names it:
compare_result_{{timestamp}}.csv for a dump.json target; compare_result_rank{{R}}_{{timestamp}}.csv
(after the target's rank folder for step folders, its rank otherwise; compare_result_proc{{pid}}_...
for a process folder) side by side for the ranks of a step, in OUTDIR/step{{N}}/{{stage}}/ when
several of the target's steps or stages are compared. The timestamp is local time, as msprobe's.

Exit code: 0 when no row's Result is `error`, 1 when some are, 2 on errors.

Examples:
  probelake compare ./lake/npu ./lake/gpu -o ./cmp
  probelake compare run/step1 run/step0 -o ./cmp          # rank folders by position
  probelake compare run/step0/rank1/dump.json run/step0/rank0/dump.json -o ./cmp
  probelake compare ./lake/run ./lake/run --target-step 2 --golden-step 1 -o ./cmp
  probelake compare ./lake/npu ./lake/gpu --step 0 --target-rank 1 --golden-rank 0 -o ./cmp"
    )
}

/// Runs the comparison.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    if args.xlsx && args.format != CompareFormat::Csv {
        bail!("--xlsx replaces the CSV files; leave out --format {:?}", args.format);
    }
    let mode = match args.mode {
        ModeArg::Auto => None,
        ModeArg::Statistics => Some(CompareMode::Statistics),
        ModeArg::Md5 => Some(CompareMode::Md5),
        ModeArg::Tensor => Some(CompareMode::Tensor),
    };
    let files = match args.format {
        CompareFormat::Table => None,
        _ if args.xlsx => Some(ResultFormat::Xlsx),
        CompareFormat::Csv => Some(ResultFormat::Csv),
        CompareFormat::Parquet => Some(ResultFormat::Parquet),
    };
    let choice = args.units.choice()?;
    // The scheduler first: an unreachable one fails before any input is opened.
    let engine = args.cluster.engine().await?;
    let runs = RunPair::open_in_place(&args.target, &args.golden, &ctx.storage).await?;
    let (target, golden) = (&runs.target, &runs.golden);
    let pairing = pair(ctx, &runs, &choice)?;
    let (pairs, skipped) = (&pairing.pairs, &pairing.skipped);
    let target_is_file = runs.target_is_file();
    let comparison = Arc::new(Comparison::of_runs(target, golden, CompareOptions { mode }).with_engine(engine));
    let mut sink = files.map(|format| ResultFiles::new(&args.output, format, needs_folders(pairs), local_timestamp()));
    let mut tables = Vec::new();
    // Counted in the target's dump.json bytes, as import and export count.
    let bar = Bar::new("comparing", ctx.quiet);
    bar.start(pairs.iter().map(|p| p.target.counts.json_bytes).sum(), pairs.len());
    let compared = async {
        let mut queue = CompareQueue::new(comparison, pairs);
        while let Some((pair, planned)) = queue.next().await {
            let (t, g) = (pair.target, pair.golden);
            let what = pair_text(t, g);
            let failed = match planned {
                Ok(planned) => match sink.as_mut() {
                    Some(sink) => match sink.add(planned, Naming::of(pair, pairing.rule, target_is_file)) {
                        Ok(()) => None,
                        Err(ResultError::Compare(e)) => {
                            Some(anyhow::Error::new(e).context(format!("comparing {what}")))
                        }
                        Err(e) => return Err(anyhow::Error::new(e)),
                    },
                    None => match planned.collect() {
                        Ok(table) => {
                            tables.push(table);
                            None
                        }
                        Err(e) => Some(anyhow::Error::new(e).context(format!("comparing {what}"))),
                    },
                },
                Err(e) => Some(anyhow::Error::new(e).context(format!("comparing {what}"))),
            };
            if let Some(e) = failed {
                // msprobe files read in place name their own damage; a dataset's is looked for.
                let damaged = async {
                    let (Ok(target), Ok(golden)) = (target.lake(), golden.lake()) else { return None };
                    match target.first_damaged_file(std::slice::from_ref(t)).await {
                        Some(damage) => Some(damage),
                        None => golden.first_damaged_file(std::slice::from_ref(g)).await,
                    }
                };
                return Err(crate::damage::name_damaged_file(e, damaged).await);
            }
            bar.advance(t.counts.json_bytes);
        }
        anyhow::Ok(())
    };
    let compared = args.cluster.within(compared).await;
    bar.finish();
    if let Err(e) = compared {
        if let Some(sink) = sink {
            sink.rollback();
        }
        return Err(e);
    }
    // Kept before printing: a closed stdout does not undo the files.
    let (errors, written) = match sink {
        Some(sink) => sink.finish(),
        None => (tables.iter().map(|t| t.rows_with_result("error")).sum(), Vec::new()),
    };
    for table in &tables {
        print_table(table)?;
    }
    ctx.note(&format!(
        "compared {} unit(s) ({} skipped); {} row(s) with Result `error`",
        pairs.len(),
        skipped.len(),
        errors
    ));
    for path in &written {
        ctx.note(&format!("  {}", path.display()));
    }
    Ok(if errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn print_table(result: &UnitComparison) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} ({:?} mode)", result.unit, result.mode)?;
    let keep = [
        "NPU Name",
        "NPU Dtype",
        "Bench Dtype",
        "MaxRelativeErr",
        "NormRelativeErr",
        "Cosine",
        "NPU MD5",
        "BENCH MD5",
        "Result",
    ];
    let cols: Vec<usize> =
        result.header.iter().enumerate().filter(|(_, h)| keep.contains(&h.as_str())).map(|(i, _)| i).collect();
    let line = |cells: Vec<&str>| cells.join(" | ");
    writeln!(out, "{}", line(cols.iter().filter_map(|&i| result.header.get(i).map(String::as_str)).collect()))?;
    for row in &result.rows {
        writeln!(out, "{}", line(cols.iter().filter_map(|&i| row.get(i)).collect()))?;
    }
    Ok(())
}
