//! `probelake report TARGET GOLDEN -o report.html`: one offline HTML page that shows where two
//! runs part.

use crate::ExitCode;
use std::path::PathBuf;

use probelake_report::{page, ReportError, ReportJob};

use super::Context;
use crate::progress::Bar;
use crate::unit_pairs::{UnitArgs, PAIRING_HELP};

/// Write one HTML page that shows where two runs part (opens offline, in any browser).
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// The target run (dataset, msprobe folder or dump.json).
    pub target: String,
    /// The golden run (dataset, msprobe folder or dump.json).
    pub golden: String,
    /// The page to write.
    #[arg(short = 'o', long = "output", default_value = "report.html", value_name = "FILE")]
    pub output: PathBuf,
    /// Relative error (a fraction: 0.5 is 50 %) above which an output counts as diverging.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// At most this many rows in the page's worst-rows table.
    #[arg(long, default_value_t = probelake_report::WORST_ROWS, value_name = "N")]
    pub worst: usize,
    /// At most this many compare rows embedded for the nodes' details (each unit pair gets its
    /// share; the rows of its first divergence always go in).
    #[arg(long, default_value_t = probelake_report::DETAIL_ROWS, value_name = "N")]
    pub detail_rows: usize,
    /// Which units are compared with which.
    #[command(flatten)]
    pub units: UnitArgs,
}

fn after_help() -> String {
    format!(
        "\
The page is one file with everything inside it (no server, no network: a Content-Security-
Policy forbids every request), for a laptop or a bug report. It shows, in this order: the
verdict (the earliest diverging op, as `probelake divergence` names it, with its module chain,
and the counts of error, NaN/inf and unmatched rows); a heatmap of rank x step per stage; the
unit's module tree coloured with msprobe's buckets of relative error, opened at the first
divergence; a node's inputs and outputs side by side with its call stack; a statistic across
steps; the worst rows. docs/report.md says what each view means.

The units are compared as `probelake compare` compares them (msprobe files are imported into a
temporary dataset first); the full tables stay in compare's CSV/xlsx.

{PAIRING_HELP}
Exit code: 0 when the page is written, 2 on errors.

Examples:
  probelake report ./lake/npu ./lake/gpu -o report.html
  probelake report npu/dump.json gpu/dump.json -o report.html --threshold 0
  probelake report ./lake/run ./lake/run --target-step 2 --golden-step 1 -o steps.html"
    )
}

/// Writes the page.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let job = ReportJob::new(&args.target, &args.golden)
        .storage(ctx.storage.clone())
        .threshold(args.threshold)
        .units(args.units.choice()?)
        .limits(args.worst, args.detail_rows);
    job.check()?;
    let bar = Bar::new("comparing", ctx.quiet);
    let data = job.run(&bar).await?;
    let html = page(&data).map_err(ReportError::from)?;
    std::fs::write(&args.output, html.as_bytes())
        .map_err(|source| ReportError::Write { path: args.output.display().to_string(), source })?;
    let first = match &data.first {
        Some(f) => format!("the runs part first at {}", f.op),
        None => "no unit pair diverges past the threshold".to_string(),
    };
    ctx.note(&format!(
        "{}: {} unit pair(s), {} rows ({} error); {first}",
        args.output.display(),
        data.counts.units,
        data.counts.rows,
        data.counts.errors
    ));
    Ok(ExitCode::SUCCESS)
}
