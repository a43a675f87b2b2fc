//! Synthetic msprobe dump trees of a toy transformer, for `probelake demo` and benchmarks.
//!
//! [`write_run`] runs a real f32 forward (and, for training stages, backward) pass of the
//! 2-layer-style transformer of `scripts/gen_msprobe_runs.py` and writes what msprobe's
//! `statistics` task would have written for it: dump.json with Max/Min/Mean/Norm per tensor,
//! grouped stack.json and construct.json, byte-compatible with CPython's `json.dump(indent=1)`.
//! Entry names, call order, argument lists and the backward quirks (a linear's backward
//! `output` is its reshaped `input`, `__mul__` backward ends in `null`, ...) follow the fixtures
//! under `tests/data/fixtures/runs/`.
//!
//! Size: at level L1 with statistics, one layer costs 14 forward entries (~13 KB of dump.json
//! plus ~1.5 KB of stack.json references) per stage per rank; a training stage with backward
//! adds 14 backward and 12 optimizer entries (~27 KB). See [`scale_hint`].

mod backward;
mod dump;
mod emit;
mod leaf;
mod model;
mod params;
mod stack;
mod tensor;
mod trace;
mod write;

use std::path::{Path, PathBuf};

use model::Dims;

/// Directory layout of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthLayout {
    /// verl's precision debugger: `step_{g}/{stage}/step0/rank{r}/`.
    Verl,
    /// msprobe's own: `step{N}/rank{r}/`, one training step per `N`.
    Msprobe,
}

/// msprobe dump level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthLevel {
    /// `Module.` entries only (forward, backward, `parameters_grad`); construct.json holds
    /// the modules and their parents.
    L0,
    /// API entries only; construct.json is `{}`.
    L1,
    /// API and `Module.` entries, `parameters_grad`, and construct.json parents.
    Mix,
}

/// What msprobe writes per tensor (its `task` and `summary_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthTask {
    /// Max/Min/Mean/Norm.
    Statistics,
    /// The statistics plus `md5`: the CRC-32 of the tensor's bytes (dump.json still says
    /// `"task": "statistics"`, as msprobe's summary_mode md5 does).
    Md5,
    /// The statistics plus `data_name`, and every tensor saved as a `.pt` file in
    /// `dump_tensor_data/`.
    Tensor,
}

/// The dtype of the floating tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthDtype {
    /// `torch.float32`.
    Fp32,
    /// `torch.bfloat16`: the model still computes in f32, but every recorded tensor is
    /// rounded to bf16, and so are its statistics, as torch's bf16 reductions return them.
    Bf16,
}

/// What to synthesise.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthSpec {
    /// Transformer blocks.
    pub layers: usize,
    /// Hidden size (4 attention heads when divisible by 4, else 1).
    pub width: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// Vocabulary size (embedding rows, head outputs).
    pub vocab: usize,
    /// verl: `step_{g}` folders; msprobe layout: `step{N}` folders.
    pub global_steps: Vec<i64>,
    /// verl only, e.g. `actor_compute_log_prob`, `ref_compute_log_prob`, `actor_update`.
    /// `actor_update`/`critic_update` train; names starting with `ref` use the frozen
    /// reference weights; the others run the actor under `no_grad`.
    pub stages: Vec<String>,
    /// `rank{R}` folders (0..ranks); each rank sees different token ids.
    pub ranks: usize,
    /// Modules only, API only, or both.
    pub level: SynthLevel,
    /// Statistics, statistics + md5, or tensor files.
    pub task: SynthTask,
    /// Dtype of the floating tensors.
    pub dtype: SynthDtype,
    /// Directory layout.
    pub layout: SynthLayout,
    /// Also write backward entries and the SGD step (verl: only for training stages), and
    /// `parameters_grad` at level Mix.
    pub backward: bool,
    /// Seed for weights and token ids.
    pub seed: u64,
    /// Multiply the attention scale of this layer (0-based) by `factor` (e.g. last layer,
    /// 1.01) — the injected bug. Only the actor model has it; the reference model does not.
    pub attention_scale_bug: Option<(usize, f32)>,
}

impl SynthSpec {
    /// 2 layers, width 32, seq 8, batch 2, vocab 64, global steps [1, 2], the three verl stages
    /// of the fixtures, 1 rank, level L1, statistics in fp32, backward for `actor_update`, seed 0, no bug.
    pub fn demo() -> Self {
        SynthSpec {
            layers: 2,
            width: 32,
            seq_len: 8,
            batch: 2,
            vocab: 64,
            global_steps: vec![1, 2],
            stages: ["actor_compute_log_prob", "ref_compute_log_prob", "actor_update"].map(String::from).to_vec(),
            ranks: 1,
            level: SynthLevel::L1,
            task: SynthTask::Statistics,
            dtype: SynthDtype::Fp32,
            layout: SynthLayout::Verl,
            backward: true,
            seed: 0,
            attention_scale_bug: None,
        }
    }
}

/// What [`write_run`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SynthReport {
    /// Files written (dump.json, stack.json and construct.json per process directory, and the
    /// `.pt` files of the tensor task).
    pub files: usize,
    /// dump.json `data` entries, summed over all files.
    pub entries: usize,
    /// Leaf values in those entries: tensor objects, `{"type", "value"}` scalars and `null`s.
    pub leaves: usize,
    /// Bytes written, all files.
    pub bytes: u64,
}

/// Why [`write_run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The spec cannot describe a model (zero sizes, bug layer out of range, ...).
    #[error("invalid synth spec: {0}")]
    Spec(String),
    /// Encoding a tensor as a `.pt` file failed.
    #[error("encoding a tensor file: {0}")]
    Tensor(#[from] probelake_msprobe::tensor_file::TensorFileError),
    /// A writer thread panicked (a bug); the tree is incomplete.
    #[error("a synthesizer thread panicked; the tree is incomplete")]
    Panicked,
    /// Creating a directory or writing a file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Rough size of the dump.json + stack.json output per layer per global step, in bytes, for
/// `spec`'s level, stages, ranks and backward setting (construct.json adds ~25% at Mix).
/// Independent of `width`/`seq_len`/`batch`/`vocab`: statistics do not grow with tensor size,
/// so to make a tree bigger raise `layers` or the number of steps, stages or ranks.
pub fn scale_hint(spec: &SynthSpec) -> u64 {
    let (fwd, train): (u64, u64) = match spec.level {
        SynthLevel::L0 => (12_000, 24_000),
        SynthLevel::L1 => (14_500, 27_000),
        SynthLevel::Mix => (26_000, 48_000),
    };
    let stages: Vec<StageKind> = match spec.layout {
        SynthLayout::Verl => spec.stages.iter().map(|s| stage_kind(s)).collect(),
        SynthLayout::Msprobe => vec![StageKind::Train],
    };
    let per_rank: u64 =
        stages.iter().map(|k| fwd + if *k == StageKind::Train && spec.backward { train } else { 0 }).sum();
    per_rank * spec.ranks as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StageKind {
    Train,
    Actor,
    Ref,
}

fn stage_kind(stage: &str) -> StageKind {
    if stage.ends_with("_update") {
        StageKind::Train
    } else if stage.starts_with("ref") {
        StageKind::Ref
    } else {
        StageKind::Actor
    }
}

fn validate(spec: &SynthSpec) -> Result<Dims, SynthError> {
    let bad = |m: &str| Err(SynthError::Spec(m.to_string()));
    if spec.layers == 0 || spec.width == 0 || spec.seq_len == 0 || spec.batch == 0 {
        return bad("layers, width, seq_len and batch must be positive");
    }
    if spec.vocab < 2 || spec.ranks == 0 {
        return bad("vocab must be at least 2 and ranks positive");
    }
    if spec.layout == SynthLayout::Verl && spec.stages.is_empty() {
        return bad("the verl layout needs at least one stage");
    }
    if spec.stages.iter().any(|s| s.is_empty() || s.contains(['/', '\\']) || s == "." || s == "..") {
        return bad("stage names must be plain directory names");
    }
    if let Some((layer, factor)) = spec.attention_scale_bug {
        if layer >= spec.layers || !factor.is_finite() {
            return bad("attention_scale_bug needs a layer < layers and a finite factor");
        }
    }
    Ok(Dims {
        layers: spec.layers,
        d: spec.width,
        heads: if spec.width.is_multiple_of(4) { 4 } else { 1 },
        t: spec.seq_len,
        b: spec.batch,
        vocab: spec.vocab,
    })
}

/// Writes the tree under `root` (created if missing), using every core. Deterministic for a
/// given spec; the weights and token ids depend only on `seed`, global step and rank, so a run
/// with `attention_scale_bug` is bit-identical to the base run up to the buggy layer's
/// `Tensor.__mul__`.
pub fn write_run(spec: &SynthSpec, root: &Path) -> Result<SynthReport, SynthError> {
    let dims = validate(spec)?;
    write::write_run(spec, dims, root)
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_modes;
