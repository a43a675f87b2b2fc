//! `probelake compare --data-mapping/--cell-mapping` (msprobe's `-dm`/`-cm`) checked cell for
//! cell against what `msprobe compare` 26.2 wrote for the same pairs and mapping files
//! (`tests/data/compare-ref/mapping`, its README and RULES.md): from the dump.json files
//! compared in memory, and from the same runs imported into datasets, through the plans.

use std::path::{Path, PathBuf};

use crate::cli;
use crate::compare::{first_csv_difference, parse_csv};
use crate::fixtures::files_below;

fn refs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare-ref/mapping")
}

/// The cases of `cases.tsv` whose options are `-dm` and `-cm` alone, as (case, target run,
/// golden run, probelake's flags for them).
fn mapping_cases() -> Vec<(String, String, String, Vec<String>)> {
    let table = std::fs::read_to_string(refs().join("cases.tsv")).expect("cases.tsv");
    let mut cases = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [case, target, golden, options, outcome] = cols[..] else { panic!("cases.tsv: {line}") };
        let words: Vec<&str> = options.split_whitespace().collect();
        if outcome != "csv" || words.iter().any(|w| w.starts_with('-') && !matches!(*w, "-dm" | "-cm")) {
            continue;
        }
        let mut flags = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let flag = if words[i] == "-dm" { "--data-mapping" } else { "--cell-mapping" };
            flags.push(flag.to_string());
            if let Some(file) = words.get(i + 1).filter(|w| !w.starts_with('-')) {
                flags.push(refs().join("cases").join(case).join(file).display().to_string());
                i += 1;
            }
            i += 1;
        }
        cases.push((case.to_string(), target.to_string(), golden.to_string(), flags));
    }
    cases
}

fn reference(case: &str) -> String {
    let path = refs().join("cases").join(case).join("compare_result.csv.zst");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8(zstd::stream::decode_all(file).expect("zstd")).expect("utf-8")
}

/// Runs `probelake compare TARGET GOLDEN FLAGS -o OUT` and returns its one result file's text.
fn compared(target: &Path, golden: &Path, flags: &[String], out: &Path) -> String {
    let mut args: Vec<String> = vec!["compare".into(), target.display().to_string(), golden.display().to_string()];
    args.extend(flags.iter().cloned());
    args.extend(["-o".into(), out.display().to_string(), "-q".into()]);
    let done = cli::probelake(&args);
    assert!(matches!(done.status.code(), Some(0 | 1)), "{args:?}: {}", String::from_utf8_lossy(&done.stderr));
    let files = files_below(out);
    assert_eq!(files.len(), 1, "{}: {files:?}", out.display());
    std::fs::read_to_string(out.join(&files[0])).expect("result")
}

fn assert_same(case: &str, how: &str, ours: &str) {
    let theirs = reference(case);
    if ours != theirs {
        let diff = first_csv_difference(&parse_csv(ours), &parse_csv(&theirs));
        panic!("{case} ({how}): {}", diff.unwrap_or_else(|| "same cells, but the text differs".into()));
    }
}

#[test]
fn data_and_cell_mappings_give_msprobes_tables_cell_for_cell() {
    let cases = mapping_cases();
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    // At least two pairs each: one where the mapping matches, one that also leaves rows unmatched.
    for expected in ["dm_full", "dm_partial", "cm_full", "cm_partial", "cm_noarg", "cm_dm_combined"] {
        assert!(names.contains(&expected), "cases.tsv lacks {expected}: {names:?}");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = refs().join("runs");
    for (case, target, golden, flags) in &cases {
        let (t, g) = (runs.join(target).join("dump.json"), runs.join(golden).join("dump.json"));
        let ours = compared(&t, &g, flags, &tmp.path().join(case).join("files"));
        assert_same(case, "dump.json files", &ours);
    }
    // Through the plans over datasets: the target's key is the mapped SQL function's.
    for (case, target, golden, flags) in
        cases.iter().filter(|c| ["dm_partial", "cm_partial", "cm_noarg"].contains(&c.0.as_str()))
    {
        let lakes = [target, golden].map(|run| {
            let lake = tmp.path().join(case).join(format!("lake-{run}"));
            let src = runs.join(run).join("dump.json");
            let done = cli::probelake([
                "import".to_string(),
                src.display().to_string(),
                lake.display().to_string(),
                "-q".into(),
            ]);
            assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
            lake
        });
        let ours = compared(&lakes[0], &lakes[1], flags, &tmp.path().join(case).join("datasets"));
        assert_same(case, "datasets", &ours);
    }
}

#[test]
fn a_mapping_file_that_is_not_a_flat_yaml_mapping_is_refused_naming_the_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = tmp.path().join("nested.yaml");
    std::fs::write(&bad, "Block:\n  norm: ln\n").expect("write");
    let run = refs().join("runs/mix-target/dump.json");
    let done = cli::probelake([
        "compare".to_string(),
        run.display().to_string(),
        run.display().to_string(),
        "--cell-mapping".into(),
        bad.display().to_string(),
        "-o".into(),
        tmp.path().join("out").display().to_string(),
    ]);
    assert_eq!(done.status.code(), Some(2));
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(err.contains("nested.yaml: line 1") && err.contains("flat"), "{err}");
    assert!(!tmp.path().join("out").exists());
}
