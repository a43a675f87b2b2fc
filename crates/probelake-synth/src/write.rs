//! Writing the tree: one job per (global step, rank), each running the model for every stage
//! and writing that rank's process directories; jobs run on all cores.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::dump::{dump_json, Header};
use crate::leaf::Encoding;
use crate::model::{Dims, Run};
use crate::params::{token_ids, Params};
use crate::stack::{Site, StackCtx};
use crate::trace::Recorder;
use crate::{backward, emit, stage_kind, StageKind, SynthError, SynthLayout, SynthLevel, SynthReport, SynthSpec};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SynthError {
    let path = path.to_path_buf();
    move |source| SynthError::Io { path, source }
}

/// Shared by all jobs of one run.
struct RunCtx<'a> {
    spec: &'a SynthSpec,
    dims: Dims,
    root: &'a Path,
    reference: Params,
    /// The bug factor as the user wrote it (1.01, not 1.0099999904632568), as Python prints it.
    bug: Option<(usize, f64)>,
}

/// Per-worker scratch space, reused across jobs.
#[derive(Default)]
struct Scratch {
    buf: Vec<u8>,
    frames: HashMap<(Site, StackCtx), Vec<String>>,
    report: SynthReport,
}

pub(super) fn write_run(spec: &SynthSpec, dims: Dims, root: &Path) -> Result<SynthReport, SynthError> {
    std::fs::create_dir_all(root).map_err(io(root))?;
    let bug = spec.attention_scale_bug.map(|(l, f)| (l, f.to_string().parse::<f64>().unwrap_or(f64::from(f))));
    let cx = RunCtx { spec, dims, root, reference: Params::init(&dims, spec.seed), bug };
    let jobs: Vec<(i64, usize)> =
        spec.global_steps.iter().flat_map(|&g| (0..spec.ranks).map(move |rank| (g, rank))).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<SynthError>> = Mutex::new(None);
    let reports: Vec<SynthReport> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut scratch = Scratch { buf: Vec::with_capacity(1 << 20), ..Scratch::default() };
                    while !failed.load(Ordering::Relaxed) {
                        let Some(&(g, rank)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                        if let Err(e) = cx.job(g, rank, &mut scratch) {
                            failed.store(true, Ordering::Relaxed);
                            if let Ok(mut slot) = first_error.lock() {
                                slot.get_or_insert(e);
                            }
                        }
                    }
                    scratch.report
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().map_err(|_| SynthError::Panicked)).collect::<Result<_, _>>()
    })?;
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut total = SynthReport::default();
    for r in reports {
        total.files += r.files;
        total.entries += r.entries;
        total.leaves += r.leaves;
        total.bytes += r.bytes;
    }
    Ok(total)
}

impl RunCtx<'_> {
    /// Every stage of global step `g` on `rank`.
    fn job(&self, g: i64, rank: usize, scratch: &mut Scratch) -> Result<(), SynthError> {
        let spec = self.spec;
        let actor = self.reference.at_step(spec.seed, g);
        let ids = token_ids(&self.dims, spec.seed, g, rank);
        let dirs: Vec<(PathBuf, StageKind)> = match spec.layout {
            SynthLayout::Verl => spec
                .stages
                .iter()
                .map(|s| {
                    let dir = self.root.join(format!("step_{g}")).join(s).join("step0").join(format!("rank{rank}"));
                    (dir, stage_kind(s))
                })
                .collect(),
            SynthLayout::Msprobe => {
                vec![(self.root.join(format!("step{g}")).join(format!("rank{rank}")), StageKind::Train)]
            }
        };
        let apis = spec.level != SynthLevel::L0;
        let modules = spec.level != SynthLevel::L1;
        for (dir, kind) in dirs {
            let train = kind == StageKind::Train;
            let run = Run {
                dims: self.dims,
                params: if kind == StageKind::Ref { &self.reference } else { &actor },
                grad: train,
                bug: if kind == StageKind::Ref { None } else { self.bug },
            };
            let mut rec = Recorder::new(apis, modules);
            let tape = run.forward(&ids, &mut rec);
            if train {
                backward::train_step(&run, &tape, &ids, spec.backward, &mut rec);
            } else {
                run.log_softmax(&tape.logits, &mut rec);
            }
            let ctx = StackCtx {
                train,
                verl: spec.layout == SynthLayout::Verl,
                hooked_modules: modules,
                spawned: spec.ranks > 1,
            };
            self.write_dir(&dir, &rec, ctx, scratch)?;
        }
        Ok(())
    }

    fn write_dir(&self, dir: &Path, rec: &Recorder, ctx: StackCtx, scratch: &mut Scratch) -> Result<(), SynthError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let tensor_dir = dir.join("dump_tensor_data");
        let tensors = self.spec.task == crate::SynthTask::Tensor;
        let data_dir = tensors.then(|| std::path::absolute(&tensor_dir).unwrap_or_else(|_| tensor_dir.clone()));
        let data_dir = data_dir.as_ref().map(|p| p.to_string_lossy());
        let header = Header {
            level: self.spec.level,
            enc: Encoding { task: self.spec.task, dtype: self.spec.dtype },
            data_dir: data_dir.as_deref(),
        };
        let report = &mut scratch.report;
        report.entries += rec.entries.len();
        for file in ["dump.json", "stack.json", "construct.json"] {
            scratch.buf.clear();
            match file {
                "dump.json" => {
                    let out = dump_json(&mut scratch.buf, rec, &header)?;
                    report.leaves += out.leaves;
                    if tensors {
                        std::fs::create_dir_all(&tensor_dir).map_err(io(&tensor_dir))?;
                        for (name, bytes) in out.tensor_files {
                            let path = tensor_dir.join(name);
                            std::fs::write(&path, &bytes).map_err(io(&path))?;
                            report.files += 1;
                            report.bytes += bytes.len() as u64;
                        }
                    }
                }
                "stack.json" => emit::stack_json(&mut scratch.buf, rec, ctx, &mut scratch.frames),
                _ => emit::construct_json(&mut scratch.buf, rec),
            }
            let path = dir.join(file);
            std::fs::write(&path, &scratch.buf).map_err(io(&path))?;
            report.files += 1;
            report.bytes += scratch.buf.len() as u64;
        }
        Ok(())
    }
}
