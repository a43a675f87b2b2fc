//! `probelake divergence` and the `compare` command line.

use std::path::Path;

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
