//! `probelake import SRC DST`

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::Context as _;
use probelake_msprobe::{import, ImportOptions, Overrides, TreeLayout};

use super::Context;
use crate::progress::Bar;
use crate::uri::{local_dir, open_lake};

/// Import msprobe dumps into a dataset.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
SRC may be an msprobe dump_path (step{N}/rank{R}|proc{pid}/dump.json), a verl save_path
(step_{g}/{stage}/step{S}/rank{R}/dump.json), any folder below them, or one dump.json.
Each (step, stage, rank) becomes one unit of DST; importing a unit again replaces it.
Nothing becomes visible until every dump read cleanly: on bad input DST is left as it was.

Exit code: 0 when every unit is committed, 2 on an error (bad input, an unreadable file, a damaged
DST, a storage failure), 130 when interrupted by Ctrl-C.

Examples:
  probelake import /data/verl/profile ./lake/run-a
  probelake import ./dump/step0/rank0/dump.json ./lake/run-b --step 7 --stage actor_update")]
pub struct Args {
    /// The msprobe dump tree, folder or dump.json file.
    pub src: PathBuf,
    /// The dataset: a folder, file:// or s3://bucket/prefix URL (created if missing).
    pub dst: String,
    /// The tree's layout instead of detecting it: msprobe, verl or single.
    #[arg(long)]
    pub layout: Option<TreeLayout>,
    /// Use this step for every dump instead of the folder's.
    #[arg(long, allow_hyphen_values = true)]
    pub step: Option<i64>,
    /// Use this stage for every dump instead of the folder's.
    #[arg(long)]
    pub stage: Option<String>,
    /// Use this rank for every dump instead of the folder's.
    #[arg(long, allow_hyphen_values = true)]
    pub rank: Option<i64>,
}

/// Runs the import.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let created = local_dir(&args.dst).filter(|d| !d.exists());
    let lake = open_lake(&args.dst, &ctx.storage)?;
    let options = ImportOptions {
        overrides: Overrides { layout: args.layout, step: args.step, stage: args.stage, rank: args.rank },
    };
    let bar = Bar::new("importing", ctx.quiet);
    let result = import(&args.src, &lake, &options, &bar).await;
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if let Some(dir) = created {
                // DST did not exist before: leave no trace of it.
                let _ = std::fs::remove_dir_all(dir);
            }
            return Err(e).with_context(|| format!("importing {}", args.src.display()));
        }
    };
    let leaves: u64 = report.units.iter().map(|u| u.counts.leaves).sum();
    let bytes: u64 = report.units.iter().map(|u| u.bytes()).sum();
    ctx.note(&format!(
        "imported {} unit(s), {} leaves from {} of JSON into {} ({} of Parquet, {:.1}%)",
        report.units.len(),
        leaves,
        human_bytes(report.json_bytes),
        args.dst,
        human_bytes(bytes),
        if report.json_bytes > 0 { bytes as f64 * 100.0 / report.json_bytes as f64 } else { 0.0 }
    ));
    Ok(ExitCode::SUCCESS)
}

/// `12.3 MB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
