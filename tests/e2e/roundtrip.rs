//! import → export gives back every file byte for byte.

use std::path::Path;

use crate::cli;
use crate::fixtures::{assert_same_bytes, files_below, runs};

/// The files export must reproduce (dump_error_info.log and the like are not carried).
pub fn is_carried(rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    matches!(name, "dump.json" | "stack.json" | "construct.json" | "debug.json")
        || rel.parent().and_then(|p| p.file_name()).is_some_and(|p| p == "dump_tensor_data")
}

/// Imports `run`, exports it, and compares every carried file.
pub fn round_trip(run: &Path) -> usize {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = tmp.path().join("ds");
    let out = tmp.path().join("out");
    cli::import(run, &ds);
    cli::export(&ds, &out);
    let want: Vec<_> = files_below(run).into_iter().filter(|r| is_carried(r)).collect();
    let got = files_below(&out);
    assert_eq!(want, got, "{}: exported file list differs", run.display());
    for rel in &want {
        let a = std::fs::read(run.join(rel)).expect("read original");
        let b = std::fs::read(out.join(rel)).expect("read exported");
        assert_same_bytes(&run.join(rel), &a, &b);
    }
    want.len()
}

#[test]
fn every_fixture_run_round_trips_byte_for_byte() {
    let runs = runs();
    let mut files = 0;
    for run in &runs {
        files += round_trip(run);
    }
    if !runs.is_empty() {
        // Guard: the fixtures hold dozens of runs' files; a walk that finds none is broken.
        assert!(files > 100, "only {files} files compared");
        eprintln!("{} runs, {files} files identical after import and export", runs.len());
    }
}

#[test]
fn export_refuses_to_overwrite_without_force() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src).expect("synth");
    let ds = tmp.path().join("ds");
    let out = tmp.path().join("out");
    cli::import(&src, &ds);
    cli::export(&ds, &out);
    let again = cli::probelake([Path::new("export"), &ds, &out]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    cli::ok([Path::new("export"), &ds, &out, Path::new("--force"), Path::new("-q")]);
}

#[test]
fn msprobe_26_runs_kept_in_the_repository_round_trip_byte_for_byte() {
    // Real msprobe 26.2 output, kept under tests/data: rank folders with dump.json, stack.json,
    // construct.json and, for tensor dumps, dump_tensor_data/. One was cut to its last APIs, so
    // its grouped stack.json has no group "0".
    let runs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare-ref/mapping/runs");
    let mut names: Vec<_> = std::fs::read_dir(&runs).expect("runs").map(|e| e.expect("entry").path()).collect();
    names.sort();
    assert!(names.len() >= 10, "{}: {names:?}", runs.display());
    let files: usize = names.iter().map(|run| round_trip(run)).sum();
    assert!(files >= names.len() * 3, "only {files} files compared");
}
