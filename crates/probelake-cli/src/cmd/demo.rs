//! `probelake demo [DIR]`: two toy runs, one with a bug, imported and shown.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use probelake_format::msprobe::{import, ImportOptions};
use probelake_format::synth::{write_run, SynthSpec};

use super::import::human_bytes;
use super::Context;
use crate::progress::Bar;
use crate::uri::open_lake;

/// Make two toy msprobe runs (one with a numeric bug), import them and show them.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Writes DIR/msprobe/{base,attnbug}: verl-layout msprobe dumps of a 2-layer transformer
(forward and backward, 2 global steps, 3 stages), the second with its last layer's attention
scale off by 1 %. Imports both into DIR/lake/{base,attnbug} and prints what is there.

Example:
  probelake demo /tmp/probelake-demo")]
pub struct Args {
    /// Where to put the runs and datasets (default: ./probelake-demo).
    pub dir: Option<PathBuf>,
}

/// Runs the demo.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("probelake-demo"));
    let runs = [("base", None), ("attnbug", Some((1usize, 1.01f32)))];
    println!("probelake demo in {}", dir.display());
    for (name, bug) in runs {
        let spec = SynthSpec { attention_scale_bug: bug, ..SynthSpec::demo() };
        let src = dir.join("msprobe").join(name);
        let dst = dir.join("lake").join(name);
        // A re-run starts from scratch so the demo always shows the same thing.
        for d in [&src, &dst] {
            if d.exists() {
                std::fs::remove_dir_all(d).with_context(|| format!("clearing {}", d.display()))?;
            }
        }
        let made = write_run(&spec, &src).with_context(|| format!("writing the {name} run"))?;
        println!(
            "  wrote {:<8} {} msprobe files, {} entries, {} leaves, {}  -> {}",
            name,
            made.files,
            made.entries,
            made.leaves,
            human_bytes(made.bytes),
            src.display()
        );
        let lake = open_lake(&dst.to_string_lossy())?;
        let bar = Bar::new("importing", ctx.quiet);
        let report = import(&src, &lake, &ImportOptions::default(), &bar).await?;
        let leaves: u64 = report.units.iter().map(|u| u.counts.leaves).sum();
        let bytes: u64 = report.units.iter().map(|u| u.bytes()).sum();
        println!(
            "  imported {:<5} {} units (step, stage, rank), {} leaves, {} of Parquet  -> {}",
            name,
            report.units.len(),
            leaves,
            human_bytes(bytes),
            dst.display()
        );
    }
    let base = dir.join("lake").join("base");
    let bug = dir.join("lake").join("attnbug");
    println!("\nnext:");
    println!("  probelake info {}", base.display());
    println!("  probelake export {} {}", bug.display(), dir.join("exported").display());
    println!("  diff -r {} {}", dir.join("msprobe").join("attnbug").display(), dir.join("exported").display());
    Ok(ExitCode::SUCCESS)
}
