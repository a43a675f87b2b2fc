//! The two runs of a comparison as they are given: datasets, or msprobe folders and dump.json
//! files, either imported into a temporary dataset ([`open_run`]) or read in place unit by unit
//! ([`DumpTree`], for `compare`); told apart as msprobe tells its inputs apart
//! ([`input_kind`]); their units paired by [`pairing`](super::pairing) ([`RunPair`]).
//! `probelake compare`, `probelake divergence` and Python's `compare` and `divergence` all open
//! their inputs here.
//!
//! msprobe 26.2 (`compare_distributed_inner`) collects a step folder's entries named
//! `^rank(0|[1-9][0-9]*)?$`, sorts them by their number (`rank` without one first) and, when
//! neither side has any, takes the one `proc<digits>` folder of each side.

pub mod pairing;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::common::runtime::SpawnedTask;
use probelake_format::lake::{UnitCounts, FORMAT_VERSION};
use probelake_format::storage::{display_uri, local_dir, open, StorageOptions};
use probelake_format::{CommitRecord, FormatError, Lake, Unit};
use probelake_msprobe::{
    by_unit, discover, import, read_unit, read_unit_stacks, DumpDir, ImportOptions, MsprobeError, NoProgress,
    Overrides, UnitStacks, UnitTables,
};

use crate::runs::pairing::{pair_units, DumpFolder, InputKind, Pairing, PairingError, PairingRule, Side, UnitChoice};

/// Why the inputs of a comparison cannot be opened or paired.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A local input does not exist.
    #[error("{what} {arg}: no such file or folder")]
    Missing {
        /// `target` or `golden`.
        what: &'static str,
        /// The input as given.
        arg: String,
    },
    /// A local input could not be read.
    #[error("reading {}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The temporary dataset for msprobe files could not be made.
    #[error("creating a temporary dataset")]
    TempDir(#[source] std::io::Error),
    /// msprobe files could not be imported.
    #[error("importing {what} {arg}")]
    Import {
        /// `target` or `golden`.
        what: &'static str,
        /// The input as given.
        arg: String,
        /// The cause.
        source: Box<MsprobeError>,
    },
    /// msprobe files to be read in place could not be listed.
    #[error("reading {what} {arg}")]
    Read {
        /// `target` or `golden`.
        what: &'static str,
        /// The input as given.
        arg: String,
        /// The cause.
        source: Box<MsprobeError>,
    },
    /// A dataset could not be opened or listed.
    #[error("opening dataset {uri}")]
    Open {
        /// The dataset, printable.
        uri: String,
        /// The cause.
        source: FormatError,
    },
    /// A dataset could not be read.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The units of the two runs do not pair.
    #[error(transparent)]
    Pairing(#[from] PairingError),
    /// A run of msprobe files read in place was asked for its dataset.
    #[error("{}: msprobe files read in place, not a dataset", path.display())]
    NotADataset {
        /// The files' folder or dump file.
        path: PathBuf,
    },
    /// Opening a run stopped before it finished (a panic or a cancelled task).
    #[error("opening the {what}: {message}")]
    Stopped {
        /// `target` or `golden run`.
        what: &'static str,
        /// What the task said.
        message: String,
    },
}

/// What `arg` (a path, `file://` or `s3://` location) names.
pub fn input_kind(arg: &str) -> Result<InputKind, InputError> {
    let Some(path) = local_dir(arg) else { return Ok(InputKind::Other) };
    let meta = std::fs::metadata(&path).map_err(|source| InputError::Io { path: path.clone(), source })?;
    if meta.is_file() {
        return Ok(InputKind::DumpFile);
    }
    if !meta.is_dir() || is_dataset(&path) {
        return Ok(InputKind::Other);
    }
    folder_kind(&path)
}

/// A folder's kind from the folders directly in it.
fn folder_kind(dir: &Path) -> Result<InputKind, InputError> {
    let (mut ranks, mut procs) = (Vec::new(), Vec::new());
    let listing = |source| InputError::Io { path: dir.to_owned(), source };
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        // Folders only, and not through links: msprobe lists files too (and then fails on
        // them), and the import, which makes the units, follows no links.
        let file_type = entry.file_type().map_err(|source| InputError::Io { path: entry.path(), source })?;
        if !file_type.is_dir() {
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

/// A run of a comparison: a dataset, or msprobe files imported into a temporary one, which
/// lives as long as the run (and its [`share`](OpenedRun::share)d copies), or msprobe files
/// read in place.
#[derive(Debug)]
pub struct OpenedRun {
    /// Where the run's units are read from.
    pub source: RunSource,
    _tmp: Option<Arc<tempfile::TempDir>>,
}

/// Where a run's units are read from.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// A dataset (maybe a temporary one, imported from msprobe files).
    Dataset(Lake),
    /// msprobe files, each unit read into memory when it is compared.
    Dumps(Arc<DumpTree>),
}

impl OpenedRun {
    /// The same run again, for the other side of a comparison within one run.
    pub fn share(&self) -> OpenedRun {
        OpenedRun { source: self.source.clone(), _tmp: self._tmp.clone() }
    }

    /// The run's dataset; an error when its msprobe files are read in place, which only
    /// [`RunPair::open_in_place`] does.
    pub fn lake(&self) -> Result<&Lake, InputError> {
        match &self.source {
            RunSource::Dataset(lake) => Ok(lake),
            RunSource::Dumps(tree) => Err(InputError::NotADataset { path: tree.root.clone() }),
        }
    }

    /// The run's committed units, or for msprobe files read in place the units they hold.
    async fn units(&self) -> Result<Vec<CommitRecord>, InputError> {
        match &self.source {
            RunSource::Dataset(lake) => Ok(lake.units().await?),
            RunSource::Dumps(tree) => Ok(tree.records()),
        }
    }
}

/// msprobe files read in place: their units as `import` would make them (found by
/// [`discover`]), each read into memory ([`read_unit`]) only when it is compared, so that
/// memory holds a unit pair at a time, not the tree.
#[derive(Debug)]
pub struct DumpTree {
    root: PathBuf,
    units: Vec<(Unit, Vec<DumpDir>)>,
}

impl DumpTree {
    /// The dump folders at or below `root` (a folder or one dump file), by unit.
    pub fn discover(root: &Path) -> Result<DumpTree, MsprobeError> {
        Ok(DumpTree { root: root.to_path_buf(), units: by_unit(discover(root, &Overrides::default())?) })
    }

    /// The units, as the records a dataset would hold for them: no files, and of the counts
    /// only the dump files and their bytes.
    pub fn records(&self) -> Vec<CommitRecord> {
        let record = |(unit, dirs): &(Unit, Vec<DumpDir>)| CommitRecord {
            format_version: FORMAT_VERSION,
            unit: unit.clone(),
            commit_id: String::new(),
            committed_at: 0,
            writer: String::new(),
            files: Vec::new(),
            counts: UnitCounts {
                dump_files: dirs.len() as u64,
                json_bytes: dirs.iter().map(DumpDir::dump_bytes).sum(),
                ..UnitCounts::default()
            },
        };
        self.units.iter().map(record).collect()
    }

    /// Reads `unit`'s files into its tables (without stack.json: [`DumpTree::read_stacks`]).
    pub fn read(&self, unit: &Unit) -> Result<UnitTables, MsprobeError> {
        read_unit(&self.dirs_of(unit))
    }

    /// Reads `unit`'s stack.json files.
    pub fn read_stacks(&self, unit: &Unit) -> Result<UnitStacks, MsprobeError> {
        read_unit_stacks(&self.dirs_of(unit))
    }

    fn dirs_of(&self, unit: &Unit) -> Vec<&DumpDir> {
        self.units.iter().filter(|(u, _)| u == unit).flat_map(|(_, dirs)| dirs.iter()).collect()
    }
}

/// Opens `arg` (`what` is `target` or `golden`) as a dataset, importing msprobe files (a tree,
/// a step, rank or stage folder, a dump.json) into a temporary dataset first.
pub async fn open_run(arg: &str, what: &'static str, storage: &StorageOptions) -> Result<OpenedRun, InputError> {
    if let Some(dir) = local_dir(arg) {
        if !dir.exists() {
            return Err(InputError::Missing { what, arg: arg.to_owned() });
        }
        if !is_dataset(&dir) {
            let tmp = tempfile::tempdir().map_err(InputError::TempDir)?;
            let lake = Lake::local(tmp.path())?;
            import(&dir, &lake, &ImportOptions::default(), &NoProgress).await.map_err(|source| InputError::Import {
                what,
                arg: arg.to_owned(),
                source: Box::new(source),
            })?;
            return Ok(OpenedRun { source: RunSource::Dataset(lake), _tmp: Some(Arc::new(tmp)) });
        }
    }
    let lake = open(arg, storage).map_err(|source| InputError::Open { uri: display_uri(arg), source })?;
    Ok(OpenedRun { source: RunSource::Dataset(lake), _tmp: None })
}

/// Whether `dir` is a dataset's root (it has a manifest).
fn is_dataset(dir: &Path) -> bool {
    dir.join(probelake_format::layout::MANIFEST_FILE).exists()
}

/// Whether `arg` names msprobe files on this machine (not a dataset).
fn is_msprobe_input(arg: &str) -> bool {
    local_dir(arg).is_some_and(|dir| dir.exists() && !is_dataset(&dir))
}

/// Opens `arg` as msprobe files read in place.
fn open_dumps(arg: &str, what: &'static str) -> Result<OpenedRun, InputError> {
    let dir = local_dir(arg).ok_or_else(|| InputError::Missing { what, arg: arg.to_owned() })?;
    let tree = DumpTree::discover(&dir).map_err(|source| InputError::Read {
        what,
        arg: arg.to_owned(),
        source: Box::new(source),
    })?;
    Ok(OpenedRun { source: RunSource::Dumps(Arc::new(tree)), _tmp: None })
}

/// Both runs of a comparison, opened, with their committed units and what each was given as.
#[derive(Debug)]
pub struct RunPair {
    /// The target (NPU) run.
    pub target: OpenedRun,
    /// The golden (bench) run.
    pub golden: OpenedRun,
    target_units: Vec<CommitRecord>,
    golden_units: Vec<CommitRecord>,
    target_kind: InputKind,
    golden_kind: InputKind,
}

impl RunPair {
    /// Opens both runs, importing msprobe files on the fly: both sides at once, as importing
    /// keeps a core busy per side, and once when both name the same place (a step compared
    /// with another step of one run).
    pub async fn open(target_arg: &str, golden_arg: &str, storage: &StorageOptions) -> Result<RunPair, InputError> {
        let spawn = |arg: &str, what: &'static str| {
            let (arg, storage) = (arg.to_owned(), storage.clone());
            SpawnedTask::spawn(async move { open_run(&arg, what, &storage).await })
        };
        let joined = |what: &'static str, result: Result<Result<OpenedRun, InputError>, _>| match result {
            Ok(opened) => opened,
            Err(e) => Err(InputError::Stopped { what, message: format!("{e}") }),
        };
        let (target, golden) = if same_place(target_arg, golden_arg) {
            let opened = joined("target", spawn(target_arg, "target").join().await)?;
            let shared = opened.share();
            (opened, shared)
        } else {
            let (t, g) = (spawn(target_arg, "target"), spawn(golden_arg, "golden"));
            (joined("target", t.join().await)?, joined("golden run", g.join().await)?)
        };
        RunPair::of(target, golden, target_arg, golden_arg).await
    }

    /// Opens both runs for a comparison: when both are msprobe files (dump.json files or
    /// folders) they are read in place, a unit pair at a time as they are compared, and no
    /// dataset is written; otherwise as [`open`](Self::open) does.
    pub async fn open_in_place(
        target_arg: &str,
        golden_arg: &str,
        storage: &StorageOptions,
    ) -> Result<RunPair, InputError> {
        if !(is_msprobe_input(target_arg) && is_msprobe_input(golden_arg)) {
            return RunPair::open(target_arg, golden_arg, storage).await;
        }
        let target = open_dumps(target_arg, "target")?;
        let golden = match same_place(target_arg, golden_arg) {
            true => target.share(),
            false => open_dumps(golden_arg, "golden")?,
        };
        RunPair::of(target, golden, target_arg, golden_arg).await
    }

    async fn of(
        target: OpenedRun,
        golden: OpenedRun,
        target_arg: &str,
        golden_arg: &str,
    ) -> Result<RunPair, InputError> {
        let (target_units, golden_units) = (target.units().await?, golden.units().await?);
        let (target_kind, golden_kind) = (input_kind(target_arg)?, input_kind(golden_arg)?);
        Ok(RunPair { target, golden, target_units, golden_units, target_kind, golden_kind })
    }

    /// Whether the target was given as one dump file: msprobe then names the results after
    /// nothing ([`Naming::of`](crate::write::results::Naming::of)).
    pub fn target_is_file(&self) -> bool {
        self.target_kind == InputKind::DumpFile
    }

    /// The units to compare under `choice`, or an error naming both sides' units and the
    /// choices that pair them.
    pub fn pair(&self, choice: &UnitChoice) -> Result<Pairing<'_>, PairingError> {
        pair_units(
            Side { kind: &self.target_kind, units: &self.target_units },
            Side { kind: &self.golden_kind, units: &self.golden_units },
            choice,
        )
    }
}

/// What a pairing did, in lines for the user: the units left out, and how two dump files or
/// two step folders were paired.
pub fn pairing_notes(pairing: &Pairing<'_>) -> Vec<String> {
    let mut notes: Vec<String> = pairing.skipped.iter().map(|s| format!("skipped: {s}")).collect();
    match pairing.rule {
        PairingRule::DumpFiles => notes.push("two dump files: compared with each other whatever their units".into()),
        PairingRule::StepFolders => {
            let names: Vec<String> = pairing
                .pairs
                .iter()
                .take(8)
                .map(|p| format!("{} with {}", p.target_folder.unwrap_or("?"), p.golden_folder.unwrap_or("?")))
                .collect();
            notes.push(format!(
                "two step folders: their dump folders paired by position ({}{})",
                names.join(", "),
                if pairing.pairs.len() > 8 { ", …" } else { "" }
            ));
        }
        PairingRule::Units => {}
    }
    notes
}

/// `target` with golden `g`, or just the unit when both are the same.
pub fn pair_text(t: &CommitRecord, g: &CommitRecord) -> String {
    if t.unit == g.unit {
        t.unit.to_string()
    } else {
        format!("target {} with golden {}", t.unit, g.unit)
    }
}

/// Whether two locations name the same thing.
fn same_place(a: &str, b: &str) -> bool {
    match (local_dir(a), local_dir(b)) {
        (Some(a), Some(b)) => match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => a == b,
    }
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
