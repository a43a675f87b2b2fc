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
        let (path, exists) = self.vet(rel)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        self.create_dirs(&dir)?;
        let tmp = dir.join(format!(".{}.probelake-tmp", uuid::Uuid::new_v4().simple()));
        if let Err(e) = std::fs::File::create(&tmp).and_then(|mut file| fill(&mut file)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(FormatError::io(&path, e));
        }
        if exists {
            let backup = dir.join(format!(".{}.probelake-old", uuid::Uuid::new_v4().simple()));
            if let Err(e) = std::fs::rename(&path, &backup) {
                let _ = std::fs::remove_file(&tmp);
                return Err(FormatError::io(&path, e));
            }
            self.replaced.push((path.clone(), backup));
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(FormatError::io(&path, e));
        }
        if !exists {
            self.created_files.push(path);
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
