//! The async writer end to end: a unit it writes exports to msprobe files that import back as
//! the very same rows; replaying real msprobe tensor dumps through it gives msprobe's own
//! statistics and checksums; `sql` and `compare` work on its datasets; and a `kill -9` of the
//! `synthetic_training` example leaves every committed unit whole and no partial one visible.

use std::path::{Path, PathBuf};

use probelake::format::Unit;
use probelake::msprobe::json::{parse, write_compact, Arena, Node, Value as Json};
use probelake::msprobe::tensor_file::read_tensor_file;
use probelake::msprobe::{is_leaf, is_parameters_grad};
use probelake::writer::device::simulated::SimulatedDevice;
use probelake::writer::{DType, Entry, Lake, SummaryMode, Task, Tensor, TensorSource, Value, WriterOptions};

use crate::cli;
use crate::fixtures::{
    assert_committed_units_whole, assert_same_bytes, assert_vacuum_leaves_only_named_files, files_below, root,
};

fn sql_as(ds: &Path, query: &str, format: &str) -> String {
    let out =
        cli::ok([Path::new("sql"), ds, Path::new("-c"), Path::new(query), Path::new("--format"), Path::new(format)]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sql_csv(ds: &Path, query: &str) -> String {
    sql_as(ds, query, "csv")
}

fn le<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

fn host(dtype: DType, shape: &[i64], bytes: Vec<u8>) -> Value {
    Value::tensor(Tensor::new(dtype, shape.to_vec(), TensorSource::host(bytes)))
}

/// Entries covering every dtype, empty and 0-dim tensors, NaN/inf, scalars of each kind,
/// nested containers, kwargs, modules with parameters and gradients, a backward entry, a
/// historical `is_recompute` field, stacks and parents, and lent, shared and device buffers.
fn varied_entries(device: &SimulatedDevice) -> Vec<Entry> {
    let f32s = |v: &[f32]| le(v, f32::to_le_bytes);
    let bf16s = |v: &[f32]| le(v, |x| half::bf16::from_f32(x).to_le_bytes());
    let f16s = |v: &[f32]| le(v, |x| half::f16::from_f32(x).to_le_bytes());
    let lent: &'static [u8] = Box::leak(f32s(&[0.25, -8.0, 3.5, 1e-3]).into_boxed_slice());
    // SAFETY: a leaked, never-freed and never-written buffer outlives the writer.
    let lent = unsafe { TensorSource::lent(lent.as_ptr(), lent.len(), || {}) };
    let frames = [
        "File /workspace/model.py, line 7, in forward, \n y = f(x)",
        "File /workspace/train.py, line 3, in <module>, \n main()",
    ];
    vec![
        Entry::new("Functional.linear.0.forward")
            .input_args([
                host(DType::F32, &[2, 2], f32s(&[1.0, -2.5, 3.25, 0.5])),
                host(DType::F32, &[3, 2], f32s(&[0.1, 0.2, 0.3, -0.4, 0.5, 0.6])),
            ])
            .input_kwargs([("bias", host(DType::F32, &[3], f32s(&[1.0, 2.0, 3.0])))])
            .output([host(DType::BF16, &[2, 3], bf16s(&[1.5, 2.25, -3.0, 4.0, 0.125, 7.5]))])
            .stack(frames)
            .parent(Some("Module.fc.Linear.forward.0")),
        Entry::new("Torch.add.0.forward")
            .input_args([
                host(DType::F16, &[4], f16s(&[1.0, f32::NAN, 2.0, 3.0])),
                host(DType::F32, &[3], f32s(&[f32::INFINITY, 1.0, -2.0])),
                Value::float(1e-5),
            ])
            .input_kwargs([("alpha", Value::int(2)), ("out", Value::null())])
            .section("is_recompute", Value::json("false"))
            .output([host(DType::F32, &[2], f32s(&[f32::INFINITY, f32::NEG_INFINITY]))])
            .stack(frames)
            .parent(Some("Module.fc.Linear.forward.0")),
        Entry::new("Tensor.__getitem__.0.forward")
            .input_args([
                host(DType::I64, &[3], le(&[5i64, -7, 1 << 40], i64::to_le_bytes)),
                Value::list([
                    Value::scalar("slice", "[null, 2, null]"),
                    Value::scalar("ellipsis", "\"...\""),
                    Value::list([Value::int(1), Value::bool(true)]),
                ]),
            ])
            .input_kwargs([
                ("dtype", Value::dtype(DType::F16)),
                ("device", Value::scalar("torch.device", "\"cpu:None\"")),
            ])
            .output([
                host(DType::I32, &[2], le(&[3i32, -4], i32::to_le_bytes)),
                host(DType::I16, &[1], le(&[-300i16], i16::to_le_bytes)),
                host(DType::I8, &[2], le(&[-5i8, 9], i8::to_le_bytes)),
                host(DType::U8, &[3], vec![0, 255, 17]),
                host(DType::Bool, &[3], vec![1, 0, 1]),
                Value::map([
                    ("values", host(DType::F64, &[2], le(&[2.5f64, -1.0], f64::to_le_bytes))),
                    ("size", Value::scalar("torch.Size", "[4, 2]")),
                ]),
                Value::Map(Vec::new()),
            ])
            .stack(["File /workspace/data.py, line 9, in get, \n return x[i]"]),
        Entry::new("Torch.abs.0.forward")
            .input_args([
                host(DType::Complex64, &[2], f32s(&[3.0, 4.0, 1.0, 0.0])),
                host(DType::Complex128, &[1], le(&[0.0f64, -2.0], f64::to_le_bytes)),
                host(DType::F32, &[0], Vec::new()),
                host(DType::F32, &[], f32s(&[-0.017_372_25])),
                host(DType::I64, &[], le(&[3i64], i64::to_le_bytes)),
                host(DType::Bool, &[], vec![1]),
                Value::str("mean — ünïcode"),
            ])
            .output([
                Value::tensor(Tensor::new(DType::F32, [4], lent)),
                Value::tensor(Tensor::new(DType::F32, [2], TensorSource::device(device.upload(f32s(&[9.0, -9.0]))))),
            ]),
        Entry::new("Module.fc.Linear.forward.0")
            .input_args([host(DType::F32, &[1, 2], f32s(&[0.5, 0.25]))])
            .input_kwargs(Vec::<(String, Value)>::new())
            .output([Value::tensor(
                Tensor::new(DType::F32, [1, 3], TensorSource::shared(f32s(&[1.0, 2.0, 3.0]))).requires_grad(true),
            )])
            .parameters([
                ("weight", host(DType::F32, &[3, 2], f32s(&[1.0; 6]))),
                ("bias", host(DType::F32, &[3], f32s(&[0.0; 3]))),
            ])
            .parent(None),
        Entry::new("Functional.linear.0.backward").input([host(DType::BF16, &[2, 3], bf16s(&[0.5; 6]))]).output([
            host(DType::F32, &[3], f32s(&[1.0, 1.0, 1.0])),
            Value::null(),
            host(DType::F32, &[3, 2], f32s(&[2.0; 6])),
        ]),
        Entry::new("Module.fc.Linear.parameters_grad.0")
            .grad("bias", host(DType::F32, &[3], f32s(&[0.1, 0.2, 0.3])))
            .grad("weight", host(DType::F32, &[3, 2], f32s(&[0.5; 6]))),
    ]
}

/// (task, summary mode) pairs msprobe can write.
const MODES: [(Task, SummaryMode); 5] = [
    (Task::Statistics, SummaryMode::Statistics),
    (Task::Statistics, SummaryMode::Md5),
    (Task::Statistics, SummaryMode::Xor),
    (Task::Tensor, SummaryMode::Statistics),
    (Task::Tensor, SummaryMode::Md5),
];

fn write_unit(ds: &Path, unit: Unit, options: WriterOptions, entries: Vec<Entry>) {
    let lake = Lake::open(ds.to_str().expect("utf-8 path")).expect("open");
    let writer = lake.unit(unit, options).expect("unit");
    for e in entries {
        writer.record(e).expect("record");
    }
    writer.commit_blocking().expect("commit");
}

/// Every table of `ds` as JSON lines, in a fixed order, minus what only import knows (file sizes).
fn tables(ds: &Path) -> Vec<(&'static str, String)> {
    let sql_csv = |ds: &Path, q: &str| sql_as(ds, q, "ndjson");
    vec![
        ("dump", sql_csv(ds, "SELECT * FROM dump ORDER BY step, stage, rank, seq, leaf")),
        ("stack", sql_csv(ds, "SELECT * FROM stack ORDER BY step, stage, rank, \"group\", name")),
        ("construct", sql_csv(ds, "SELECT * FROM construct ORDER BY step, stage, rank, seq")),
        ("tensor", sql_csv(ds, "SELECT * FROM tensor ORDER BY step, stage, rank, data_name")),
        (
            "source",
            sql_csv(
                ds,
                "SELECT step, stage, rank, file, kind, task, level, framework, dump_data_dir, entries, leaves, indent, \
                 skeleton, original IS NULL AS o, stack_format, stack_indent, stack_original IS NULL AS so, \
                 construct_format, construct_indent, construct_original IS NULL AS co, inner_step, pid FROM source \
                 ORDER BY step, stage, rank",
            ),
        ),
    ]
}

#[test]
fn writer_units_export_to_msprobe_files_that_import_back_as_the_same_rows() {
    for (i, (task, summary_mode)) in MODES.into_iter().enumerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (written, exported, imported) = (tmp.path().join("w"), tmp.path().join("x"), tmp.path().join("i"));
        let device = SimulatedDevice::new();
        let options =
            WriterOptions { task, summary_mode, level: "mix".into(), threads: 1 + i % 3, ..WriterOptions::default() };
        let unit = if i % 2 == 0 { Unit::new(3, "actor_update", 1) } else { Unit::new(5, "default", -1) };
        write_unit(&written, unit, WriterOptions { pid: Some(4242), ..options }, varied_entries(&device));
        cli::export(&written, &exported);
        cli::import(&exported, &imported);
        let label = format!("{task:?}/{summary_mode:?}");
        for ((table, want), (_, got)) in tables(&written).into_iter().zip(tables(&imported)) {
            assert!(!want.is_empty() || table == "tensor" && task == Task::Statistics, "{label}: {table} is empty");
            assert_eq!(want, got, "{label}: table {table} differs after export and import");
        }
        // Exporting the re-imported dataset gives the same files again, byte for byte.
        let again = tmp.path().join("x2");
        cli::export(&imported, &again);
        let files = files_below(&exported);
        assert_eq!(files, files_below(&again), "{label}");
        assert!(files.iter().any(|f| f.ends_with("dump.json")), "{label}: {files:?}");
        assert_eq!(
            files.iter().any(|f| f.to_string_lossy().ends_with(".pt")),
            task == Task::Tensor,
            "{label}: {files:?}"
        );
        for f in &files {
            assert_same_bytes(
                f,
                &std::fs::read(exported.join(f)).expect("read"),
                &std::fs::read(again.join(f)).expect("read"),
            );
        }
    }
}

#[test]
fn sql_and_compare_work_on_writer_datasets() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = tmp.path().join("w");
    let device = SimulatedDevice::new();
    let options = WriterOptions { summary_mode: SummaryMode::Md5, ..WriterOptions::default() };
    write_unit(&ds, Unit::new(1, "actor_update", 0), options, varied_entries(&device));
    let typed = sql_csv(&ds, "SELECT arrow_typeof(step) AS s, count(*) AS n, count(md5) AS m FROM dump GROUP BY 1");
    // 43 leaves (see varied_entries), 31 of them tensors, each with a CRC-32.
    assert_eq!(typed.lines().nth(1), Some("Int64,43,31"), "{typed}");
    let ds_arg = ds.to_string_lossy().into_owned();
    let out = tmp.path().join("cmp");
    let run = cli::probelake(["compare", &ds_arg, &ds_arg, "-o", &out.to_string_lossy(), "--mode", "md5"]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let csv: String =
        files_below(&out).iter().map(|f| std::fs::read_to_string(out.join(f)).unwrap_or_default()).collect();
    // Every row of msprobe's md5 table: `…,Requires_grad Consistent,Result,Err_message,…`.
    let rows: Vec<&str> = csv.lines().filter(|l| !l.starts_with("NPU Name")).collect();
    assert_eq!(rows.len(), 43, "{csv}");
    assert!(rows.iter().all(|r| r.contains(",True,pass,[],")), "{csv}");
}

/// Rebuilds a writer entry from one entry of a real dump.json, tensors read from its `.pt` files.
fn entry_from_json(name: &str, node: &Node<'_>, tensors: &Path) -> Entry {
    fn value(node: &Node<'_>, tensors: &Path) -> Value {
        let compact = |n: &Node<'_>| {
            let mut out = Vec::new();
            write_compact(&mut out, n);
            String::from_utf8(out).expect("utf-8")
        };
        if is_leaf(node) {
            let Json::Object(_) = &node.value else { return Value::Null };
            let kind = node.value.get("type").and_then(|t| t.value.as_str()).expect("type");
            if !kind.contains("Tensor") {
                return Value::scalar(kind, compact(node.value.get("value").expect("value")));
            }
            let dtype: DType =
                node.value.get("dtype").and_then(|d| d.value.as_str()).expect("dtype").parse().expect("dtype");
            let shape: Vec<i64> = match &node.value.get("shape").expect("shape").value {
                Json::Array(dims) => dims.iter().map(|d| compact(d).parse().expect("dim")).collect(),
                _ => panic!("shape"),
            };
            let bytes = match node.value.get("data_name").and_then(|d| d.value.as_str()) {
                Some(file) => {
                    let raw = std::fs::read(tensors.join(file)).expect("tensor file");
                    read_tensor_file(file, &raw).expect("tensor").0.data
                }
                None => Vec::new(),
            };
            let rg = matches!(node.value.get("requires_grad").map(|n| &n.value), Some(Json::Bool(true)));
            return Value::tensor(Tensor::new(dtype, shape, TensorSource::host(bytes)).requires_grad(rg));
        }
        match &node.value {
            Json::Array(items) => Value::list(items.iter().map(|i| value(i, tensors))),
            Json::Object(members) => Value::map(members.iter().map(|(k, v)| (k.to_string(), value(v, tensors)))),
            _ => Value::json(compact(node)),
        }
    }
    let Json::Object(fields) = &node.value else { panic!("{name} is not an object") };
    let grads = is_parameters_grad(name);
    let mut entry = Entry::new(name);
    for (field, v) in fields.iter() {
        let slot = grads || matches!(field.as_ref(), "input_args" | "input_kwargs" | "input" | "output" | "parameters");
        let v = if slot {
            value(v, tensors)
        } else {
            let mut out = Vec::new();
            write_compact(&mut out, v);
            Value::json(String::from_utf8(out).expect("utf-8"))
        };
        entry = entry.section(field.to_string(), v);
    }
    entry
}

/// Real msprobe runs that saved every tensor, so the writer can see what msprobe saw.
fn tensor_runs() -> Vec<PathBuf> {
    let Some(root) = root() else { return Vec::new() };
    let gen = root.join("msprobe/generated-head-8ff00da3-pytorch2.8-cpu");
    ["L1-tensor-md5", "L1-tensor-kwargs", "L0-tensor"]
        .iter()
        .map(|r| gen.join(r))
        .chain([root.join("runs/plain-l1-tensor-base")])
        .collect()
}

fn dump_dir(run: &Path) -> PathBuf {
    files_below(run)
        .into_iter()
        .find(|f| f.ends_with("dump.json"))
        .and_then(|f| f.parent().map(|p| run.join(p)))
        .expect("a dump.json")
}

#[test]
fn replaying_real_msprobe_tensor_dumps_gives_msprobes_statistics_and_checksums() {
    let mut compared = 0;
    for run in tensor_runs() {
        let dir = dump_dir(&run);
        let bytes = std::fs::read(dir.join("dump.json")).expect("dump.json");
        let arena = Arena::new();
        let doc = parse(&bytes, &arena).expect("json");
        let header = |k: &str| doc.value.get(k).and_then(|n| n.value.as_str()).map(str::to_string);
        let text = String::from_utf8_lossy(&bytes);
        let summary_mode = if text.contains("\"md5\": \"0x") {
            SummaryMode::Xor
        } else if text.contains("\"md5\"") {
            SummaryMode::Md5
        } else {
            SummaryMode::Statistics
        };
        let task = if header("task").as_deref() == Some("tensor") { Task::Tensor } else { Task::Statistics };
        let pid: i64 = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("proc"))
            .expect("proc folder")
            .parse()
            .expect("pid");
        let options = WriterOptions {
            task,
            summary_mode,
            level: header("level").expect("level"),
            framework: header("framework").expect("framework"),
            dump_data_dir: header("dump_data_dir"),
            pid: Some(pid),
            extra_info: false,
            ..WriterOptions::default()
        };
        let Some(Json::Object(entries)) = doc.value.get("data").map(|d| &d.value) else { panic!("data") };
        let tensors = dir.join("dump_tensor_data");
        let entries: Vec<Entry> = entries.iter().map(|(name, node)| entry_from_json(name, node, &tensors)).collect();

        let tmp = tempfile::tempdir().expect("tempdir");
        let step: i64 = run.join("step0").exists().then_some(0).expect("step0");
        let ds = tmp.path().join("w");
        write_unit(&ds, Unit::new(step, "default", -1), options, entries);
        let out = tmp.path().join("x");
        cli::export(&ds, &out);
        let rel = dir.strip_prefix(&run).expect("inside the run");
        let exported = std::fs::read(out.join(rel).join("dump.json")).expect("exported dump.json");
        check_against_msprobe(&run.join(rel).join("dump.json"), &bytes, &exported);
        // The tensor files hold the same tensors msprobe saved.
        for f in files_below(&tensors) {
            let name = f.to_string_lossy();
            let want = read_tensor_file(&name, &std::fs::read(tensors.join(&f)).expect("read")).expect("msprobe .pt").0;
            let got = std::fs::read(out.join(rel).join("dump_tensor_data").join(&f)).expect("exported .pt");
            assert_eq!(read_tensor_file(&name, &got).expect("exported .pt").0, want, "{name}");
        }
        compared += 1;
    }
    if compared > 0 {
        eprintln!("{compared} msprobe tensor runs replayed through the writer");
    }
}

thread_local! {
    /// Mean/Norm values that differ from msprobe's within the tolerance, for the report line.
    static TOLERATED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The writer's dump.json against msprobe's: identical except that Mean and Norm may differ by
/// the documented tolerance (the writer accumulates in f64, torch in the tensor's precision).
fn check_against_msprobe(path: &Path, want: &[u8], got: &[u8]) {
    if want == got {
        eprintln!("{}: byte-identical", path.display());
        return;
    }
    let arena = Arena::new();
    let (w, g) = (parse(want, &arena).expect("msprobe json"), parse(got, &arena).expect("writer json"));
    let mut diffs = Vec::new();
    TOLERATED.with(|t| t.set(0));
    walk_pair(&w, &g, "$", None, &mut diffs);
    let tolerated = TOLERATED.with(|t| t.get());
    eprintln!("{}: identical but for {tolerated} Mean/Norm values, within tolerance", path.display());
    assert!(diffs.is_empty(), "{}: {} differences:\n{}", path.display(), diffs.len(), diffs.join("\n"));
}

fn walk_pair(w: &Node<'_>, g: &Node<'_>, at: &str, dtype: Option<&str>, diffs: &mut Vec<String>) {
    // The tensor's largest magnitude, from msprobe's own Max and Min.
    let stat = |k: &str| {
        w.value.get(k).and_then(|n| match &n.value {
            Json::Number(t) => t.parse::<f64>().ok(),
            _ => None,
        })
    };
    let magnitude = match (stat("Max"), stat("Min")) {
        (Some(a), Some(b)) => Some(a.abs().max(b.abs())),
        _ => None,
    };
    walk_pair_in(w, g, at, dtype, magnitude, diffs);
}

fn walk_pair_in(
    w: &Node<'_>,
    g: &Node<'_>,
    at: &str,
    dtype: Option<&str>,
    magnitude: Option<f64>,
    diffs: &mut Vec<String>,
) {
    match (&w.value, &g.value) {
        (Json::Object(a), Json::Object(b)) => {
            let keys_a: Vec<&str> = a.iter().map(|(k, _)| k.as_ref()).collect();
            let keys_b: Vec<&str> = b.iter().map(|(k, _)| k.as_ref()).collect();
            if keys_a != keys_b {
                diffs.push(format!("{at}: keys {keys_a:?} vs {keys_b:?}"));
                return;
            }
            let dtype = w.value.get("dtype").and_then(|d| d.value.as_str()).or(dtype);
            for ((k, x), (_, y)) in a.iter().zip(b.iter()) {
                if w.value.get("dtype").is_some() {
                    walk_pair_in(x, y, &format!("{at}.{k}"), dtype, magnitude, diffs);
                } else {
                    walk_pair(x, y, &format!("{at}.{k}"), dtype, diffs);
                }
            }
        }
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                walk_pair(x, y, &format!("{at}[{i}]"), dtype, diffs);
            }
        }
        (Json::Number(a), Json::Number(b)) if a != b => {
            let (x, y) = (a.parse::<f64>().unwrap_or(f64::NAN), b.parse::<f64>().unwrap_or(f64::NAN));
            // Units in the last place of the tensor's dtype (torch reduces float32 in float32).
            let eps = match dtype {
                Some("torch.bfloat16") => 2f64.powi(-8),
                Some("torch.float16") => 2f64.powi(-11),
                _ => 2f64.powi(-24),
            };
            let ok = if at.ends_with(".Norm") {
                // A sum of squares: no cancellation, a few ulps.
                (x - y).abs() <= 8.0 * eps * x.abs().max(y.abs())
            } else if at.ends_with(".Mean") {
                // A mean near zero cancels: torch's float32 sum errs by about 2^-24 * max|x| per
                // level of its cascade, which can be many ulps of the mean itself.
                (x - y).abs() <= 8.0 * eps * x.abs().max(y.abs()) + 64.0 * 2f64.powi(-24) * magnitude.unwrap_or(0.0)
            } else {
                false
            };
            if !ok {
                diffs.push(format!("{at}: msprobe {a}, writer {b}"));
            } else {
                TOLERATED.with(|t| t.set(t.get() + 1));
            }
        }
        _ => {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            write_compact(&mut a, w);
            write_compact(&mut b, g);
            if a != b {
                diffs.push(format!(
                    "{at}: msprobe {}, writer {}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
        }
    }
}

/// The `synthetic_training` example binary, built by `cargo test` (or built here if missing).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("examples").join(format!("synthetic_training{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--example", "synthetic_training", "--quiet"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the example failed");
    }
    bin
}

/// Kills of the example per test run, each after a different number of commits and a
/// different delay (a fixed-seed sequence, so a failure repeats).
const EXAMPLE_KILLS: u64 = 6;

#[test]
fn kill_9_of_the_example_at_many_points_leaves_whole_units_and_vacuum_cleans_up() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = tmp.path().join("run");
    let example = |steps: &str| {
        let mut command = std::process::Command::new(example_binary());
        command.arg(&ds).args(["--steps", steps, "--layers", "2", "--hidden", "64", "--seq", "16", "--batch", "1"]);
        command.args(["--task", "tensor"]);
        command
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    for kill in 0..EXAMPLE_KILLS {
        let (commits_first, delay_ms) = (next(4), next(40));
        let mut child = example("1000")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the example starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < commits_first {
            match lines.next() {
                Some(Ok(line)) if line.contains("committed") => seen += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // SIGKILL: no destructor, no flush, no cleanup runs.
        child.kill().expect("kill -9");
        let _ = child.wait();
        if !ds.join("_probelake/manifest.json").exists() {
            continue; // killed before its first commit: nothing is visible
        }
        // Files of the unit being written when the process died are invisible; vacuum removes
        // exactly those and leaves every named file.
        let units = assert_vacuum_leaves_only_named_files(&ds);
        assert!(!units.is_empty() || seen == 0, "kill {kill}: {seen} commits seen, none visible");
    }
    // The re-run over the same dataset succeeds, and what it wrote exports.
    let out = example("2").output().expect("the example runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_committed_units_whole(&ds);
    cli::export(&ds, &tmp.path().join("x"));
}
