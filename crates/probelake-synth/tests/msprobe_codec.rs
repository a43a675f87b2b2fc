//! The msprobe codec over synthesized runs: export gives the tree back byte for byte, fails
//! whole, and the leaf reader agrees with the general parser on every task, level and dtype.
//! (Here rather than in probelake-msprobe, which the synthesizer depends on.)
#![allow(clippy::unwrap_used)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use probelake_format::{FormatError, Lake, Table};
use probelake_msprobe::testing::{dump_files_below, files_below, read_straight};
use probelake_msprobe::{export, import, ExportOptions, ImportOptions, NoProgress, StackFrames, EXPORT_DUMP_COLUMNS};
use probelake_synth::{write_run, SynthDtype, SynthLevel, SynthSpec, SynthTask};

/// Synthesized runs of every task, level and dtype: both ways agree on every file, and most
/// leaves are read straight.
#[test]
fn synthesized_dump_files_take_apart_the_same_both_ways() {
    let synthesized = tempfile::tempdir().unwrap();
    for (i, (task, level, dtype)) in [
        (SynthTask::Statistics, SynthLevel::Mix, SynthDtype::Fp32),
        (SynthTask::Md5, SynthLevel::L0, SynthDtype::Bf16),
        (SynthTask::Tensor, SynthLevel::L1, SynthDtype::Bf16),
    ]
    .into_iter()
    .enumerate()
    {
        let spec = SynthSpec { task, level, dtype, global_steps: vec![1], ..SynthSpec::demo() };
        write_run(&spec, &synthesized.path().join(i.to_string())).unwrap();
    }
    let files = dump_files_below(synthesized.path());
    let (read, leaves) = read_straight(&files);
    // Integer statistics, `class_type` records and container values are left to the
    // general way; the rest, most of every file, is read straight.
    assert!(read * 10 > leaves * 8, "{read} of {leaves} leaves read straight from {} files", files.len());
}

/// Every file below `root`, relative, with its bytes, in path order.
fn contents_below(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let relative = |path: PathBuf| (path.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
    files_below(root).into_iter().map(relative).collect()
}

/// A synthesized run of six units (two steps, three stages), imported into a dataset.
async fn six_units(dir: &Path) -> (PathBuf, Lake) {
    let tree = dir.join("tree");
    write_run(&SynthSpec::demo(), &tree).unwrap();
    let lake = Lake::local(&dir.join("ds")).unwrap();
    import(&tree, &lake, &ImportOptions::default(), &NoProgress).await.unwrap();
    (tree, lake)
}

#[tokio::test]
async fn units_rendered_side_by_side_give_the_tree_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (tree, lake) = six_units(dir.path()).await;
    let out = dir.path().join("out");
    let report = export(&lake, &out, &ExportOptions::default(), &NoProgress).await.unwrap();
    let (want, got) = (contents_below(&tree), contents_below(&out));
    assert_eq!(report.units, 6);
    assert_eq!(report.files, got.len());
    assert_eq!(report.bytes, got.values().map(|b| b.len() as u64).sum::<u64>());
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (path, bytes) in &want {
        assert!(got.get(path) == Some(bytes), "{} differs", path.display());
    }
}

#[tokio::test]
async fn the_first_broken_unit_in_order_is_the_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_, lake) = six_units(dir.path()).await;
    let records = lake.units().await.unwrap();
    // Units 2 and 4 (0-based) broken: their dump files are no longer Parquet. Units 1 and 3
    // render beside unit 2, and unit 1 must be written first; unit 2's error must win over 4's.
    let broken = |k: usize| records[k].files_of(Table::Dump).next().unwrap().path.clone();
    for k in [2, 4] {
        std::fs::write(dir.path().join("ds").join(broken(k)), b"not parquet").unwrap();
    }
    let out = dir.path().join("out");
    for _ in 0..3 {
        let err = export(&lake, &out, &ExportOptions::default(), &NoProgress).await.unwrap_err();
        let Some(FormatError::Parquet { location, .. }) = err.as_dataset() else { panic!("{err}") };
        assert!(location.ends_with(&broken(2)), "{location}");
        assert!(!out.exists(), "a failed export left files behind");
    }
}

#[tokio::test]
async fn frames_decode_as_a_dictionary_and_dump_files_without_the_unused_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (_, lake) = six_units(dir.path()).await;
    let record = lake.units().await.unwrap().remove(0);
    let stack = record.files_of(Table::Stack).next().unwrap();
    let plain = lake.fetch_file(stack).await.unwrap().decode().unwrap();
    let hinted = lake.fetch_file(stack).await.unwrap().decode_columns(None, &["frames"]).unwrap();
    let frames_of = |batches: &[RecordBatch]| -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        for batch in batches {
            let frames = StackFrames::new(batch.column_by_name("frames").unwrap()).unwrap();
            for i in 0..batch.num_rows() {
                rows.push(frames.row(i).unwrap().into_iter().map(Cow::into_owned).collect());
            }
        }
        rows
    };
    let frames_type = hinted[0].column_by_name("frames").unwrap().data_type().clone();
    let arrow::datatypes::DataType::List(item) = frames_type else { panic!("{frames_type}") };
    assert!(matches!(item.data_type(), arrow::datatypes::DataType::Dictionary(..)), "{item}");
    let want = frames_of(&plain);
    assert!(want.iter().any(|f| !f.is_empty()), "the demo run has stack frames");
    assert_eq!(frames_of(&hinted), want);

    let dump = record.files_of(Table::Dump).next().unwrap();
    let only = lake.fetch_file(dump).await.unwrap().decode_columns(Some(&EXPORT_DUMP_COLUMNS), &[]).unwrap();
    let names: Vec<String> = only[0].schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names.len(), EXPORT_DUMP_COLUMNS.len());
    assert!(names.iter().all(|n| EXPORT_DUMP_COLUMNS.contains(&n.as_str())), "{names:?}");
}

#[tokio::test]
async fn a_unit_meeting_an_existing_file_stops_the_export_before_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (tree, lake) = six_units(dir.path()).await;
    let out = dir.path().join("out");
    export(&lake, &out, &ExportOptions::default(), &NoProgress).await.unwrap();
    // One unit's dump.json is already there (not the first unit's, so the units before it
    // are written before the refusal and must be rolled back).
    let kept = contents_below(&tree).into_keys().filter(|p| p.ends_with("dump.json")).nth(3).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::create_dir_all(out.join(kept.parent().unwrap())).unwrap();
    std::fs::write(out.join(&kept), b"mine").unwrap();
    let err = export(&lake, &out, &ExportOptions::default(), &NoProgress).await.unwrap_err();
    assert!(matches!(err.as_dataset(), Some(FormatError::Exists { path }) if path.ends_with(&kept)), "{err}");
    assert_eq!(contents_below(&out).into_iter().collect::<Vec<_>>(), [(kept, b"mine".to_vec())]);
}
