//! `probelake synth OUT`: an msprobe dump tree of a toy transformer, at any size.

use crate::ExitCode;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use probelake_synth::{scale_hint, write_run, SynthDtype, SynthLayout, SynthLevel, SynthSpec, SynthTask};

use super::import::human_bytes;
use super::Context;

/// Write a synthetic msprobe dump tree (for benchmarks, tests and trying things out).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Runs a real f32 forward (and, for training stages, backward) pass of a small transformer and
writes what msprobe writes for it: dump.json, stack.json and construct.json per rank, in
verl's layout (step_{g}/{stage}/step0/rank{R}) or msprobe's (step{N}/rank{R}). The same
arguments always give the same bytes; ranks are written in parallel on all cores.

What each tensor becomes follows msprobe's config:
  --level l1     API calls (Functional.linear.0.forward ...); construct.json is {}
  --level l0     modules only (Module.blocks.0.attn... forward, backward, parameters_grad)
  --level mix    both, with construct.json parents
  --task statistics   Max/Min/Mean/Norm per tensor
  --task md5          the same plus \"md5\": CRC-32 of the tensor's bytes (summary_mode md5)
  --task tensor       the same plus \"data_name\", and each tensor as a .pt file in dump_tensor_data/
  --dtype bf16        float tensors are torch.bfloat16; statistics are bf16 values

Size grows with --layers, --steps, --stages and --ranks (statistics do not grow with tensor
size): about 13 KB of dump.json per layer per forward-only stage and rank at L1, 40 KB for a
training stage; --task tensor adds the .pt files (~2-12 KB each, one per tensor). The
command prints the estimate before writing.

Exit code: 0 when the tree is written, 2 on an error (OUTPUT is not empty, a full disk: nothing
is left half written), 130 when interrupted by Ctrl-C.

Examples:
  probelake synth ./dumps/base                              # the demo's shape: 2 layers, 2 steps, 3 stages
  probelake synth ./dumps/bug --bug                         # the same run, last layer's attention off by 1 %
  probelake synth ./dumps/early --bug-layer 0               # ... off in the first layer instead
  probelake synth ./dumps/big --layers 64 --ranks 32        # ~1M dump leaves
  probelake synth ./dumps/pair --layout msprobe --steps 1 --layers 250   # one ~10 MB msprobe compare input
  probelake synth ./dumps/t --layout msprobe --steps 1 --task tensor     # .pt files, as msprobe compare reads them
  probelake synth ./dumps/m --layout msprobe --task md5 --dtype bf16     # like a bf16 run with summary_mode md5")]
pub struct Args {
    /// Folder to write the tree into (must not exist, or be empty).
    pub output: PathBuf,
    /// Transformer blocks.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Global steps (verl: step_1..step_N; msprobe layout: step0..step{N-1}).
    #[arg(long, default_value_t = 2)]
    pub steps: i64,
    /// verl stages, comma-separated; names starting with `ref` run the frozen reference model,
    /// `*_update` stages train (backward and optimizer entries).
    #[arg(long, value_delimiter = ',', default_value = "actor_compute_log_prob,ref_compute_log_prob,actor_update")]
    pub stages: Vec<String>,
    /// Ranks (rank0..rank{R-1}), each with different tokens.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// Folder layout.
    #[arg(long, value_enum, default_value_t = LayoutArg::Verl)]
    pub layout: LayoutArg,
    /// Dump level: modules only (l0), API calls only (l1) or both (mix).
    #[arg(long, value_enum, default_value_t = LevelArg::L1)]
    pub level: LevelArg,
    /// What is written per tensor: statistics, statistics + md5, or statistics + a .pt file.
    #[arg(long, value_enum, default_value_t = TaskArg::Statistics)]
    pub task: TaskArg,
    /// Dtype of the floating tensors.
    #[arg(long, value_enum, default_value_t = DtypeArg::Fp32)]
    pub dtype: DtypeArg,
    /// Scale the last layer's attention by 1.01: the numeric bug `probelake demo` hunts.
    #[arg(long)]
    pub bug: bool,
    /// Put the bug into this layer (0-based) instead of the last: 0 makes the runs part early
    /// in execution order. Implies --bug.
    #[arg(long, value_name = "LAYER")]
    pub bug_layer: Option<usize>,
    /// Forward only: no backward or optimizer entries in training stages.
    #[arg(long)]
    pub no_backward: bool,
    /// Seed for weights and tokens.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `--layout`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LayoutArg {
    /// `step_{g}/{stage}/step0/rank{R}/`
    Verl,
    /// `step{N}/rank{R}/` (one stage)
    Msprobe,
}

/// `--level`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LevelArg {
    /// Modules only: forward, backward and parameters_grad entries, construct.json parents.
    L0,
    /// API calls only.
    L1,
    /// API calls and modules, with parameters_grad and construct.json parents.
    Mix,
}

/// `--task`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum TaskArg {
    /// Max/Min/Mean/Norm per tensor.
    Statistics,
    /// Statistics and an "md5" CRC-32 of each tensor's bytes (msprobe's summary_mode md5).
    Md5,
    /// Statistics, a "data_name" per tensor and the tensor itself in dump_tensor_data/NAME.pt.
    Tensor,
}

/// `--dtype`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DtypeArg {
    /// torch.float32.
    Fp32,
    /// torch.bfloat16 (values and statistics rounded to bf16).
    Bf16,
}

impl Args {
    fn spec(&self) -> anyhow::Result<SynthSpec> {
        if self.layers == 0 || self.ranks == 0 || self.steps <= 0 {
            bail!("--layers, --ranks and --steps must be at least 1");
        }
        if let Some(layer) = self.bug_layer.filter(|&l| l >= self.layers) {
            bail!("--bug-layer {layer}: the model has layers 0..{}; give one of them", self.layers - 1);
        }
        let layout = match self.layout {
            LayoutArg::Verl => SynthLayout::Verl,
            LayoutArg::Msprobe => SynthLayout::Msprobe,
        };
        // verl numbers global steps from 1, msprobe's step folders from 0.
        let global_steps = match layout {
            SynthLayout::Verl => (1..=self.steps).collect(),
            SynthLayout::Msprobe => (0..self.steps).collect(),
        };
        Ok(SynthSpec {
            layers: self.layers,
            global_steps,
            stages: self.stages.clone(),
            ranks: self.ranks,
            level: match self.level {
                LevelArg::L0 => SynthLevel::L0,
                LevelArg::L1 => SynthLevel::L1,
                LevelArg::Mix => SynthLevel::Mix,
            },
            task: match self.task {
                TaskArg::Statistics => SynthTask::Statistics,
                TaskArg::Md5 => SynthTask::Md5,
                TaskArg::Tensor => SynthTask::Tensor,
            },
            dtype: match self.dtype {
                DtypeArg::Fp32 => SynthDtype::Fp32,
                DtypeArg::Bf16 => SynthDtype::Bf16,
            },
            layout,
            backward: !self.no_backward,
            seed: self.seed,
            attention_scale_bug: match self.bug_layer {
                Some(layer) => Some((layer, 1.01)),
                None => self.bug.then(|| (self.layers - 1, 1.01)),
            },
            ..SynthSpec::demo()
        })
    }
}

/// Writes the tree.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let spec = args.spec()?;
    if std::fs::read_dir(&args.output).is_ok_and(|mut d| d.next().is_some()) {
        bail!("{} is not empty; give a new folder", args.output.display());
    }
    // scale_hint is per layer and global step.
    let estimate = scale_hint(&spec) * spec.layers as u64 * spec.global_steps.len() as u64;
    ctx.note(&format!("writing about {} into {}", human_bytes(estimate), args.output.display()));
    let started = std::time::Instant::now();
    let out = args.output.clone();
    let existed = args.output.exists();
    let written = tokio::task::spawn_blocking(move || write_run(&spec, &out)).await;
    let report = match written {
        Ok(Ok(report)) => report,
        failed => {
            // Half a tree would import as a smaller run without a word; leave none.
            remove_partial_tree(&args.output, existed);
            failed
                .context("the synthesizer thread failed")?
                .with_context(|| format!("writing {}", args.output.display()))?
        }
    };
    println!(
        "{}: {} files, {} entries, {} leaves, {} in {:.1}s",
        args.output.display(),
        report.files,
        report.entries,
        report.leaves,
        human_bytes(report.bytes),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Removes what a failed write put in `dir`: the folder itself when this run created it, its
/// contents when it was an empty folder before (checked above). Best effort.
pub(crate) fn remove_partial_tree(dir: &std::path::Path, existed: bool) {
    if !existed {
        let _ = std::fs::remove_dir_all(dir);
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn spec(argv: &[&str]) -> anyhow::Result<SynthSpec> {
        Cli::try_parse_from(std::iter::once("synth").chain(argv.iter().copied()))?.args.spec()
    }

    #[test]
    fn defaults_are_the_demo_run() -> anyhow::Result<()> {
        assert_eq!(spec(&["out"])?, SynthSpec::demo());
        Ok(())
    }

    #[test]
    fn layouts_number_steps_as_their_tools_do() -> anyhow::Result<()> {
        let s = spec(&["out", "--layout", "msprobe", "--steps", "3", "--layers", "4", "--bug", "--level", "mix"])?;
        assert_eq!(s.global_steps, [0, 1, 2]);
        assert_eq!(s.attention_scale_bug, Some((3, 1.01)));
        assert_eq!(s.level, SynthLevel::Mix);
        let s = spec(&["out", "--level", "l0", "--task", "tensor", "--dtype", "bf16"])?;
        assert_eq!((s.level, s.task, s.dtype), (SynthLevel::L0, SynthTask::Tensor, SynthDtype::Bf16));
        assert_eq!(spec(&["out", "--task", "md5"])?.task, SynthTask::Md5);
        assert!(spec(&["out", "--layers", "0"]).is_err());
        assert!(spec(&["out", "--steps", "0"]).is_err());
        assert_eq!(spec(&["out", "--layers", "4", "--bug-layer", "0"])?.attention_scale_bug, Some((0, 1.01)));
        let err = spec(&["out", "--layers", "4", "--bug-layer", "4"]).unwrap_err().to_string();
        assert!(err.contains("layers 0..3"), "{err}");
        Ok(())
    }
}
