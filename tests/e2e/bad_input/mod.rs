//! Bad input: a clear error naming the file and position, exit code 2, no panic, and the
//! dataset exactly as it was.

use std::path::{Path, PathBuf};

use crate::cli;
use crate::fixtures::snapshot;

const GOOD: &str = r#"{
 "task": "statistics",
 "level": "L1",
 "framework": "pytorch",
 "dump_data_dir": null,
 "data": {
  "Torch.add.0.forward": {
   "input_args": [
    {
     "type": "torch.Tensor",
     "dtype": "torch.float32",
     "shape": [
      4
     ],
     "Max": NaN,
     "Min": 1.0,
     "Mean": 2.0,
     "Norm": 3.0,
     "requires_grad": false
    }
   ],
   "input_kwargs": {},
   "output": [
    null
   ]
  }
 }
}"#;

/// Writes `dump` as `step0/rank0/dump.json` under a fresh folder.
fn tree(tmp: &Path, name: &str, dump: &[u8]) -> PathBuf {
    let dir = tmp.join(name).join("step0/rank0");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("dump.json"), dump).expect("write");
    tmp.join(name)
}

fn assert_refused(src: &Path, ds: &Path, expect: &[&str]) {
    let before = snapshot(ds);
    let out = cli::probelake([Path::new("import"), src, ds, Path::new("-q")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: exit {:?}\n{err}", src.display(), out.status.code());
    assert!(!err.contains("panicked"), "{err}");
    for e in expect {
        assert!(err.contains(e), "{}: expected {e:?} in:\n{err}", src.display());
    }
    assert_eq!(before, snapshot(ds), "{}: the dataset changed", src.display());
}

#[test]
fn bad_dumps_leave_the_dataset_unchanged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = tmp.path().join("ds");
    // A dataset with one good unit, which every bad import must leave alone.
    cli::import(&tree(tmp.path(), "good", GOOD.as_bytes()), &ds);
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
        ("truncated", GOOD.as_bytes()[..GOOD.len() / 2].to_vec(), vec!["dump.json", "byte", "line"]),
        ("not-msprobe", br#"{"name": "x", "items": [1, 2]}"#.to_vec(), vec!["dump.json", "no `data` object"]),
        ("wrong-shape", GOOD.replace("[\n      4\n     ]", "\"4\"").into_bytes(), vec!["dump.json", "shape", "byte"]),
        ("wrong-stat", GOOD.replace("\"Min\": 1.0", "\"Min\": \"one\"").into_bytes(), vec!["Min", "byte"]),
        (
            "wrong-entry",
            GOOD.replace("\"Torch.add.0.forward\": {", "\"Torch.add.0.forward\": 5, \"x\": {").into_bytes(),
            vec!["must be an object"],
        ),
        ("deep", format!("{{\"data\": {{\"a\": {{\"input_args\": {deep}}}}}}}").into_bytes(), vec!["nesting deeper"]),
        ("binary", vec![0x89, b'P', b'N', b'G', 0, 0xff, 0xfe, 1, 2, 3], vec!["dump.json", "byte"]),
        (
            "duplicate",
            GOOD.replace("\"Torch.add.0.forward\": {", "\"Torch.add.0.forward\": {}, \"Torch.add.0.forward\": {")
                .into_bytes(),
            vec!["twice"],
        ),
    ];
    for (name, bytes, expect) in cases {
        let src = tree(tmp.path(), name, &bytes);
        assert_refused(&src, &ds, &expect);
    }
    assert_refused(&tmp.path().join("no-such-folder"), &ds, &["no-such-folder"]);
    // A good file beside a bad one: nothing of either is committed.
    let mixed = tree(tmp.path(), "mixed", GOOD.as_bytes());
    let bad = mixed.join("step1/rank0");
    std::fs::create_dir_all(&bad).expect("mkdir");
    std::fs::write(bad.join("dump.json"), &GOOD.as_bytes()[..100]).expect("write");
    assert_refused(&mixed, &ds, &["step1/rank0/dump.json"]);
}

#[test]
fn a_failed_import_into_a_new_folder_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tree(tmp.path(), "bad", b"{\"data\": [");
    let ds = tmp.path().join("new-ds");
    let out = cli::probelake([Path::new("import"), &src, &ds]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!ds.exists(), "the failed import left {}", ds.display());
}

#[test]
fn truncation_at_every_offset_is_an_error_never_a_panic() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The library directly: running the binary thousands of times would be slow.
    for cut in 0..GOOD.len() {
        let bytes = &GOOD.as_bytes()[..cut];
        let result = probelake_format::json::parse(bytes);
        assert!(result.is_err(), "a dump cut at {cut} parsed");
    }
    let _ = tmp;
}
