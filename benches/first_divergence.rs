//! `sql/first_divergence.sql` between two synthesized runs, end to end in process: open both
//! runs (read their commit records), plan, and run the query. Throughput is in `dump` rows
//! of both runs.
//!
//! `cargo bench --bench first_divergence`. Each size is a verl tree of [`SynthSpec::demo`]
//! with 64 layers (2 global steps x 3 stages) and more ranks; the target run has the last
//! layer's attention scale off by 1 %. The 2 x 1M-leaf comparison with DuckDB is
//! `benches/side_by_side/first_divergence.sh`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use probelake::format::Lake;
use probelake::msprobe::{import, ImportOptions, NoProgress};
use probelake::query::{Run, RunSession};
use probelake::synth::{write_run, SynthSpec};

/// (label, ranks): 6 and 24 units of 64 layers per run, about 32k and 128k leaves each.
const SIZES: [(&str, usize); 2] = [("2x32k", 1), ("2x128k", 4)];

const QUERY: &str = include_str!("../sql/first_divergence.sql");

struct Pair {
    _dir: tempfile::TempDir,
    target: Lake,
    golden: Lake,
    leaves: u64,
}

fn synthesize(rt: &tokio::runtime::Runtime, ranks: usize) -> Pair {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = SynthSpec { layers: 64, ranks, ..SynthSpec::demo() };
    let mut leaves = 0;
    let mut lakes = Vec::new();
    for (name, bug) in [("golden", None), ("target", Some((63, 1.01f32)))] {
        let src = dir.path().join("msprobe").join(name);
        write_run(&SynthSpec { attention_scale_bug: bug, ..base.clone() }, &src).expect("synthesize");
        let lake = Lake::local(&dir.path().join("lake").join(name)).expect("lake");
        let report = rt.block_on(import(&src, &lake, &ImportOptions::default(), &NoProgress)).expect("import");
        leaves += report.units.iter().map(|u| u.counts.leaves).sum::<u64>();
        std::fs::remove_dir_all(&src).expect("remove msprobe tree");
        lakes.push(lake);
    }
    let golden = lakes.remove(0);
    let target = lakes.remove(0);
    eprintln!("{ranks} rank(s): {leaves} dump rows in both runs, in {}", dir.path().display());
    Pair { _dir: dir, target, golden, leaves }
}

async fn first_divergence(pair: &Pair) -> usize {
    let runs = vec![Run::new("target", pair.target.clone()), Run::new("golden", pair.golden.clone())];
    let session = RunSession::open(runs, false).await.expect("open runs");
    let batches = session.collect(QUERY).await.expect("first_divergence.sql");
    batches.iter().map(|b| b.num_rows()).sum()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let mut group = c.benchmark_group("first_divergence");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for (label, ranks) in SIZES {
        let pair = synthesize(&rt, ranks);
        group.throughput(Throughput::Elements(pair.leaves));
        group.bench_with_input(BenchmarkId::from_parameter(label), &pair, |b, pair| {
            b.iter(|| rt.block_on(first_divergence(pair)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
