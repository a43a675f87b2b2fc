//! A training loop that records a transformer-shaped workload through the async writer, then
//! prints throughput and `record` latency.
//!
//!     cargo run --release --example synthetic_training -- OUT [--steps N] [--layers L]
//!         [--dtype bf16|f32] [--task statistics|md5|tensor] [--hidden H] [--seq S] [--batch B]
//!         [--stages a,b] [--rank R]
//!
//! Each step runs every stage (default `actor_compute_log_prob` then `actor_update`) as one
//! unit of OUT. A stage records, per layer, the API calls of an attention block and an MLP
//! (`layer_norm`, `linear` q/k/v, `scaled_dot_product_attention`, `linear` out, `__add__`,
//! `layer_norm`, `linear` up, `gelu`, `linear` down, `__add__`) and a `Module` entry; stages
//! named `*update` add the backward entries in reverse order and the `parameters_grad` of every
//! linear and layer norm. Activations are in `--dtype`; weights and gradients are float32, as
//! in mixed-precision training. Tensor bytes come from a pre-filled random pool (a real
//! training step makes them for free), so what is measured is the writer.
//!
//! While one unit commits in the background, the next one records. A line is printed when a
//! unit is committed, so `probelake export OUT DIR` then gives msprobe's files for it.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use probelake_writer::{
    CommitRecord, DType, Entry, Lake, Metrics, SummaryMode, Task, Tensor, TensorSource, Unit, UnitWriter, Value,
    WriterOptions,
};

struct Args {
    out: String,
    steps: i64,
    layers: usize,
    dtype: DType,
    task: Task,
    summary: SummaryMode,
    hidden: usize,
    seq: usize,
    batch: usize,
    stages: Vec<String>,
    rank: i64,
}

const USAGE: &str = "usage: synthetic_training OUT [--steps N] [--layers L] [--dtype bf16|f32] \
[--task statistics|md5|tensor] [--hidden H] [--seq S] [--batch B] [--stages a,b] [--rank R]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: String::new(),
        steps: 2,
        layers: 4,
        dtype: DType::BF16,
        task: Task::Statistics,
        summary: SummaryMode::Statistics,
        hidden: 512,
        seq: 256,
        batch: 2,
        stages: vec!["actor_compute_log_prob".into(), "actor_update".into()],
        rank: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"));
        let number = |v: String| v.parse::<usize>().map_err(|_| format!("{arg}: `{v}` is not a number"));
        match arg.as_str() {
            "--steps" => args.steps = number(value()?)? as i64,
            "--layers" => args.layers = number(value()?)?,
            "--hidden" => args.hidden = number(value()?)?.max(8) / 8 * 8,
            "--seq" => args.seq = number(value()?)?.max(1),
            "--batch" => args.batch = number(value()?)?.max(1),
            "--rank" => args.rank = value()?.parse().map_err(|_| "--rank: not a number".to_string())?,
            "--stages" => args.stages = value()?.split(',').map(str::to_string).collect(),
            "--dtype" => {
                args.dtype = match value()?.as_str() {
                    "bf16" | "bfloat16" => DType::BF16,
                    "f32" | "float32" => DType::F32,
                    other => return Err(format!("--dtype {other}: use bf16 or f32")),
                }
            }
            "--task" => {
                (args.task, args.summary) = match value()?.as_str() {
                    "statistics" => (Task::Statistics, SummaryMode::Statistics),
                    "md5" => (Task::Statistics, SummaryMode::Md5),
                    "tensor" => (Task::Tensor, SummaryMode::Md5),
                    other => return Err(format!("--task {other}: use statistics, md5 or tensor")),
                }
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}\n{USAGE}")),
            other if args.out.is_empty() => args.out = other.to_string(),
            other => return Err(format!("unexpected argument {other}\n{USAGE}")),
        }
    }
    if args.out.is_empty() {
        return Err(USAGE.into());
    }
    Ok(args)
}

/// Random bytes to slice tensors from: each tensor starts at a different offset, so every
/// step's statistics differ.
struct Pool {
    bytes: Bytes,
    next: u64,
}

impl Pool {
    fn new(len: usize, dtype: DType) -> Pool {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            // Roughly normal: the sum of four uniforms, centred.
            let r = next();
            let u = |s: u32| ((r >> s) & 0xffff) as f32 / 65536.0;
            let v = (u(0) + u(16) + u(32) + u(48) - 2.0) * 1.7;
            match dtype {
                DType::BF16 => out.extend_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
                _ => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        Pool { bytes: Bytes::from(out), next: 1 }
    }

    fn tensor(&mut self, dtype: DType, shape: &[usize]) -> Tensor {
        let numel: usize = shape.iter().product();
        let len = numel * dtype.itemsize();
        let room = self.bytes.len().saturating_sub(len).max(1) as u64;
        self.next = self.next.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let offset = ((self.next >> 17) % room) as usize / 4 * 4;
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        Tensor::new(dtype, dims, TensorSource::host(self.bytes.slice(offset..offset + len)))
    }
}

/// Per-step call counters, as msprobe keeps them (`Functional.linear.{n}`).
#[derive(Default)]
struct Counters(std::collections::HashMap<&'static str, u64>);

impl Counters {
    fn next(&mut self, api: &'static str) -> String {
        let n = self.0.entry(api).or_insert(0);
        let name = format!("{api}.{n}");
        *n += 1;
        name
    }
}

/// One recorded API call, kept to emit its backward entry later.
struct Call {
    name: String,
    inputs: Vec<Vec<usize>>,
    output: Vec<usize>,
}

struct Recorder<'a> {
    unit: &'a UnitWriter,
    pool: &'a mut Pool,
    weights: &'a mut Pool,
    act: DType,
    calls: Vec<Call>,
    counters: Counters,
    bytes: u64,
    tensors: u64,
}

impl Recorder<'_> {
    fn act(&mut self, shape: &[usize]) -> Value {
        self.tensors += 1;
        let t = self.pool.tensor(self.act, shape);
        self.bytes += t.byte_len() as u64;
        Value::tensor(t)
    }

    fn weight(&mut self, shape: &[usize], requires_grad: bool) -> Value {
        self.tensors += 1;
        let t = self.weights.tensor(DType::F32, shape).requires_grad(requires_grad);
        self.bytes += t.byte_len() as u64;
        Value::tensor(t)
    }

    fn record(&self, entry: Entry) -> Result<(), String> {
        self.unit.record(entry).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Records an API forward call: activations in, weights, one activation out.
    fn api(&mut self, op: Op<'_>, parent: &str) -> Result<(), String> {
        let Op { api, acts, weights, kwargs, out, frame } = op;
        let name = self.counters.next(api);
        let mut args = Vec::new();
        for shape in acts {
            args.push(self.act(shape));
        }
        for shape in weights {
            args.push(self.weight(shape, true));
        }
        let output = self.act(out);
        let entry = Entry::new(format!("{name}.forward"))
            .input_args(args)
            .input_kwargs(kwargs)
            .output([output])
            .stack([format!("File /workspace/model.py, line {}, in forward, \n {frame}", 40 + self.calls.len() % 60)])
            .parent(Some(parent));
        self.record(entry)?;
        let mut inputs: Vec<Vec<usize>> = acts.iter().map(|s| s.to_vec()).collect();
        inputs.extend(weights.iter().map(|s| s.to_vec()));
        self.calls.push(Call { name, inputs, output: out.to_vec() });
        Ok(())
    }

    /// The backward entries of every call so far, in reverse order.
    fn backward(&mut self) -> Result<(), String> {
        let calls = std::mem::take(&mut self.calls);
        for call in calls.iter().rev() {
            let grad_out = self.act(&call.output);
            let grads: Vec<Value> = call.inputs.iter().map(|s| self.act(s)).collect();
            self.record(Entry::new(format!("{}.backward", call.name)).input([grad_out]).output(grads))?;
        }
        Ok(())
    }
}

/// One API call of the model: its name, argument shapes and source line.
struct Op<'a> {
    api: &'static str,
    acts: &'a [&'a [usize]],
    weights: &'a [&'a [usize]],
    kwargs: Vec<(&'static str, Value)>,
    out: &'a [usize],
    frame: &'a str,
}

/// An [`Op`] from its parts.
fn op<'a>(
    api: &'static str,
    acts: &'a [&'a [usize]],
    weights: &'a [&'a [usize]],
    kwargs: Vec<(&'static str, Value)>,
    out: &'a [usize],
    frame: &'a str,
) -> Op<'a> {
    Op { api, acts, weights, kwargs, out, frame }
}

struct Shapes {
    b: usize,
    s: usize,
    h: usize,
    heads: usize,
}

/// Records one stage of one step; returns (tensor bytes, tensors).
fn record_stage(
    unit: &UnitWriter,
    pool: &mut Pool,
    weights: &mut Pool,
    args: &Args,
    train: bool,
) -> Result<(u64, u64), String> {
    let d = Shapes { b: args.batch, s: args.seq, h: args.hidden, heads: (args.hidden / 64).max(1) };
    let (b, s, h) = (d.b, d.s, d.h);
    let x = [b, s, h];
    let mut r = Recorder {
        unit,
        pool,
        weights,
        act: args.dtype,
        calls: Vec::new(),
        counters: Counters::default(),
        bytes: 0,
        tensors: 0,
    };
    let mut modules = Vec::new();
    for layer in 0..args.layers {
        let module = format!("Module.model.layers.{layer}.TransformerLayer.forward.0");
        let ln = |eps: f64| vec![("eps", Value::float(eps))];
        let qkv = [b, d.heads, s, h / d.heads];
        r.api(op("Functional.layer_norm", &[&x], &[&[h], &[h]], ln(1e-5), &x, "h = self.ln1(x)"), &module)?;
        let qkv_w: [&[usize]; 2] = [&[3 * h, h], &[3 * h]];
        r.api(op("Functional.linear", &[&x], &qkv_w, vec![], &[b, s, 3 * h], "qkv = self.qkv(h)"), &module)?;
        let causal = vec![("is_causal", Value::bool(true))];
        let qkv_in: [&[usize]; 3] = [&qkv, &qkv, &qkv];
        r.api(op("Functional.scaled_dot_product_attention", &qkv_in, &[], causal, &qkv, "a = sdpa(q, k, v)"), &module)?;
        r.api(op("Functional.linear", &[&x], &[&[h, h], &[h]], vec![], &x, "a = self.proj(a)"), &module)?;
        r.api(op("Tensor.__add__", &[&x, &x], &[], vec![], &x, "x = x + a"), &module)?;
        r.api(op("Functional.layer_norm", &[&x], &[&[h], &[h]], ln(1e-5), &x, "h = self.ln2(x)"), &module)?;
        r.api(
            op("Functional.linear", &[&x], &[&[4 * h, h], &[4 * h]], vec![], &[b, s, 4 * h], "u = self.up(h)"),
            &module,
        )?;
        r.api(op("Functional.gelu", &[&[b, s, 4 * h]], &[], vec![], &[b, s, 4 * h], "u = F.gelu(u)"), &module)?;
        r.api(
            op("Functional.linear", &[&[b, s, 4 * h]], &[&[h, 4 * h], &[h]], vec![], &x, "m = self.down(u)"),
            &module,
        )?;
        r.api(op("Tensor.__add__", &[&x, &x], &[], vec![], &x, "x = x + m"), &module)?;
        let (input, output) = (r.act(&x), r.act(&x));
        r.record(
            Entry::new(module.clone())
                .input_args([input])
                .input_kwargs(Vec::<(String, Value)>::new())
                .output([output])
                .parameters(Vec::<(String, Value)>::new())
                .parent(None),
        )?;
        modules.push(layer);
    }
    if train {
        r.backward()?;
        for layer in modules.iter().rev() {
            let p = format!("Module.model.layers.{layer}");
            for (module, class, shape) in [
                ("down", "Linear", [h, 4 * h]),
                ("up", "Linear", [4 * h, h]),
                ("ln2", "LayerNorm", [h, 0]),
                ("proj", "Linear", [h, h]),
                ("qkv", "Linear", [3 * h, h]),
                ("ln1", "LayerNorm", [h, 0]),
            ] {
                let weight: Vec<usize> = shape.iter().copied().filter(|&n| n > 0).collect();
                let (bias, weight) = (r.weight(&shape[..1], false), r.weight(&weight, false));
                r.record(
                    Entry::new(format!("{p}.{module}.{class}.parameters_grad.0"))
                        .grad("bias", bias)
                        .grad("weight", weight),
                )?;
            }
        }
    }
    Ok((r.bytes, r.tensors))
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-9) / 1e9
}

struct Pending {
    label: String,
    bytes: u64,
    tensors: u64,
    metrics: Metrics,
    recorded_in: Duration,
    started: Instant,
    commit: tokio::task::JoinHandle<probelake_writer::Result<CommitRecord>>,
}

async fn finish(p: Pending) -> Result<(), String> {
    let record = p.commit.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let m = &p.metrics;
    println!(
        "{}: committed {} entries, {} leaves, {} tensors, {:.1} MB; record loop {:.1} ms ({:.2} GB/s), \
         record() p50 {:.2} µs p99 {:.2} µs max {:.1} µs, waits {}; recorded to committed {:.1} ms",
        p.label,
        record.counts.entries,
        record.counts.leaves,
        p.tensors,
        p.bytes as f64 / 1e6,
        p.recorded_in.as_secs_f64() * 1e3,
        gbps(p.bytes, p.recorded_in),
        micros(m.record_p50),
        micros(m.record_p99),
        micros(m.record_max),
        m.waits,
        p.started.elapsed().as_secs_f64() * 1e3,
    );
    Ok(())
}

async fn run(args: Args) -> Result<(), String> {
    let lake = Lake::open(&args.out).map_err(|e| e.to_string())?;
    let biggest = args.batch * args.seq * args.hidden * 4;
    let mut pool = Pool::new(biggest * args.dtype.itemsize() + (16 << 20), args.dtype);
    let mut weights = Pool::new(args.hidden * args.hidden * 4 * 4 + (4 << 20), DType::F32);
    let options =
        WriterOptions { task: args.task, summary_mode: args.summary, level: "mix".into(), ..WriterOptions::default() };
    let start = Instant::now();
    let (mut total_bytes, mut loop_time, mut units) = (0u64, Duration::ZERO, 0u64);
    let mut latencies: Vec<(Duration, Duration)> = Vec::new();
    let mut pending: Option<Pending> = None;
    for step in 0..args.steps {
        for stage in &args.stages {
            let unit =
                lake.unit(Unit::new(step, stage.as_str(), args.rank), options.clone()).map_err(|e| e.to_string())?;
            let t0 = Instant::now();
            let (bytes, tensors) = record_stage(&unit, &mut pool, &mut weights, &args, stage.ends_with("update"))?;
            let recorded_in = t0.elapsed();
            let metrics = unit.metrics();
            latencies.push((metrics.record_p50, metrics.record_p99));
            (total_bytes, loop_time, units) = (total_bytes + bytes, loop_time + recorded_in, units + 1);
            // The previous unit has been committing meanwhile; wait for it before the next.
            if let Some(p) = pending.take() {
                finish(p).await?;
            }
            pending = Some(Pending {
                label: format!("step {step} {stage} rank {}", args.rank),
                bytes,
                tensors,
                metrics,
                recorded_in,
                started: t0,
                commit: tokio::spawn(unit.commit()),
            });
        }
    }
    if let Some(p) = pending.take() {
        finish(p).await?;
    }
    let wall = start.elapsed();
    let worst_p99 = latencies.iter().map(|l| l.1).max().unwrap_or_default();
    let mut p50s: Vec<Duration> = latencies.iter().map(|l| l.0).collect();
    p50s.sort();
    println!(
        "total: {units} units, {:.2} GB of tensors ({} {}); record loops {:.2} GB/s; end to end (all committed) \
         {:.2} GB/s in {:.2} s; record() median of unit p50s {:.2} µs, worst unit p99 {:.2} µs",
        total_bytes as f64 / 1e9,
        args.dtype,
        match (args.task, args.summary) {
            (Task::Tensor, _) => "task tensor",
            (_, SummaryMode::Md5) => "task statistics + md5",
            _ => "task statistics",
        },
        gbps(total_bytes, loop_time),
        gbps(total_bytes, wall),
        wall.as_secs_f64(),
        micros(p50s.get(p50s.len() / 2).copied().unwrap_or_default()),
        micros(worst_p99),
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("synthetic_training: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("synthetic_training: {e}");
            ExitCode::from(2)
        }
    }
}
