//! The demo and synthesized runs: import, info, export, byte for byte.

use std::path::Path;

use crate::cli;
use crate::fixtures::{assert_same_tree, files_below};

#[test]
fn demo_runs_and_its_runs_round_trip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = cli::ok([Path::new("demo"), tmp.path(), Path::new("-q")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("imported base"), "{stdout}");
    assert!(stdout.contains("imported attnbug"), "{stdout}");
    let info = cli::ok([Path::new("info"), &tmp.path().join("lake/attnbug")]);
    let info = String::from_utf8_lossy(&info.stdout);
    // 2 global steps x 3 stages x 1 rank.
    assert!(info.contains("6 unit(s)"), "{info}");
    assert!(info.contains("actor_update"), "{info}");

    let src = tmp.path().join("msprobe/attnbug");
    let back = tmp.path().join("back");
    cli::export(&tmp.path().join("lake/attnbug"), &back);
    assert_same_tree(&src, &back);
}

#[test]
fn reimporting_a_unit_replaces_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let spec = probelake_synth::SynthSpec::demo();
    let src = tmp.path().join("src");
    probelake_synth::write_run(&spec, &src).expect("synth");
    let ds = tmp.path().join("ds");
    cli::import(&src, &ds);
    cli::import(&src.join("step_1"), &ds);
    let info = cli::ok([Path::new("info"), &ds]);
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("6 unit(s)"), "{info}");
    // The replaced unit's old files are gone: one source file per unit remains.
    let sources = files_below(&ds.join("source")).len();
    assert_eq!(sources, 6, "{info}");
}

#[test]
fn synth_writes_msprobe_trees_that_round_trip_and_refuses_a_full_folder() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("tree");
    let args =
        ["--layout", "msprobe", "--steps", "2", "--ranks", "2", "--layers", "3", "--level", "mix", "--bug", "-q"];
    let out =
        cli::ok([Path::new("synth"), &src].into_iter().map(|p| p.as_os_str()).chain(args.iter().map(|a| a.as_ref())));
    assert!(String::from_utf8_lossy(&out.stdout).contains("12 files"), "{}", String::from_utf8_lossy(&out.stdout));
    let files = files_below(&src);
    for rel in ["step0/rank0/dump.json", "step1/rank1/stack.json", "step1/rank1/construct.json"] {
        assert!(files.iter().any(|f| f == Path::new(rel)), "{rel} missing from {files:?}");
    }

    let lake = tmp.path().join("lake");
    cli::import(&src, &lake);
    let back = tmp.path().join("back");
    cli::export(&lake, &back);
    assert_same_tree(&src, &back);

    // A second synth into the same folder is refused and changes nothing.
    let again = cli::probelake([Path::new("synth"), &src]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(files_below(&src), files);
}

#[test]
fn every_level_task_and_dtype_round_trips_byte_for_byte() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let modes: [[&str; 3]; 5] = [
        ["l0", "statistics", "fp32"],
        ["l1", "md5", "bf16"],
        ["mix", "md5", "fp32"],
        ["l1", "tensor", "fp32"],
        ["mix", "tensor", "bf16"],
    ];
    for [level, task, dtype] in modes {
        let name = format!("{level}-{task}-{dtype}");
        let src = tmp.path().join(&name).join("tree");
        let args = ["--layout", "msprobe", "--steps", "1", "--layers", "1", "--ranks", "2", "-q"];
        let mode = ["--level", level, "--task", task, "--dtype", dtype];
        cli::ok(
            [Path::new("synth"), &src]
                .into_iter()
                .map(|p| p.as_os_str())
                .chain(args.iter().chain(&mode).map(|a| a.as_ref())),
        );
        let files = files_below(&src);
        let has_pt = files.iter().any(|f| f.extension().is_some_and(|e| e == "pt"));
        assert_eq!(has_pt, task == "tensor", "{name}: {files:?}");
        let lake = tmp.path().join(&name).join("lake");
        cli::import(&src, &lake);
        let back = tmp.path().join(&name).join("back");
        cli::export(&lake, &back);
        assert_same_tree(&src, &back);
    }
}
