//! Writes a synthetic msprobe run (what `probelake demo` writes, at any size) for benchmarks
//! and side-by-side checks against msprobe itself.
//!
//! ```text
//! cargo run --release --example synth -- OUT [--layers N] [--layout msprobe|verl] [--level l1|mix]
//!                                            [--ranks R] [--steps S] [--bug] [--seed N]
//! ```
//!
//! The defaults are `SynthSpec::demo()`'s (verl layout, 2 layers, L1, 1 rank, global steps 1
//! and 2). `--layout msprobe --steps 1` gives one training step, `step0/rank{R}/dump.json`, the
//! shape of a single `msprobe compare` pair; a training stage's dump.json grows by about 41 KB
//! per layer at L1 (see `synth::scale_hint`). `--bug` scales the last layer's attention by
//! 1.01, the demo's bug. Prints the bytes written.

use std::path::PathBuf;
use std::process::ExitCode;

use probelake::format::synth::{write_run, SynthLayout, SynthLevel, SynthSpec};

fn parse(args: &[String]) -> Result<(PathBuf, SynthSpec), String> {
    let mut spec = SynthSpec::demo();
    let mut out = None;
    let mut bug = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |v: &String| v.parse::<usize>().map_err(|e| format!("{arg} {v}: {e}"));
        match arg.as_str() {
            "--layers" => spec.layers = number(value()?)?,
            "--ranks" => spec.ranks = number(value()?)?,
            "--seed" => spec.seed = number(value()?)? as u64,
            "--steps" => spec.global_steps = (0..number(value()?)? as i64).collect(),
            "--bug" => bug = true,
            "--layout" => {
                spec.layout = match value()?.as_str() {
                    "msprobe" | "plain" => SynthLayout::Msprobe,
                    "verl" => SynthLayout::Verl,
                    other => return Err(format!("--layout {other}: msprobe or verl")),
                }
            }
            "--level" => {
                spec.level = match value()?.to_ascii_lowercase().as_str() {
                    "l1" => SynthLevel::L1,
                    "mix" => SynthLevel::Mix,
                    other => return Err(format!("--level {other}: l1 or mix")),
                }
            }
            _ if out.is_none() && !arg.starts_with("--") => out = Some(PathBuf::from(arg)),
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    if spec.layout == SynthLayout::Verl && spec.global_steps.first() == Some(&0) {
        // verl numbers global steps from 1.
        spec.global_steps.iter_mut().for_each(|g| *g += 1);
    }
    if bug {
        spec.attention_scale_bug = Some((spec.layers.saturating_sub(1), 1.01));
    }
    Ok((out.ok_or("give the output folder")?, spec))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, spec) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("synth: {e}\nusage: synth OUT [--layers N] [--layout msprobe|verl] [--level l1|mix] [--ranks R] [--steps S] [--bug] [--seed N]");
            return ExitCode::from(2);
        }
    };
    match write_run(&spec, &out) {
        Ok(report) => {
            println!(
                "{} files, {} entries, {} leaves, {} bytes",
                report.files, report.entries, report.leaves, report.bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("synth: {e}");
            ExitCode::FAILURE
        }
    }
}
