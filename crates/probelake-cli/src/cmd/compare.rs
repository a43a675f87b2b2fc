//! `probelake compare TARGET GOLDEN`: msprobe's compare table for every unit in both runs.

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::bail;
use probelake_compare::write::results::ResultFormat;
use probelake_compare::{read_mapping_file, CompareJob, Mappings, ModeChoice, Output, UnitComparison};

use super::Context;
use crate::progress::Bar;
use crate::unit_pairs::{UnitArgs, PAIRING_HELP};

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
    /// The comparison mode: auto (detected from the dumps, as msprobe does), statistics
    /// (Max/Min/Mean/Norm differences), md5 (CRC-32 equality) or tensor (metrics over the
    /// dumped tensors).
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub mode: ModeChoice,
    /// Write msprobe's .xlsx workbooks instead of .csv files (numbers as numbers).
    #[arg(long)]
    pub xlsx: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: CompareFormat,
    /// msprobe's -dm: a YAML of `npu_row_name: bench_row_name` lines (whole row names, as the
    /// NPU Name and Bench Name columns show them) for runs that name rows otherwise.
    #[arg(long = "data-mapping", value_name = "FILE")]
    pub data_mapping: Option<PathBuf>,
    /// msprobe's -cm: a YAML of `target_cell: golden_cell` lines that rename the module (cell)
    /// part of the target's rows; without FILE, only the target's raw names are used.
    #[arg(long = "cell-mapping", value_name = "FILE", num_args = 0..=1)]
    pub cell_mapping: Option<Option<PathBuf>>,
    /// msprobe's -fm: pair rows by msprobe's fuzzy walk over names without call counters
    /// (tensor mode; with --data-mapping, only stops renumbering backward calls).
    #[arg(long = "fuzzy-match")]
    pub fuzzy_match: bool,
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

--data-mapping and --cell-mapping are msprobe's -dm and -cm, with its rules for PyTorch dumps:
the target's rows are keyed by their raw names (backward calls not renumbered, as msprobe keys
them), --cell-mapping decides the key when both are given, and with --data-mapping pairs of
different dtypes stay paired (docs/compare.md, section `Runs that name things otherwise`).
--fuzzy-match is msprobe's -fm: no backward call is renumbered on either side, and unless
--data-mapping is given the rows are paired by a greedy walk in dump order over names without
their call counters. msprobe 26.2 gives usable results this way in tensor mode only, so other
modes are refused; like msprobe, the walk stops writing target rows once the golden run has
run out of rows.

Exit code: 0 when no row's Result is `error`, 1 when some are, 2 on errors.

Examples:
  probelake compare ./lake/npu ./lake/gpu -o ./cmp
  probelake compare run/step1 run/step0 -o ./cmp          # rank folders by position
  probelake compare run/step0/rank1/dump.json run/step0/rank0/dump.json -o ./cmp
  probelake compare ./lake/run ./lake/run --target-step 2 --golden-step 1 -o ./cmp
  probelake compare ./lake/npu ./lake/gpu --step 0 --target-rank 1 --golden-rank 0 -o ./cmp
  probelake compare npu/dump.json gpu/dump.json --cell-mapping cells.yaml -o ./cmp
  probelake compare npu/dump.json gpu/dump.json --mode tensor --fuzzy-match -o ./cmp"
    )
}

/// Runs the comparison.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    if args.xlsx && args.format != CompareFormat::Csv {
        bail!("--xlsx replaces the CSV files; leave out --format {:?}", args.format);
    }
    let output = match args.format {
        CompareFormat::Table => Output::Tables,
        _ if args.xlsx => Output::Files { dir: args.output.clone(), format: ResultFormat::Xlsx },
        CompareFormat::Csv => Output::Files { dir: args.output.clone(), format: ResultFormat::Csv },
        CompareFormat::Parquet => Output::Files { dir: args.output.clone(), format: ResultFormat::Parquet },
    };
    let units = args.units.choice()?;
    let mut mappings = Mappings::default();
    if let Some(file) = &args.data_mapping {
        mappings = mappings.with_data_mapping(read_mapping_file(file)?);
    }
    match &args.cell_mapping {
        Some(None) => mappings = mappings.with_cell_mapping([]),
        Some(Some(file)) => mappings = mappings.with_cell_mapping(read_mapping_file(file)?),
        None => {}
    }
    let mappings = mappings.with_fuzzy_match(args.fuzzy_match);
    // The scheduler first: an unreachable one fails before any input is opened.
    let engine = args.cluster.engine().await?;
    let job = CompareJob::new(&args.target, &args.golden)
        .storage(ctx.storage.clone())
        .mode(args.mode.mode())
        .units(units)
        .mappings(mappings)
        .output(output)
        .engine(engine);
    // Counted in the target's dump.json bytes, as import and export count.
    let bar = Bar::new("comparing", ctx.quiet);
    let report = args.cluster.within(async { Ok(job.run(&bar).await?) }).await?;
    for note in &report.notes {
        ctx.note(note);
    }
    for table in &report.tables {
        print_table(table)?;
    }
    ctx.note(&format!(
        "compared {} unit(s) ({} skipped); {} row(s) with Result `error`",
        report.compared,
        report.skipped.len(),
        report.errors
    ));
    for path in &report.files {
        ctx.note(&format!("  {}", path.display()));
    }
    Ok(if report.errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
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
