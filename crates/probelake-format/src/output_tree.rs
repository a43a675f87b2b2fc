//! Writing a tree of files into a local folder all or nothing: what `export` and `compare`
//! write goes through an [`OutputTree`], which on failure removes what it created and puts back
//! what it replaced, so a failed command leaves its output folder as it found it.
//!
//! ```
//! use probelake_format::output_tree::OutputTree;
//! let dir = tempfile::tempdir().unwrap();
//! let dst = dir.path().join("out");
//! let mut tree = OutputTree::new(&dst, false);
//! tree.write("a/b.json".as_ref(), b"{}").unwrap();
//! tree.rollback();
//! assert!(!dst.exists());
//! ```

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use crate::error::{FormatError, Result};

/// Files written below one folder, undoable until [`OutputTree::finish`]; dropped unfinished,
/// it rolls back.
#[derive(Debug)]
pub struct OutputTree {
    root: PathBuf,
    overwrite: bool,
    created_dirs: Vec<PathBuf>,
    created_files: Vec<PathBuf>,
    /// (file, the copy of what it held before) for overwritten files.
    replaced: Vec<(PathBuf, PathBuf)>,
}

impl OutputTree {
    /// A tree below `root` (created when needed); `overwrite` allows replacing existing files.
    pub fn new(root: &Path, overwrite: bool) -> Self {
        OutputTree {
            root: root.to_path_buf(),
            overwrite,
            created_dirs: Vec::new(),
            created_files: Vec::new(),
            replaced: Vec::new(),
        }
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks that `rel` can be written without writing it: a plain relative path, not written
    /// by this tree already (two units of one export on one file), not a folder, and, unless
    /// the tree overwrites, not an existing file. [`OutputTree::write`] checks the same.
    pub fn check(&self, rel: &Path) -> Result<()> {
        self.vet(rel).map(|_| ())
    }

    /// [`OutputTree::check`], returning the full path and whether a file is there.
    fn vet(&self, rel: &Path) -> Result<(PathBuf, bool)> {
        if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(FormatError::Internal(format!("output path {} is not a plain relative path", rel.display())));
        }
        let path = self.root.join(rel);
        if self.created_files.contains(&path) || self.replaced.iter().any(|(p, _)| *p == path) {
            return Err(FormatError::OutputPath {
                path,
                message: "two units would write this same file; export them one at a time (--step/--stage/--rank) \
                          into separate folders"
                    .into(),
            });
        }
        let existing = std::fs::symlink_metadata(&path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            // Overwriting replaces files, never a folder and what is in it.
            return Err(FormatError::OutputPath { path, message: "is a folder; give a file name".into() });
        }
        let exists = existing.is_some();
        if exists && !self.overwrite {
            return Err(FormatError::Exists { path });
        }
        Ok((path, exists))
    }

    /// Writes `bytes` to `rel` (relative, plain components only) atomically: a temporary file
    /// in the same folder, renamed into place.
    pub fn write(&mut self, rel: &Path, bytes: &[u8]) -> Result<()> {
        self.write_with(rel, |file| file.write_all(bytes))
    }

    /// Like [`OutputTree::write`], with the content written by `fill` into the temporary file,
    /// so that a large file can be written as it is produced instead of held whole first.
    pub fn write_with(
        &mut self,
        rel: &Path,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<()> {
        self.write_parts(|_, _| rel.to_path_buf(), |parts| fill(parts.current()?)).map(|_| ())
    }

    /// Like [`OutputTree::write_with`], for content that may be cut into several files: `fill`
    /// writes into [`Parts::current`] and starts another file with [`Parts::next_file`], and only
    /// then are the files named, file `i` of `n` at `name(n, i)`, so that a name can say how
    /// many there are (msprobe names a long table's CSV files `…_part_1.csv`, `…_part_2.csv`
    /// and a short one's without a suffix). Every name must be in the folder of `name(1, 0)`.
    /// Returns the paths written.
    ///
    /// ```
    /// use std::io::Write;
    /// use probelake_format::output_tree::OutputTree;
    /// let dir = tempfile::tempdir().unwrap();
    /// let mut tree = OutputTree::new(dir.path(), false);
    /// let name = |n: usize, i: usize| if n == 1 { "t.csv".into() } else { format!("t_part_{}.csv", i + 1).into() };
    /// let written = tree.write_parts(name, |parts| {
    ///     parts.current()?.write_all(b"a\n")?;
    ///     parts.next_file()?.write_all(b"b\n")
    /// }).unwrap();
    /// tree.finish();
    /// assert_eq!(written, [dir.path().join("t_part_1.csv"), dir.path().join("t_part_2.csv")]);
    /// ```
    pub fn write_parts(
        &mut self,
        name: impl Fn(usize, usize) -> PathBuf,
        fill: impl FnOnce(&mut Parts) -> std::io::Result<()>,
    ) -> Result<Vec<PathBuf>> {
        let (first, _) = self.vet(&name(1, 0))?;
        let dir = first.parent().unwrap_or(&self.root).to_path_buf();
        self.create_dirs(&dir)?;
        let mut parts = Parts { dir, files: Vec::new() };
        if let Err(e) = fill(&mut parts) {
            parts.remove();
            return Err(FormatError::io(&first, e));
        }
        let count = parts.files.len().max(1);
        if parts.files.is_empty() {
            // Nothing written: still one (empty) file, as a plain write of no bytes gives.
            if let Err(e) = parts.next_file() {
                return Err(FormatError::io(&first, e));
            }
        }
        let mut written = Vec::with_capacity(count);
        let mut temps = std::mem::take(&mut parts.files).into_iter().map(|(tmp, _)| tmp);
        for (i, tmp) in temps.by_ref().enumerate() {
            let placed = self.vet(&name(count, i)).and_then(|(path, exists)| {
                if path.parent() != Some(parts.dir.as_path()) {
                    return Err(FormatError::Internal(format!("{} is not beside {}", path.display(), first.display())));
                }
                self.place(&tmp, &path, exists).map(|()| path)
            });
            match placed {
                Ok(path) => written.push(path),
                Err(e) => {
                    // The files placed before are the tree's now, undone by its rollback.
                    let _ = std::fs::remove_file(&tmp);
                    temps.for_each(|t| drop(std::fs::remove_file(t)));
                    return Err(e);
                }
            }
        }
        Ok(written)
    }

    /// Moves the finished temporary file `tmp` to `path`, keeping a copy of the file that
    /// was there (`exists`) to put back on rollback.
    fn place(&mut self, tmp: &Path, path: &Path, exists: bool) -> Result<()> {
        let dir = path.parent().unwrap_or(&self.root);
        if exists {
            let backup = dir.join(format!(".{}.probelake-old", uuid::Uuid::new_v4().simple()));
            if let Err(e) = std::fs::rename(path, &backup) {
                let _ = std::fs::remove_file(tmp);
                return Err(FormatError::io(path, e));
            }
            self.replaced.push((path.to_path_buf(), backup));
        }
        if let Err(e) = std::fs::rename(tmp, path) {
            let _ = std::fs::remove_file(tmp);
            return Err(FormatError::io(path, e));
        }
        if !exists {
            self.created_files.push(path.to_path_buf());
        }
        Ok(())
    }

    fn create_dirs(&mut self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at {
            // A relative root ends in "" (the working directory), which always exists.
            if d.as_os_str().is_empty() || std::fs::symlink_metadata(d).is_ok() {
                break;
            }
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(&d) {
                Ok(()) => self.created_dirs.push(d),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(FormatError::io(&d, e)),
            }
        }
        Ok(())
    }

    /// Keeps everything written; drops the copies of replaced files.
    pub fn finish(mut self) {
        for (_, backup) in std::mem::take(&mut self.replaced) {
            let _ = std::fs::remove_file(backup);
        }
        self.created_files.clear();
        self.created_dirs.clear();
    }

    /// Removes every file and folder this tree created and puts replaced files back. Best
    /// effort: it runs after another error, which is the one worth reporting.
    pub fn rollback(mut self) {
        self.undo();
    }

    fn undo(&mut self) {
        for file in std::mem::take(&mut self.created_files).iter().rev() {
            let _ = std::fs::remove_file(file);
        }
        for (file, backup) in std::mem::take(&mut self.replaced).iter().rev() {
            if std::fs::rename(backup, file).is_err() {
                tracing::warn!(file = %file.display(), backup = %backup.display(), "could not restore an overwritten file");
            }
        }
        for dir in std::mem::take(&mut self.created_dirs).iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A tree dropped before [`OutputTree::finish`] is rolled back: a command cancelled half way
/// (Ctrl-C drops its future) or a panic leaves the folder as it found it, as an error does.
impl Drop for OutputTree {
    fn drop(&mut self) {
        self.undo();
    }
}

/// The files [`OutputTree::write_parts`] is filling: temporary files in the output's folder,
/// named only once all are written. Dropped before then, they are removed.
#[derive(Debug)]
pub struct Parts {
    dir: PathBuf,
    files: Vec<(PathBuf, std::fs::File)>,
}

impl Parts {
    /// The file being written; the first is started on first use.
    pub fn current(&mut self) -> std::io::Result<&mut std::fs::File> {
        if self.files.is_empty() {
            return self.next_file();
        }
        self.files.last_mut().map(|(_, file)| file).ok_or_else(|| std::io::Error::other("no file started"))
    }

    /// Starts the next file and returns it.
    pub fn next_file(&mut self) -> std::io::Result<&mut std::fs::File> {
        let tmp = self.dir.join(format!(".{}.probelake-tmp", uuid::Uuid::new_v4().simple()));
        let file = std::fs::File::create(&tmp)?;
        self.files.push((tmp, file));
        self.current()
    }

    fn remove(&mut self) {
        for (tmp, _) in self.files.drain(..) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_restores_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("dst");
        std::fs::create_dir_all(root.join("keep")).unwrap();
        std::fs::write(root.join("keep/old.txt"), b"old").unwrap();
        let mut tree = OutputTree::new(&root, true);
        tree.write(Path::new("keep/old.txt"), b"new").unwrap();
        tree.write(Path::new("new/deep/x.txt"), b"x").unwrap();
        assert_eq!(std::fs::read(root.join("keep/old.txt")).unwrap(), b"new");
        assert!(matches!(tree.write(Path::new("new/deep/x.txt"), b"y"), Err(FormatError::OutputPath { .. })));
        tree.rollback();
        assert_eq!(std::fs::read(root.join("keep/old.txt")).unwrap(), b"old");
        assert!(!root.join("new").exists());
        let names: Vec<_> = std::fs::read_dir(root.join("keep")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["old.txt"]);
    }

    #[test]
    fn a_relative_root_is_created_below_the_working_directory() {
        // Relative to the crate folder, where cargo runs unit tests; removed again below.
        let rel = Path::new("target-of-a-relative-root-test").join(uuid::Uuid::new_v4().simple().to_string());
        let mut tree = OutputTree::new(&rel, false);
        let written = tree.write(Path::new("a/b.txt"), b"x");
        let exists = rel.join("a/b.txt").is_file();
        tree.rollback();
        let _ = std::fs::remove_dir(Path::new("target-of-a-relative-root-test"));
        written.unwrap();
        assert!(exists);
        assert!(!rel.exists());
    }

    #[test]
    fn parts_are_named_by_their_count_and_undone_together() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("dst");
        let name = |base: &'static str| {
            move |n: usize, i: usize| {
                PathBuf::from(if n == 1 { format!("d/{base}.csv") } else { format!("d/{base}_{i}.csv") })
            }
        };
        let mut tree = OutputTree::new(&root, false);
        let one = tree.write_parts(name("s"), |parts| parts.current()?.write_all(b"x")).unwrap();
        assert_eq!(one, [root.join("d/s.csv")]);
        let three = tree
            .write_parts(name("t"), |parts| {
                for part in [b"a", b"b", b"c"] {
                    parts.next_file()?.write_all(part)?;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(three, [0, 1, 2].map(|i| root.join(format!("d/t_{i}.csv"))));
        assert_eq!(std::fs::read(root.join("d/t_2.csv")).unwrap(), b"c");
        // A failing fill leaves no temporary file; a name already taken fails at the end.
        let failed = tree.write_parts(
            |_, _| "d/u.csv".into(),
            |parts| {
                parts.next_file()?;
                Err(std::io::Error::other("full"))
            },
        );
        assert!(failed.is_err());
        assert!(tree.write_parts(|_, i| format!("d/t_{i}.csv").into(), |p| p.current().map(drop)).is_err());
        let mut names: Vec<_> = std::fs::read_dir(root.join("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["s.csv", "t_0.csv", "t_1.csv", "t_2.csv"]);
        tree.rollback();
        assert!(!root.exists());
    }

    #[test]
    fn existing_files_are_refused_without_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), b"a").unwrap();
        let mut tree = OutputTree::new(tmp.path(), false);
        assert!(matches!(tree.write(Path::new("a"), b"b"), Err(FormatError::Exists { .. })));
        assert!(tree.write(Path::new("../a"), b"b").is_err());
        tree.finish();
        assert_eq!(std::fs::read(tmp.path().join("a")).unwrap(), b"a");
    }
}
