//! `probelake compare --data-mapping/--cell-mapping/--fuzzy-match` (msprobe's `-dm`/`-cm`/`-fm`)
//! checked cell for cell against what `msprobe compare` 26.2 wrote for the same pairs and
//! mapping files (`tests/data/compare-ref/mapping`, its README and RULES.md): from the dump.json
//! files compared in memory, and from the same runs imported into datasets, through the plans.
//! Where msprobe's own `-fm` output is broken (statistics and md5 modes), probelake refuses.

use std::path::{Path, PathBuf};

use crate::cli;
use crate::compare::{first_csv_difference, parse_csv};
use crate::fixtures::files_below;

fn refs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare-ref/mapping")
}

/// Cases where msprobe 26.2 writes a CSV with `-fm` that misplaces its columns: refused.
const BROKEN_FUZZY: [&str; 2] = ["fm_stats_same", "fm_md5_diff"];

/// The cases of `cases.tsv` whose options are `-dm`, `-cm` and `-fm` and whose outcome is a
/// usable CSV, as (case, target run, golden run, probelake's flags for them).
fn mapping_cases() -> Vec<(String, String, String, Vec<String>)> {
    let table = std::fs::read_to_string(refs().join("cases.tsv")).expect("cases.tsv");
    let mut cases = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [case, target, golden, options, outcome] = cols[..] else { panic!("cases.tsv: {line}") };
        let words: Vec<&str> = options.split_whitespace().collect();
        if outcome != "csv"
            || BROKEN_FUZZY.contains(&case)
            || words.iter().any(|w| w.starts_with('-') && !matches!(*w, "-dm" | "-cm" | "-fm"))
        {
            continue;
        }
        let mut flags = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let flag = match words[i] {
                "-dm" => "--data-mapping",
                "-cm" => "--cell-mapping",
                _ => "--fuzzy-match",
            };
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

/// msprobe's CSV for `case` (a case folder, or a folder inside one).
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

/// Cell for cell, as the other compare tests hold it: Cosine and EucDist (tensor mode) may
/// differ from numpy's BLAS sums in their last bits, every other cell is msprobe's text.
fn assert_same(case: &str, how: &str, ours: &str) {
    let theirs = reference(case);
    if let Some(diff) = first_csv_difference(&parse_csv(ours), &parse_csv(&theirs)) {
        panic!("{case} ({how}): {diff}");
    }
}

#[test]
fn data_and_cell_mappings_give_msprobes_tables_cell_for_cell() {
    let cases = mapping_cases();
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    // At least two pairs each: one where the mapping matches, one that also leaves rows unmatched.
    for expected in [
        "dm_full",
        "dm_partial",
        "cm_full",
        "cm_partial",
        "cm_noarg",
        "cm_dm_combined",
        "dm_full_fm",
        "fm_tensor_diff",
        "fm_tensor_prefix",
    ] {
        assert!(names.contains(&expected), "cases.tsv lacks {expected}: {names:?}");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = refs().join("runs");
    for (case, target, golden, flags) in &cases {
        let (t, g) = (runs.join(target).join("dump.json"), runs.join(golden).join("dump.json"));
        let ours = compared(&t, &g, flags, &tmp.path().join(case).join("files"));
        assert_same(case, "dump.json files", &ours);
        if case == "fm_tensor_diff" {
            // The same pair the other way round: the golden run has the rows the target lacks.
            let ours = compared(&g, &t, flags, &tmp.path().join(case).join("swapped"));
            assert_same("fm_tensor_diff/swapped", "dump.json files", &ours);
        }
    }
    // Through the plans over datasets: the target's key is the mapped SQL function's, and the
    // fuzzy walk runs over both sides' keyed leaves.
    let through_plans = ["dm_partial", "cm_partial", "cm_noarg", "dm_full_fm", "fm_tensor_diff", "fm_tensor_prefix"];
    for (case, target, golden, flags) in cases.iter().filter(|c| through_plans.contains(&c.0.as_str())) {
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

#[test]
fn fuzzy_match_is_refused_where_msprobes_own_output_is_broken() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = refs().join("runs");
    // Statistics and md5 dumps: msprobe 26.2 misplaces the golden columns or crashes.
    for (target, golden, mode) in
        [("l1-target", "l1-golden", "statistics"), ("l1-md5-target", "l1-md5-golden-diff", "md5")]
    {
        let out = tmp.path().join(target);
        let done = cli::probelake([
            "compare".to_string(),
            runs.join(target).join("dump.json").display().to_string(),
            runs.join(golden).join("dump.json").display().to_string(),
            "--fuzzy-match".into(),
            "-o".into(),
            out.display().to_string(),
        ]);
        assert_eq!(done.status.code(), Some(2), "{target}");
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(err.contains("tensor mode only") && err.contains(&format!("in {mode} mode")), "{err}");
        assert!(!out.exists() || files_below(&out).is_empty(), "{target}: files left behind");
    }
}
