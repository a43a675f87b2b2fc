//! `probelake_compare` against what `msprobe compare` (mindstudio-probe 26.2) wrote for
//! pairs of the real runs in `tests/data/fixtures` (`compare-ref/`): every cell must match.

use std::path::{Path, PathBuf};

use probelake_compare::{compare_sql, compare_unit, CompareOptions, UnitComparison};
use probelake_format::{CommitRecord, Lake};
use probelake_msprobe::{import, NoProgress};
use probelake_query::datafusion::arrow::array::AsArray;
use probelake_query::{Run, RunSession};

/// `compare-ref` folder → (target run, golden run, step, stage, [(rank, csv file)]).
/// Units of a `proc*` layout have rank -1.
type Case = (&'static str, &'static str, &'static str, i64, &'static str, &'static [(i64, &'static str)]);

const CASES: &[Case] = &[
    (
        "verl-l1-stats__step_1__actor_compute_log_prob",
        "verl-l1-stats-attnbug",
        "verl-l1-stats-base",
        1,
        "actor_compute_log_prob",
        &[(-1, "compare_result.csv")],
    ),
    (
        "verl-l1-stats__step_1__actor_update",
        "verl-l1-stats-attnbug",
        "verl-l1-stats-base",
        1,
        "actor_update",
        &[(-1, "compare_result.csv")],
    ),
    (
        "verl-l1-stats__step_1__ref_compute_log_prob",
        "verl-l1-stats-attnbug",
        "verl-l1-stats-base",
        1,
        "ref_compute_log_prob",
        &[(-1, "compare_result.csv")],
    ),
    (
        "plain-mix-stats-2rank__bf16_vs_fp32__step0",
        "plain-mix-stats-2rank-bf16",
        "plain-mix-stats-2rank",
        0,
        "default",
        &[(0, "compare_result_rank0.csv"), (1, "compare_result_rank1.csv")],
    ),
    (
        "plain-l1-tensor__attnbug_vs_base",
        "plain-l1-tensor-attnbug",
        "plain-l1-tensor-base",
        0,
        "default",
        &[(-1, "compare_result.csv")],
    ),
    (
        "plain-l1-md5-bf16__nan_vs_base",
        "plain-l1-md5-bf16-nan",
        "plain-l1-md5-bf16-base",
        0,
        "default",
        &[(-1, "compare_result.csv")],
    ),
];

/// An RFC 4180 reader for what Python's csv module writes (quoted fields may hold `,`, `"`
/// doubled, and newlines).
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                c => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                any = false;
            }
            c => field.push(c),
        }
    }
    if any {
        row.push(field);
        rows.push(row);
    }
    rows
}

fn same_cell(column: &str, ours: &str, theirs: &str) -> bool {
    let (ours, theirs) = (ours.strip_prefix(' ').unwrap_or(ours), theirs.strip_prefix(' ').unwrap_or(theirs));
    if ours == theirs {
        return true;
    }
    // BLAS sums in another order than a plain loop: allow the last bits of these two.
    if matches!(column, "Cosine" | "EucDist") {
        if let (Ok(a), Ok(b)) = (ours.parse::<f64>(), theirs.parse::<f64>()) {
            return (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300);
        }
    }
    false
}

/// The first difference between our table and msprobe's CSV, if any.
fn first_difference(ours: &UnitComparison, reference: &[Vec<String>]) -> Option<String> {
    let mut buf = Vec::new();
    ours.write_csv(&mut buf).ok()?;
    first_csv_difference(&parse_csv(&String::from_utf8_lossy(&buf)), reference)
}

/// The first cell where a CSV we wrote (`written`, parsed) differs from msprobe's, if any.
pub fn first_csv_difference(written: &[Vec<String>], reference: &[Vec<String>]) -> Option<String> {
    let (ref_header, ref_rows) = reference.split_first()?;
    let Some((header, rows)) = written.split_first() else { return Some("we wrote nothing".into()) };
    if header != ref_header {
        return Some(format!("header differs:\n ours   {header:?}\n theirs {ref_header:?}"));
    }
    for (i, (a, b)) in rows.iter().zip(ref_rows).enumerate() {
        for (j, column) in ref_header.iter().enumerate() {
            let (x, y) = (a.get(j).map_or("<missing>", String::as_str), b.get(j).map_or("<missing>", String::as_str));
            if !same_cell(column, x, y) {
                return Some(format!(
                    "row {} ({}), column {column}: ours {x:?}, msprobe {y:?}",
                    i + 1,
                    b.first().map_or("", String::as_str)
                ));
            }
        }
    }
    if written.len() != reference.len() {
        return Some(format!("{} rows, msprobe wrote {}", written.len() - 1, reference.len() - 1));
    }
    None
}

async fn imported(runs: &Path, name: &str, tmp: &Path) -> (Lake, Vec<CommitRecord>) {
    let dir = tmp.join(name);
    let lake = Lake::local(&dir).expect("lake");
    if !dir.join("_probelake").exists() {
        import(&runs.join(name), &lake, &Default::default(), &NoProgress).await.expect("import");
    }
    let units = lake.units().await.expect("units");
    (lake, units)
}

fn unit<'a>(units: &'a [CommitRecord], step: i64, stage: &str, rank: i64) -> &'a CommitRecord {
    units
        .iter()
        .find(|u| u.unit.step == step && u.unit.stage == stage && u.unit.rank == rank)
        .unwrap_or_else(|| panic!("no unit step={step} stage={stage} rank={rank}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn compare_matches_msprobe_csv() {
    let Some(root) = crate::fixtures::root() else { return };
    let refs = root.join("compare-ref");
    if !refs.is_dir() {
        eprintln!("skipping: {} not found", refs.display());
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = root.join("runs");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (folder, target, golden, step, stage, files) in CASES {
        let (tl, tu) = imported(&runs, target, tmp.path()).await;
        let (gl, gu) = imported(&runs, golden, tmp.path()).await;
        for (rank, file) in *files {
            let path: PathBuf = refs.join(folder).join(file);
            let text = std::fs::read_to_string(&path).expect("reference csv");
            let result = compare_unit(
                &tl,
                unit(&tu, *step, stage, *rank),
                &gl,
                unit(&gu, *step, stage, *rank),
                &CompareOptions::default(),
            )
            .await
            .expect("compare");
            checked += 1;
            failures.extend(msprobe_difference(&result, folder, file, &text));
        }
    }
    assert!(failures.is_empty(), "{} of {checked} CSVs differ:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(checked, 7);
}

/// Where `result` differs from msprobe's CSV `text` (`folder/file` of `compare-ref`): outside
/// tensor mode (BLAS order) the file itself must be byte-identical, in every mode the cells.
fn msprobe_difference(result: &UnitComparison, folder: &str, file: &str, text: &str) -> Option<String> {
    let reference = parse_csv(text);
    if let Some(diff) = first_difference(result, &reference) {
        return Some(format!("{folder}/{file}: {diff}"));
    }
    let mut bytes = Vec::new();
    result.write_csv(&mut bytes).expect("write csv");
    (result.mode != probelake_compare::CompareMode::Tensor && bytes != text.as_bytes())
        .then(|| format!("{folder}/{file}: same cells, but the CSV text differs (quoting?)"))
}

/// The same pairs with the runs' msprobe folders read in place, not imported: each unit pair is
/// read into memory and joined there (`RunPair::open_in_place`, `Comparison::of_runs`).
#[tokio::test(flavor = "multi_thread")]
async fn compare_in_memory_matches_msprobe_csv() {
    use probelake_compare::runs::pairing::UnitChoice;
    use probelake_compare::runs::{RunPair, RunSource};
    use probelake_compare::Comparison;

    let Some(root) = crate::fixtures::root() else { return };
    let (refs, runs) = (root.join("compare-ref"), root.join("runs"));
    let mut failures = Vec::new();
    let mut checked = 0;
    for (folder, target, golden, step, stage, files) in CASES {
        let (t, g) = (runs.join(target), runs.join(golden));
        let opened = RunPair::open_in_place(&t.to_string_lossy(), &g.to_string_lossy(), &Default::default())
            .await
            .expect("open");
        assert!(matches!(opened.target.source, RunSource::Dumps(_)), "{target} read in place");
        let comparison = Comparison::of_runs(&opened.target, &opened.golden, CompareOptions::default());
        let pairing = opened.pair(&UnitChoice::default()).expect("pairs");
        for (rank, file) in *files {
            let pair = pairing
                .pairs
                .iter()
                .find(|p| p.target.unit.step == *step && p.target.unit.stage == *stage && p.target.unit.rank == *rank)
                .unwrap_or_else(|| panic!("{folder}: no pair for rank {rank}"));
            let result = comparison.unit(pair.target, pair.golden).await.expect("compare");
            let text = std::fs::read_to_string(refs.join(folder).join(file)).expect("reference csv");
            checked += 1;
            failures.extend(msprobe_difference(&result, folder, file, &text));
        }
    }
    assert!(failures.is_empty(), "{} of {checked} CSVs differ:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(checked, 7);
}

/// Synthesized runs of every task (statistics, md5, tensor) at level mix, two ranks, steps and
/// stages, the target with the attention bug: every unit pair read in place gives the CSV the same pair
/// gives from the imported datasets, byte for byte.
#[tokio::test(flavor = "multi_thread")]
async fn in_memory_and_dataset_comparisons_agree() {
    use probelake_compare::runs::pairing::UnitChoice;
    use probelake_compare::runs::RunPair;
    use probelake_compare::Comparison;
    use probelake_synth::{write_run, SynthLevel, SynthSpec, SynthTask as Task};

    let tmp = tempfile::tempdir().expect("tempdir");
    for task in [Task::Statistics, Task::Md5, Task::Tensor] {
        let dir = tmp.path().join(format!("{task:?}"));
        let mut trees = Vec::new();
        for (name, bug) in [("bug", Some((1, 1.01))), ("base", None)] {
            let spec =
                SynthSpec { ranks: 2, task, level: SynthLevel::Mix, attention_scale_bug: bug, ..SynthSpec::demo() };
            let src = dir.join(format!("{name}-tree"));
            write_run(&spec, &src).expect("synth");
            trees.push(src.to_string_lossy().into_owned());
        }
        let in_place = RunPair::open_in_place(&trees[0], &trees[1], &Default::default()).await.expect("open");
        let imported = RunPair::open(&trees[0], &trees[1], &Default::default()).await.expect("import");
        let choice = UnitChoice::default();
        let (a, b) = (in_place.pair(&choice).expect("pairs"), imported.pair(&choice).expect("pairs"));
        assert_eq!(a.pairs.len(), b.pairs.len(), "{task:?}");
        assert!(a.pairs.len() >= 12, "{task:?}: {} pairs", a.pairs.len());
        let opts = CompareOptions::default();
        let in_memory = Comparison::of_runs(&in_place.target, &in_place.golden, opts.clone());
        let from_datasets = Comparison::of_runs(&imported.target, &imported.golden, opts);
        let mut errors = 0;
        for (p, q) in a.pairs.iter().zip(&b.pairs) {
            assert_eq!((&p.target.unit, &p.golden.unit), (&q.target.unit, &q.golden.unit));
            let x = in_memory.unit(p.target, p.golden).await.expect("in memory");
            let y = from_datasets.unit(q.target, q.golden).await.expect("from datasets");
            let csv = |table: &UnitComparison| {
                let mut out = Vec::new();
                table.write_csv(&mut out).expect("csv");
                out
            };
            assert!(x.rows.len() > 10, "{task:?} {}: {} rows", p.target.unit, x.rows.len());
            assert!(csv(&x) == csv(&y), "{task:?} {}: the CSVs differ", p.target.unit);
            errors += x.rows_with_result("error");
        }
        assert!(errors > 0 || task == Task::Md5, "{task:?}: the bug gives rows with Result `error`");
    }
}

/// The SQL `docs/compare-internals.md` shows (`compare_sql`) runs in a plain `RunSession` and yields
/// msprobe's rows: one per CSV row, matched exactly where the CSV names a Bench row.
#[tokio::test(flavor = "multi_thread")]
async fn documented_compare_sql_yields_msprobe_rows() {
    let Some(root) = crate::fixtures::root() else { return };
    let refs = root.join("compare-ref");
    if !refs.is_dir() {
        eprintln!("skipping: {} not found", refs.display());
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = root.join("runs");
    let (folder, target, golden, step, stage, files) = &CASES[0];
    let (tl, tu) = imported(&runs, target, tmp.path()).await;
    let (gl, _) = imported(&runs, golden, tmp.path()).await;
    let (rank, file) = files[0];
    let reference = parse_csv(&std::fs::read_to_string(refs.join(folder).join(file)).expect("reference csv"));
    let session = RunSession::open(vec![Run::new("target", tl), Run::new("golden", gl)], false).await.expect("session");
    let u = &unit(&tu, *step, stage, rank).unit;
    let batches = session.collect(&compare_sql(u, u)).await.expect("compare sql");
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, reference.len() - 1);
    let matched: usize = batches
        .iter()
        .map(|b| {
            let m = b.column_by_name("matched").expect("matched column");
            m.as_boolean().true_count()
        })
        .sum();
    let bench_named = reference[1..].iter().filter(|r| r[1] != "N/A").count();
    assert_eq!(matched, bench_named);
}

/// A dump.json (as `json.dump(indent=1)` writes it) with an embedding whose int64 input has
/// integer Max/Min and null Mean/Norm, a layer norm with float statistics and, when
/// `scalar` is given, a `Tensor.__mul__` with that scalar argument.
fn dump_with_int_stats(scalar: Option<&str>) -> String {
    let tensor = |dtype: &str, max: &str, min: &str, mean: &str, norm: &str| {
        format!(
            "{{\n     \"type\": \"torch.Tensor\",\n     \"dtype\": \"{dtype}\",\n     \"shape\": [\n      2\n     ],\n     \
             \"Max\": {max},\n     \"Min\": {min},\n     \"Mean\": {mean},\n     \"Norm\": {norm},\n     \
             \"requires_grad\": false\n    }}"
        )
    };
    let entry = |name: &str, input: String, output: String| {
        format!(
            "  \"{name}\": {{\n   \"input_args\": [\n    {input}\n   ],\n   \"input_kwargs\": {{}},\n   \
             \"output\": [\n    {output}\n   ]\n  }}"
        )
    };
    let floats = || tensor("torch.float32", "4.5", "-2.25", "0.125", "22.5");
    let mut entries = vec![
        entry("Module.embed.Embedding.forward.0", tensor("torch.int64", "57", "12", "null", "null"), floats()),
        entry("Module.ln.LayerNorm.forward.0", floats(), floats()),
    ];
    if let Some(value) = scalar {
        let arg = format!("{{\n     \"type\": \"str\",\n     \"value\": \"{value}\"\n    }}");
        entries.push(entry("Tensor.__mul__.0.forward", arg, floats()));
    }
    format!(
        "{{\n \"task\": \"statistics\",\n \"level\": \"L0\",\n \"framework\": \"pytorch\",\n \"dump_data_dir\": null,\n \
         \"data\": {{\n{}\n }}\n}}",
        entries.join(",\n")
    )
}

/// pandas types msprobe's statistics columns (see `table/columns.rs` of probelake-compare): an integer Max prints
/// as `57.0` when its column holds floats and no string — what msprobe 26.2 wrote for a
/// module-level (L0) dump — and stays `57` when a scalar argument puts a string there.
#[tokio::test(flavor = "multi_thread")]
async fn integer_statistics_print_as_pandas_types_their_column() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (scalar, max) in [(None, "57.0"), (Some("mean"), "57")] {
        let dir = tmp.path().join(format!("run-{}", scalar.unwrap_or("none"))).join("step0").join("rank0");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("dump.json"), dump_with_int_stats(scalar)).expect("write");
        let lake_dir = tmp.path().join(format!("lake-{}", scalar.unwrap_or("none")));
        let lake = Lake::local(&lake_dir).expect("lake");
        import(dir.parent().expect("step").parent().expect("run"), &lake, &Default::default(), &NoProgress)
            .await
            .expect("import");
        let units = lake.units().await.expect("units");
        let u = unit(&units, 0, "default", 0);
        let result = compare_unit(&lake, u, &lake, u, &CompareOptions::default()).await.expect("compare");
        let col = |name: &str| result.header.iter().position(|h| h == name).expect("column");
        let row = result.rows.row(0).expect("a row");
        let cell = |name: &str| row.get(col(name)).expect("cell");
        assert_eq!(cell("NPU Name"), "Module.embed.Embedding.forward.0.input.0");
        assert_eq!((cell("NPU max"), cell("Bench max")), (max, max), "{row:?}");
        assert_eq!(cell("NPU mean"), "None");
        assert_eq!(cell("Max diff"), "0");
    }
}

/// A [`Comparison`] plans the first unit pair of each shape and re-binds those plans to the
/// files of the pairs after it; every pair's table must be the one its own plans give.
#[tokio::test(flavor = "multi_thread")]
async fn reused_plans_give_each_unit_pair_its_own_rows() {
    use probelake_compare::Comparison;
    use probelake_synth::{write_run, SynthSpec};

    let tmp = tempfile::tempdir().expect("tempdir");
    let mut lakes = Vec::new();
    for (name, bug) in [("bug", Some((1, 1.01))), ("base", None)] {
        let spec = SynthSpec { ranks: 2, attention_scale_bug: bug, ..SynthSpec::demo() };
        let src = tmp.path().join(format!("{name}-tree"));
        write_run(&spec, &src).expect("synth");
        let lake = Lake::local(&tmp.path().join(name)).expect("lake");
        import(&src, &lake, &Default::default(), &NoProgress).await.expect("import");
        lakes.push(lake);
    }
    let (target, golden) = (&lakes[0], &lakes[1]);
    let (t_units, g_units) = (target.units().await.expect("units"), golden.units().await.expect("units"));
    assert_eq!(t_units.len(), 12, "2 steps x 3 stages x 2 ranks");
    let csv = |table: &UnitComparison| {
        let mut out = Vec::new();
        table.write_csv(&mut out).expect("csv");
        out
    };
    let comparison = Comparison::new(target.clone(), golden.clone(), CompareOptions::default());
    for (t, g) in t_units.iter().zip(&g_units) {
        assert_eq!(t.unit, g.unit);
        let reused = comparison.unit(t, g).await.expect("compare");
        let own = compare_unit(target, t, golden, g, &CompareOptions::default()).await.expect("compare");
        assert!(reused.rows.len() > 10, "{}: {} rows", t.unit, reused.rows.len());
        assert_eq!(csv(&reused), csv(&own), "{}", t.unit);
    }
    let planned = comparison.pairs_planned();
    assert!((1..t_units.len()).contains(&planned), "{planned} of {} pairs planned", t_units.len());
}

/// A planned unit written as CSV is built a few thousand rows at a time on every core; the
/// file must be the one the whole table gives, whatever the chunks.
#[tokio::test(flavor = "multi_thread")]
async fn streamed_csv_is_the_whole_tables_csv() {
    use probelake_compare::{CompareError, Comparison};
    use probelake_synth::{write_run, SynthSpec};

    let tmp = tempfile::tempdir().expect("tempdir");
    let mut lakes = Vec::new();
    for (name, bug) in [("bug", Some((3, 1.01))), ("base", None)] {
        let spec = SynthSpec {
            layers: 128,
            global_steps: vec![1],
            stages: vec!["actor_update".into()],
            attention_scale_bug: bug,
            ..SynthSpec::demo()
        };
        let src = tmp.path().join(format!("{name}-tree"));
        write_run(&spec, &src).expect("synth");
        let lake = Lake::local(&tmp.path().join(name)).expect("lake");
        import(&src, &lake, &Default::default(), &NoProgress).await.expect("import");
        lakes.push(lake);
    }
    let (target, golden) = (&lakes[0], &lakes[1]);
    let (t, g) = (&target.units().await.expect("units")[0], &golden.units().await.expect("units")[0]);
    let comparison = Comparison::new(target.clone(), golden.clone(), CompareOptions::default());
    let whole = comparison.unit(t, g).await.expect("compare");
    // Several chunks of 4096 rows for each of the two cores CI has.
    assert!(whole.rows.len() > 4 * 4096, "{} rows", whole.rows.len());
    let mut expected = Vec::new();
    whole.write_csv(&mut expected).expect("csv");

    let planned = comparison.plan_unit(t, g).await.expect("plan");
    assert_eq!((planned.header(), planned.unit()), (whole.header.as_slice(), &whole.unit));
    let mut streamed = Vec::new();
    let counts = planned.write_csv(&mut streamed).expect("csv");
    assert!(streamed == expected, "streamed CSV differs from the whole table's");
    let result = whole.header.iter().position(|h| h == "Result").expect("Result column");
    let errors = whole.rows.iter().filter(|r| r.get(result) == Some("error")).count();
    assert_eq!((counts.rows, counts.errors), (whole.rows.len(), errors));
    assert_eq!(whole.rows_with_result("error"), errors);
    assert!(errors > 0, "the bug gives rows with Result `error`");

    // A writer that fails part way stops the building with its error.
    struct FullAfter(usize);
    impl std::io::Write for FullAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    match planned.write_csv(&mut FullAfter(expected.len() / 2)) {
        Err(CompareError::Write(e)) => assert_eq!(e.to_string(), "disk full"),
        other => panic!("expected the writer's error, got {other:?}"),
    }
    let whole_again = planned.collect().expect("collect");
    assert_eq!(whole_again.rows, whole.rows);
}
