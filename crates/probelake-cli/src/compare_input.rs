//! What a path given to `compare` or `divergence` is, in msprobe's terms: a dump file, a step
//! folder of rank folders, a folder of one process folder, or anything else
//! (`probelake_query::compare::pairing` decides what pairs with what from that).
//!
//! msprobe 26.2 (`compare_distributed_inner`) collects a step folder's entries named
//! `^rank(0|[1-9][0-9]*)?$`, sorts them by their number (`rank` without one first) and, when
//! neither side has any, takes the one `proc<digits>` folder of each side.

use std::path::Path;

use anyhow::Context as _;
use probelake_query::compare::pairing::{DumpFolder, InputKind};

use crate::uri::local_dir;

/// What `arg` (a path, `file://` or `s3://` location) names.
pub fn input_kind(arg: &str) -> anyhow::Result<InputKind> {
    let Some(path) = local_dir(arg) else { return Ok(InputKind::Other) };
    let meta = std::fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?;
    if meta.is_file() {
        return Ok(InputKind::DumpFile);
    }
    if !meta.is_dir() || path.join("_probelake").join("manifest.json").exists() {
        return Ok(InputKind::Other);
    }
    folder_kind(&path)
}

/// A folder's kind from the folders directly in it.
fn folder_kind(dir: &Path) -> anyhow::Result<InputKind> {
    let mut ranks = Vec::new();
    let mut procs = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        // Folders only, and not through links: msprobe lists files too (and then fails on
        // them), and the import, which makes the units, follows no links.
        if !entry.file_type().with_context(|| format!("reading {}", entry.path().display()))?.is_dir() {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else { continue };
        if let Some(number) = rank_number(&name) {
            ranks.push((number, name));
        } else if is_proc_folder(&name) {
            procs.push(name);
        }
    }
    if !ranks.is_empty() {
        ranks.sort();
        let folders = ranks.into_iter().map(|(number, name)| DumpFolder { name, rank: number.max(0) }).collect();
        return Ok(InputKind::RankFolders(folders));
    }
    match <[String; 1]>::try_from(procs) {
        Ok([name]) => Ok(InputKind::ProcFolder(DumpFolder { name, rank: -1 })),
        Err(_) => Ok(InputKind::Other),
    }
}

/// msprobe's sort key of a rank folder name: its number, -1 for `rank`; `None` for other names.
/// A number too large for the import to read as a rank is no rank folder either.
fn rank_number(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("rank")?;
    if digits.is_empty() {
        return Some(-1);
    }
    let canonical = digits == "0" || (!digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit()));
    if canonical {
        digits.parse().ok()
    } else {
        None
    }
}

/// `proc` and ASCII digits: msprobe's process folder (`dirname[4:].isdigit()`).
fn is_proc_folder(name: &str) -> bool {
    name.strip_prefix("proc").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(paths: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tempdir");
        for p in paths {
            let path = tmp.path().join(p);
            if p.ends_with(".json") {
                std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                std::fs::write(path, "{}").expect("write");
            } else {
                std::fs::create_dir_all(path).expect("mkdir");
            }
        }
        tmp
    }

    fn kind(dir: &Path, rel: &str) -> InputKind {
        input_kind(&dir.join(rel).to_string_lossy()).expect("kind")
    }

    fn folders(names: &[(&str, i64)]) -> InputKind {
        InputKind::RankFolders(names.iter().map(|(n, r)| DumpFolder { name: n.to_string(), rank: *r }).collect())
    }

    #[test]
    fn rank_folders_sort_by_number_with_bare_rank_first() {
        let tmp = tree(&["s/rank10", "s/rank2", "s/rank", "s/rank01", "s/ranks", "s/proc7", "s/rank3.txt"]);
        std::fs::write(tmp.path().join("s/rank4"), "a file").expect("write");
        assert_eq!(kind(tmp.path(), "s"), folders(&[("rank", 0), ("rank2", 2), ("rank10", 10)]));
    }

    #[test]
    fn one_proc_folder_without_rank_folders() {
        let tmp = tree(&["v/step_2/actor_update/step0/proc6420/dump.json", "two/proc1", "two/proc2", "p/proc"]);
        assert_eq!(
            kind(tmp.path(), "v/step_2/actor_update/step0"),
            InputKind::ProcFolder(DumpFolder { name: "proc6420".into(), rank: -1 })
        );
        assert_eq!(kind(tmp.path(), "two"), InputKind::Other);
        assert_eq!(kind(tmp.path(), "p"), InputKind::Other);
        // A stage folder, a whole tree and a rank folder are none of msprobe's forms.
        assert_eq!(kind(tmp.path(), "v/step_2/actor_update"), InputKind::Other);
        assert_eq!(kind(tmp.path(), "v"), InputKind::Other);
        assert_eq!(kind(tmp.path(), "v/step_2/actor_update/step0/proc6420"), InputKind::Other);
        assert_eq!(kind(tmp.path(), "v/step_2/actor_update/step0/proc6420/dump.json"), InputKind::DumpFile);
    }

    #[test]
    fn datasets_and_remote_locations_are_other() {
        let tmp = tree(&["ds/_probelake/manifest.json", "ds/rank0"]);
        assert_eq!(kind(tmp.path(), "ds"), InputKind::Other);
        assert_eq!(input_kind("s3://bucket/run").expect("kind"), InputKind::Other);
        assert!(input_kind(&tmp.path().join("missing").to_string_lossy()).is_err());
    }
}
