//! Every command that writes, on a full disk and with impossible output paths: a clear error,
//! and no half-written file, folder or dataset left behind.
//!
//! The full disk is a file-size limit (`ulimit -f`, RLIMIT_FSIZE): the write fails with EFBIG
//! as it would with ENOSPC on a full tmpfs, and it needs no mount privileges in CI.

use std::path::Path;
use std::process::Command;

use super::{assert_clear_error, assert_refused, assert_unchanged, os, run_command, state};
use crate::cli;

/// Runs `probelake ARGS` in `cwd` with files limited to `kib` KiB.
fn run_limited(cwd: &Path, kib: u32, args: &[&str]) -> std::process::Output {
    let script = format!("ulimit -f {kib} && exec \"$0\" \"$@\"");
    run_command(
        Command::new("sh").arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_probelake")).args(args).current_dir(cwd),
    )
}

/// A sandbox with the tree `src` (two units) and its dataset `ds`.
fn sandbox() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let synth = ["synth", "src", "--layout", "msprobe", "--steps", "1", "--ranks", "2", "--layers", "2", "-q"];
    assert!(super::run_in(root, synth).status.success());
    cli::import(&root.join("src"), &root.join("ds"));
    tmp
}

#[test]
fn a_full_disk_fails_every_writing_command_cleanly() {
    let tmp = sandbox();
    let root = tmp.path();
    let writers: [&[&str]; 11] = [
        &["import", "src", "new-ds"],
        &["import", "src", "ds"],
        &["export", "ds", "out"],
        &["compare", "ds", "ds", "-o", "out"],
        &["compare", "ds", "ds", "-o", "out", "--xlsx"],
        &["compare", "ds", "ds", "-o", "out", "--format", "parquet"],
        &["sql", "ds", "-c", "SELECT name, max FROM dump", "--format", "csv", "-o", "out.csv"],
        // Its result (no divergence) is smaller than the limit; a limit of 0 fails any write.
        &["divergence", "ds", "ds", "--threshold", "0", "--format", "json", "-o", "out.json", "--", "0"],
        &["plot", "divergence", "ds", "ds", "-o", "out"],
        &["synth", "out", "--layers", "2"],
        &["demo", "out"],
    ];
    for args in writers {
        let before = state(root);
        let (args, kib) = match args {
            [args @ .., "--", kib] => (args, kib.parse().expect("a size")),
            _ => (args, 4),
        };
        let what = format!("full disk ({kib} KiB): probelake {}", args.join(" "));
        let out = run_limited(root, kib, args);
        let after = state(root);
        if args[0] == "demo" {
            // The demo clears and refills its own folder; on failure it may leave that empty.
            assert_clear_error(&what, &out, &["too large"]);
            let left: Vec<_> = after.iter().filter(|(p, _)| p.starts_with("out")).collect();
            assert!(left.iter().all(|(_, e)| *e == super::Entry::Folder), "{what}: left {left:?}");
            let _ = std::fs::remove_dir_all(root.join("out"));
            continue;
        }
        assert_clear_error(&what, &out, &["too large"]);
        assert_unchanged(&what, &before, &after);
    }
}

#[test]
fn impossible_output_paths_are_refused_before_anything_is_written() {
    let tmp = sandbox();
    let root = tmp.path();
    std::fs::write(root.join("a-file"), b"x").expect("write");
    std::os::unix::fs::symlink("loop", root.join("loop")).expect("link");
    let full = root.join("full");
    cli::export(&root.join("ds"), &full);
    let cases: [(&[&str], &[&str]); 14] = [
        (&["export", "ds", "a-file"], &["a-file"]),
        // Into the dataset itself: msprobe folders next to `_probelake/`.
        (&["export", "ds", "ds"], &["inside the dataset"]),
        (&["export", "ds", "./ds/new/deeper"], &["inside the dataset"]),
        (&["export", "ds", "not-yet/../ds/new"], &["inside the dataset"]),
        (&["export", "ds", "not-yet/./../x/../ds"], &["inside the dataset"]),
        (&["export", "ds", "a-file/below"], &["a-file"]),
        (&["export", "ds", "loop/below"], &["loop"]),
        // A folder that already holds the tree: nothing is overwritten without --force.
        (&["export", "ds", "full"], &["already exists", "--force"]),
        (&["compare", "ds", "ds", "-o", "a-file"], &["a-file"]),
        (&["sql", "ds", "-c", "SELECT 1", "--format", "csv", "-o", "a-file/x.csv"], &["a-file"]),
        (&["sql", "ds", "-c", "SELECT 1", "--format", "csv", "-o", "src"], &["src"]),
        (&["divergence", "ds", "ds", "--format", "csv", "-o", "loop/x.csv"], &["loop"]),
        (&["plot", "divergence", "ds", "ds", "-o", "a-file/x"], &["a-file"]),
        (&["synth", "src"], &["not empty"]),
    ];
    for (args, expect) in cases {
        assert_refused(root, &os(args), expect);
    }
}

/// Ctrl-C half way through `compare` and `export`: exit code 130 and none of the files written
/// so far left behind, as when a later unit fails.
#[test]
fn an_interrupted_compare_or_export_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    // Enough units that the command is still writing when the first file shows.
    let synth = ["synth", "src", "--layout", "msprobe", "--steps", "1", "--ranks", "32", "--layers", "4", "-q"];
    assert!(super::run_in(root, synth).status.success());
    cli::import(&root.join("src"), &root.join("ds"));
    for args in [&["compare", "ds", "ds", "-o", "out", "--quiet"][..], &["export", "ds", "out"]] {
        let what = args.join(" ");
        let out = root.join("out");
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelake"))
            .args(args)
            .current_dir(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the command starts");
        let started = std::time::Instant::now();
        while !crate::fixtures::files_below(&out).iter().any(|f| !f.to_string_lossy().contains("probelake-tmp")) {
            assert!(child.try_wait().expect("wait").is_none(), "{what}: ended before a file was written");
            assert!(started.elapsed().as_secs() < 60, "{what}: no file after a minute");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
        assert!(kill.success(), "{what}: kill -INT failed");
        let result = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&result.stderr);
        if result.status.code() == Some(130) {
            assert!(err.contains("interrupted"), "{what}: {err}");
            let left = crate::fixtures::files_below(&out);
            assert!(left.is_empty(), "{what}: left {left:?}");
            assert!(!out.exists(), "{what}: left the folder it created");
        } else {
            // The signal came after the last unit: then the output must be whole.
            assert!(result.status.code().is_some_and(|c| c < 2), "{what}: exit {:?}\n{err}", result.status);
            eprintln!("note: {what} finished before the interrupt reached it");
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}
