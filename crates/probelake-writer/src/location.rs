//! Where a unit's dump.json goes on export: the msprobe or verl folder a real dump of the same
//! unit would have, so `probelake export` gives a tree msprobe's tools and `probelake import`
//! read back as the same unit.

use probelake_format::layout::{encode_partition_value, DEFAULT_STAGE};
use probelake_format::Unit;
use probelake_msprobe::Origin;

/// The dump file's path in the export, and the origin columns its rows carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DumpLocation {
    /// `step3/rank0/dump.json` or `step_3/actor_update/step0/rank0/dump.json`.
    pub file: String,
    /// `inner_step` (verl layout: 0) and `pid` (`proc{pid}` folders).
    pub origin: Origin,
}

impl DumpLocation {
    /// msprobe's layout `step{S}/rank{R}` for the default stage, verl's
    /// `step_{g}/{stage}/step0/rank{R}` otherwise; a negative rank is a `proc{pid}` folder.
    pub(crate) fn of(unit: &Unit, pid: Option<i64>) -> Self {
        let (rank_dir, pid) = if unit.rank >= 0 {
            (format!("rank{}", unit.rank), None)
        } else {
            let pid = pid.unwrap_or_else(|| i64::from(std::process::id()));
            (format!("proc{pid}"), Some(pid))
        };
        if unit.stage == DEFAULT_STAGE {
            return DumpLocation {
                file: format!("step{}/{rank_dir}/dump.json", unit.step),
                origin: Origin { inner_step: None, pid },
            };
        }
        let global = if unit.step == -1 { "step_unknown".to_string() } else { format!("step_{}", unit.step) };
        DumpLocation {
            file: format!("{global}/{}/step0/{rank_dir}/dump.json", encode_partition_value(&unit.stage)),
            origin: Origin { inner_step: Some(0), pid },
        }
    }

    /// `…/dump_tensor_data` beside the dump file.
    pub(crate) fn tensor_dir(&self) -> String {
        match self.file.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/dump_tensor_data"),
            None => "dump_tensor_data".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msprobe_and_verl_folders() {
        let m = DumpLocation::of(&Unit::new(2, "default", 1), None);
        assert_eq!(m.file, "step2/rank1/dump.json");
        assert_eq!(m.origin, Origin { inner_step: None, pid: None });
        assert_eq!(m.tensor_dir(), "step2/rank1/dump_tensor_data");
        let v = DumpLocation::of(&Unit::new(7, "actor_update", -1), Some(42));
        assert_eq!(v.file, "step_7/actor_update/step0/proc42/dump.json");
        assert_eq!(v.origin, Origin { inner_step: Some(0), pid: Some(42) });
        assert_eq!(DumpLocation::of(&Unit::new(-1, "ref", 0), None).file, "step_unknown/ref/step0/rank0/dump.json");
    }
}
