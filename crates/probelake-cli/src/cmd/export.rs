//! `probelake export SRC DST`

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::Context as _;
use probelake_msprobe::{export, ExportOptions};

use super::Context;
use crate::progress::Bar;
use crate::uri::open_existing;

/// Write a dataset back as msprobe files.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Rebuilds the folder tree the data came from (e.g. step_1/actor_update/step0/proc4242/dump.json)
with dump.json, stack.json, construct.json, debug.json and dump_tensor_data/ files, byte for
byte as msprobe wrote them.

Exit code: 0 when every file is written, 2 on an error (files already there without --force, a
damaged dataset, a full disk: the output folder is left as it was), 130 when interrupted by
Ctrl-C (the files written so far are removed).

Examples:
  probelake export ./lake/run-a ./run-a-msprobe
  probelake export ./lake/run-a ./out --step 1 --stage actor_update --rank 0")]
pub struct Args {
    /// The dataset: a folder or file:// URL.
    pub src: String,
    /// The folder to write the msprobe tree into.
    pub dst: PathBuf,
    /// Only this step.
    #[arg(long, allow_hyphen_values = true)]
    pub step: Option<i64>,
    /// Only this stage.
    #[arg(long)]
    pub stage: Option<String>,
    /// Only this rank (-1 for proc{pid} folders).
    #[arg(long, allow_hyphen_values = true)]
    pub rank: Option<i64>,
    /// Overwrite files that exist in DST.
    #[arg(long)]
    pub force: bool,
}

/// Runs the export.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let lake = open_existing(&args.src, &ctx.storage)?;
    let options = ExportOptions { step: args.step, stage: args.stage, rank: args.rank, force: args.force };
    let bar = Bar::new("exporting", ctx.quiet);
    let report = export(&lake, &args.dst, &options, &bar).await.with_context(|| format!("exporting {}", args.src))?;
    if report.units == 0 {
        anyhow::bail!("{}: no unit matches the filters; `probelake info {}` lists the units", args.src, args.src);
    }
    ctx.note(&format!(
        "exported {} unit(s): {} files, {} into {}",
        report.units,
        report.files,
        super::import::human_bytes(report.bytes),
        args.dst.display()
    ));
    Ok(ExitCode::SUCCESS)
}
