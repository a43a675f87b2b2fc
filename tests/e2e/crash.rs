//! `kill -9` of `probelake import` at points spread over its run: after each, every committed
//! unit is whole and nothing else is visible; `probelake vacuum` then removes what the killed
//! process left and nothing else; the same import finally succeeds and exports byte for byte.
//! A folder an import was killed in before its first commit (no manifest) is vacuumed only
//! with `--force`, and only of files at the layout's paths.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use probelake::format::Lake;

use crate::cli;
use crate::fixtures::{
    assert_committed_units_whole, assert_same_tree, assert_vacuum_leaves_only_named_files, files_below,
};

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

/// What an import killed before its first commit leaves: every data file, no `_probelake/`.
/// Made by copying a finished import's table folders, so the names and paths are exactly
/// those an import writes.
fn killed_before_first_commit(reference: &Path, dst: &Path) {
    for table in ["dump", "stack", "construct", "tensor", "source"] {
        let from = reference.join(table);
        if from.exists() {
            crate::bad_input::copy_tree(&from, &dst.join(table));
        }
    }
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn vacuum_without_a_manifest_lists_then_removes_only_the_layouts_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("tree");
    cli::ok([Path::new("synth"), &src, Path::new("--layers"), Path::new("1"), Path::new("-q")]);
    let reference = tmp.path().join("reference");
    cli::import(&src, &reference);
    let dst = tmp.path().join("killed");
    killed_before_first_commit(&reference, &dst);
    let ours = files_below(&dst);
    assert!(ours.len() > 5, "{ours:?}");
    // What a user may keep beside (or mistake for) a dataset.
    let foreign = [
        "notes.txt",
        "dump/readme.parquet",
        "dump/step=1/x.parquet",
        "dump/step=1/not-a-uuid.parquet",
        "results/summary.parquet",
        "_probelake/notes.txt",
    ];
    for f in foreign {
        let path = dst.join(f);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, f).expect("write");
    }
    let before = files_below(&dst);
    let dst_arg = dst.to_string_lossy().into_owned();

    // A listing by default: every file of the import named, nothing removed, and how to.
    let listed = stdout(&cli::ok(["vacuum", &dst_arg, "--older-than", "0s"]));
    for file in &ours {
        assert!(listed.contains(&format!("would remove uncommitted {}\n", file.display())), "{file:?}\n{listed}");
    }
    assert_eq!(listed.matches("would remove uncommitted ").count(), ours.len(), "{listed}");
    assert!(listed.contains(&format!("run: probelake vacuum {dst_arg} --older-than 0s --force")), "{listed}");
    assert_eq!(files_below(&dst), before);
    // Young files are an import at work: not even listed for removal.
    let young = stdout(&cli::ok(["vacuum", &dst_arg]));
    assert!(young.contains(&format!("would remove 0 file(s), 0 B; kept {} younger than 1d", ours.len())), "{young}");

    let removed = stdout(&cli::ok(["vacuum", &dst_arg, "--older-than", "0s", "--force"]));
    assert_eq!(removed.matches("removed uncommitted ").count(), ours.len(), "{removed}");
    let mut left: Vec<std::path::PathBuf> = foreign.iter().map(std::path::PathBuf::from).collect();
    left.sort();
    assert_eq!(files_below(&dst), left);
    // The layout folders the import made are gone where they emptied; `dump/step=1` holds the
    // user's files and stays.
    for gone in ["stack", "construct", "source", "dump/step=1/stage=actor_update"] {
        assert!(!dst.join(gone).exists(), "{gone}");
    }
    assert!(dst.join("dump/step=1").is_dir());

    // Nothing of an import's is left: as for any folder that is no dataset, an error, and
    // nothing deleted.
    let again = cli::probelake(["vacuum", &dst_arg, "--older-than", "0s", "--force"]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(err.contains("no probelake dataset here") && err.contains("nothing was deleted"), "{err}");
    assert_eq!(files_below(&dst), left);

    // An import into the cleaned folder works.
    cli::import(&src, &dst);
    assert_eq!(assert_committed_units_whole(&dst).len(), assert_committed_units_whole(&reference).len());
}
