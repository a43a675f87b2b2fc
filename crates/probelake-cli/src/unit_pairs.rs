//! The flags of `compare` and `divergence` that choose which units are compared with which
//! (`probelake_compare::runs::pairing` pairs them).

use probelake_compare::runs::pairing::{PairingError, Pick, UnitChoice, Words};

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
            words: Words::Flags,
        })
    }
}
