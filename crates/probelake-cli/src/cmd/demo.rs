//! `probelake demo [DIR]`: two toy runs, one with a bug, imported and shown.

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::Context as _;
use probelake_compare::runs::pairing::{pair_units, InputKind, Side, UnitChoice};
use probelake_compare::{CompareOptions, Comparison};
use probelake_msprobe::{import, ImportOptions};
use probelake_synth::{write_run, SynthSpec};

use super::import::human_bytes;
use super::Context;
use crate::progress::Bar;
use crate::uri::open_lake;

/// Make two toy msprobe runs (one with a numeric bug), import them and show them.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Writes DIR/msprobe/{base,attnbug}: verl-layout msprobe dumps of a 2-layer transformer
(forward and backward, 2 global steps, 3 stages), the second with its last layer's attention
scale off by 1 %. Imports both into DIR/lake/{base,attnbug}, prints what is there and runs
sql/first_divergence.sql over the pair (the first item where the runs part, per unit) and
msprobe's compare table for every unit (DIR/compare/step{N}/{stage}/compare_result_rank0.csv).

Exit code: 0 when all of it ran (the compare finds `error` rows on purpose; unlike `probelake
compare`, the demo still exits 0), 2 on an error, 130 when interrupted by Ctrl-C.

Example:
  probelake demo /tmp/probelake-demo")]
pub struct Args {
    /// Where to put the runs and datasets (default: probelake-demo in the temporary folder,
    /// $TMPDIR or /tmp, so that a demo run from a clone leaves the clone as it was).
    pub dir: Option<PathBuf>,
}

/// Runs the demo.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| std::env::temp_dir().join("probelake-demo"));
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
        let made = write_run(&spec, &src).inspect_err(|_| super::synth::remove_partial_tree(&src, false));
        let made = made.with_context(|| format!("writing the {name} run"))?;
        println!(
            "  wrote {:<8} {} msprobe files, {} entries, {} leaves, {}  -> {}",
            name,
            made.files,
            made.entries,
            made.leaves,
            human_bytes(made.bytes),
            src.display()
        );
        let lake = open_lake(&dst.to_string_lossy(), &ctx.storage)?;
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

    // The demo's bug is small (1 %), so ask for the first difference of any size.
    // The canned query is shipped in the binary, so the demo runs anywhere.
    let query = probelake_compare::divergence::first_divergence_sql(0.0)?;
    let specs = [format!("target={}", bug.display()), format!("golden={}", base.display())];
    let session = super::sql::open_runs(&specs, None, false, &ctx.storage, &probelake_query::LocalEngine).await?;
    let batches = session.collect(&query).await.context("running sql/first_divergence.sql")?;
    println!(
        "\nfirst divergence of attnbug from base, per (step, stage, rank) (sql/first_divergence.sql, threshold 0):"
    );
    let mut out = std::io::stdout().lock();
    crate::output::write_batches(&mut out, &batches, crate::output::OutputFormat::Table, 0)?;
    drop(out);

    // msprobe's compare table for every unit, as `probelake compare` writes it.
    let (t_lake, g_lake) =
        (open_lake(&bug.to_string_lossy(), &ctx.storage)?, open_lake(&base.to_string_lossy(), &ctx.storage)?);
    let (t_units, g_units) = (t_lake.units().await?, g_lake.units().await?);
    let other = InputKind::Other;
    let pairing = pair_units(
        Side { kind: &other, units: &t_units },
        Side { kind: &other, units: &g_units },
        &UnitChoice::default(),
    )?;
    let out_dir = dir.join("compare");
    println!("\nmsprobe compare of attnbug (target) against base (golden), per unit -> {}:", out_dir.display());
    println!(
        "  {:>4} {:<24} {:>4} {:>6} {:>6} {:>8} {:>6}",
        "step", "stage", "rank", "rows", "pass", "warning", "error"
    );
    let comparison = Comparison::new(t_lake.clone(), g_lake.clone(), CompareOptions::default());
    for pair in &pairing.pairs {
        let (t, g) = (pair.target, pair.golden);
        let result = comparison.unit(t, g).await?;
        println!(
            "  {:>4} {:<24} {:>4} {:>6} {:>6} {:>8} {:>6}",
            t.unit.step,
            t.unit.stage,
            t.unit.rank,
            result.rows.len(),
            result.rows_with_result("pass"),
            result.rows_with_result("warning"),
            result.rows_with_result("error")
        );
        let folder = out_dir.join(format!("step{}", t.unit.step)).join(&t.unit.stage);
        std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
        let mut csv = Vec::new();
        result.write_csv(&mut csv)?;
        let path = folder.join(format!("compare_result_rank{}.csv", t.unit.rank));
        std::fs::write(&path, csv).with_context(|| format!("writing {}", path.display()))?;
    }

    println!("\nnext:");
    println!("  probelake info {}", base.display());
    println!("  probelake export {} {}", bug.display(), dir.join("exported").display());
    println!("  diff -r {} {}", dir.join("msprobe").join("attnbug").display(), dir.join("exported").display());
    println!("  probelake divergence {} {} --threshold 0", bug.display(), base.display());
    println!("  probelake sql --run target={} --run golden={} -f sql/top_diffs.sql", bug.display(), base.display());
    Ok(ExitCode::SUCCESS)
}
