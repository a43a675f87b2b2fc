//! Finding msprobe dump folders in a tree and working out which step, stage and rank each is.
//!
//! Layouts recognised from the folder names above a `dump.json` / `debug.json`:
//!
//! | layout  | path                                              | step | stage   | rank         |
//! |---------|---------------------------------------------------|------|---------|--------------|
//! | verl    | `step_{g}/{stage}/step{S}/rank{R}` (or `proc{pid}`) | g    | stage   | R (−1: proc) |
//! | msprobe | `step{S}/rank{R}` (or `proc{pid}`, `pid{pid}`, `rank`) | S    | default | R (−1: proc) |
//! | single  | anything else                                     | 0    | default | 0            |

use std::path::{Path, PathBuf};

use crate::error::{MsprobeError, Result};
use probelake_format::layout::{Unit, DEFAULT_STAGE};

use crate::dump_file::DumpKind;

/// How a tree is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeLayout {
    /// msprobe's own `step{S}/rank{R}`.
    Msprobe,
    /// verl's `step_{g}/{stage}/step{S}/rank{R}`.
    Verl,
    /// One dump folder with no recognisable parents.
    Single,
}

impl std::str::FromStr for TreeLayout {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "msprobe" => Ok(TreeLayout::Msprobe),
            "verl" => Ok(TreeLayout::Verl),
            "single" => Ok(TreeLayout::Single),
            _ => Err(format!("unknown layout `{s}`: use msprobe, verl or single")),
        }
    }
}

/// Values that replace what the folder names say.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Force a layout instead of detecting it.
    pub layout: Option<TreeLayout>,
    /// The step of every unit.
    pub step: Option<i64>,
    /// The stage of every unit.
    pub stage: Option<String>,
    /// The rank of every unit.
    pub rank: Option<i64>,
}

/// One folder holding a dump file.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpDir {
    /// The folder.
    pub dir: PathBuf,
    /// The dump file itself (normally `dir/dump.json`).
    pub path: PathBuf,
    /// dump.json or debug.json.
    pub kind: DumpKind,
    /// The dump file's path relative to the layout's root (`step_1/actor_update/step0/proc4242/dump.json`).
    pub file: String,
    /// The layout it was recognised as.
    pub layout: TreeLayout,
    /// The unit it belongs to.
    pub unit: Unit,
    /// msprobe's inner `step{S}` of a verl dump.
    pub inner_step: Option<i64>,
    /// The pid of a `proc{pid}` / `pid{pid}` folder.
    pub pid: Option<i64>,
}

impl DumpDir {
    /// The dump file's size in bytes (0 when it cannot be read): what progress and the
    /// figures of import, export and compare count.
    pub fn dump_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }
}

/// `dirs` (as [`discover`] finds them, a unit's folders one after the other) grouped by unit,
/// in order: one unit's folders become one committed unit, or are compared as one.
pub fn by_unit<D: std::borrow::Borrow<DumpDir>>(dirs: impl IntoIterator<Item = D>) -> Vec<(Unit, Vec<D>)> {
    let mut units: Vec<(Unit, Vec<D>)> = Vec::new();
    for dir in dirs {
        match units.last_mut() {
            Some((unit, members)) if *unit == dir.borrow().unit => members.push(dir),
            _ => units.push((dir.borrow().unit.clone(), vec![dir])),
        }
    }
    units
}

/// Finds every dump folder at or below `src` (a folder or one dump file), in path order.
pub fn discover(src: &Path, overrides: &Overrides) -> Result<Vec<DumpDir>> {
    let meta = std::fs::metadata(src).map_err(|e| MsprobeError::io(src, e))?;
    let mut found = Vec::new();
    if meta.is_file() {
        let kind = if src.file_name().is_some_and(|n| n == "debug.json") { DumpKind::Debug } else { DumpKind::Dump };
        let dir = src.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        found.push((dir, kind, src.file_name().map(|n| n.to_string_lossy().into_owned())));
    } else if meta.is_dir() {
        walk(src, &mut found, 0)?;
    }
    // Anything else (a device, a pipe, a socket) holds no dump either.
    if found.is_empty() {
        return Err(MsprobeError::NoDumps { path: src.to_path_buf() });
    }
    let base = if meta.is_file() { src.parent().unwrap_or(Path::new(".")) } else { src };
    let base = std::fs::canonicalize(if base.as_os_str().is_empty() { Path::new(".") } else { base })
        .map_err(|e| MsprobeError::io(base, e))?;
    let mut dirs = Vec::with_capacity(found.len());
    for (dir, kind, file_name) in found {
        let abs = std::fs::canonicalize(&dir).map_err(|e| MsprobeError::io(&dir, e))?;
        dirs.push(classify(&dir, &abs, Some(&base), kind, file_name.as_deref(), overrides)?);
    }
    dirs.sort_by(|a, b| (&a.unit, a.inner_step, a.pid, &a.file).cmp(&(&b.unit, b.inner_step, b.pid, &b.file)));
    for pair in dirs.windows(2) {
        if let [a, b] = pair {
            if (&a.unit, a.inner_step, a.pid) == (&b.unit, b.inner_step, b.pid) {
                return Err(MsprobeError::Layout {
                    path: b.dir.clone(),
                    message: format!(
                        "this dump and {} would both be {}; import them separately with --step/--stage/--rank",
                        a.dir.display(),
                        a.unit
                    ),
                });
            }
        }
    }
    Ok(dirs)
}

const MAX_WALK_DEPTH: usize = 64;

fn walk(dir: &Path, found: &mut Vec<(PathBuf, DumpKind, Option<String>)>, depth: usize) -> Result<()> {
    if depth > MAX_WALK_DEPTH {
        return Err(MsprobeError::Layout {
            path: dir.to_path_buf(),
            message: format!("folders nested deeper than {MAX_WALK_DEPTH} levels"),
        });
    }
    let mut children: Vec<PathBuf> = Vec::new();
    let mut kind = None;
    let entries = std::fs::read_dir(dir).map_err(|e| MsprobeError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| MsprobeError::io(dir, e))?;
        // Symlinks are not followed: a loop must not hang the import.
        let ft = entry.file_type().map_err(|e| MsprobeError::io(entry.path(), e))?;
        let name = entry.file_name();
        if ft.is_dir() {
            if name != "dump_tensor_data" && name != "_probelake" {
                children.push(entry.path());
            }
        } else if ft.is_file() && name == "dump.json" {
            kind = Some(DumpKind::Dump);
        } else if ft.is_file() && name == "debug.json" && kind.is_none() {
            kind = Some(DumpKind::Debug);
        }
    }
    if let Some(kind) = kind {
        found.push((dir.to_path_buf(), kind, None));
    }
    children.sort();
    for child in children {
        walk(&child, found, depth + 1)?;
    }
    Ok(())
}

fn number_after(name: &str, prefix: &str) -> Option<i64> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// (rank, pid) of a rank folder name.
fn rank_dir(name: &str) -> Option<(i64, Option<i64>)> {
    if name == "rank" {
        return Some((0, None));
    }
    if let Some(r) = number_after(name, "rank") {
        return Some((r, None));
    }
    number_after(name, "proc").or_else(|| number_after(name, "pid")).map(|pid| (-1, Some(pid)))
}

/// Where msprobe's dump file `path` belongs, from its path alone (nothing is read): the unit
/// and the file's place in the tree that `import` would give it and `export` writes back.
///
/// ```
/// use probelake_msprobe::place_dump_file;
/// let verl = place_dump_file("/ckpt/dump/step_3/actor_update/step0/rank1/dump.json".as_ref()).unwrap();
/// assert_eq!((verl.unit.step, verl.unit.stage.as_str(), verl.unit.rank), (3, "actor_update", 1));
/// assert_eq!(verl.file, "step_3/actor_update/step0/rank1/dump.json");
/// let plain = place_dump_file("out/step2/proc4242/dump.json".as_ref()).unwrap();
/// assert_eq!((plain.unit.step, plain.unit.rank, plain.pid), (2, -1, Some(4242)));
/// ```
pub fn place_dump_file(path: &Path) -> Result<DumpDir> {
    let kind = if path.file_name().is_some_and(|n| n == "debug.json") { DumpKind::Debug } else { DumpKind::Dump };
    let dir = path.parent().unwrap_or(Path::new(""));
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    classify(dir, dir, None, kind, file_name.as_deref(), &Overrides::default())
}

/// `abs` is `dir` made absolute; `base` the folder an import started from (none: the file's
/// place is its path within the layout).
fn classify(
    dir: &Path,
    abs: &Path,
    base: Option<&Path>,
    kind: DumpKind,
    file_name: Option<&str>,
    ov: &Overrides,
) -> Result<DumpDir> {
    let names: Vec<String> = abs.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let at = |back: usize| names.len().checked_sub(back + 1).and_then(|i| names.get(i)).map(String::as_str);
    let file_name = file_name.unwrap_or(kind.file_name());

    let rank = at(0).and_then(rank_dir);
    let inner = at(1).and_then(|n| number_after(n, "step"));
    let global = at(3).and_then(|n| if n == "step_unknown" { Some(-1) } else { number_after(n, "step_") });
    let detected = match (rank, inner, global) {
        (Some(_), Some(_), Some(_)) => TreeLayout::Verl,
        (Some(_), Some(_), None) => TreeLayout::Msprobe,
        _ => TreeLayout::Single,
    };
    let layout = ov.layout.unwrap_or(detected);
    let need = |what: &str| MsprobeError::Layout {
        path: dir.to_path_buf(),
        message: format!(
            "--layout {} needs {what} above the dump file; drop --layout to detect it",
            layout_name(layout)
        ),
    };
    let (unit, inner_step, pid, rel) = match layout {
        TreeLayout::Verl => {
            let (r, pid) = rank.ok_or_else(|| need("a rank{R} or proc{pid} folder"))?;
            let s = inner.ok_or_else(|| need("a step{S} folder"))?;
            let g = global.ok_or_else(|| need("a step_{g} folder two levels up"))?;
            let stage = at(2).unwrap_or(DEFAULT_STAGE).to_string();
            let rel = format!(
                "{}/{}/{}/{}",
                at(3).unwrap_or_default(),
                stage,
                at(1).unwrap_or_default(),
                at(0).unwrap_or_default()
            );
            (Unit::new(g, stage, r), Some(s), pid, rel)
        }
        TreeLayout::Msprobe => {
            let (r, pid) = rank.ok_or_else(|| need("a rank{R} or proc{pid} folder"))?;
            let s = inner.ok_or_else(|| need("a step{S} folder"))?;
            let rel = format!("{}/{}", at(1).unwrap_or_default(), at(0).unwrap_or_default());
            (Unit::new(s, DEFAULT_STAGE, r), None, pid, rel)
        }
        TreeLayout::Single => (Unit::new(0, DEFAULT_STAGE, 0), None, None, String::new()),
    };
    let unit = Unit {
        step: ov.step.unwrap_or(unit.step),
        stage: ov.stage.clone().unwrap_or(unit.stage),
        rank: ov.rank.unwrap_or(unit.rank),
    };
    // Keep the folders between SRC and the layout's root (several dump_paths imported at
    // once); when SRC lies inside the layout, keep the layout's own path.
    let depth = rel.split('/').filter(|s| !s.is_empty()).count();
    let layout_root = abs.ancestors().nth(depth).unwrap_or(abs);
    let rel = match base.map(|base| (base, abs.strip_prefix(base))) {
        Some((base, Ok(below))) if layout_root.starts_with(base) => {
            below.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
        }
        _ => rel,
    };
    let file = if rel.is_empty() { file_name.to_string() } else { format!("{rel}/{file_name}") };
    Ok(DumpDir { dir: dir.to_path_buf(), path: dir.join(file_name), kind, file, layout, unit, inner_step, pid })
}

fn layout_name(l: TreeLayout) -> &'static str {
    match l {
        TreeLayout::Msprobe => "msprobe",
        TreeLayout::Verl => "verl",
        TreeLayout::Single => "single",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that is neither a folder nor a file says there is nothing to import, not "Not a
    /// directory" from the walk.
    #[cfg(unix)]
    #[test]
    fn a_device_is_no_dump() {
        let err = discover(Path::new("/dev/null"), &Overrides::default()).unwrap_err();
        assert!(matches!(err, MsprobeError::NoDumps { .. }), "{err}");
    }

    #[test]
    fn recognises_all_three_layouts() {
        let tmp = tempfile::tempdir().unwrap();
        for rel in ["v/step_3/actor_update/step0/proc42", "m/step2/rank1", "s/whatever"] {
            let d = tmp.path().join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("dump.json"), "{}").unwrap();
        }
        let v = discover(&tmp.path().join("v/step_3"), &Overrides::default()).unwrap();
        assert_eq!(v[0].unit, Unit::new(3, "actor_update", -1));
        assert_eq!((v[0].inner_step, v[0].pid), (Some(0), Some(42)));
        assert_eq!(v[0].file, "step_3/actor_update/step0/proc42/dump.json");
        let m = discover(&tmp.path().join("m/step2/rank1/dump.json"), &Overrides::default()).unwrap();
        assert_eq!((m[0].unit.clone(), m[0].layout), (Unit::new(2, "default", 1), TreeLayout::Msprobe));
        assert_eq!(m[0].file, "step2/rank1/dump.json");
        let s = discover(&tmp.path().join("s"), &Overrides { rank: Some(5), ..Default::default() }).unwrap();
        assert_eq!((s[0].unit.clone(), s[0].file.as_str()), (Unit::new(0, "default", 5), "whatever/dump.json"));
        assert!(matches!(
            discover(&tmp.path().join("nope"), &Overrides::default()),
            Err(MsprobeError::Dataset(probelake_format::FormatError::Io { .. }))
        ));
        std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
        assert!(matches!(
            discover(&tmp.path().join("empty"), &Overrides::default()),
            Err(MsprobeError::NoDumps { .. })
        ));
    }
}
