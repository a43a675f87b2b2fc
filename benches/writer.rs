//! The async writer, side by side in one run: its kernels (statistics over f32 and bf16, CRC-32,
//! xor) against `memcpy` of the same bytes; `record()` on the caller's thread; and end-to-end
//! bytes per second from `record` to a committed unit on local disk.
//!
//! `cargo bench --bench writer` (all groups) or `cargo bench --bench writer -- kernels`.
//! The `record` group also prints the writer's own p50/p99 of `record()` (criterion reports
//! means), measured over every call of the group.

#[path = "../crates/probelake-writer/examples/kernel_speed/inputs.rs"]
mod inputs;

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use inputs::{random_f32, random_half};
use probelake_writer::checksum::{crc32_hex, xor64};
use probelake_writer::stats::summarize;
use probelake_writer::{DType, Entry, Lake, Tensor, TensorSource, Unit, Value, WriterOptions};

/// Buffer sizes: in L2, in the last-level cache, and well beyond it.
const SIZES: [(&str, usize); 3] = [("256KiB", 256 << 10), ("4MiB", 4 << 20), ("64MiB", 64 << 20)];

fn kernels(c: &mut Criterion) {
    let mut g = c.benchmark_group("kernels");
    g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for (label, size) in SIZES {
        let data = random_f32(size);
        let bf16 = random_half(size, true);
        let f16 = random_half(size, false);
        let mut dst = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("memcpy", label), &data, |b, d| {
            b.iter(|| {
                dst.copy_from_slice(std::hint::black_box(d));
                std::hint::black_box(&dst);
            })
        });
        g.bench_with_input(BenchmarkId::new("stats_f32", label), &data, |b, d| {
            b.iter(|| summarize(DType::F32, std::hint::black_box(d), false))
        });
        g.bench_with_input(BenchmarkId::new("stats_bf16", label), &bf16, |b, d| {
            b.iter(|| summarize(DType::BF16, std::hint::black_box(d), false))
        });
        g.bench_with_input(BenchmarkId::new("stats_f16", label), &f16, |b, d| {
            b.iter(|| summarize(DType::F16, std::hint::black_box(d), false))
        });
        g.bench_with_input(BenchmarkId::new("crc32", label), &data, |b, d| {
            b.iter(|| crc32_hex(std::hint::black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("xor", label), &data, |b, d| b.iter(|| xor64(std::hint::black_box(d))));
    }
    g.finish();
}

fn entry(i: u64, tensor: &Bytes, dtype: DType, shape: &[i64]) -> Entry {
    let t = |b: &Bytes| Value::tensor(Tensor::new(dtype, shape.to_vec(), TensorSource::host(b.clone())));
    Entry::new(format!("Functional.linear.{i}.forward"))
        .input_args([t(tensor), t(tensor)])
        .input_kwargs([("bias", Value::null())])
        .output([t(tensor)])
}

fn record(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path().to_str().expect("utf-8")).expect("open");
    let mut g = c.benchmark_group("record");
    g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    // A 4 KiB f32 tensor (3 per entry): the caller's cost, not the statistics, is measured.
    let tensor = Bytes::from(random_f32(4096));
    let mut step = 0;
    let mut worst = (Duration::ZERO, Duration::ZERO, 0u64);
    g.bench_function("host_entry_3x4KiB", |b| {
        b.iter_custom(|iters| {
            let unit = lake.unit(Unit::new(step, "bench", 0), WriterOptions::default()).expect("unit");
            step += 1;
            let entries: Vec<Entry> = (0..iters).map(|i| entry(i, &tensor, DType::F32, &[32, 32])).collect();
            let start = Instant::now();
            for e in entries {
                unit.record(e).expect("record");
            }
            let took = start.elapsed();
            let m = unit.metrics();
            if m.records > worst.2 {
                worst = (m.record_p50, m.record_p99, m.records);
            }
            unit.commit_blocking().expect("commit");
            took
        })
    });
    g.finish();
    eprintln!(
        "record(): writer metrics over {} calls of the largest sample: p50 {:?}, p99 {:?}",
        worst.2, worst.0, worst.1
    );
    // Percentiles over one long run, from the writer's own histogram (criterion reports means).
    // The tensors share one buffer, so a budget above their total costs no memory and keeps
    // back-pressure (measured separately by the waits) out of the caller's latency.
    let options = WriterOptions { budget_bytes: 1 << 34, ..WriterOptions::default() };
    let unit = lake.unit(Unit::new(step, "bench", 0), options).expect("unit");
    let entries: Vec<Entry> = (0..100_000).map(|i| entry(i, &tensor, DType::F32, &[32, 32])).collect();
    for e in entries {
        unit.record(e).expect("record");
    }
    let m = unit.metrics();
    eprintln!(
        "record(): 100000 calls (3 x 4 KiB f32 each): p50 {:?}, p99 {:?}, max {:?}, waits {}",
        m.record_p50, m.record_p99, m.record_max, m.waits
    );
    unit.commit_blocking().expect("commit");
}

fn end_to_end(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path().to_str().expect("utf-8")).expect("open");
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(4));
    // 64 entries of 3 x 1 MiB: one unit of 192 MiB of tensors, recorded and committed.
    let f32s = Bytes::from(random_f32(1 << 20));
    let bf16s = Bytes::from(random_half(1 << 20, true));
    let total = 64 * 3 * (1u64 << 20);
    let mut step = 0;
    for (label, dtype, shape, tensor) in
        [("f32", DType::F32, [512i64, 512], &f32s), ("bf16", DType::BF16, [512, 1024], &bf16s)]
    {
        g.throughput(Throughput::Bytes(total));
        g.bench_function(BenchmarkId::new("statistics_unit_192MiB", label), |b| {
            b.iter(|| {
                let unit = lake.unit(Unit::new(step, "bench", 0), WriterOptions::default()).expect("unit");
                step += 1;
                for i in 0..64 {
                    unit.record(entry(i, tensor, dtype, &shape)).expect("record");
                }
                unit.commit_blocking().expect("commit")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, record, end_to_end);
criterion_main!(benches);
