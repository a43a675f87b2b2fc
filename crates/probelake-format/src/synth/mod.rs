//! Synthetic msprobe dump trees of a toy transformer, for `probelake demo` and benchmarks.
//!
//! [`write_run`] runs a real f32 forward (and, for training stages, backward) pass of the
//! 2-layer-style transformer from `shared/tools/gen_msprobe_runs.py` and writes what msprobe's
//! `statistics` task would have written for it: dump.json with Max/Min/Mean/Norm per tensor,
//! grouped stack.json and construct.json, byte-compatible with CPython's `json.dump(indent=1)`.
//! Entry names, call order, argument lists and the backward quirks (a linear's backward
//! `output` is its reshaped `input`, `__mul__` backward ends in `null`, ...) follow the fixtures
//! under `shared/fixtures/runs/`.
//!
//! Size: at level L1 with statistics, one layer costs 14 forward entries (~13 KB of dump.json
//! plus ~1.5 KB of stack.json references) per stage per rank; a training stage with backward
//! adds 14 backward and 12 optimizer entries (~27 KB). See [`scale_hint`].

mod backward;
mod emit;
mod model;
mod params;
mod stack;
mod tensor;
mod trace;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use model::{Dims, Run};
use params::{token_ids, Params};
use stack::StackCtx;
use trace::Recorder;

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
    /// API entries only; construct.json is `{}`.
    L1,
    /// API and `Module.` entries, `parameters_grad`, and construct.json parents.
    Mix,
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
    /// API only, or API + modules.
    pub level: SynthLevel,
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
    /// of the fixtures, 1 rank, level L1, backward for `actor_update`, seed 0, no bug.
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
    /// Files written (dump.json, stack.json and construct.json per process directory).
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

/// Writes the tree under `root` (created if missing). Deterministic for a given spec; the
/// weights and token ids depend only on `seed`, global step and rank, so a run with
/// `attention_scale_bug` is bit-identical to the base run up to the buggy layer's
/// `Tensor.__mul__`.
pub fn write_run(spec: &SynthSpec, root: &Path) -> Result<SynthReport, SynthError> {
    let dims = validate(spec)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SynthError::Io { path, source }
    };
    std::fs::create_dir_all(root).map_err(io(root))?;
    // Print the factor as the user wrote it (1.01, not 1.0099999904632568), as Python would.
    let bug = spec.attention_scale_bug.map(|(l, f)| (l, f.to_string().parse::<f64>().unwrap_or(f64::from(f))));
    let reference = Params::init(&dims, spec.seed);
    let mut report = SynthReport::default();
    let mut buf = Vec::with_capacity(1 << 20);
    let mut frames = HashMap::new();
    let mix = spec.level == SynthLevel::Mix;
    for &g in &spec.global_steps {
        let actor = reference.at_step(spec.seed, g);
        for rank in 0..spec.ranks {
            let ids = token_ids(&dims, spec.seed, g, rank);
            let jobs: Vec<(PathBuf, StageKind)> = match spec.layout {
                SynthLayout::Verl => spec
                    .stages
                    .iter()
                    .map(|s| {
                        let dir = root.join(format!("step_{g}")).join(s).join("step0").join(format!("rank{rank}"));
                        (dir, stage_kind(s))
                    })
                    .collect(),
                SynthLayout::Msprobe => {
                    vec![(root.join(format!("step{g}")).join(format!("rank{rank}")), StageKind::Train)]
                }
            };
            for (dir, kind) in jobs {
                let train = kind == StageKind::Train;
                let run = Run {
                    dims,
                    params: if kind == StageKind::Ref { &reference } else { &actor },
                    grad: train,
                    bug: if kind == StageKind::Ref { None } else { bug },
                };
                let mut rec = Recorder::new(mix);
                let tape = run.forward(&ids, &mut rec);
                if train {
                    backward::train_step(&run, &tape, &ids, spec.backward, &mut rec);
                } else {
                    run.log_softmax(&tape.logits, &mut rec);
                }
                let ctx = StackCtx { train, verl: spec.layout == SynthLayout::Verl, mix, spawned: spec.ranks > 1 };
                std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                report.entries += rec.entries.len();
                for file in ["dump.json", "stack.json", "construct.json"] {
                    buf.clear();
                    match file {
                        "dump.json" => report.leaves += emit::dump_json(&mut buf, &rec),
                        "stack.json" => emit::stack_json(&mut buf, &rec, ctx, &mut frames),
                        _ => emit::construct_json(&mut buf, &rec),
                    }
                    let path = dir.join(file);
                    std::fs::write(&path, &buf).map_err(io(&path))?;
                    report.files += 1;
                    report.bytes += buf.len() as u64;
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
