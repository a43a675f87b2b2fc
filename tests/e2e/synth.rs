//! The demo and synthesized runs: import, info, export, byte for byte.

use std::path::Path;

use crate::cli;
use crate::fixtures::{assert_same_bytes, files_below};

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
    let files = files_below(&src);
    assert_eq!(files, files_below(&back));
    for rel in files {
        let a = std::fs::read(src.join(&rel)).expect("read");
        let b = std::fs::read(back.join(&rel)).expect("read");
        assert_same_bytes(&rel, &a, &b);
    }
}

#[test]
fn reimporting_a_unit_replaces_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let spec = probelake_format::synth::SynthSpec::demo();
    let src = tmp.path().join("src");
    probelake_format::synth::write_run(&spec, &src).expect("synth");
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
