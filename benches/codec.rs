//! Import and export throughput of the msprobe codec, in MB/s of dump.json, on synthesized runs.
//!
//! `cargo bench --bench codec` (all groups) or `cargo bench --bench codec -- import` (one).
//! Each size is a verl tree of [`SynthSpec::demo`] with more layers: 2 global steps x 3 stages
//! x 1 rank = 6 units, one dump.json (plus stack.json and construct.json) each. Throughput is
//! counted in bytes of dump.json, the figure the targets are stated in; stack.json and
//! construct.json are imported and exported too but not counted.
//!
//! Besides timings it prints the dataset size ratio (Parquet bytes of the committed units over
//! their dump.json bytes) for each size.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use probelake_format::{Lake, Table};
use probelake_msprobe::json::{detect_layout, parse, Arena, Layout};
use probelake_msprobe::{self as msprobe, DumpKind, ExportOptions, ImportOptions, NoProgress};
use probelake_synth::{scale_hint, write_run, SynthSpec};

/// (label, transformer layers): about 10 MB and 50 MB of dump.json.
const SIZES: [(&str, usize); 2] = [("10MB", 70), ("50MB", 350)];

struct Input {
    label: &'static str,
    _dir: tempfile::TempDir,
    tree: PathBuf,
    /// Every dump.json of the tree, read into memory, with its layout.
    dumps: Vec<(Vec<u8>, Layout)>,
    json_bytes: u64,
}

/// A group that runs `work` on every dump.json of each input, in memory.
fn each_dump_file(c: &mut Criterion, name: &str, inputs: &[Input], work: impl Fn(&[u8])) {
    let mut group = c.benchmark_group(name);
    for input in inputs {
        group.throughput(Throughput::Bytes(input.json_bytes));
        group.bench_function(BenchmarkId::from_parameter(input.label), |b| {
            b.iter(|| input.dumps.iter().for_each(|(bytes, _)| work(bytes)))
        });
    }
    group.finish();
}

fn synthesize(label: &'static str, layers: usize) -> Input {
    let spec = SynthSpec { layers, ..SynthSpec::demo() };
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = dir.path().join("run");
    let report = write_run(&spec, &tree).expect("synthesize");
    let mut paths = Vec::new();
    dump_files(&tree, &mut paths);
    paths.sort();
    let dumps: Vec<(Vec<u8>, Layout)> = paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).expect("read dump.json");
            let layout = detect_layout(&bytes);
            (bytes, layout)
        })
        .collect();
    let json_bytes = dumps.iter().map(|(b, _)| b.len() as u64).sum();
    eprintln!(
        "input {label}: {layers} layers, {} dump.json files, {:.1} MB of dump.json ({:.1} MB with stack/construct; \
         scale_hint says {:.1} MB), {} leaves",
        dumps.len(),
        mb(json_bytes),
        mb(report.bytes),
        mb(scale_hint(&spec) * (layers * spec.global_steps.len()) as u64),
        report.leaves,
    );
    Input { label, _dir: dir, tree, dumps, json_bytes }
}

fn dump_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            dump_files(&path, out);
        } else if path.file_name().is_some_and(|n| n == "dump.json") {
            out.push(path);
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn import_into(rt: &tokio::runtime::Runtime, tree: &Path, dataset: &Path) -> msprobe::ImportReport {
    let lake = Lake::local(dataset).expect("lake");
    rt.block_on(msprobe::import(tree, &lake, &ImportOptions::default(), &NoProgress)).expect("import")
}

/// Prints the dataset size against the dump.json bytes, overall and per table.
fn report_size(input: &Input, report: &msprobe::ImportReport) {
    let total: u64 = report.units.iter().map(|u| u.bytes()).sum();
    let per_table: Vec<String> = Table::ALL
        .iter()
        .map(|t| {
            let b: u64 = report.units.iter().flat_map(|u| u.files_of(*t)).map(|f| f.bytes).sum();
            format!("{} {:.2} MB", t.name(), mb(b))
        })
        .collect();
    eprintln!(
        "dataset {}: {:.2} MB of Parquet for {:.2} MB of dump.json = {:.1}% ({})",
        input.label,
        mb(total),
        mb(report.json_bytes),
        100.0 * total as f64 / report.json_bytes as f64,
        per_table.join(", "),
    );
}

fn benches(c: &mut Criterion) {
    let inputs: Vec<Input> = SIZES.iter().map(|&(label, layers)| synthesize(label, layers)).collect();
    let rt = runtime();

    let mut group = c.benchmark_group("import");
    for input in &inputs {
        let scratch = tempfile::tempdir().expect("tempdir");
        report_size(input, &import_into(&rt, &input.tree, &scratch.path().join("probe")));
        group.throughput(Throughput::Bytes(input.json_bytes));
        let mut n = 0;
        group.bench_function(BenchmarkId::from_parameter(input.label), |b| {
            b.iter_batched(
                || {
                    n += 1;
                    scratch.path().join(format!("ds{n}"))
                },
                |dataset| import_into(&rt, &input.tree, &dataset),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("export");
    for input in &inputs {
        let scratch = tempfile::tempdir().expect("tempdir");
        let dataset = scratch.path().join("ds");
        import_into(&rt, &input.tree, &dataset);
        let lake = Lake::local(&dataset).expect("lake");
        let dst = scratch.path().join("out");
        let options = ExportOptions { force: true, ..Default::default() };
        group.throughput(Throughput::Bytes(input.json_bytes));
        group.bench_function(BenchmarkId::from_parameter(input.label), |b| {
            b.iter(|| rt.block_on(msprobe::export(&lake, &dst, &options, &NoProgress)).expect("export"))
        });
    }
    group.finish();

    each_dump_file(c, "parse", &inputs, |bytes| {
        let arena = Arena::new();
        std::hint::black_box(parse(bytes, &arena).expect("parse"));
    });
    // What import does to a file: leaves read straight from the text as it is parsed, then
    // the document taken apart (against `parse` + `take_apart` below, the general way).
    each_dump_file(c, "parse_dump", &inputs, |bytes| {
        let arena = Arena::new();
        let doc = msprobe::parse_dump(bytes, &arena, DumpKind::Dump).expect("parse_dump");
        std::hint::black_box(
            msprobe::take_apart_read(&doc.doc, doc.read, bytes, DumpKind::Dump, doc.layout).expect("take_apart"),
        );
    });

    let mut group = c.benchmark_group("take_apart");
    for input in &inputs {
        let arena = Arena::new();
        let docs: Vec<_> = input.dumps.iter().map(|(b, l)| (parse(b, &arena).expect("parse"), b, *l)).collect();
        group.throughput(Throughput::Bytes(input.json_bytes));
        group.bench_function(BenchmarkId::from_parameter(input.label), |b| {
            b.iter(|| {
                for (doc, bytes, layout) in &docs {
                    std::hint::black_box(
                        msprobe::take_apart_source(doc, bytes, DumpKind::Dump, *layout).expect("take_apart"),
                    );
                }
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("render");
    for input in &inputs {
        let arena = Arena::new();
        let docs: Vec<_> = input.dumps.iter().map(|(b, l)| (parse(b, &arena).expect("parse"), *l)).collect();
        let parsed: Vec<_> =
            docs.iter().map(|(d, l)| msprobe::take_apart(d, DumpKind::Dump, *l).expect("take_apart")).collect();
        let leaves: Vec<Vec<_>> =
            parsed.iter().map(|p| p.leaves.iter().map(|l| p.value(l).to_leaf()).collect()).collect();
        // The bench is only meaningful if render reproduces the input.
        for ((p, leaves), (bytes, _)) in parsed.iter().zip(&leaves).zip(&input.dumps) {
            let mut out = Vec::new();
            msprobe::render(&p.skeleton, p.layout, leaves, &mut out).expect("render");
            assert!(out == *bytes, "render does not reproduce the synthesized dump.json");
        }
        let mut out = Vec::with_capacity(input.dumps.iter().map(|(b, _)| b.len()).max().unwrap_or(0));
        group.throughput(Throughput::Bytes(input.json_bytes));
        group.bench_function(BenchmarkId::from_parameter(input.label), |b| {
            b.iter(|| {
                for (p, leaves) in parsed.iter().zip(&leaves) {
                    out.clear();
                    msprobe::render(&p.skeleton, p.layout, leaves, &mut out).expect("render");
                }
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4))
}

criterion_group! { name = codec; config = config(); targets = benches }
criterion_main!(codec);
