//! `probelake divergence` and the `compare` command line.

use std::path::Path;

use probelake_compare::divergence::first_divergence_sql;
use probelake_format::Lake;
use probelake_query::datafusion::arrow::util::pretty::pretty_format_batches;
use probelake_query::{Run, RunSession};

use crate::cli;
use crate::fixtures::root;

fn first_rows(stdout: &str) -> Vec<(String, String)> {
    // CSV: step,stage,rank,first_divergence,...
    stdout
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((format!("{}/{}", f.first()?, f.get(1)?), f.get(3)?.to_string()))
        })
        .collect()
}

#[test]
fn divergence_on_the_verl_fixture_runs() {
    let Some(fixtures) = root() else { return };
    let bug = fixtures.join("runs/verl-l1-stats-attnbug");
    let base = fixtures.join("runs/verl-l1-stats-base");
    // Straight from the msprobe folders: imported on the fly.
    let out = cli::probelake([Path::new("divergence"), &bug, &base, Path::new("--format"), Path::new("csv")]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = first_rows(&String::from_utf8_lossy(&out.stdout));
    for stage in ["actor_compute_log_prob", "actor_update"] {
        let hit = rows.iter().find(|(k, _)| k == &format!("1/{stage}")).map(|(_, v)| v.as_str());
        assert_eq!(hit, Some("Functional.layer_norm.3.forward"), "{rows:?}");
    }
    assert!(!rows.iter().any(|(k, _)| k.contains("ref_compute_log_prob")), "{rows:?}");
    let out = cli::probelake([
        Path::new("divergence"),
        &bug,
        &base,
        Path::new("--threshold"),
        Path::new("0"),
        Path::new("--format"),
        Path::new("csv"),
    ]);
    let rows = first_rows(&String::from_utf8_lossy(&out.stdout));
    let hit = rows.iter().find(|(k, _)| k == "1/actor_update").map(|(_, v)| v.as_str());
    assert_eq!(hit, Some("Tensor.__mul__.1.forward"), "{rows:?}");
}

#[test]
fn identical_runs_do_not_diverge_and_compare_passes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src).expect("synth");
    let ds = tmp.path().join("ds");
    cli::import(&src, &ds);
    let out = cli::probelake([Path::new("divergence"), &ds, &ds]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let cmp = tmp.path().join("cmp");
    let out = cli::probelake([Path::new("compare"), &ds, &src, Path::new("-o"), &cmp]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let files = crate::fixtures::files_below(&cmp);
    // 2 steps x 3 stages, nested as step{N}/{stage}/compare_result_rank0_<ts>.csv.
    assert_eq!(files.len(), 6, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(cmp.join(f)).expect("read");
        assert!(text.starts_with("NPU Name,Bench Name,"), "{}", f.display());
        assert!(!text.contains(",error,"), "{}", f.display());
    }
}

#[test]
fn compare_reports_what_it_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src).expect("synth");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    cli::import(&src, &a);
    cli::import(&src.join("step_1"), &b);
    let out = cli::probelake([Path::new("compare"), &a, &b, Path::new("-o"), &tmp.path().join("cmp")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("skipped: step 2 / stage actor_update / rank 0 is only in the target"), "{err}");
    assert!(err.contains("compared 3 unit(s) (3 skipped)"), "{err}");
    let out = cli::probelake([Path::new("compare"), &a, &b, Path::new("--step"), Path::new("7")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no (step, stage, rank) is in both runs"));
}

/// A step folder of several ranks gives msprobe's flat `compare_result_rank{R}_<ts>.csv` files;
/// folders appear only when several steps or stages are compared.
#[test]
fn ranks_of_one_step_are_written_side_by_side() {
    use probelake_synth::{write_run, SynthLayout, SynthSpec};
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    let spec = SynthSpec { layout: SynthLayout::Msprobe, ranks: 2, global_steps: vec![0], ..SynthSpec::demo() };
    write_run(&spec, &src).expect("synth");
    let cmp = tmp.path().join("cmp");
    let step = src.join("step0");
    let out = cli::probelake([Path::new("compare"), &step, &step, Path::new("-o"), &cmp]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let files: Vec<String> =
        crate::fixtures::files_below(&cmp).iter().map(|f| f.to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for (file, rank) in files.iter().zip(["0", "1"]) {
        let stamp = file.strip_prefix(&format!("compare_result_rank{rank}_")).and_then(|s| s.strip_suffix(".csv"));
        assert!(stamp.is_some_and(|s| s.len() == 14 && s.bytes().all(|b| b.is_ascii_digit())), "{files:?}");
    }
}

/// `--target-step 2 --golden-step 1` compares a verl run with itself a step back; each row
/// carries the target's key and is the row of the two stage folders compared directly.
#[test]
fn divergence_pairs_a_step_with_another_step() {
    let Some(fixtures) = root() else { return };
    let run = fixtures.join("runs/verl-l1-stats-attnbug");
    let csv = |args: &[&std::ffi::OsStr]| {
        let mut all = vec![std::ffi::OsStr::new("divergence")];
        all.extend_from_slice(args);
        all.extend(["--threshold", "0", "--format", "csv"].map(std::ffi::OsStr::new));
        let out = cli::probelake(all);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let flags = csv(&[run.as_os_str(), run.as_os_str(), os("--target-step"), os("2"), os("--golden-step"), os("1")]);
    let rows: Vec<&str> = flags.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "one row per stage:\n{flags}");
    assert!(rows.iter().all(|r| r.starts_with("2,")), "{flags}");
    let (t, g) = (run.join("step_2/actor_update/step0"), run.join("step_1/actor_update/step0"));
    let direct = csv(&[t.as_os_str(), g.as_os_str()]);
    let direct_row = direct.lines().nth(1).expect("a row");
    assert!(direct_row.starts_with("2,actor_update,-1,"), "{direct}");
    assert!(rows.contains(&direct_row), "{direct_row} not in:\n{flags}");
    let out =
        cli::probelake([os("divergence"), run.as_os_str(), run.as_os_str(), os("--target-stage"), os("actor_update")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target-stage actor_update needs --golden-stage"));
}

/// The rows of `sql/first_divergence.sql` and of the `first_divergence` table function (which
/// stops reading each unit pair at its first divergence) for `target` against `golden`, at
/// several thresholds, printed whole: they must be equal to the last digit.
async fn query_and_function(target: &Lake, golden: &Lake) -> Vec<(String, String, String)> {
    let session = RunSession::open(vec![Run::new("target", target.clone()), Run::new("golden", golden.clone())], false)
        .await
        .expect("session");
    let session = &session;
    let mut out = Vec::new();
    for threshold in [0.0, 1e-3, 0.5, 2.0] {
        let text = first_divergence_sql(threshold).expect("sql");
        let function = format!("SELECT * FROM first_divergence({threshold:?})");
        let [by_text, by_function] = [text, function].map(|sql| async move {
            // Printed without the header: no batch at all prints none.
            let batches = session.collect(&sql).await.expect("query");
            let rows: Vec<_> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
            pretty_format_batches(&rows).expect("print").to_string()
        });
        let (by_text, by_function) = (by_text.await, by_function.await);
        out.push((format!("threshold {threshold}"), by_text, by_function));
    }
    out
}

async fn import_into(src: &Path, dir: &Path) -> Lake {
    let lake = Lake::local(dir).expect("lake");
    probelake_msprobe::import(src, &lake, &Default::default(), &probelake_msprobe::NoProgress).await.expect("import");
    lake
}

/// Synthesized runs of every level, task and layout, with the bug in the first layer, the last
/// layer or nowhere, and the real runs of `tests/data/fixtures` (proc folders whose pids differ
/// between runs, two ranks, bf16 against fp32, NaN statistics): the function gives the query's
/// rows.
#[tokio::test(flavor = "multi_thread")]
async fn first_divergence_function_gives_the_query_s_rows() {
    use probelake_synth::{SynthLayout, SynthLevel, SynthSpec, SynthTask};

    let tmp = tempfile::tempdir().expect("tempdir");
    let mut pairs: Vec<(String, Lake, Lake)> = Vec::new();
    let cases = [
        ("l1 verl, bug in layer 0", SynthLevel::L1, SynthTask::Statistics, SynthLayout::Verl, Some(0)),
        ("mix verl, bug in the last layer", SynthLevel::Mix, SynthTask::Statistics, SynthLayout::Verl, Some(2)),
        ("mix msprobe md5, bug in layer 1", SynthLevel::Mix, SynthTask::Md5, SynthLayout::Msprobe, Some(1)),
        ("l0 msprobe, no bug", SynthLevel::L0, SynthTask::Statistics, SynthLayout::Msprobe, None),
    ];
    for (i, (what, level, task, layout, bug)) in cases.into_iter().enumerate() {
        let base = SynthSpec { layers: 3, ranks: 2, level, task, layout, ..SynthSpec::demo() };
        let base = match layout {
            SynthLayout::Msprobe => SynthSpec { global_steps: vec![0, 1], ..base },
            SynthLayout::Verl => base,
        };
        let buggy = SynthSpec { attention_scale_bug: bug.map(|layer| (layer, 1.01)), ..base.clone() };
        let dir = tmp.path().join(i.to_string());
        probelake_synth::write_run(&base, &dir.join("golden-src")).expect("synth");
        probelake_synth::write_run(&buggy, &dir.join("target-src")).expect("synth");
        let golden = import_into(&dir.join("golden-src"), &dir.join("golden")).await;
        let target = import_into(&dir.join("target-src"), &dir.join("target")).await;
        pairs.push((what.to_string(), target, golden));
    }
    if let Some(root) = crate::fixtures::root() {
        let runs = root.join("runs");
        for (target, golden) in [
            ("verl-l1-stats-attnbug", "verl-l1-stats-base"),
            ("plain-l1-tensor-attnbug", "plain-l1-tensor-base"),
            ("plain-l1-md5-bf16-nan", "plain-l1-md5-bf16-base"),
            ("plain-mix-stats-2rank-bf16", "plain-mix-stats-2rank"),
        ] {
            let t = import_into(&runs.join(target), &tmp.path().join(target)).await;
            let g = import_into(&runs.join(golden), &tmp.path().join(golden)).await;
            pairs.push((format!("{target} vs {golden}"), t, g));
        }
    }
    let mut differing = Vec::new();
    let mut rows = 0;
    for (what, target, golden) in &pairs {
        for (threshold, by_text, by_function) in query_and_function(target, golden).await {
            rows += by_text.lines().count();
            if by_text != by_function {
                differing.push(format!("{what}, {threshold}:\nquery text:\n{by_text}\nfunction:\n{by_function}"));
            }
        }
    }
    assert!(differing.is_empty(), "{}", differing.join("\n"));
    // Not vacuous: most cases diverge somewhere.
    assert!(rows > 100, "only {rows} lines printed");
}
