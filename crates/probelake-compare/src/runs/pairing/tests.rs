//! The pairing rules, one case each.

use super::*;

fn record(step: i64, stage: &str, rank: i64) -> CommitRecord {
    CommitRecord {
        format_version: 1,
        unit: Unit::new(step, stage, rank),
        commit_id: String::new(),
        committed_at: 0,
        writer: String::new(),
        files: Vec::new(),
        counts: Default::default(),
    }
}

fn folder(name: &str, rank: i64) -> DumpFolder {
    DumpFolder { name: name.into(), rank }
}

/// Each pair as (target unit, golden unit, target folder).
fn pairs(p: &Pairing<'_>) -> Vec<(String, String, Option<String>)> {
    p.pairs
        .iter()
        .map(|p| (p.target.unit.to_string(), p.golden.unit.to_string(), p.target_folder.map(str::to_string)))
        .collect()
}

fn u(step: i64, stage: &str, rank: i64) -> String {
    Unit::new(step, stage, rank).to_string()
}

fn each<T>(target: T, golden: T) -> Pick<T> {
    Pick::Each { target, golden }
}

#[test]
fn two_dump_files_pair_whatever_their_units() {
    let (t, g) = ([record(1, "default", 1)], [record(0, "default", 0)]);
    let kind = InputKind::DumpFile;
    let p =
        pair_units(Side { kind: &kind, units: &t }, Side { kind: &kind, units: &g }, &UnitChoice::default()).unwrap();
    assert_eq!(p.rule, PairingRule::DumpFiles);
    assert_eq!(pairs(&p), [(u(1, "default", 1), u(0, "default", 0), None)]);
    assert!(p.skipped.is_empty());
}

/// msprobe pairs `rank*` folders by sorted position, not by number: rank1 and rank3 of the
/// target meet rank0 and rank2 of the golden run, and the result is named after the target's.
#[test]
fn step_folders_pair_rank_folders_by_position() {
    let t = [record(1, "default", 1), record(1, "default", 3)];
    let g = [record(0, "default", 0), record(0, "default", 2)];
    let tk = InputKind::RankFolders(vec![folder("rank1", 1), folder("rank3", 3)]);
    let gk = InputKind::RankFolders(vec![folder("rank0", 0), folder("rank2", 2)]);
    let p = pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap();
    assert_eq!(p.rule, PairingRule::StepFolders);
    assert_eq!(
        pairs(&p),
        [
            (u(1, "default", 1), u(0, "default", 0), Some("rank1".into())),
            (u(1, "default", 3), u(0, "default", 2), Some("rank3".into()))
        ]
    );
    // `--rank 3` keeps the pairs of the target's rank 3.
    let choice = UnitChoice { rank: Pick::Both(3), ..Default::default() };
    let p = pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &choice).unwrap();
    assert_eq!(pairs(&p), [(u(1, "default", 3), u(0, "default", 2), Some("rank3".into()))]);
}

#[test]
fn unequal_rank_folder_counts_are_refused() {
    let t = [record(1, "default", 0), record(1, "default", 1)];
    let g = [record(0, "default", 0)];
    let tk = InputKind::RankFolders(vec![folder("rank0", 0), folder("rank1", 1)]);
    let gk = InputKind::RankFolders(vec![folder("rank0", 0)]);
    let err =
        pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap_err();
    assert_eq!(
        err,
        PairingError::RankFolderCount {
            words: Words::Flags,
            target: vec!["rank0".into(), "rank1".into()],
            golden: vec!["rank0".into()]
        }
    );
    assert!(err.to_string().contains("2 rank folder(s) (rank0, rank1), the golden run's 1 (rank0)"), "{err}");
}

/// A rank folder without a dump file leaves its pair out, as msprobe skips it; the others
/// keep their positions.
#[test]
fn a_rank_folder_without_a_dump_is_skipped() {
    let t = [record(1, "default", 1)];
    let g = [record(0, "default", 0), record(0, "default", 1)];
    let tk = InputKind::RankFolders(vec![folder("rank0", 0), folder("rank1", 1)]);
    let gk = InputKind::RankFolders(vec![folder("rank0", 0), folder("rank1", 1)]);
    let p = pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap();
    assert_eq!(pairs(&p), [(u(1, "default", 1), u(0, "default", 1), Some("rank1".into()))]);
    assert_eq!(p.skipped, ["target rank0 with golden rank0: the target's rank0 holds no dump file"]);
}

/// A verl stage's `step0/` holds one `proc{pid}` folder: two of them pair whatever their steps.
#[test]
fn proc_folders_pair_with_each_other() {
    let t = [record(2, "actor_update", -1)];
    let g = [record(1, "actor_update", -1)];
    let (tk, gk) = (InputKind::ProcFolder(folder("proc42", -1)), InputKind::ProcFolder(folder("proc7", -1)));
    let p = pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap();
    assert_eq!(pairs(&p), [(u(2, "actor_update", -1), u(1, "actor_update", -1), Some("proc42".into()))]);
}

/// Datasets, trees, rank folders and mixed inputs pair by equal units, and say what they
/// left out.
#[test]
fn other_inputs_pair_by_equal_units() {
    let t = [record(1, "a", 0), record(2, "a", 0)];
    let g = [record(1, "a", 0), record(3, "a", 0)];
    for (tk, gk) in [
        (InputKind::Other, InputKind::Other),
        (InputKind::DumpFile, InputKind::Other),
        (InputKind::RankFolders(vec![folder("rank0", 0)]), InputKind::ProcFolder(folder("proc1", -1))),
    ] {
        let p =
            pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap();
        assert_eq!(p.rule, PairingRule::Units);
        assert_eq!(pairs(&p), [(u(1, "a", 0), u(1, "a", 0), None)]);
        assert_eq!(
            p.skipped,
            [format!("{} is only in the target", u(2, "a", 0)), format!("{} is only in the golden run", u(3, "a", 0))]
        );
    }
}

/// `--target-step 2 --golden-step 1`: every unit of step 2 against the unit of step 1 with
/// the same stage and rank; the inputs' own rule no longer applies.
#[test]
fn flags_choose_each_sides_unit() {
    let run = [record(1, "a", 0), record(1, "a", 1), record(2, "a", 0), record(2, "a", 1), record(2, "b", 0)];
    let choice = UnitChoice { step: each(2, 1), ..Default::default() };
    let kind = InputKind::Other;
    let p = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice).unwrap();
    assert_eq!(pairs(&p), [(u(2, "a", 0), u(1, "a", 0), None), (u(2, "a", 1), u(1, "a", 1), None)]);
    assert_eq!(p.skipped, [format!("target {}: the golden run has no {}", u(2, "b", 0), u(1, "b", 0))]);
    // Rank against rank of one step, and a stage against another.
    let choice = UnitChoice { step: Pick::Both(2), rank: each(1, 0), ..Default::default() };
    let p = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice).unwrap();
    assert_eq!(pairs(&p), [(u(2, "a", 1), u(2, "a", 0), None)]);
    let choice = UnitChoice { stage: each("b".into(), "a".into()), ..Default::default() };
    let p = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice).unwrap();
    assert_eq!(pairs(&p), [(u(2, "b", 0), u(2, "a", 0), None)]);
    // Flags override a pair of files, too.
    let (t, g) = ([record(1, "default", 1)], [record(0, "default", 0)]);
    let file = InputKind::DumpFile;
    let choice = UnitChoice { step: each(1, 0), rank: each(1, 0), ..Default::default() };
    let p = pair_units(Side { kind: &file, units: &t }, Side { kind: &file, units: &g }, &choice).unwrap();
    assert_eq!(p.rule, PairingRule::Units);
}

#[test]
fn a_flag_on_one_side_names_the_missing_one() {
    let err = Pick::from_flags("step", None, Some(2), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--target-step 2 needs --golden-step too: say which step of the golden side to compare with \
         (--step V chooses V on both sides)"
    );
    let err = Pick::<String>::from_flags("stage", None, None, Some("x".into())).unwrap_err();
    assert!(err.to_string().starts_with("--golden-stage x needs --target-stage too"), "{err}");
    let err = Pick::from_flags("rank", Some(0), Some(1), Some(0)).unwrap_err();
    assert_eq!(err, PairingError::BothForms { words: Words::Flags, dimension: "rank" });
    assert_eq!(Pick::from_flags("rank", None, Some(1), Some(0)).unwrap(), each(1, 0));
    assert_eq!(Pick::from_flags("rank", Some(-1), None, None).unwrap(), Pick::Both(-1));
    assert_eq!(Pick::<i64>::from_flags("rank", None, None, None).unwrap(), Pick::Any);
}

/// The error names both sides' units and the flags that pair the closest two.
#[test]
fn nothing_paired_says_which_flags_pair() {
    let (t, g) = ([record(1, "default", 1)], [record(0, "default", 0)]);
    let kind = InputKind::Other;
    let err = pair_units(Side { kind: &kind, units: &t }, Side { kind: &kind, units: &g }, &UnitChoice::default())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no (step, stage, rank) is in both runs\n  target units: step 1 / stage default / rank 1\n  golden units: \
         step 0 / stage default / rank 0\n  to compare target step 1 / stage default / rank 1 with golden step 0 / \
         stage default / rank 0, give: --target-step 1 --golden-step 0 --target-rank 1 --golden-rank 0"
    );
    // Flags that choose nothing: the closest pair among what exists, and the flags it replaces.
    let run = [record(1, "actor update", -1), record(2, "actor update", -1)];
    let choice = UnitChoice { step: each(2, 7), ..Default::default() };
    let err = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("no target unit pairs with a golden unit under --target-step 2 --golden-step 7"), "{err}");
    assert!(
        err.ends_with("give: --target-step 2 --golden-step 1 (instead of --target-step 2 --golden-step 7)"),
        "{err}"
    );
    // A --stage that still holds stays in the flags suggested.
    let choice = UnitChoice { step: each(2, 7), stage: Pick::Both("actor update".into()), ..Default::default() };
    let err = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice)
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("give: --target-step 2 --golden-step 1 --stage 'actor update' (instead of --target-step 2 --golden-step 7 --stage 'actor update')"), "{err}");
    let choice = UnitChoice { stage: each("actor update".into(), "x".into()), ..Default::default() };
    let err = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice)
        .unwrap_err()
        .to_string();
    assert!(err.contains("under --target-stage 'actor update' --golden-stage x"), "{err}");
    // A filter that leaves out the units both runs share.
    let choice = UnitChoice { rank: Pick::Both(5), ..Default::default() };
    let err = pair_units(Side { kind: &kind, units: &run }, Side { kind: &kind, units: &run }, &choice)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("no (step, stage, rank) is in both runs with --rank 5\n"), "{err}");
    assert!(err.contains("is in both runs: leave out the flags that exclude it"), "{err}");
}

#[test]
fn long_unit_lists_are_cut() {
    let t: Vec<CommitRecord> = (0..20).map(|r| record(1, "a", r)).collect();
    let g: Vec<CommitRecord> = (0..20).map(|r| record(0, "a", r)).collect();
    let kind = InputKind::Other;
    let err = pair_units(Side { kind: &kind, units: &t }, Side { kind: &kind, units: &g }, &UnitChoice::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank 7; … and 12 more\n"), "{err}");
    assert!(err.ends_with("give: --target-step 1 --golden-step 0"), "{err}");
}

#[test]
fn a_folder_matching_several_units_is_refused() {
    let t = [record(1, "default", 0), record(0, "default", 0)];
    let g = [record(0, "default", 0)];
    let tk = InputKind::RankFolders(vec![folder("rank0", 0)]);
    let gk = InputKind::RankFolders(vec![folder("rank0", 0)]);
    let err =
        pair_units(Side { kind: &tk, units: &t }, Side { kind: &gk, units: &g }, &UnitChoice::default()).unwrap_err();
    assert!(matches!(err, PairingError::AmbiguousFolder { side: "target", .. }), "{err}");
}

#[test]
fn messages_name_the_choices_in_the_callers_words() {
    let flags = Pick::from_flags("step", None, Some(2), None).unwrap_err().to_string();
    assert!(flags.starts_with("--target-step 2 needs --golden-step too"), "{flags}");
    let keywords = Pick::from_words(Words::Keywords, "stage", None, None, Some("it's".to_string())).unwrap_err();
    let keywords = keywords.to_string();
    assert!(keywords.starts_with(r"golden_stage='it\'s' needs target_stage too"), "{keywords}");
    assert!(!keywords.contains("--"), "{keywords}");
    let both = Pick::from_words(Words::Keywords, "rank", Some(1), Some(1), None).unwrap_err().to_string();
    assert!(both.starts_with("rank chooses the same rank on both sides and target_rank/golden_rank"), "{both}");

    // A choice that pairs nothing suggests keywords to Python.
    let (t, g) = ([record(2, "a", 0)], [record(1, "a", 0)]);
    let kind = InputKind::Other;
    let choice = UnitChoice { stage: Pick::Both("a".into()), words: Words::Keywords, ..Default::default() };
    let err =
        pair_units(Side { kind: &kind, units: &t }, Side { kind: &kind, units: &g }, &choice).unwrap_err().to_string();
    assert!(err.contains("give: target_step=2, golden_step=1, stage='a' (instead of stage='a')"), "{err}");
}
