//! The two runs of `compare` and `divergence`: opened (msprobe files imported), told apart as
//! msprobe tells its inputs apart, and their units paired (`compare::pairing`).

use anyhow::Context as _;
use probelake_format::{CommitRecord, StorageOptions};
use probelake_query::compare::pairing::{
    pair_units, InputKind, Pairing, PairingError, PairingRule, Pick, Side, UnitChoice,
};

use crate::cmd::compare::{open_run, Opened};
use crate::cmd::Context;
use crate::compare_input::input_kind;
use crate::uri::local_dir;

/// The pairing rules, for `--help`.
pub const PAIRING_HELP: &str = "\
Which unit is compared with which (as msprobe pairs the inputs it accepts):
  two dump.json files        with each other, whatever their step, stage and rank
  two step folders           their rank* folders by sorted position (the first with the first,
                             ...; the counts must be equal), or their one proc* folder each
                             (a single-process step folder, a verl stage's step0/)
  anything else              datasets, whole trees, rank folders, a file against a folder:
                             every (step, stage, rank) present in both (msprobe refuses these)
  --target-X A --golden-X B  (X: step, stage or rank) instead of the above: the target's units
                             with A against the golden run's with B, the other dimensions
                             paired by equal values; within one run (given twice) or two
  --step/--stage/--rank      keep only the pairs whose target unit has that value
";

/// The flags that choose which units are compared with which.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Choosing units (see the pairing rules below)")]
pub struct UnitArgs {
    /// Only this step, on both sides.
    #[arg(long, allow_hyphen_values = true)]
    pub step: Option<i64>,
    /// Only this stage, on both sides.
    #[arg(long)]
    pub stage: Option<String>,
    /// Only this rank, on both sides (-1: a proc{pid} folder's unit).
    #[arg(long, allow_hyphen_values = true)]
    pub rank: Option<i64>,
    /// The target's step, compared with the golden run's --golden-step.
    #[arg(long, value_name = "STEP", allow_hyphen_values = true)]
    pub target_step: Option<i64>,
    /// The golden run's step, compared with the target's --target-step.
    #[arg(long, value_name = "STEP", allow_hyphen_values = true)]
    pub golden_step: Option<i64>,
    /// The target's stage, compared with the golden run's --golden-stage.
    #[arg(long, value_name = "STAGE")]
    pub target_stage: Option<String>,
    /// The golden run's stage, compared with the target's --target-stage.
    #[arg(long, value_name = "STAGE")]
    pub golden_stage: Option<String>,
    /// The target's rank, compared with the golden run's --golden-rank.
    #[arg(long, value_name = "RANK", allow_hyphen_values = true)]
    pub target_rank: Option<i64>,
    /// The golden run's rank, compared with the target's --target-rank.
    #[arg(long, value_name = "RANK", allow_hyphen_values = true)]
    pub golden_rank: Option<i64>,
}

impl UnitArgs {
    /// The flags as a choice per dimension; an error names a flag given for one side only.
    pub fn choice(&self) -> Result<UnitChoice, PairingError> {
        Ok(UnitChoice {
            step: Pick::from_flags("step", self.step, self.target_step, self.golden_step)?,
            stage: Pick::from_flags("stage", self.stage.clone(), self.target_stage.clone(), self.golden_stage.clone())?,
            rank: Pick::from_flags("rank", self.rank, self.target_rank, self.golden_rank)?,
        })
    }
}

/// Both runs, opened, with their units and what each was given as.
pub struct Runs {
    /// The target run.
    pub target: Opened,
    /// The golden run.
    pub golden: Opened,
    target_units: Vec<CommitRecord>,
    golden_units: Vec<CommitRecord>,
    target_kind: InputKind,
    golden_kind: InputKind,
}

impl Runs {
    /// Opens both runs, importing msprobe files on the fly; both sides at once, as importing
    /// keeps a core busy per side, and once when both name the same place (a step compared
    /// with another step of one run).
    pub async fn open(target_arg: &str, golden_arg: &str, storage: &StorageOptions) -> anyhow::Result<Runs> {
        let open = |arg: &str, what: &'static str| {
            let (arg, storage) = (arg.to_owned(), storage.clone());
            tokio::spawn(async move { open_run(&arg, what, &storage).await })
        };
        let (target, golden) = if same_place(target_arg, golden_arg) {
            let opened = open(target_arg, "target").await.context("opening the target")??;
            let shared = opened.share();
            (opened, shared)
        } else {
            let (t, g) = (open(target_arg, "target"), open(golden_arg, "golden"));
            (t.await.context("opening the target")??, g.await.context("opening the golden run")??)
        };
        let (target_units, golden_units) = (target.lake.units().await?, golden.lake.units().await?);
        let (target_kind, golden_kind) = (input_kind(target_arg)?, input_kind(golden_arg)?);
        Ok(Runs { target, golden, target_units, golden_units, target_kind, golden_kind })
    }

    /// The units to compare under `choice`, notes on what was paired how and left out on
    /// stderr, or an error naming both sides' units and the flags that pair them.
    pub fn pair(&self, ctx: &Context, choice: &UnitChoice) -> anyhow::Result<Pairing<'_>> {
        let pairing = pair_units(
            Side { kind: &self.target_kind, units: &self.target_units },
            Side { kind: &self.golden_kind, units: &self.golden_units },
            choice,
        )?;
        for note in &pairing.skipped {
            ctx.note(&format!("skipped: {note}"));
        }
        match pairing.rule {
            PairingRule::DumpFiles => ctx.note("two dump files: compared with each other whatever their units"),
            PairingRule::StepFolders => {
                let names: Vec<String> = pairing
                    .pairs
                    .iter()
                    .take(8)
                    .map(|p| format!("{} with {}", p.target_folder.unwrap_or("?"), p.golden_folder.unwrap_or("?")))
                    .collect();
                ctx.note(&format!(
                    "two step folders: their dump folders paired by position ({}{})",
                    names.join(", "),
                    if pairing.pairs.len() > 8 { ", …" } else { "" }
                ));
            }
            PairingRule::Units => {}
        }
        Ok(pairing)
    }
}

/// `target` with golden `g`, or just the unit when both are the same.
pub fn pair_text(t: &CommitRecord, g: &CommitRecord) -> String {
    if t.unit == g.unit {
        t.unit.to_string()
    } else {
        format!("target {} with golden {}", t.unit, g.unit)
    }
}

/// Whether two command-line locations name the same thing.
fn same_place(a: &str, b: &str) -> bool {
    match (local_dir(a), local_dir(b)) {
        (Some(a), Some(b)) => match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => a == b,
    }
}
