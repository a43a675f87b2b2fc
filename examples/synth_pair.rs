//! Two synthesized runs, `golden` and `target` (the last layer's attention scale off by 1 %),
//! written as msprobe dumps and imported into `OUT/lake/{golden,target}`: the input of the
//! first-divergence benchmark (`benches/side_by_side/first_divergence.sh`).
//!
//!     cargo run --release --example synth_pair -- OUT [--layers N] [--ranks N] [--steps N]
//!
//! The defaults (64 layers, 32 ranks, 2 global steps, the 3 verl stages of the fixtures) make
//! about 1,030,000 `dump` rows per run in 192 units. The msprobe trees are deleted once
//! imported (`--keep-json` keeps them). A second call with the same arguments reuses the
//! datasets (`OUT/lake/spec.txt` records what they were made from).

use std::path::PathBuf;
use std::process::ExitCode;

use probelake::format::msprobe::{import, ImportOptions, NoProgress};
use probelake::format::synth::{write_run, SynthSpec};
use probelake::format::Lake;

struct Args {
    out: PathBuf,
    layers: usize,
    ranks: usize,
    steps: i64,
    keep_json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { out: PathBuf::new(), layers: 64, ranks: 32, steps: 2, keep_json: false };
    let mut out = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            it.next().and_then(|v| v.parse().ok()).ok_or(format!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--layers" => args.layers = number("--layers")?,
            "--ranks" => args.ranks = number("--ranks")?,
            "--steps" => args.steps = number("--steps")? as i64,
            "--keep-json" => args.keep_json = true,
            _ if a.starts_with('-') => return Err(format!("unknown option {a}")),
            _ => out = Some(PathBuf::from(a)),
        }
    }
    args.out = out.ok_or("usage: synth_pair OUT [--layers N] [--ranks N] [--steps N] [--keep-json]")?;
    Ok(args)
}

async fn make(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let lakes = args.out.join("lake");
    let stamp = lakes.join("spec.txt");
    let wanted = format!("layers={} ranks={} steps={}\n", args.layers, args.ranks, args.steps);
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        eprintln!("reusing {}", lakes.display());
        return Ok(());
    }
    let base = SynthSpec {
        layers: args.layers,
        ranks: args.ranks,
        global_steps: (1..=args.steps).collect(),
        ..SynthSpec::demo()
    };
    let runs = [("golden", None), ("target", Some((args.layers - 1, 1.01f32)))];
    for (name, bug) in runs {
        let spec = SynthSpec { attention_scale_bug: bug, ..base.clone() };
        let (src, dst) = (args.out.join("msprobe").join(name), lakes.join(name));
        for dir in [&src, &dst] {
            if dir.exists() {
                std::fs::remove_dir_all(dir)?;
            }
        }
        let started = std::time::Instant::now();
        let made = write_run(&spec, &src)?;
        let written = started.elapsed();
        let report = import(&src, &Lake::local(&dst)?, &ImportOptions::default(), &NoProgress).await?;
        let leaves: u64 = report.units.iter().map(|u| u.counts.leaves).sum();
        eprintln!(
            "{name}: {} units, {leaves} leaves, {:.0} MB of dump.json (synthesized in {:.1}s, imported in {:.1}s)",
            report.units.len(),
            made.bytes as f64 / 1e6,
            written.as_secs_f64(),
            (started.elapsed() - written).as_secs_f64()
        );
        if !args.keep_json {
            std::fs::remove_dir_all(&src)?;
        }
    }
    std::fs::write(&stamp, wanted)?;
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) if a.layers > 0 && a.ranks > 0 && a.steps > 0 => a,
        Ok(_) => {
            eprintln!("synth_pair: --layers, --ranks and --steps must be positive");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("synth_pair: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("synth_pair: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(make(&args)) {
        Ok(()) => {
            let lakes = args.out.join("lake");
            println!("{}", lakes.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("synth_pair: {e}");
            ExitCode::from(2)
        }
    }
}
