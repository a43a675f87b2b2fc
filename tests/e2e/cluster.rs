//! A real Ballista cluster: `probelake cluster scheduler` and two `probelake cluster executor`
//! processes on 127.0.0.1 (free ports, temporary work folders, killed when the test ends),
//! queried with `--cluster` and checked against the local engine's output byte for byte.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use probelake_cluster::Ballista;
use probelake_query::{Run, RunSession};
use probelake_synth::{write_run, SynthSpec};

use crate::fixtures::files_below;
use crate::moto::{with_only, Moto};

/// A scheduler and its executors, each a process of its own.
struct Cluster {
    scheduler: Child,
    executors: Vec<Child>,
    /// `127.0.0.1:PORT` of the scheduler.
    address: String,
    log: PathBuf,
    work: tempfile::TempDir,
}

/// The first line `child` prints, which its command prints once it listens.
fn first_line(child: &mut Child, what: &str) -> String {
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("{what}: stdout is piped"));
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!line.is_empty(), "{what} exited before it was ready");
    line.trim().to_string()
}

impl Cluster {
    /// Starts a scheduler (executors lost after 3 s without a heartbeat) and `executors`
    /// executors (two slots, a heartbeat a second), with `env` set on each.
    fn start(executors: usize, env: &[(&'static str, String)]) -> Cluster {
        let work = tempfile::tempdir().expect("tempdir");
        let log = work.path().join("scheduler.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_probelake"));
        command
            .args(["cluster", "scheduler", "--bind", "127.0.0.1:0", "--executor-timeout", "3"])
            .env("PROBELAKE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        with_only(&mut command, env.to_vec());
        let mut scheduler = command.spawn().expect("the scheduler starts");
        let ready = first_line(&mut scheduler, "the scheduler");
        let address = ready.rsplit(' ').next().unwrap_or_default().to_string();
        assert!(ready.starts_with("scheduler listening on 127.0.0.1:"), "{ready}");
        let mut cluster = Cluster { scheduler, executors: Vec::new(), address, log, work };
        for i in 0..executors {
            cluster.add_executor(i, env);
        }
        // Registered: the scheduler logs each executor's registration.
        let deadline = Instant::now() + Duration::from_secs(60);
        while cluster.registrations() < executors {
            assert!(Instant::now() < deadline, "executors did not register within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster
    }

    fn add_executor(&mut self, i: usize, env: &[(&'static str, String)]) {
        let work_dir = self.work.path().join(format!("executor{i}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_probelake"));
        command
            .args(["cluster", "executor", "--scheduler", &self.address, "--bind-host", "127.0.0.1"])
            .args(["--flight-port", "0", "--grpc-port", "0", "--slots", "2", "--heartbeat", "1"])
            .arg("--work-dir")
            .arg(&work_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        with_only(&mut command, env.to_vec());
        let mut executor = command.spawn().expect("an executor starts");
        let ready = first_line(&mut executor, "an executor");
        assert!(ready.starts_with("executor ready: flight port"), "{ready}");
        self.executors.push(executor);
    }

    fn registrations(&self) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().matches("register executor request").count()
    }

    fn engine(&self) -> Ballista {
        Ballista::new(&self.address).expect("the scheduler's address")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.executors.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn probelake(args: &[&str], env: &[(&'static str, String)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_probelake"));
    command.args(args);
    with_only(&mut command, env.to_vec());
    command.output().expect("the probelake binary runs")
}

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two runs, the second with the synthesizer's attention bug from step 2 on, imported into
/// `dir/target` and `dir/golden` (2 steps × 3 stages × 2 ranks).
fn two_runs(dir: &Path) -> (String, String) {
    let spec = SynthSpec { ranks: 2, layers: 3, ..SynthSpec::demo() };
    let mut lakes = Vec::new();
    for (name, bug) in [("target", Some((2, 1.01))), ("golden", None)] {
        let src = dir.join(format!("{name}-src"));
        write_run(&SynthSpec { attention_scale_bug: bug, ..spec.clone() }, &src).expect("synth");
        let lake = dir.join(name);
        ok(probelake(&["import", &src.to_string_lossy(), &lake.to_string_lossy(), "-q"], &[]), "import");
        lakes.push(lake.to_string_lossy().into_owned());
    }
    (lakes.remove(0), lakes.remove(0))
}

const JOIN: &str =
    "SELECT t.step, t.stage, t.rank, t.item, t.norm, g.norm AS golden_norm, rel_err(t.norm, g.norm) AS rel \
    FROM target.dump t JOIN golden.dump g USING (step, stage, rank, item) \
    WHERE t.section = 'output' ORDER BY t.step, t.stage, t.rank, t.item";
// Aggregates whose value does not depend on the order rows arrive in (a float sum does, in its
// last bits): the cluster adds partial results up in an order of its own.
const GROUP_BY: &str =
    "SELECT step, stage, rank, api, count(*) AS leaves, max(norm) AS max_norm, min(mean) AS min_mean, \
    count(DISTINCT name) AS entries FROM target.dump GROUP BY step, stage, rank, api ORDER BY step, stage, rank, api";

/// `probelake sql` over both runs, locally and on `cluster`, with the same output.
fn same_sql(runs: &[String], sql_args: &[&str], cluster: &Cluster, env: &[(&'static str, String)]) -> String {
    let mut args: Vec<&str> = vec!["sql", "--format", "csv"];
    for run in runs {
        args.extend(["--run", run]);
    }
    args.extend(sql_args);
    let local = ok(probelake(&args, env), "local sql");
    args.extend(["--cluster", &cluster.address]);
    let remote = ok(probelake(&args, env), "cluster sql");
    assert_eq!(remote, local, "{sql_args:?}: the cluster's rows differ from the local engine's");
    assert!(local.lines().count() > 1, "{sql_args:?} returned no rows:\n{local}");
    local
}

/// Every file below `dir` with its bytes, by relative path; `compare_result_…_{timestamp}.csv`
/// without the timestamp, which is the run's.
fn sorted_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_below(dir)
        .into_iter()
        .map(|rel| {
            let name = rel.to_string_lossy();
            let name = name.trim_end_matches(".csv").trim_end_matches(|c: char| c.is_ascii_digit()).to_string();
            (name, std::fs::read(dir.join(&rel)).expect("read"))
        })
        .collect()
}

#[test]
fn sql_divergence_and_compare_on_a_cluster_equal_the_local_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, golden) = two_runs(dir.path());
    let runs = [format!("target={target}"), format!("golden={golden}")];
    let cluster = Cluster::start(2, &[]);
    let first_divergence = concat!(env!("CARGO_MANIFEST_DIR"), "/sql/first_divergence.sql");
    same_sql(&runs, &["-c", JOIN], &cluster, &[]);
    let found = same_sql(&runs, &["-f", first_divergence], &cluster, &[]);
    assert!(found.contains("Functional."), "the attention bug is found:\n{found}");
    same_sql(&runs, &["-c", GROUP_BY], &cluster, &[]);

    let divergence = |extra: &[&str]| {
        let mut args = vec!["divergence", &target, &golden, "--format", "csv"];
        args.extend(extra);
        let out = probelake(&args, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(divergence(&["--cluster", &cluster.address]), divergence(&[]));

    let (local_out, remote_out) = (dir.path().join("cmp-local"), dir.path().join("cmp-cluster"));
    for (out, extra) in [(&local_out, None), (&remote_out, Some(cluster.address.as_str()))] {
        let mut args = vec!["compare", &target, &golden, "-q", "-o"];
        let out = out.to_string_lossy().into_owned();
        args.push(&out);
        if let Some(address) = extra {
            args.extend(["--cluster", address]);
        }
        let result = probelake(&args, &[]);
        assert_eq!(result.status.code(), Some(1), "{}", String::from_utf8_lossy(&result.stderr));
    }
    let (local, remote) = (sorted_tree(&local_out), sorted_tree(&remote_out));
    assert_eq!(local.len(), 12, "{:?}", local.iter().map(|f| &f.0).collect::<Vec<_>>());
    assert!(local == remote, "compare --cluster wrote other files or bytes than compare");
}

#[test]
fn a_join_forced_to_shuffle_runs_its_tasks_on_both_executors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, golden) = two_runs(dir.path());
    let cluster = Cluster::start(2, &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let runs = vec![
            Run::new("target", probelake_format::Lake::open(&target).expect("target")),
            Run::new("golden", probelake_format::Lake::open(&golden).expect("golden")),
        ];
        let engine = cluster.engine();
        let session = RunSession::open_on(runs, false, &engine).await.expect("session");
        // No broadcast: both sides are hash-partitioned on the join keys (a shuffle), and the
        // last stage, the join itself, runs as one task per partition.
        for set in [
            "SET ballista.optimizer.broadcast_join_threshold_bytes = 0",
            "SET ballista.optimizer.broadcast_join_threshold_rows = 0",
            "SET datafusion.execution.target_partitions = 4",
        ] {
            session.collect(set).await.expect(set);
        }
        let sql = "SELECT t.step, t.stage, t.rank, t.item, rel_err(t.norm, g.norm) AS rel \
                   FROM target.dump t JOIN golden.dump g USING (step, stage, rank, item)";
        let plan = session.plan(sql).await.expect("plan").pop().expect("a statement");
        let state = session.context().state();
        let physical = state.create_physical_plan(&plan).await.expect("physical plan");
        let rows: usize =
            probelake_query::datafusion::physical_plan::collect(Arc::clone(&physical), session.context().task_ctx())
                .await
                .expect("the join runs")
                .iter()
                .map(|b| b.num_rows())
                .sum();
        let executors = engine.result_executors(&physical).await.expect("job state").expect("a cluster job");
        assert!(executors.len() >= 2, "{executors:?}");
        let mut distinct = executors.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 2, "the join's tasks ran on {distinct:?} ({executors:?})");

        let local = RunSession::open(
            vec![
                Run::new("target", probelake_format::Lake::open(&target).expect("target")),
                Run::new("golden", probelake_format::Lake::open(&golden).expect("golden")),
            ],
            false,
        )
        .await
        .expect("local session");
        let want: usize = local.collect(sql).await.expect("local join").iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, want);
        assert!(rows > 0);
    });
}

#[test]
fn an_executor_killed_mid_query_gives_a_clean_error_or_the_right_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, golden) = two_runs(dir.path());
    let runs = [format!("target={target}"), format!("golden={golden}")];
    let before = (sorted_tree(Path::new(&target)), sorted_tree(Path::new(&golden)));
    let mut cluster = Cluster::start(2, &[]);
    // Heavy enough to be running when the executor goes: every leaf against every leaf of its
    // unit's other run.
    let sql = "SELECT t.stage, count(*) AS pairs, max(rel_err(t.norm, g.norm)) AS rel \
               FROM target.dump t JOIN golden.dump g ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank \
               GROUP BY t.stage ORDER BY t.stage";
    let mut args: Vec<&str> = vec!["sql", "--format", "csv", "-c", sql];
    for run in &runs {
        args.extend(["--run", run]);
    }
    let want = ok(probelake(&args, &[]), "local sql");
    // Ballista 55 can leave a job waiting without end after losing an executor (seen once in
    // CI); the client's timeout turns that into a clean error.
    args.extend(["--cluster", &cluster.address, "--cluster-timeout", "60"]);
    let started = Instant::now();
    let mut query = Command::new(env!("CARGO_BIN_EXE_probelake"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the query starts");
    std::thread::sleep(Duration::from_millis(300));
    let victim = &mut cluster.executors[0];
    victim.kill().expect("kill the executor");
    let _ = victim.wait();
    // The query ends (one way or the other) within a bound: the scheduler declares the
    // executor lost after 3 s and runs its tasks again on the other one, or fails the job.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = query.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the query did not end within 120 s of the kill");
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = query.wait_with_output().expect("output");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("after {:?}: {status}; stderr: {stderr}", started.elapsed());
    match status.code() {
        Some(0) => assert_eq!(stdout, want, "a retried query returned other rows"),
        Some(2) => {
            assert!(stderr.starts_with("probelake: "), "not a clean error: {stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
        other => panic!("exit {other:?}: {stderr}"),
    }
    assert!(before == (sorted_tree(Path::new(&target)), sorted_tree(Path::new(&golden))), "a dataset changed");
}

#[test]
fn a_cluster_reads_s3_datasets_with_its_own_credentials() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, golden) = two_runs(dir.path());
    let (s3_target, s3_golden) = (moto.url("cluster/target"), moto.url("cluster/golden"));
    for (from, to) in [(&target, &s3_target), (&golden, &s3_golden)] {
        let src = dir.path().join(format!("{}-src", Path::new(from).file_name().unwrap_or_default().to_string_lossy()));
        ok(moto.run([Path::new("import"), &src, Path::new(to), Path::new("-q")]), "import to s3");
    }
    let env = moto.env();
    let cluster = Cluster::start(2, &env);
    let runs = [format!("target={s3_target}"), format!("golden={s3_golden}")];
    let on_s3 = same_sql(&runs, &["-c", JOIN], &cluster, &env);
    let local_runs = [format!("target={target}"), format!("golden={golden}")];
    assert_eq!(on_s3, same_sql(&local_runs, &["-c", JOIN], &cluster, &[]));
}

#[test]
fn no_scheduler_at_the_address_is_an_error_that_says_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    probelake_format::Lake::local(&lake).expect("an empty dataset");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let address = format!("127.0.0.1:{port}");
    let out = probelake(&["sql", &lake.to_string_lossy(), "-c", "SELECT 1", "--cluster", &address], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is `probelake cluster scheduler` running there?"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_job_that_gets_no_answer_ends_at_the_cluster_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, _) = two_runs(dir.path());
    // A scheduler without executors queues the job for ever.
    let cluster = Cluster::start(0, &[]);
    let started = Instant::now();
    let run = format!("t={target}");
    let args = ["sql", "--run", &run, "-c", "SELECT count(*) FROM t.dump", "--cluster", &cluster.address];
    let out = probelake(&[&args[..], &["--cluster-timeout", "2"]].concat(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no answer within 2 s (--cluster-timeout)"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}
