//! `probelake sql` over real and synthesized runs: counts, typing, pruning, the canned
//! queries, the first-divergence acceptance case and the read-only guard.

use std::path::{Path, PathBuf};

use crate::cli;
use crate::fixtures::root;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn sql(args: &[&str]) -> String {
    let out = cli::ok(std::iter::once("sql").chain(args.iter().copied()));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A synthesized base run and a bug run, imported.
fn demo_pair(tmp: &Path) -> (PathBuf, PathBuf) {
    let out = cli::ok([Path::new("demo"), tmp, Path::new("-q")]);
    assert!(out.status.success());
    (tmp.join("lake/base"), tmp.join("lake/attnbug"))
}

#[test]
fn counts_types_and_ordering() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    let base = base.to_string_lossy().into_owned();
    let info = String::from_utf8_lossy(&cli::ok(["info", &base]).stdout).into_owned();
    let leaves: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("leaves in info");
    let count = sql(&["--run", &format!("a={base}"), "-c", "SELECT count(*) AS n FROM dump", "--format", "csv"]);
    assert_eq!(count.lines().nth(1), Some(leaves.to_string().as_str()), "{count}");
    let steps = sql(&[&base, "-c", "SELECT DISTINCT step FROM dump ORDER BY step", "--format", "csv"]);
    assert_eq!(steps, "step\n1\n2\n");
    let types = sql(&[
        &base,
        "-c",
        "SELECT arrow_typeof(step) AS s, arrow_typeof(rank) AS r, arrow_typeof(stage) AS g FROM dump LIMIT 1",
        "--format",
        "csv",
    ]);
    assert_eq!(types.lines().nth(1), Some("Int64,Int64,Utf8"), "{types}");
}

/// The rows of a CSV text, read back by arrow's CSV reader (quotes, embedded commas and
/// newlines resolved), every column as text.
fn read_csv(text: &str) -> Vec<probelake::query::datafusion::arrow::record_batch::RecordBatch> {
    use probelake::query::datafusion::arrow::csv::reader::{Format, ReaderBuilder};
    use probelake::query::datafusion::arrow::datatypes::{DataType, Field, Schema};
    let format = Format::default().with_header(true);
    let (inferred, _) = format.infer_schema(std::io::Cursor::new(text), None).expect("a CSV header");
    let as_text: Vec<Field> = inferred.fields().iter().map(|f| Field::new(f.name(), DataType::Utf8, true)).collect();
    let reader = ReaderBuilder::new(std::sync::Arc::new(Schema::new(as_text)))
        .with_format(format)
        .build(std::io::Cursor::new(text))
        .expect("a CSV reader");
    reader.collect::<Result<Vec<_>, _>>().expect("the CSV reads back")
}

#[test]
fn every_table_writes_as_csv_with_lists_as_the_table_shows_them() {
    use probelake::query::datafusion::arrow::array::AsArray;
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("tree");
    // Tensors and modules, so that every table has rows and every list column values.
    let synth = ["--layout", "msprobe", "--steps", "1", "--layers", "1", "--level", "mix", "--task", "tensor", "-q"];
    cli::ok([Path::new("synth"), &src].into_iter().map(Path::as_os_str).chain(synth.iter().map(|a| a.as_ref())));
    let ds = tmp.path().join("ds");
    cli::import(&src, &ds);
    let ds = ds.to_string_lossy().into_owned();
    for table in ["dump", "stack", "construct", "tensor", "source"] {
        let count = sql(&[&ds, "-c", &format!("SELECT count(*) AS n FROM {table}"), "--format", "csv"]);
        let rows: usize = count.lines().nth(1).and_then(|n| n.parse().ok()).expect("a count");
        assert!(rows > 0, "{table} has no rows to write");
        let csv = sql(&[&ds, "-c", &format!("SELECT * FROM {table}"), "--format", "csv"]);
        let read: usize = read_csv(&csv).iter().map(|b| b.num_rows()).sum();
        assert_eq!(read, rows, "{table}");
    }
    // A shape of several dimensions, in CSV and in the table format: the same `[2, 8]` text.
    for (table, key) in [("dump", "seq, leaf"), ("tensor", "data_name")] {
        let query = format!(
            "SELECT shape FROM {table} WHERE cardinality(shape) >= 2 ORDER BY step, stage, rank, {key} LIMIT 1"
        );
        let batches = read_csv(&sql(&[&ds, "-c", &query, "--format", "csv"]));
        let cell = batches[0].column(0).as_string::<i32>().value(0).to_string();
        let dims = cell.strip_prefix('[').and_then(|c| c.strip_suffix(']')).expect("a bracketed list");
        assert!(dims.split(", ").all(|d| d.parse::<u64>().is_ok()) && dims.contains(", "), "{table}: {cell}");
        let shown = sql(&[&ds, "-c", &query]);
        assert!(shown.contains(&format!("| {cell} |")), "{table}: {cell} not in\n{shown}");
    }
    // A list of strings (with commas and quotes of its own) reads back as the table shows it.
    let query = "SELECT frames FROM stack WHERE cardinality(frames) > 0 ORDER BY step, stage, rank, name LIMIT 1";
    let frames = read_csv(&sql(&[&ds, "-c", query, "--format", "csv"]));
    let cell = frames[0].column(0).as_string::<i32>().value(0).to_string();
    assert!(cell.starts_with("[File ") && cell.ends_with(']'), "{cell}");
    let shown = sql(&[&ds, "-c", query, "--maxrows", "0"]);
    let first_line = cell.lines().next().expect("a line");
    assert!(shown.contains(first_line), "{first_line} not in\n{shown}");
}

/// `probelake sql … | head`: the reader leaving early is no error, in every format.
#[test]
fn a_reader_that_stops_early_is_no_error() {
    use std::io::Read;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    for format in ["table", "csv", "json", "ndjson"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_probelake"))
            .arg("sql")
            .args([&*base.to_string_lossy(), "-c", "SELECT * FROM dump", "--maxrows", "0", "--format", format])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("probelake starts");
        let mut head = [0u8; 100];
        child.stdout.take().expect("stdout").read_exact(&mut head).expect("the first bytes");
        // The pipe closes here, with most of the output (far more than a pipe buffer) unread.
        let out = child.wait_with_output().expect("probelake ends");
        assert_eq!(out.status.code(), Some(0), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn stage_filter_prunes_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    let base = base.to_string_lossy().into_owned();
    // max(seq), not count(*): row counts come from the commit records, and a count opens no file.
    let plan =
        sql(&[&base, "-c", "EXPLAIN ANALYZE SELECT max(seq) FROM dump WHERE stage = 'actor_update'", "--maxrows", "0"]);
    assert!(plan.contains("stage=actor_update"), "{plan}");
    assert!(!plan.contains("stage=ref_compute_log_prob"), "pruning did not happen:\n{plan}");
    let all = sql(&[&base, "-c", "EXPLAIN ANALYZE SELECT max(seq) FROM dump", "--maxrows", "0"]);
    // One of the three stages' files, of every stage's.
    let (pruned, total) = (files_opened(&plan), files_opened(&all));
    assert!(pruned > 0 && pruned * 3 == total, "files opened: {pruned} of {total}\n{plan}\n{all}");
}

/// The `files_opened=N` metric of an EXPLAIN ANALYZE.
fn files_opened(plan: &str) -> usize {
    metric(plan, "files_opened").parse().expect("a count")
}

/// Scans follow the session's Parquet settings: off by default (page index, bloom filters,
/// filter pushdown), and `SET` turns them on for the following statements.
#[test]
fn scans_follow_the_parquet_settings() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    let base = base.to_string_lossy().into_owned();
    let explain = |set: &str| {
        let query = format!("{set} EXPLAIN ANALYZE SELECT max(seq) FROM dump WHERE seq < 5");
        sql(&[&base, "-c", &query, "--maxrows", "0"])
    };
    let defaults = explain("");
    assert_eq!(metric(&defaults, "page_index_rows_pruned"), "0", "{defaults}");
    assert_eq!(metric(&defaults, "pushdown_rows_pruned"), "0", "{defaults}");
    let page_index = explain("SET datafusion.execution.parquet.enable_page_index = true;");
    assert_ne!(metric(&page_index, "page_index_rows_pruned"), "0", "{page_index}");
    let pushdown = explain("SET datafusion.execution.parquet.pushdown_filters = true;");
    assert_ne!(metric(&pushdown, "pushdown_rows_pruned"), "0", "{pushdown}");
}

/// The leading number of the first value of metric `name` in an EXPLAIN ANALYZE (`39.07` of
/// `39.07 K`; `0` of `0 total → 0 matched`, the rows a page index was consulted for).
fn metric<'p>(plan: &'p str, name: &str) -> &'p str {
    let key = format!("{name}=");
    let at = plan.find(&key).unwrap_or_else(|| panic!("{name} in the plan:\n{plan}")) + key.len();
    plan[at..].split([' ', ',', ']']).next().unwrap_or_default()
}

#[test]
fn writes_are_refused_without_allow_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    let base = base.to_string_lossy().into_owned();
    let target = tmp.path().join("copy.parquet");
    let statements = [
        format!("COPY (SELECT 1) TO '{}'", target.display()),
        format!("CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '{}'", tmp.path().display()),
        "INSERT INTO dump SELECT * FROM dump".to_string(),
    ];
    for statement in &statements {
        let out = cli::probelake(["sql", &base, "-c", statement]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{statement}: {err}");
        assert!(
            err.contains("--allow-write") || err.contains("not supported") || err.contains("read-only"),
            "{statement}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        // The refusal wraps DataFusion's own planning error; its prefix is said once.
        assert_eq!(err.matches("Error during planning").count(), 1, "{statement}: {err}");
    }
    assert!(!target.exists());
    cli::ok(["sql", &base, "--allow-write", "-c", &statements[0]]);
    assert!(target.exists());
}

#[test]
fn sql_errors_name_the_position() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = demo_pair(tmp.path());
    let out = cli::probelake(["sql", &base.to_string_lossy(), "-c", "SELEC * FROM dump"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Line: 1") || err.contains("line 1"), "{err}");
    let out = cli::probelake(["sql", &base.to_string_lossy(), "-c", "SELECT nope FROM dump"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn canned_queries_run_on_the_demo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, bug) = demo_pair(tmp.path());
    let (base, bug) = (base.to_string_lossy().into_owned(), bug.to_string_lossy().into_owned());
    for file in std::fs::read_dir(repo("sql")).expect("sql/").flatten() {
        let path = file.path();
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("-- "), "{} must start with a comment saying what it answers", path.display());
        cli::ok([
            "sql",
            "--run",
            &format!("target={bug}"),
            "--run",
            &format!("golden={base}"),
            "-f",
            &path.to_string_lossy(),
        ]);
    }
}

fn first_divergence(target: &Path, golden: &Path, threshold: &str) -> String {
    let text = std::fs::read_to_string(repo("sql/first_divergence.sql")).expect("read");
    let text = text.replace("SELECT 0.5 AS threshold", &format!("SELECT {threshold} AS threshold"));
    sql(&[
        "--run",
        &format!("target={}", target.display()),
        "--run",
        &format!("golden={}", golden.display()),
        "-c",
        &text,
        "--format",
        "csv",
    ])
}

#[test]
fn first_divergence_on_the_fixture_runs() {
    let Some(fixtures) = root() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bug, base) = (tmp.path().join("bug"), tmp.path().join("base"));
    cli::import(&fixtures.join("runs/verl-l1-stats-attnbug"), &bug);
    cli::import(&fixtures.join("runs/verl-l1-stats-base"), &base);
    let pick = |csv: &str, stage: &str| -> Option<String> {
        csv.lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&"1") && f.get(1) == Some(&stage))
            .and_then(|f| f.get(3).map(|s| s.to_string()))
    };
    let any = first_divergence(&bug, &base, "0");
    let rule = first_divergence(&bug, &base, "0.5");
    for stage in ["actor_compute_log_prob", "actor_update"] {
        assert_eq!(pick(&any, stage).as_deref(), Some("Tensor.__mul__.1.forward"), "{any}");
        assert_eq!(pick(&rule, stage).as_deref(), Some("Functional.layer_norm.3.forward"), "{rule}");
    }
    assert_eq!(pick(&any, "ref_compute_log_prob"), None, "{any}");
    assert_eq!(pick(&rule, "ref_compute_log_prob"), None, "{rule}");
}

/// A folder holding `ds`, a dataset of one small synthesized unit.
fn one_unit_dataset() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    let synth = ["synth", src.to_str().expect("utf-8 path"), "--layers", "1", "--steps", "1", "--ranks", "1", "-q"];
    cli::ok(synth);
    cli::import(&src, &tmp.path().join("ds"));
    tmp
}

/// Ctrl-C at the interactive prompt cancels the running statement and the prompt goes on: the
/// next statement runs and end of input exits 0 (before, the whole program ended).
#[test]
fn ctrl_c_cancels_a_statement_at_the_prompt() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    let tmp = one_unit_dataset();
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelake"))
        .args(["sql", "ds"])
        .current_dir(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("probelake sql starts");
    let (lines, from_child) = mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let lines = lines.clone();
        std::thread::spawn(move || {
            BufReader::new(stream).lines().map_while(Result::ok).for_each(|l| drop(lines.send(l)))
        });
    }
    let wait_for = |what: &str, on_tick: &mut dyn FnMut()| {
        let started = Instant::now();
        loop {
            match from_child.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.contains(what) => return,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => on_tick(),
                Err(e) => panic!("waiting for {what:?}: {e}"),
            }
            assert!(started.elapsed() < Duration::from_secs(60), "no {what:?} after a minute");
        }
    };
    let mut stdin = child.stdin.take().expect("stdin");
    // The first statement's answer shows the prompt is up and reading.
    writeln!(stdin, "SELECT 41 + 1 AS answer;").expect("write");
    wait_for("42", &mut || {});
    // Runs for minutes unless cancelled (no statistics shortcut for a sum).
    writeln!(stdin, "SELECT sum(value % 7) FROM range(100000000000);").expect("write");
    let pid = child.id().to_string();
    // Interrupt until it is cancelled: a signal that lands between two statements is ignored.
    wait_for("cancelled", &mut || {
        let kill = Command::new("kill").args(["-INT", &pid]).status().expect("kill runs");
        assert!(kill.success(), "kill -INT failed");
    });
    writeln!(stdin, "SELECT 'still here' AS after;").expect("write");
    wait_for("still here", &mut || {});
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit {status:?}");
}

/// Ctrl-C stops a statement given with `-c` while every worker of the runtime computes it (a
/// join with no yield for seconds at a time): exit 130 within moments. Ctrl-C once waited for
/// the statement to end, because a signal reaches tokio only through a worker that parks.
#[test]
fn ctrl_c_stops_a_long_statement_with_130() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let tmp = one_unit_dataset();
    let query = "SELECT count(*) FROM dump a, dump b, dump c WHERE a.norm + b.norm > c.norm";
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelake"))
        .args(["sql", "ds", "-c", query])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("probelake sql starts");
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().expect("try_wait").is_none(), "the statement ended before Ctrl-C");
    let interrupted = Instant::now();
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().expect("kill runs").success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running 30 s after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "exit {status:?}");
    assert!(interrupted.elapsed() < Duration::from_secs(10), "{:?}", interrupted.elapsed());
}
