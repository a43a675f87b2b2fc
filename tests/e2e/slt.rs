//! SQL behaviour pinned in `tests/slt/*.slt`: the sqllogictest format DataFusion uses (a
//! statement or query, then the rows it must give; `query error <regex>` pins a failure),
//! run in process through [`RunSession`] over synthesized runs, so no fixtures are needed.
//!
//! The session (read-only, as `probelake sql` without `--allow-write`) has three runs, made
//! once per test process with `probelake_synth` and imported with probelake:
//!
//! | run | what | steps | stages | ranks |
//! |---|---|---|---|---|
//! | `golden` (default schema) | the demo model, level L1 | 2, 10 | the 3 verl stages of the fixtures | 2 |
//! | `target` | `golden` with the last layer's attention scale off by 1 % | 2, 10 | same | 2 |
//! | `odd` | a 1-layer model at level mix whose attention scale overflows f32 (NaN and inf statistics), stage names that need percent-encoding | 1 | `eval rollout`, `ref=50%`, `naïve_update` | 11 |
//!
//! Every canned query is available as a variable (`control substitution on`, then
//! `${first_divergence}`, `${nan_inf}`, …, the text of `sql/<name>.sql`;
//! `${first_divergence_any}` is first_divergence.sql with threshold 0).
//!
//! Floats are printed rounded to 12 significant digits, NULL as `NULL`, `''` as `(empty)`.
//! To rewrite the expected results after a deliberate change, run
//! `PROBELAKE_SLT_COMPLETE=1 cargo test --test e2e slt::` and review the diff.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use probelake::format::Lake;
use probelake::msprobe::{import, ImportOptions, NoProgress};
use probelake::query::datafusion::arrow::array::{Array, ArrayRef, AsArray};
use probelake::query::datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use probelake::query::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use probelake::query::{QueryError, Run, RunSession};
use probelake::synth::{write_run, SynthLevel, SynthSpec};
use sqllogictest::{ColumnType, DBOutput};

/// The `.slt` files, each run by the test of the same name below.
const FILES: [&str; 6] = ["catalog", "partitions", "udfs", "read_only", "errors", "canned"];

#[test]
fn catalog() {
    run_file("catalog");
}

#[test]
fn partitions() {
    run_file("partitions");
}

#[test]
fn udfs() {
    run_file("udfs");
}

#[test]
fn read_only() {
    run_file("read_only");
}

#[test]
fn errors() {
    run_file("errors");
}

#[test]
fn canned() {
    run_file("canned");
}

#[test]
fn every_slt_file_has_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(slt_dir())
        .expect("tests/slt")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".slt").map(String::from))
        .collect();
    found.sort();
    let mut listed: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed, "add a #[test] and a FILES entry in tests/e2e/slt.rs for each tests/slt/*.slt");
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn slt_dir() -> PathBuf {
    repo().join("tests/slt")
}

/// Runs (or, with `PROBELAKE_SLT_COMPLETE=1`, rewrites) `tests/slt/NAME.slt`.
fn run_file(name: &str) {
    let lakes = lakes();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let runs = ["golden", "target", "odd"]
            .into_iter()
            .map(|n| Ok(Run::new(n, Lake::local(&lakes.join(n))?)))
            .collect::<Result<Vec<_>, probelake::format::FormatError>>()
            .expect("open runs");
        let session = Arc::new(RunSession::open(runs, false).await.expect("session"));
        let mut runner = sqllogictest::Runner::new(move || {
            let session = Arc::clone(&session);
            async move { Ok::<_, QueryError>(Probelake { session }) }
        });
        runner.with_column_validator(sqllogictest::strict_column_validator);
        for file in std::fs::read_dir(repo().join("sql")).expect("sql/").flatten() {
            let path = file.path();
            let (Some(stem), Ok(text)) = (path.file_stem().and_then(|s| s.to_str()), std::fs::read_to_string(&path))
            else {
                continue;
            };
            if stem == "first_divergence" {
                let any = text.replace("SELECT 0.5 AS threshold", "SELECT 0 AS threshold");
                assert_ne!(any, text, "sql/first_divergence.sql no longer says `SELECT 0.5 AS threshold`");
                runner.set_var("first_divergence_any".into(), any);
            }
            runner.set_var(stem.to_string(), text);
        }
        let path = slt_dir().join(format!("{name}.slt"));
        if std::env::var_os("PROBELAKE_SLT_COMPLETE").is_some_and(|v| v == "1") {
            runner
                .update_test_file(
                    &path,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::strict_column_validator,
                )
                .await
                .unwrap_or_else(|e| panic!("completing {}: {e}", path.display()));
        } else if let Err(e) = runner.run_file_async(&path).await {
            panic!(
                "{}\n(if the change is deliberate: PROBELAKE_SLT_COMPLETE=1 cargo test --test e2e slt::)",
                e.display(true)
            );
        }
    });
}

/// The three runs, synthesized and imported once per test process into the target dir's
/// scratch folder (made afresh by each process, left there for a look after a failure).
fn lakes() -> &'static Path {
    static LAKES: OnceLock<PathBuf> = OnceLock::new();
    LAKES.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slt-runs");
        let _ = std::fs::remove_dir_all(&root);
        let golden = SynthSpec { global_steps: vec![2, 10], ranks: 2, ..SynthSpec::demo() };
        let target = SynthSpec { attention_scale_bug: Some((1, 1.01)), ..golden.clone() };
        let odd = SynthSpec {
            layers: 1,
            width: 8,
            seq_len: 4,
            batch: 1,
            vocab: 16,
            global_steps: vec![1],
            stages: ["eval rollout", "ref=50%", "naïve_update"].map(String::from).to_vec(),
            ranks: 11,
            level: SynthLevel::Mix,
            attention_scale_bug: Some((0, 3e38)),
            ..SynthSpec::demo()
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        for (name, spec) in [("golden", golden), ("target", target), ("odd", odd)] {
            let src = root.join("msprobe").join(name);
            write_run(&spec, &src).expect("synthesize");
            let lake = Lake::local(&root.join("lake").join(name)).expect("lake");
            runtime.block_on(import(&src, &lake, &ImportOptions::default(), &NoProgress)).expect("import");
        }
        let _ = std::fs::remove_dir_all(root.join("msprobe"));
        root.join("lake")
    })
}

/// The session as sqllogictest's database.
struct Probelake {
    session: Arc<RunSession>,
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for Probelake {
    type Error = QueryError;
    type ColumnType = Column;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Column>, QueryError> {
        let Some(df) = self.session.sql(sql).await? else {
            return Ok(DBOutput::StatementComplete(0));
        };
        let types = df.schema().fields().iter().map(|f| Column::of(f.data_type())).collect();
        let mut rows = Vec::new();
        for batch in df.collect().await? {
            let cells: Vec<Vec<String>> = batch.columns().iter().map(cells).collect::<Result<_, QueryError>>()?;
            for r in 0..batch.num_rows() {
                rows.push(cells.iter().map(|c| c.get(r).cloned().unwrap_or_default()).collect());
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "probelake"
    }
}

/// A result column's type letter, as DataFusion's sqllogictest writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Column {
    /// `B`
    Boolean,
    /// `I`
    Integer,
    /// `R`
    Float,
    /// `T`
    Text,
    /// `?`: lists and anything else.
    Other,
}

impl Column {
    fn of(t: &DataType) -> Self {
        match t {
            DataType::Boolean => Column::Boolean,
            t if t.is_integer() => Column::Integer,
            t if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) => Column::Float,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Column::Text,
            DataType::Dictionary(_, v) => Column::of(v),
            _ => Column::Other,
        }
    }
}

impl ColumnType for Column {
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'B' => Column::Boolean,
            'I' => Column::Integer,
            'R' => Column::Float,
            'T' => Column::Text,
            _ => Column::Other,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Column::Boolean => 'B',
            Column::Integer => 'I',
            Column::Float => 'R',
            Column::Text => 'T',
            Column::Other => '?',
        }
    }
}

/// A column's values as sqllogictest text.
fn cells(array: &ArrayRef) -> Result<Vec<String>, QueryError> {
    let float = |v: f64| {
        if v.is_finite() {
            // 12 significant digits: the last bits of a sum depend on the order partitions finish in.
            let rounded: f64 = format!("{v:.11e}").parse().unwrap_or(v);
            format!("{rounded}")
        } else {
            format!("{v}")
        }
    };
    let out = match array.data_type() {
        DataType::Float64 => {
            array.as_primitive::<Float64Type>().iter().map(|v| v.map_or("NULL".into(), float)).collect()
        }
        DataType::Float32 => {
            array.as_primitive::<Float32Type>().iter().map(|v| v.map_or("NULL".into(), |v| float(v.into()))).collect()
        }
        _ => {
            let options = FormatOptions::default().with_null("NULL");
            let formatter = ArrayFormatter::try_new(array.as_ref(), &options)
                .map_err(probelake::query::datafusion::error::DataFusionError::from)?;
            (0..array.len())
                .map(|i| {
                    let text = formatter.value(i).to_string();
                    if text.is_empty() && array.is_valid(i) {
                        "(empty)".to_string()
                    } else {
                        text
                    }
                })
                .collect()
        }
    };
    Ok(out)
}
