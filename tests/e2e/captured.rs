//! `import_captured`: a dump handed over in memory (as `probelake.msprobe` does from a running
//! job) exports the same files as the files it came from, whether given as written or in the
//! one-line layout with `relayout`.

use std::path::{Path, PathBuf};

use probelake::format::Lake;
use probelake::msprobe::json::{parse, write_compact, Arena};
use probelake::msprobe::{discover, import_captured, place_dump_file, CapturedDump, DumpDir, Overrides};

use crate::cli;
use crate::fixtures::{assert_same_bytes, files_below, runs};
use crate::roundtrip::is_carried;

fn read_if_present(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// The one-line text Python's `json.dumps(value)` writes for the same document.
fn one_line(bytes: &[u8]) -> Vec<u8> {
    let arena = Arena::new();
    let doc = parse(bytes, &arena).expect("fixture parses");
    let mut out = Vec::with_capacity(bytes.len());
    write_compact(&mut out, &doc);
    out
}

/// Each dump folder of `run` captured in memory and committed to a fresh dataset; its export
/// must equal the folder's files.
fn captured_round_trip(run: &Path, relayout: bool, rt: &tokio::runtime::Runtime) -> usize {
    let mut compared = 0;
    for dir in discover(run, &Overrides::default()).expect("discover") {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ds = tmp.path().join("ds");
        let lake = Lake::local(&ds).expect("lake");
        let mut tensors = Vec::new();
        if let Ok(entries) = std::fs::read_dir(dir.dir.join("dump_tensor_data")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                tensors.push((name, std::fs::read(entry.path()).expect("tensor file")));
            }
        }
        let absolute: PathBuf = std::fs::canonicalize(&dir.path).expect("canonical path");
        let captured = CapturedDump {
            dump_path: absolute.to_string_lossy().into_owned(),
            dump: std::fs::read(&dir.path).expect("dump file"),
            stack: read_if_present(&dir.dir.join("stack.json")),
            construct: read_if_present(&dir.dir.join("construct.json")),
            tensors,
            relayout: None,
        };
        // msprobe writes indent=1; a file whose rows do not rebuild its one-line text is
        // refused in that form and then given as written, as probelake.msprobe does.
        let taken = relayout && captured.dump.starts_with(b"{\n \"") && {
            let one = CapturedDump {
                dump: one_line(&captured.dump),
                stack: captured.stack.as_deref().map(one_line),
                construct: captured.construct.as_deref().map(one_line),
                relayout: Some(1),
                ..captured.clone()
            };
            rt.block_on(import_captured(&lake, &one)).is_ok()
        };
        if !taken {
            rt.block_on(import_captured(&lake, &captured)).expect("import_captured");
        }
        let out = tmp.path().join("out");
        cli::export(&ds, &out);
        let exported_dir = out.join(folder_of(&dir));
        let want: Vec<_> = files_below(&dir.dir).into_iter().filter(|r| is_carried(r)).collect();
        assert_eq!(want, files_below(&exported_dir), "{}: exported file list differs", dir.dir.display());
        for rel in &want {
            let a = std::fs::read(dir.dir.join(rel)).expect("read original");
            let b = std::fs::read(exported_dir.join(rel)).expect("read exported");
            assert_same_bytes(&dir.dir.join(rel), &a, &b);
        }
        compared += want.len();
    }
    compared
}

/// The folder export writes a captured dump's files into: its place in the layout.
fn folder_of(dir: &DumpDir) -> PathBuf {
    let placed = place_dump_file(&std::fs::canonicalize(&dir.path).expect("path")).expect("place");
    PathBuf::from(placed.file.rsplit_once('/').map_or("", |(folder, _)| folder))
}

#[test]
fn captured_dumps_export_byte_for_byte() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut files = 0;
    for run in runs() {
        files += captured_round_trip(&run, false, &rt);
        files += captured_round_trip(&run, true, &rt);
    }
    if !runs().is_empty() {
        assert!(files > 100, "only {files} files compared");
        eprintln!("{files} files identical after import_captured and export");
    }
}

#[test]
fn a_captured_dump_with_bad_json_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let lake = Lake::local(&tmp.path().join("ds")).expect("lake");
    let bad = CapturedDump {
        dump_path: "/job/dump/step3/rank1/dump.json".into(),
        dump: b"{\"task\": \"statistics\", \"data\": {".to_vec(),
        ..CapturedDump::default()
    };
    let err = rt.block_on(import_captured(&lake, &bad)).expect_err("bad JSON is refused");
    assert!(err.to_string().contains("step3/rank1/dump.json"), "{err}");
    assert!(files_below(&tmp.path().join("ds")).is_empty(), "a refused dump left files behind");
}
