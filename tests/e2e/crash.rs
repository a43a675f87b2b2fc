//! `kill -9` of `probelake import` at points spread over its run: after each, every committed
//! unit is whole and nothing else is visible; `probelake vacuum` then removes what the killed
//! process left and nothing else; the same import finally succeeds and exports byte for byte.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use probelake::format::Lake;

use crate::cli;
use crate::fixtures::{assert_committed_units_whole, assert_same_tree, assert_vacuum_leaves_only_named_files};

/// Kills per test run; the points are spread evenly over one measured import.
const KILLS: u32 = 8;

#[test]
fn kill_9_of_import_leaves_whole_units_and_vacuum_cleans_up() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("tree");
    let args = ["--layers", "8", "--ranks", "4", "-q"];
    cli::ok([Path::new("synth"), &src].into_iter().map(Path::as_os_str).chain(args.iter().map(|a| a.as_ref())));

    // How long a whole import takes here, to aim the kills.
    let reference = tmp.path().join("reference");
    let started = Instant::now();
    cli::import(&src, &reference);
    let full = started.elapsed();
    let expected_units = runtime().block_on(Lake::local(&reference).expect("open").units()).expect("units").len();

    // Killed imports into a new folder and, after a first import lands, re-imports that replace
    // every unit: the points span 0 to 1.5 times a whole import, so some fall in the commits.
    let dst = tmp.path().join("lake");
    let mut visible_counts = Vec::new();
    for k in 1..=KILLS {
        if k == KILLS / 2 {
            cli::import(&src, &dst);
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelake"))
            .args([Path::new("import"), &src, &dst, Path::new("-q")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("import starts");
        std::thread::sleep(full * 3 * k / (2 * KILLS));
        // SIGKILL: no destructor, no cleanup runs.
        let _ = child.kill();
        let _ = child.wait();
        let visible = assert_only_whole_units(&dst);
        if k >= KILLS / 2 {
            // Every unit was committed once; a killed re-import replaces some, never removes one.
            assert_eq!(visible, expected_units, "kill {k}");
            assert_vacuum_leaves_only_named_files(&dst);
        }
        visible_counts.push(visible);
    }
    eprintln!("units visible after each kill: {visible_counts:?}");

    // The import that is allowed to finish.
    cli::import(&src, &dst);
    assert_eq!(assert_only_whole_units(&dst), expected_units);
    assert_vacuum_leaves_only_named_files(&dst);
    let again = cli::ok([Path::new("vacuum"), &dst, Path::new("--older-than"), Path::new("0s")]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("removed 0 file(s)"));

    let back = tmp.path().join("back");
    cli::export(&dst, &back);
    assert_same_tree(&src, &back);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// How many units are visible, each checked whole ([`assert_committed_units_whole`]).
fn assert_only_whole_units(dst: &Path) -> usize {
    if !dst.join("_probelake/manifest.json").exists() {
        // Killed before the first commit: nothing may be visible.
        let out = cli::probelake([Path::new("info"), dst]);
        assert!(!out.status.success(), "info on a dataset never committed");
        return 0;
    }
    assert_committed_units_whole(dst).len()
}
