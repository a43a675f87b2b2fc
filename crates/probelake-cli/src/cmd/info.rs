//! `probelake info SRC`

use crate::ExitCode;
use std::io::Write as _;

use super::import::human_bytes;
use super::Context;
use crate::uri::open_existing;

/// Show what a dataset holds.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
One line per unit (step, stage, rank): dump files, entries, leaves, tensors, JSON bytes
imported, Parquet bytes stored, and task/level/framework; then the totals.

Exit code: 0, or 2 on an error (no dataset there, a damaged manifest or commit record).

Example:
  probelake info ./lake/run-a")]
pub struct Args {
    /// The dataset: a folder or file:// URL.
    pub src: String,
}

/// Prints the table.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let lake = open_existing(&args.src, &ctx.storage)?;
    let units = lake.units().await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "dataset {}: {} unit(s)", args.src, units.len())?;
    writeln!(
        out,
        "{:>5} {:<24} {:>5} {:>5} {:>8} {:>9} {:>7} {:>10} {:>10}  task/level/framework",
        "step", "stage", "rank", "files", "entries", "leaves", "tensors", "json", "parquet"
    )?;
    let (mut entries, mut leaves, mut tensors, mut json, mut parquet) = (0, 0, 0, 0, 0);
    for u in &units {
        let c = &u.counts;
        writeln!(
            out,
            "{:>5} {:<24} {:>5} {:>5} {:>8} {:>9} {:>7} {:>10} {:>10}  {}/{}/{}",
            u.unit.step,
            probelake_query::render::printable(&u.unit.stage),
            u.unit.rank,
            c.dump_files,
            c.entries,
            c.leaves,
            c.tensors,
            human_bytes(c.json_bytes),
            human_bytes(u.bytes()),
            c.task.as_deref().unwrap_or("-"),
            c.level.as_deref().unwrap_or("-"),
            c.framework.as_deref().unwrap_or("-"),
        )?;
        entries += c.entries;
        leaves += c.leaves;
        tensors += c.tensors;
        json += c.json_bytes;
        parquet += u.bytes();
    }
    writeln!(
        out,
        "total: {} entries, {} leaves, {} tensors, {} of JSON stored in {} ({:.1}%)",
        entries,
        leaves,
        tensors,
        human_bytes(json),
        human_bytes(parquet),
        if json > 0 { parquet as f64 * 100.0 / json as f64 } else { 0.0 }
    )?;
    Ok(ExitCode::SUCCESS)
}
