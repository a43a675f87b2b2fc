//! `compare` of two imported runs, as `probelake compare DATASET DATASET` does (one
//! [`compare_unit`] per unit pair): plan and run the pairing query, build msprobe's rows and
//! write them as msprobe's CSV (into memory). Throughput is in result rows.
//!
//! `cargo bench --bench compare`. Each size is one training step of the synthesized
//! transformer in msprobe's layout (`probelake synth --layout msprobe --steps 1 --layers N`),
//! the target with the last layer's attention scale off by 1 %. The comparison with
//! `msprobe compare` itself is `benches/side_by_side/compare.sh`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use probelake::compare::{compare_unit, CompareOptions};
use probelake::format::Lake;
use probelake::msprobe::{import, ImportOptions, NoProgress};
use probelake::synth::{write_run, SynthLayout, SynthSpec};

/// (label, layers): about 1 MB and 10.7 MB of dump.json per side (the second is the size
/// `compare.sh` measures against msprobe).
const SIZES: [(&str, usize); 2] = [("1MB", 27), ("10MB", 289)];

struct Pair {
    _dir: tempfile::TempDir,
    target: Lake,
    golden: Lake,
}

fn synthesize(rt: &tokio::runtime::Runtime, layers: usize) -> Pair {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = SynthSpec {
        layers,
        layout: SynthLayout::Msprobe,
        global_steps: vec![0],
        stages: Vec::new(),
        ..SynthSpec::demo()
    };
    let mut lakes = Vec::new();
    for (name, bug) in [("golden", None), ("target", Some((layers - 1, 1.01f32)))] {
        let src = dir.path().join("msprobe").join(name);
        write_run(&SynthSpec { attention_scale_bug: bug, ..base.clone() }, &src).expect("synthesize");
        let lake = Lake::local(&dir.path().join("lake").join(name)).expect("lake");
        rt.block_on(import(&src, &lake, &ImportOptions::default(), &NoProgress)).expect("import");
        std::fs::remove_dir_all(&src).expect("remove msprobe tree");
        lakes.push(lake);
    }
    let golden = lakes.remove(0);
    let target = lakes.remove(0);
    Pair { _dir: dir, target, golden }
}

/// Compares every unit of the pair and writes the CSVs; returns the bytes written.
async fn compare(pair: &Pair) -> usize {
    let (targets, goldens) = (pair.target.units().await.expect("units"), pair.golden.units().await.expect("units"));
    let mut csv = Vec::new();
    for (t, g) in targets.iter().zip(&goldens) {
        let table = compare_unit(&pair.target, t, &pair.golden, g, &CompareOptions::default()).await.expect("compare");
        table.write_csv(&mut csv).expect("write csv");
    }
    csv.len()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let mut group = c.benchmark_group("compare");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for (label, layers) in SIZES {
        let pair = synthesize(&rt, layers);
        let rows = rt.block_on(async {
            let (t, g) = (pair.target.units().await.expect("units"), pair.golden.units().await.expect("units"));
            let mut rows = 0;
            for (t, g) in t.iter().zip(&g) {
                let table = compare_unit(&pair.target, t, &pair.golden, g, &CompareOptions::default()).await;
                rows += table.expect("compare").rows.len();
            }
            rows
        });
        eprintln!("{label}: {rows} result rows");
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &pair, |b, pair| {
            b.iter(|| rt.block_on(compare(pair)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
