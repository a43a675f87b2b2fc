//! The statistics kernels against `memcpy` of the same bytes, measured in one run (issue 8's
//! target: every kernel at ≥ 70% of memcpy). A light stand-in for the root package's criterion
//! bench (`benches/writer.rs`, which pulls in DataFusion): the same buffers (random f32 values;
//! bfloat16 and float16 hold them rounded) at 256 KiB (L2), 4 MiB (L3) and 64 MiB (DRAM).
//!
//!     cargo run --release -p probelake-writer --example kernel_speed -- [repetitions]
//!
//! Each repetition times every contender once, interleaved, over enough passes to last about
//! 20 ms; the table keeps each contender's best repetition, since on a shared machine the
//! noise (preemption, other processes' cache traffic) only ever slows a run down.

mod inputs;

use std::hint::black_box;
use std::time::{Duration, Instant};

use inputs::{random_f32, random_half};
use probelake_writer::stats::summarize;
use probelake_writer::DType;

const SIZES: [(&str, usize); 3] = [("256 KiB", 256 << 10), ("4 MiB", 4 << 20), ("64 MiB", 64 << 20)];
/// How long one timing should last, so the clock's resolution and one-off stalls do not matter.
const TIMING_TARGET: Duration = Duration::from_millis(20);

/// Seconds per pass of `f`, timed over enough passes to last about [`TIMING_TARGET`].
fn seconds_per_pass(mut f: impl FnMut()) -> f64 {
    f();
    let mut passes = 1u32;
    loop {
        let start = Instant::now();
        for _ in 0..passes {
            f();
        }
        let took = start.elapsed();
        if took >= TIMING_TARGET {
            return took.as_secs_f64() / f64::from(passes);
        }
        passes = passes.saturating_mul(2);
    }
}

fn main() {
    let repetitions: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    println!("best of {repetitions} repetitions; GiB/s of buffer bytes, and % of memcpy of the same size");
    println!("| size | memcpy | stats float32 | stats bfloat16 | stats float16 |");
    println!("|---|---|---|---|---|");
    for (label, size) in SIZES {
        let f32s = random_f32(size);
        let bf16s = random_half(size, true);
        let f16s = random_half(size, false);
        let mut dst = vec![0u8; size];
        let mut best = [f64::INFINITY; 4];
        for _ in 0..repetitions {
            let timings = [
                seconds_per_pass(|| {
                    dst.copy_from_slice(black_box(&f32s));
                    black_box(&dst);
                }),
                seconds_per_pass(|| {
                    black_box(summarize(DType::F32, black_box(&f32s), false));
                }),
                seconds_per_pass(|| {
                    black_box(summarize(DType::BF16, black_box(&bf16s), false));
                }),
                seconds_per_pass(|| {
                    black_box(summarize(DType::F16, black_box(&f16s), false));
                }),
            ];
            for (b, t) in best.iter_mut().zip(timings) {
                *b = b.min(t);
            }
        }
        let gib_s = |seconds: f64| size as f64 / seconds / f64::from(1u32 << 30);
        let memcpy = gib_s(best[0]);
        let cells: Vec<String> =
            best[1..].iter().map(|&t| format!("{:.2} GiB/s ({:.0}%)", gib_s(t), 100.0 * gib_s(t) / memcpy)).collect();
        println!("| {label} | {memcpy:.2} GiB/s | {} |", cells.join(" | "));
    }
}
