//! `probelake plot trend|divergence`: charts as SVG and PNG (probelake-plot draws them).

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::bail;
use probelake_plot::{
    fetch_divergence, fetch_trend, Across, DivergenceQuery, ErrorOf, RowsBy, Stat, Subject, TrendQuery,
};
use probelake_query::{Run, RunSession};

use super::sql::{open_runs, run_name_from_path};
use super::Context;
use crate::damage::naming_damage;
use probelake_compare::runs::open_run;

/// Draw charts of runs as SVG and PNG.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Charts: trend (statistics across steps, one line per run) and divergence (a heatmap of the
relative error between a target and a golden run); `probelake plot CHART --help` for each.

Exit code: 0 when the chart files are written (whatever errors a divergence heatmap shows), 2 on
an error (nothing to draw, a damaged dataset, an unwritable output), 130 when interrupted by
Ctrl-C.")]
pub struct Args {
    /// The chart.
    #[command(subcommand)]
    pub chart: ChartArgs,
}

/// The charts.
#[derive(Debug, clap::Subcommand)]
pub enum ChartArgs {
    /// An op's or an item's statistics across training steps, one line per run.
    Trend(TrendArgs),
    /// A heatmap of the relative error between a target and a golden run.
    Divergence(DivergenceArgs),
}

/// A statistic, or all four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatArg {
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
    /// The mean.
    Mean,
    /// The L2 norm.
    Norm,
    /// All four, one panel each.
    All,
}

/// An op's or an item's statistics across training steps, one line per run.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
An op (--op Functional.layer_norm) is the first output of each of its forward calls; when
several leaves meet at a step (calls, ranks) they are combined as one tensor holding them all
would be: largest max, smallest min, element-weighted mean, √Σnorm². One line per run, and per
stage when several stages are drawn (narrow with --stage); ranks are combined unless --rank is
given. NaN and ±inf are marked above the data, never plotted as numbers.

Writes OUT.svg and OUT.png (or only one, when OUT ends in .svg or .png).

Exit code: 0 when the chart files are written, 2 on an error (nothing to draw, a damaged dataset,
an unwritable output), 130 when interrupted by Ctrl-C.

Examples:
  probelake plot trend ./lake/base --op Functional.layer_norm
  probelake plot trend --run base=./lake/base --run bug=./lake/bug --op Functional.linear \\
      --stat max --stat norm --stage actor_update -o docs/img/trend
  probelake plot trend ./lake/base --item Functional.linear.3.forward.output.0 --stat all")]
pub struct TrendArgs {
    /// A dataset given by its path alone (named after its folder).
    #[arg(value_name = "DATASET")]
    pub dataset: Option<String>,
    /// A dataset as NAME=URI (repeatable): one line per run.
    #[arg(long = "run", value_name = "NAME=URI")]
    pub runs: Vec<String>,
    /// The op to follow (the `op` column: `Functional.linear`, `Module.layers.0.Attention`).
    #[arg(long, conflicts_with = "item", required_unless_present = "item")]
    pub op: Option<String>,
    /// One leaf to follow, by msprobe compare's row name (the `item` column).
    #[arg(long)]
    pub item: Option<String>,
    /// Statistics to draw, one panel each (repeatable, or comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "norm")]
    pub stat: Vec<StatArg>,
    /// Only this stage.
    #[arg(long)]
    pub stage: Option<String>,
    /// Only this rank.
    #[arg(long, allow_hyphen_values = true)]
    pub rank: Option<i64>,
    /// A logarithmic value axis (all values must be positive).
    #[arg(long)]
    pub log_y: bool,
    /// Output path: a stem for OUT.svg and OUT.png, or a file ending in .svg or .png.
    #[arg(short = 'o', long = "output", default_value = "trend")]
    pub output: PathBuf,
}

/// What the heatmap shows per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ErrorArg {
    /// The largest error of max, min, mean and norm.
    Worst,
    /// max only.
    Max,
    /// min only.
    Min,
    /// mean only.
    Mean,
    /// norm only.
    Norm,
}

/// The heatmap's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AcrossArg {
    /// Training steps.
    Step,
    /// Ranks.
    Rank,
}

/// The heatmap's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowsArg {
    /// Every op call (`Functional.linear.3`).
    Call,
    /// Every op (`Functional.linear`), its calls combined.
    Op,
}

/// A heatmap of the relative error between a target and a golden run.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Forward outputs of both runs are paired by (step, stage, rank, item); a cell is the largest
relative error |t − g| / |g| (a fraction) of its pairs: every output of the op call, every stage
and rank unless narrowed. Colours run on a log scale from pale yellow (agreement) to dark red;
a target NaN/inf where the golden run is finite is blue. Rows are in execution order; past
--max-rows, the rows with the largest errors are kept.

TARGET and GOLDEN are datasets, or msprobe dump folders imported into a temporary dataset.
Writes OUT.svg and OUT.png (or only one, when OUT ends in .svg or .png).

Exit code: 0 when the chart files are written, however far the runs part (unlike `probelake
divergence`), 2 on an error (nothing to draw, a damaged dataset, an unwritable output), 130 when
interrupted by Ctrl-C.

Examples:
  probelake plot divergence ./lake/bug ./lake/base
  probelake plot divergence ./lake/bug ./lake/base --by rank --step 3 --stat norm -o rank3")]
pub struct DivergenceArgs {
    /// The target run (dataset, msprobe folder or dump.json).
    pub target: String,
    /// The golden run (dataset, msprobe folder or dump.json).
    pub golden: String,
    /// Columns: training steps or ranks.
    #[arg(long, value_enum, default_value = "step")]
    pub by: AcrossArg,
    /// Rows: op calls or ops.
    #[arg(long, value_enum, default_value = "call")]
    pub rows: RowsArg,
    /// The error shown.
    #[arg(long, value_enum, default_value = "worst")]
    pub stat: ErrorArg,
    /// Only this stage.
    #[arg(long)]
    pub stage: Option<String>,
    /// Only this step.
    #[arg(long, allow_hyphen_values = true)]
    pub step: Option<i64>,
    /// Only this rank.
    #[arg(long, allow_hyphen_values = true)]
    pub rank: Option<i64>,
    /// At most this many rows (those with the largest errors).
    #[arg(long, default_value_t = 60)]
    pub max_rows: usize,
    /// Output path: a stem for OUT.svg and OUT.png, or a file ending in .svg or .png.
    #[arg(short = 'o', long = "output", default_value = "divergence")]
    pub output: PathBuf,
}

/// Runs the command.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let (figure, output) = match args.chart {
        ChartArgs::Trend(a) => {
            let session =
                open_runs(&a.runs, a.dataset.as_deref(), false, &ctx.storage, &probelake_query::LocalEngine).await?;
            let subject = match (a.op, a.item) {
                (Some(op), _) => Subject::Op(op),
                (None, Some(item)) => Subject::Item(item),
                (None, None) => bail!("give --op OP or --item ITEM"),
            };
            let stats = if a.stat.contains(&StatArg::All) {
                Stat::ALL.to_vec()
            } else {
                let mut stats: Vec<Stat> = Vec::new();
                for s in a.stat.iter().filter_map(|s| stat_of(*s)) {
                    if !stats.contains(&s) {
                        stats.push(s);
                    }
                }
                stats
            };
            let query = TrendQuery { subject, stats, stage: a.stage, rank: a.rank, log_y: a.log_y };
            (naming_damage(fetch_trend(&session, &query).await, &session).await?.render()?, a.output)
        }
        ChartArgs::Divergence(a) => {
            let target = open_run(&a.target, "target", &ctx.storage).await?;
            let golden = open_run(&a.golden, "golden", &ctx.storage).await?;
            let (t_name, g_name) = run_names(&a.target, &a.golden);
            let runs = vec![Run::new(&t_name, target.lake()?.clone()), Run::new(&g_name, golden.lake()?.clone())];
            let session = RunSession::open(runs, false).await?;
            let query = DivergenceQuery {
                across: match a.by {
                    AcrossArg::Step => Across::Steps,
                    AcrossArg::Rank => Across::Ranks,
                },
                rows: match a.rows {
                    RowsArg::Call => RowsBy::Call,
                    RowsArg::Op => RowsBy::Op,
                },
                error_of: match a.stat {
                    ErrorArg::Worst => ErrorOf::Worst,
                    ErrorArg::Max => ErrorOf::Stat(Stat::Max),
                    ErrorArg::Min => ErrorOf::Stat(Stat::Min),
                    ErrorArg::Mean => ErrorOf::Stat(Stat::Mean),
                    ErrorArg::Norm => ErrorOf::Stat(Stat::Norm),
                },
                stage: a.stage,
                step: a.step,
                rank: a.rank,
                max_rows: a.max_rows,
                ..DivergenceQuery::new(t_name, g_name)
            };
            (naming_damage(fetch_divergence(&session, &query).await, &session).await?.render()?, a.output)
        }
    };
    for path in figure.save(&output)? {
        ctx.note(&format!("wrote {} ({}×{})", path.display(), figure.width, figure.height));
    }
    Ok(ExitCode::SUCCESS)
}

fn stat_of(arg: StatArg) -> Option<Stat> {
    match arg {
        StatArg::Max => Some(Stat::Max),
        StatArg::Min => Some(Stat::Min),
        StatArg::Mean => Some(Stat::Mean),
        StatArg::Norm => Some(Stat::Norm),
        StatArg::All => None,
    }
}

/// The runs' names in titles: their folder names, or `target`/`golden` when those clash.
fn run_names(target: &str, golden: &str) -> (String, String) {
    let (t, g) = (run_name_from_path(target), run_name_from_path(golden));
    if t == g {
        ("target".into(), "golden".into())
    } else {
        (t, g)
    }
}
