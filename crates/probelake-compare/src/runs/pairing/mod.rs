//! Which unit of the target run is compared with which unit of the golden run.
//!
//! msprobe 26.2 (`msprobe compare -tp TARGET -gp GOLDEN`) pairs what it is given: two dump
//! files with each other, whatever their step, stage and rank; two step folders by the sorted
//! position of their `rank*` folders (the counts must be equal), or by their one `proc*`
//! folder each when neither holds rank folders; it refuses everything else. [`pair_units`]
//! does the same where msprobe accepts, and pairs any other two inputs (datasets, whole dump
//! trees, rank folders, a file against a folder) by (step, stage, rank), as before. Flags
//! choose each side's unit explicitly ([`UnitChoice`]): a step against another step, a stage
//! against another stage or a rank against another rank, within one run or across two.
//!
//! This module only decides; telling a file from a step folder needs the filesystem and is
//! the caller's ([`InputKind`]).

use std::fmt;

use probelake_format::{CommitRecord, Unit};

/// What one side of a comparison was given as, in msprobe's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    /// One dump.json (or debug.json) file.
    DumpFile,
    /// A step folder: its rank folders (`rank`, `rank0`, `rank1`, …), sorted as msprobe sorts
    /// them (by number, `rank` first). Never empty.
    RankFolders(Vec<DumpFolder>),
    /// A folder without rank folders that holds exactly one `proc{pid}` folder: a step folder
    /// of a single-process run, or a verl stage's `step0/`.
    ProcFolder(DumpFolder),
    /// Anything else: a dataset, a whole dump tree, a rank folder, an `s3://` location.
    Other,
}

/// A dump folder of a step folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpFolder {
    /// Its name (`rank3`, `rank`, `proc4242`), which msprobe appends to the result's file name.
    pub name: String,
    /// The rank its unit has once imported (`rank` is 0, a `proc{pid}` folder -1).
    pub rank: i64,
}

/// How one dimension (step, stage or rank) of the compared units is chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Pick<T> {
    /// Not chosen: every value, the two sides paired where they are equal.
    #[default]
    Any,
    /// This value on both sides (`--step 2`).
    Both(T),
    /// A value for each side (`--target-step 2 --golden-step 1`).
    Each {
        /// The target's value.
        target: T,
        /// The golden run's value.
        golden: T,
    },
}

impl<T: fmt::Display> Pick<T> {
    /// The pick of `dimension` (`step`, `stage`, `rank`) from its three flags: `--{dimension}`
    /// (`both`), `--target-{dimension}` and `--golden-{dimension}`. A side's flag without the
    /// other's, or `--{dimension}` with either, is an error that names the flag to change.
    pub fn from_flags(
        dimension: &'static str,
        both: Option<T>,
        target: Option<T>,
        golden: Option<T>,
    ) -> Result<Self, PairingError> {
        Pick::from_words(Words::Flags, dimension, both, target, golden)
    }

    /// [`Pick::from_flags`], with errors in the caller's `words` (Python's `step=`,
    /// `target_step=`, `golden_step=` keywords, say).
    pub fn from_words(
        words: Words,
        dimension: &'static str,
        both: Option<T>,
        target: Option<T>,
        golden: Option<T>,
    ) -> Result<Self, PairingError> {
        match (both, target, golden) {
            (None, None, None) => Ok(Pick::Any),
            (Some(v), None, None) => Ok(Pick::Both(v)),
            (None, Some(target), Some(golden)) => Ok(Pick::Each { target, golden }),
            (None, Some(v), None) => Err(PairingError::OneSided {
                words,
                dimension,
                given: "target",
                missing: "golden",
                value: v.to_string(),
            }),
            (None, None, Some(v)) => Err(PairingError::OneSided {
                words,
                dimension,
                given: "golden",
                missing: "target",
                value: v.to_string(),
            }),
            (Some(_), _, _) => Err(PairingError::BothForms { words, dimension }),
        }
    }
}

/// How a caller names the unit choices in messages: the command line's flags (`--step 2`,
/// `--target-rank 1`) or Python's keyword arguments (`step=2`, `target_rank=1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Words {
    /// `--step`, `--target-step`, `--golden-step`, …
    #[default]
    Flags,
    /// `step=`, `target_step=`, `golden_step=`, …
    Keywords,
}

impl Words {
    /// The name of `dimension`'s choice for `side` (`None`: both sides).
    pub fn name(self, side: Option<&str>, dimension: &str) -> String {
        match (self, side) {
            (Words::Flags, None) => format!("--{dimension}"),
            (Words::Flags, Some(side)) => format!("--{side}-{dimension}"),
            (Words::Keywords, None) => dimension.to_string(),
            (Words::Keywords, Some(side)) => format!("{side}_{dimension}"),
        }
    }

    /// The choice of `value` for `dimension` and `side`, as the caller writes it.
    fn given(self, side: Option<&str>, dimension: &str, value: &str, is_text: bool) -> String {
        let name = self.name(side, dimension);
        match self {
            Words::Flags => format!("{name} {}", probelake_query::render::shell_word(value)),
            Words::Keywords if is_text => format!("{name}={}", python_str(value)),
            Words::Keywords => format!("{name}={value}"),
        }
    }

    fn separator(self) -> &'static str {
        match self {
            Words::Flags => " ",
            Words::Keywords => ", ",
        }
    }
}

/// `text` as a Python string literal.
fn python_str(text: &str) -> String {
    format!("'{}'", text.replace('\\', r"\\").replace('\'', r"\'"))
}

impl<T: PartialEq> Pick<T> {
    /// Whether `value` is chosen on the target's side.
    fn target_keeps(&self, value: &T) -> bool {
        match self {
            Pick::Any => true,
            Pick::Both(v) | Pick::Each { target: v, .. } => v == value,
        }
    }

    /// Whether `value` is chosen on the golden run's side.
    fn golden_keeps(&self, value: &T) -> bool {
        match self {
            Pick::Any => true,
            Pick::Both(v) | Pick::Each { golden: v, .. } => v == value,
        }
    }

    /// Whether each side has its own value.
    fn is_each(&self) -> bool {
        matches!(self, Pick::Each { .. })
    }

    /// Whether a target value and a golden value pair in this dimension: equal ones, unless
    /// each side's value is given (both sides were filtered to it already).
    fn pairs(&self, target: &T, golden: &T) -> bool {
        self.is_each() || target == golden
    }
}

/// The units chosen on the command line, dimension by dimension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitChoice {
    /// The step (`--step`, or `--target-step` and `--golden-step`).
    pub step: Pick<i64>,
    /// The stage (`--stage`, or `--target-stage` and `--golden-stage`).
    pub stage: Pick<String>,
    /// The rank (`--rank`, or `--target-rank` and `--golden-rank`).
    pub rank: Pick<i64>,
    /// How the caller names these choices, for messages.
    pub words: Words,
}

impl UnitChoice {
    /// Whether any dimension has a value per side: then the flags, not the inputs, pair.
    pub fn is_explicit(&self) -> bool {
        self.step.is_each() || self.stage.is_each() || self.rank.is_each()
    }

    fn target_keeps(&self, u: &Unit) -> bool {
        self.step.target_keeps(&u.step) && self.stage.target_keeps(&u.stage) && self.rank.target_keeps(&u.rank)
    }

    fn golden_keeps(&self, u: &Unit) -> bool {
        self.step.golden_keeps(&u.step) && self.stage.golden_keeps(&u.stage) && self.rank.golden_keeps(&u.rank)
    }

    fn pairs(&self, t: &Unit, g: &Unit) -> bool {
        self.step.pairs(&t.step, &g.step) && self.stage.pairs(&t.stage, &g.stage) && self.rank.pairs(&t.rank, &g.rank)
    }

    /// The golden unit that `t` pairs with under the flags.
    fn partner_of(&self, t: &Unit) -> Unit {
        Unit {
            step: match &self.step {
                Pick::Each { golden, .. } => *golden,
                _ => t.step,
            },
            stage: match &self.stage {
                Pick::Each { golden, .. } => golden.clone(),
                _ => t.stage.clone(),
            },
            rank: match &self.rank {
                Pick::Each { golden, .. } => *golden,
                _ => t.rank,
            },
        }
    }

    /// The choices as given, in the caller's words, for messages.
    fn flags(&self) -> String {
        let mut out = Vec::new();
        push_flags(&mut out, self.words, "step", &self.step, false);
        push_flags(&mut out, self.words, "stage", &self.stage, true);
        push_flags(&mut out, self.words, "rank", &self.rank, false);
        out.join(self.words.separator())
    }
}

fn push_flags<T: fmt::Display>(out: &mut Vec<String>, words: Words, dimension: &str, pick: &Pick<T>, text: bool) {
    match pick {
        Pick::Any => {}
        Pick::Both(v) => out.push(words.given(None, dimension, &v.to_string(), text)),
        Pick::Each { target, golden } => {
            out.push(words.given(Some("target"), dimension, &target.to_string(), text));
            out.push(words.given(Some("golden"), dimension, &golden.to_string(), text));
        }
    }
}

/// One side of a comparison: what it was given as, and its committed units.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// What the command line named.
    pub kind: &'a InputKind,
    /// The committed units of its dataset (for a dump file or folder, of the dataset it was
    /// imported into).
    pub units: &'a [CommitRecord],
}

/// How the pairs were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingRule {
    /// Two dump files, compared with each other whatever their units (msprobe).
    DumpFiles,
    /// Two step folders, their rank (or proc) folders paired by position (msprobe).
    StepFolders,
    /// By (step, stage, rank): equal values, or the values each side's flags choose.
    Units,
}

/// A target unit and the golden unit it is compared with.
#[derive(Debug, Clone, Copy)]
pub struct UnitPair<'a> {
    /// The target's unit.
    pub target: &'a CommitRecord,
    /// The golden run's unit.
    pub golden: &'a CommitRecord,
    /// The target's rank or proc folder when two step folders were paired: msprobe names the
    /// result `compare_result_{folder}_{timestamp}.csv` after it.
    pub target_folder: Option<&'a str>,
    /// The golden run's rank or proc folder when two step folders were paired.
    pub golden_folder: Option<&'a str>,
}

/// The pairs to compare, in the target's order, and what was left out.
#[derive(Debug, Clone)]
pub struct Pairing<'a> {
    /// How they were paired.
    pub rule: PairingRule,
    /// The pairs; never empty.
    pub pairs: Vec<UnitPair<'a>>,
    /// A line for each unit (or folder) left without a partner.
    pub skipped: Vec<String>,
}

/// Why nothing, or not everything asked for, can be paired.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    /// One side's flag of a dimension without the other's.
    #[error(
        "{} needs {} too: say which {dimension} of the {missing} side to compare with ({} chooses V on both sides)",
        words.given(Some(given), dimension, value, *dimension == "stage"),
        words.name(Some(missing), dimension),
        words.given(None, dimension, "V", false)
    )]
    OneSided {
        /// How the caller names the choices.
        words: Words,
        /// `step`, `stage` or `rank`.
        dimension: &'static str,
        /// The side whose flag was given (`target` or `golden`).
        given: &'static str,
        /// The side whose flag is missing.
        missing: &'static str,
        /// The value given.
        value: String,
    },
    /// `--{dimension}` together with `--target-{dimension}`/`--golden-{dimension}`.
    #[error(
        "{} chooses the same {dimension} on both sides and {}/{} one per side: give one form or the other",
        words.name(None, dimension),
        words.name(Some("target"), dimension),
        words.name(Some("golden"), dimension)
    )]
    BothForms {
        /// How the caller names the choices.
        words: Words,
        /// `step`, `stage` or `rank`.
        dimension: &'static str,
    },
    /// Two step folders with different numbers of rank folders (msprobe refuses them too).
    #[error(
        "the target's step folder holds {} rank folder(s) ({}), the golden run's {} ({}); step folders pair their \
         rank folders by position, as msprobe does, so the counts must be equal. Compare one rank's dump.json with \
         another's, or give the runs' parent folders and choose units with {}/{}",
        target.len(), target.join(", "), golden.len(), golden.join(", "),
        words.name(Some("target"), "rank"), words.name(Some("golden"), "rank")
    )]
    RankFolderCount {
        /// How the caller names the choices.
        words: Words,
        /// The target's rank folders, in msprobe's order.
        target: Vec<String>,
        /// The golden run's rank folders.
        golden: Vec<String>,
    },
    /// A step folder's rank folder matches several imported units.
    #[error(
        "the {side}'s {folder} cannot be told apart from other dumps in its step folder (units {units}); give \
         the rank folders' dump.json files instead"
    )]
    AmbiguousFolder {
        /// `target` or `golden`.
        side: &'static str,
        /// The folder name.
        folder: String,
        /// The units it could be.
        units: String,
    },
    /// No pair at all.
    #[error("{0}")]
    NothingPaired(Box<NothingPaired>),
}

/// What there was when nothing paired, to say what would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NothingPaired {
    /// The rule that was applied.
    pub rule: PairingRule,
    /// The flags given.
    pub choice: UnitChoice,
    /// Every unit of the target.
    pub target: Vec<Unit>,
    /// Every unit of the golden run.
    pub golden: Vec<Unit>,
    /// The closest pair of units (fewest differing dimensions) among those the flags choose.
    pub closest: Option<(Unit, Unit)>,
}

/// Units of each side weighed for the closest pair of a message.
const CLOSEST_SEARCH: usize = 1000;

/// Units listed per side in a message before "… and N more".
const LISTED: usize = 8;

impl fmt::Display for NothingPaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.choice.flags();
        match (self.rule, flags.is_empty()) {
            (PairingRule::Units, true) => write!(f, "no (step, stage, rank) is in both runs")?,
            (PairingRule::Units, false) if !self.choice.is_explicit() => {
                write!(f, "no (step, stage, rank) is in both runs with {flags}")?
            }
            (PairingRule::Units, false) => write!(f, "no target unit pairs with a golden unit under {flags}")?,
            (_, false) => write!(f, "{flags} leaves no pair to compare")?,
            (_, true) => write!(f, "no pair of the step folders' dump folders holds a dump file on both sides")?,
        }
        for (side, units) in [("target", &self.target), ("golden", &self.golden)] {
            let listed: Vec<String> = units.iter().take(LISTED).map(Unit::to_string).collect();
            write!(f, "\n  {side} units: {}", if listed.is_empty() { "none".into() } else { listed.join("; ") })?;
            if units.len() > LISTED {
                write!(f, "; … and {} more", units.len() - LISTED)?;
            }
        }
        match &self.closest {
            Some((t, g)) if t == g => write!(
                f,
                "\n  {t} is in both runs: leave out the flags that exclude it (`probelake info` lists each run's units)"
            ),
            Some((t, g)) => {
                let pick = UnitChoice {
                    step: suggest(&self.choice.step, &t.step, &g.step),
                    stage: suggest(&self.choice.stage, &t.stage, &g.stage),
                    rank: suggest(&self.choice.rank, &t.rank, &g.rank),
                    words: self.choice.words,
                };
                write!(f, "\n  to compare target {t} with golden {g}, give: {}", pick.flags())?;
                if !flags.is_empty() {
                    write!(f, " (instead of {flags})")?;
                }
                Ok(())
            }
            None => write!(f, "\n  a side holds no unit: `probelake info` lists each run's units"),
        }
    }
}

/// The pick of one dimension that pairs target value `t` with golden value `g`: a value per
/// side where they differ, else the `--{dimension}` given when it still holds.
fn suggest<T: Clone + PartialEq>(given: &Pick<T>, t: &T, g: &T) -> Pick<T> {
    match given {
        _ if t != g => Pick::Each { target: t.clone(), golden: g.clone() },
        Pick::Both(v) if v == t => Pick::Both(v.clone()),
        _ => Pick::Any,
    }
}

/// Pairs the units of `target` and `golden` as msprobe pairs the inputs they were given as,
/// or as `choice` says.
///
/// - Any `--target-*`/`--golden-*` value in `choice` ([`UnitChoice::is_explicit`]): the units
///   of each side those values choose, paired by equal values in the other dimensions
///   ([`PairingRule::Units`]), whatever the inputs are.
/// - Else two dump files: their one unit each, whatever it is ([`PairingRule::DumpFiles`]).
/// - Else two step folders with rank folders: the rank folders by position, counts equal;
///   two folders of one `proc*` folder each: those ([`PairingRule::StepFolders`]). A pair
///   whose folder holds no dump file is skipped, as msprobe skips it.
/// - Else by equal (step, stage, rank) ([`PairingRule::Units`]).
///
/// `--step`/`--stage`/`--rank` values ([`Pick::Both`]) keep only the pairs whose target unit
/// has them. Errors when nothing pairs, naming both sides' units and the flags that would
/// pair the closest two.
pub fn pair_units<'a>(target: Side<'a>, golden: Side<'a>, choice: &UnitChoice) -> Result<Pairing<'a>, PairingError> {
    let (rule, pairs, skipped) = match (target.kind, golden.kind) {
        _ if choice.is_explicit() => by_units(target.units, golden.units, choice),
        (InputKind::DumpFile, InputKind::DumpFile) => match (target.units, golden.units) {
            ([t], [g]) => {
                let pairs = vec![UnitPair { target: t, golden: g, target_folder: None, golden_folder: None }];
                (PairingRule::DumpFiles, pairs, Vec::new())
            }
            // A file imports as one unit; anything else is no longer a pair of files.
            _ => by_units(target.units, golden.units, choice),
        },
        (InputKind::RankFolders(t), InputKind::RankFolders(g)) => {
            if t.len() != g.len() {
                return Err(PairingError::RankFolderCount {
                    words: choice.words,
                    target: t.iter().map(|f| f.name.clone()).collect(),
                    golden: g.iter().map(|f| f.name.clone()).collect(),
                });
            }
            by_folders(target.units, t, golden.units, g)?
        }
        (InputKind::ProcFolder(t), InputKind::ProcFolder(g)) => {
            by_folders(target.units, std::slice::from_ref(t), golden.units, std::slice::from_ref(g))?
        }
        _ => by_units(target.units, golden.units, choice),
    };
    // `--step`/`--stage`/`--rank` narrow msprobe's pairs by the target's unit; the pairs by
    // units were made from the units they keep already.
    let pairs: Vec<UnitPair<'a>> = pairs.into_iter().filter(|p| choice.target_keeps(&p.target.unit)).collect();
    if pairs.is_empty() {
        return Err(nothing_paired(rule, target.units, golden.units, choice));
    }
    Ok(Pairing { rule, pairs, skipped })
}

type Paired<'a> = (PairingRule, Vec<UnitPair<'a>>, Vec<String>);

/// Pairs by (step, stage, rank) under `choice`.
fn by_units<'a>(target: &'a [CommitRecord], golden: &'a [CommitRecord], choice: &UnitChoice) -> Paired<'a> {
    let t_kept: Vec<&CommitRecord> = target.iter().filter(|r| choice.target_keeps(&r.unit)).collect();
    let g_kept: Vec<&CommitRecord> = golden.iter().filter(|r| choice.golden_keeps(&r.unit)).collect();
    let explicit = choice.is_explicit();
    let mut pairs = Vec::new();
    let mut skipped = Vec::new();
    for &t in &t_kept {
        match g_kept.iter().find(|g| choice.pairs(&t.unit, &g.unit)) {
            Some(&g) => pairs.push(UnitPair { target: t, golden: g, target_folder: None, golden_folder: None }),
            None if explicit => {
                skipped.push(format!("target {}: the golden run has no {}", t.unit, choice.partner_of(&t.unit)))
            }
            None => skipped.push(format!("{} is only in the target", t.unit)),
        }
    }
    for &g in &g_kept {
        if !t_kept.iter().any(|t| choice.pairs(&t.unit, &g.unit)) {
            skipped.push(if explicit {
                format!("golden {}: no target unit pairs with it", g.unit)
            } else {
                format!("{} is only in the golden run", g.unit)
            });
        }
    }
    (PairingRule::Units, pairs, skipped)
}

/// Pairs step folders' dump folders by position.
fn by_folders<'a>(
    target: &'a [CommitRecord],
    t_folders: &'a [DumpFolder],
    golden: &'a [CommitRecord],
    g_folders: &'a [DumpFolder],
) -> Result<Paired<'a>, PairingError> {
    let mut pairs = Vec::new();
    let mut skipped = Vec::new();
    for (tf, gf) in t_folders.iter().zip(g_folders) {
        let t = unit_of_folder("target", target, tf)?;
        let g = unit_of_folder("golden", golden, gf)?;
        match (t, g) {
            (Some(t), Some(g)) => pairs.push(UnitPair {
                target: t,
                golden: g,
                target_folder: Some(&tf.name),
                golden_folder: Some(&gf.name),
            }),
            (t, _) => {
                let (side, folder) = if t.is_none() { ("target", tf) } else { ("golden", gf) };
                skipped.push(format!(
                    "target {} with golden {}: the {side}'s {} holds no dump file",
                    tf.name, gf.name, folder.name
                ));
            }
        }
    }
    Ok((PairingRule::StepFolders, pairs, skipped))
}

/// The unit imported from a step folder's dump folder: the one with the folder's rank.
fn unit_of_folder<'a>(
    side: &'static str,
    units: &'a [CommitRecord],
    folder: &DumpFolder,
) -> Result<Option<&'a CommitRecord>, PairingError> {
    let found: Vec<&CommitRecord> = units.iter().filter(|r| r.unit.rank == folder.rank).collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        several => Err(PairingError::AmbiguousFolder {
            side,
            folder: folder.name.clone(),
            units: several.iter().map(|r| r.unit.to_string()).collect::<Vec<_>>().join("; "),
        }),
    }
}

fn nothing_paired(
    rule: PairingRule,
    target: &[CommitRecord],
    golden: &[CommitRecord],
    choice: &UnitChoice,
) -> PairingError {
    // The closest pair among the units the flags choose; a side they leave empty is taken whole.
    let side = |units: &[CommitRecord], keeps: &dyn Fn(&Unit) -> bool| {
        let kept: Vec<Unit> = units.iter().map(|r| r.unit.clone()).filter(|u| keeps(u)).collect();
        if kept.is_empty() {
            units.iter().map(|r| r.unit.clone()).collect()
        } else {
            kept
        }
    };
    let t_side = side(target, &|u| choice.target_keeps(u));
    let g_side = side(golden, &|u| choice.golden_keeps(u));
    // Fewest differences outside the dimensions given per side, then the most differences
    // inside them (those were asked to differ).
    let score = |t: &Unit, g: &Unit| {
        let dims = [
            (choice.step.is_each(), t.step != g.step),
            (choice.stage.is_each(), t.stage != g.stage),
            (choice.rank.is_each(), t.rank != g.rank),
        ];
        let outside = dims.iter().filter(|(each, differs)| !each && *differs).count();
        let same_inside = dims.iter().filter(|(each, differs)| *each && !differs).count();
        (outside, same_inside)
    };
    // Bounded: a message about two large runs need not weigh every pair of their units.
    let closest = t_side
        .iter()
        .take(CLOSEST_SEARCH)
        .flat_map(|t| g_side.iter().take(CLOSEST_SEARCH).map(move |g| (t, g)))
        .min_by_key(|(t, g)| score(t, g))
        .map(|(t, g)| (t.clone(), g.clone()));
    PairingError::NothingPaired(Box::new(NothingPaired {
        rule,
        choice: choice.clone(),
        target: target.iter().map(|r| r.unit.clone()).collect(),
        golden: golden.iter().map(|r| r.unit.clone()).collect(),
        closest,
    }))
}

#[cfg(test)]
mod tests;
