//! `probelake compare` over the pairs msprobe users compare every day — two step folders of
//! one run, one rank's dump.json against another's, a verl stage's `step0/` of two global
//! steps — and the same pairs chosen with `--target-*`/`--golden-*` flags, each checked cell
//! for cell against what `msprobe compare` (mindstudio-probe 26.2) wrote for the pair
//! (`tests/data/compare-ref`, see its README). The real binary runs, so that telling the
//! inputs apart, pairing, file names and cells are all checked.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cli;
use crate::compare::{first_csv_difference, parse_csv};
use crate::fixtures::{files_below, root};

/// `plain-mix-stats-2rank/step1` against `step0`: rank folders paired by position.
const STEPS: &str = "plain-mix-stats-2rank__step1_vs_step0";
/// `plain-mix-stats-2rank/step0/rank1/dump.json` against `rank0/dump.json`.
const RANKS: &str = "plain-mix-stats-2rank__rank1_vs_rank0__step0";
/// `verl-l1-stats-attnbug/step_2/actor_update/step0` against `step_1/actor_update/step0`.
const VERL_STEPS: &str = "verl-l1-stats-attnbug__step_2_vs_step_1__actor_update";

/// msprobe's CSV for `case`, kept zstd-compressed beside the tests.
fn reference(case: &str, file: &str) -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare-ref").join(case).join(format!("{file}.zst"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8(zstd::stream::decode_all(file).expect("zstd")).expect("utf-8")
}

/// Runs `probelake compare ARGS -q` and returns its exit code and stderr.
fn compare<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(args: I) -> (Option<i32>, String) {
    let mut all: Vec<OsString> = vec!["compare".into()];
    all.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
    all.push("-q".into());
    let out = cli::probelake(all);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The result files in `dir`, each as its name without the timestamp (`compare_result_rank0.csv`)
/// and its path; the timestamp must be msprobe's 14 digits.
fn results(dir: &Path) -> Vec<(String, PathBuf)> {
    files_below(dir)
        .into_iter()
        .map(|rel| {
            let name = rel.to_string_lossy().into_owned();
            let (stem, ext) = name.rsplit_once('.').unwrap_or_else(|| panic!("{name}: no extension"));
            let (prefix, stamp) = stem.rsplit_once('_').unwrap_or_else(|| panic!("{name}: no timestamp"));
            assert!(stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()), "{name}: no timestamp");
            (format!("{prefix}.{ext}"), dir.join(rel))
        })
        .collect()
}

/// Asserts that `dir` holds exactly the files named in `files` (without timestamps), each byte
/// for byte the reference file of `case` named beside it (and says the first cell that
/// differs when one is not).
fn assert_matches_msprobe(case: &str, dir: &Path, files: &[(&str, &str)]) {
    let written = results(dir);
    let names: Vec<&str> = written.iter().map(|(n, _)| n.as_str()).collect();
    let expected: Vec<&str> = files.iter().map(|(ours, _)| *ours).collect();
    assert_eq!(names, expected, "{case}: files written in {}", dir.display());
    for ((name, path), (_, reference_name)) in written.iter().zip(files) {
        let (ours, theirs) = (std::fs::read_to_string(path).expect("result"), reference(case, reference_name));
        if ours != theirs {
            let diff = first_csv_difference(&parse_csv(&ours), &parse_csv(&theirs));
            panic!("{case}/{name}: {}", diff.unwrap_or_else(|| "same cells, but the text differs (quoting?)".into()));
        }
    }
}

#[test]
fn compare_pairs_step_folders_by_rank_folder_position() {
    let Some(fixtures) = root() else { return };
    let run = fixtures.join("runs/plain-mix-stats-2rank");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("cmp");
    let (code, err) = compare([run.join("step1"), run.join("step0"), "-o".into(), out.clone()]);
    // Each rank has one row msprobe's rules call an error.
    assert_eq!(code, Some(1), "{err}");
    assert_matches_msprobe(
        STEPS,
        &out,
        &[
            ("compare_result_rank0.csv", "compare_result_rank0.csv"),
            ("compare_result_rank1.csv", "compare_result_rank1.csv"),
        ],
    );
    // The same pair chosen in the whole run by flags, and written as workbooks named alike.
    let out = tmp.path().join("flags");
    let (code, err) = compare([
        run.clone(),
        run.clone(),
        "--target-step".into(),
        "1".into(),
        "--golden-step".into(),
        "0".into(),
        "-o".into(),
        out.clone(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert_matches_msprobe(
        STEPS,
        &out,
        &[
            ("compare_result_rank0.csv", "compare_result_rank0.csv"),
            ("compare_result_rank1.csv", "compare_result_rank1.csv"),
        ],
    );
    let out = tmp.path().join("xlsx");
    let (code, err) = compare([run.join("step1"), run.join("step0"), "--xlsx".into(), "-o".into(), out.clone()]);
    assert_eq!(code, Some(1), "{err}");
    let names: Vec<String> = results(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["compare_result_rank0.xlsx", "compare_result_rank1.xlsx"]);
}

#[test]
fn compare_pairs_two_dump_files_whatever_their_ranks() {
    let Some(fixtures) = root() else { return };
    let step = fixtures.join("runs/plain-mix-stats-2rank/step0");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("cmp");
    let (code, err) = compare([step.join("rank1/dump.json"), step.join("rank0/dump.json"), "-o".into(), out.clone()]);
    assert_eq!(code, Some(1), "{err}");
    assert_matches_msprobe(RANKS, &out, &[("compare_result.csv", "compare_result.csv")]);

    // Two rank folders pair by unit, and these differ: the error names both and the flags.
    let (code, err) = compare([step.join("rank1"), step.join("rank0"), "-o".into(), tmp.path().join("none")]);
    assert_eq!(code, Some(2), "{err}");
    for part in [
        "no (step, stage, rank) is in both runs",
        "target units: step 0 / stage default / rank 1",
        "golden units: step 0 / stage default / rank 0",
        "give: --target-rank 1 --golden-rank 0",
    ] {
        assert!(err.contains(part), "{part:?} not in: {err}");
    }
    assert!(!tmp.path().join("none").exists());
    // With those flags, and from a dataset, the same pair named after the target's rank.
    let ds = tmp.path().join("ds");
    cli::import(&fixtures.join("runs/plain-mix-stats-2rank"), &ds);
    let out = tmp.path().join("flags");
    let (code, err) = compare([
        ds.clone(),
        ds.clone(),
        "--step".into(),
        "0".into(),
        "--target-rank".into(),
        "1".into(),
        "--golden-rank".into(),
        "0".into(),
        "-o".into(),
        out.clone(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    // A dataset's unit is named after its rank: the cells are msprobe's for the two files.
    assert_matches_msprobe(RANKS, &out, &[("compare_result_rank1.csv", "compare_result.csv")]);
}

#[test]
fn compare_pairs_a_verl_stage_of_two_global_steps() {
    let Some(fixtures) = root() else { return };
    let run = fixtures.join("runs/verl-l1-stats-attnbug");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("cmp");
    let (code, err) = compare([
        run.join("step_2/actor_update/step0"),
        run.join("step_1/actor_update/step0"),
        "-o".into(),
        out.clone(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_matches_msprobe(VERL_STEPS, &out, &[("compare_result_proc6420.csv", "compare_result_proc6420.csv")]);
    // The stage folders themselves pair by unit (msprobe refuses them): the flags say how.
    let (code, err) = compare([
        run.join("step_2/actor_update"),
        run.join("step_1/actor_update"),
        "-o".into(),
        tmp.path().join("none"),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give: --target-step 2 --golden-step 1"), "{err}");
    let out = tmp.path().join("flags");
    let (code, err) = compare([
        run.clone(),
        run.clone(),
        "--stage".into(),
        "actor_update".into(),
        "--target-step".into(),
        "2".into(),
        "--golden-step".into(),
        "1".into(),
        "-o".into(),
        out.clone(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_matches_msprobe(VERL_STEPS, &out, &[("compare_result_proc6420.csv", "compare_result_proc6420.csv")]);
}

#[test]
fn compare_refuses_half_a_pair_of_flags_and_unequal_rank_counts() {
    use probelake_synth::{write_run, SynthLayout, SynthSpec};
    let tmp = tempfile::tempdir().expect("tempdir");
    let (two, one) = (tmp.path().join("two"), tmp.path().join("one"));
    for (ranks, dir) in [(2, &two), (1, &one)] {
        let spec = SynthSpec { layout: SynthLayout::Msprobe, ranks, global_steps: vec![0], ..SynthSpec::demo() };
        write_run(&spec, dir).expect("synth");
    }
    let (code, err) = compare([two.as_os_str(), two.as_os_str(), OsStr::new("--golden-rank"), OsStr::new("0")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--golden-rank 0 needs --target-rank too"), "{err}");
    let none = tmp.path().join("none");
    let (code, err) = compare([two.join("step0"), one.join("step0"), "-o".into(), none.clone()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("2 rank folder(s) (rank0, rank1), the golden run's 1 (rank0)"), "{err}");
    assert!(!none.exists());
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// The stamp in a result's name is local time, as msprobe's: under UTC+8 it is eight hours
/// ahead of the clock in UTC.
#[test]
fn compare_stamps_results_in_local_time() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src).expect("synth");
    let dump = files_below(&src).into_iter().find(|f| f.ends_with("dump.json")).expect("a dump.json");
    let dump = src.join(dump);
    // A POSIX rule needs no zone files; the named zone is checked where they are installed.
    let mut zones = vec!["CST-8"];
    if Path::new("/usr/share/zoneinfo/Asia/Shanghai").exists() {
        zones.push("Asia/Shanghai");
    }
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64;
    for (i, zone) in zones.into_iter().enumerate() {
        let out = tmp.path().join(format!("cmp{i}"));
        let before = now();
        let run = Command::new(env!("CARGO_BIN_EXE_probelake"))
            .env("TZ", zone)
            .args([
                OsStr::new("compare"),
                dump.as_os_str(),
                dump.as_os_str(),
                OsStr::new("-q"),
                OsStr::new("-o"),
                out.as_os_str(),
            ])
            .output()
            .expect("the probelake binary runs");
        let after = now();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let names = files_below(&out);
        let [name] = names.as_slice() else { panic!("{names:?}") };
        let stamp = name.to_string_lossy().trim_start_matches("compare_result_").trim_end_matches(".csv").to_string();
        let num = |r: std::ops::Range<usize>| stamp.get(r).and_then(|s| s.parse::<i64>().ok()).expect("a digit field");
        let local = days_from_civil(num(0..4), num(4..6), num(6..8)) * 86_400
            + num(8..10) * 3600
            + num(10..12) * 60
            + num(12..14);
        let utc = local - 8 * 3600;
        assert!((before..=after).contains(&utc), "TZ={zone}: stamp {stamp} is not UTC+8 of {before}..={after}");
    }
}

/// The join of two different units that docs/sql.md shows runs over one run given twice and
/// pairs step 2's outputs with step 1's of the same stage, rank and item.
#[tokio::test(flavor = "multi_thread")]
async fn documented_join_of_two_steps_runs() {
    use probelake_query::datafusion::arrow::array::{Array, AsArray};
    use probelake_query::datafusion::arrow::datatypes::Float64Type;
    use probelake_query::{Run, RunSession};

    let Some(fixtures) = root() else { return };
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/sql.md")).expect("docs/sql.md");
    let start = doc.find("```sql\n-- Outputs of global step 2").expect("the documented join") + "```sql\n".len();
    let query = doc.get(start..).and_then(|rest| rest.split("```").next()).expect("its end");
    let tmp = tempfile::tempdir().expect("tempdir");
    let lake = probelake_format::Lake::local(tmp.path()).expect("lake");
    let src = fixtures.join("runs/verl-l1-stats-attnbug");
    probelake_msprobe::import(&src, &lake, &Default::default(), &probelake_msprobe::NoProgress).await.expect("import");
    let session = RunSession::open(vec![Run::new("target", lake.clone()), Run::new("golden", lake)], false)
        .await
        .expect("session");
    let batches = session.collect(query).await.expect("the documented join runs");
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 10);
    let batch = batches.iter().find(|b| b.num_rows() > 0).expect("rows");
    let (t, g) =
        (batch.column_by_name("target_norm").expect("column"), batch.column_by_name("golden_norm").expect("column"));
    let (t, g) = (t.as_primitive::<Float64Type>(), g.as_primitive::<Float64Type>());
    // The largest change first: two different steps, not a unit joined with itself.
    assert!(t.is_valid(0) && g.is_valid(0) && t.value(0) != g.value(0), "{t:?} {g:?}");
}
