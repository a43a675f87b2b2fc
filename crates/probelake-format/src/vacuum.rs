//! `vacuum`: removing files that no commit record names.
//!
//! A killed import, a writer that crashed before committing, or a replaced unit whose old files
//! could not be deleted all leave data files behind. probelake's readers never see them (they
//! read what commit records name), but plain Parquet readers of the table folders do, and they
//! cost storage. [`Lake::vacuum`] deletes them.
//!
//! # The grace period
//!
//! A writer uploads a unit's data files first and commits them afterwards; in between they are
//! named by no record, exactly like a crashed writer's leftovers. `import` uploads every unit of
//! a tree before committing any, so for a large tree that window lasts as long as the upload,
//! and the writer API keeps a unit's files staged until the unit is done. Vacuum therefore only
//! deletes files older than a grace period ([`DEFAULT_GRACE`], 24 hours: far longer than any
//! import, and enough to absorb clock skew between this machine and an object store). Deleting
//! younger files is safe only when nothing writes to the dataset: `--older-than 0s` is for that
//! case (and for tests).
//!
//! Records are read twice, before and after listing, so a unit committed while vacuum lists is
//! never touched; what the grace period guards against is a file uploaded long before its
//! commit, which the second read can miss only if its commit lands after that read.
//!
//! # What is removed
//!
//! - `.parquet` files under the table folders (`dump/`, `stack/`, `construct/`, `tensor/`,
//!   `source/`) that no commit record names;
//! - on a local dataset, temporary files of interrupted writes (`NAME#N`, which the local store
//!   writes before renaming into place and never lists), anywhere in the dataset;
//! - then, locally, the folders those deletions left empty.
//!
//! Nothing else is touched: not `_probelake/` metadata, not files of other kinds, and never
//! anything behind a symbolic link (the local walk does not follow links). On S3, interrupted
//! multipart uploads are not objects and cannot be listed through the S3 API probelake uses;
//! an `AbortIncompleteMultipartUpload` lifecycle rule on the bucket removes them.

use std::collections::HashSet;
use std::path::{Path as FsPath, PathBuf};
use std::time::{Duration, SystemTime};

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{FormatError, Result};
use crate::lake::Lake;
use crate::layout::{child, Table, META_DIR};

/// How long a file must have existed before vacuum may delete it, unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// What to vacuum.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    /// Only files last modified at least this long ago are deleted.
    pub older_than: Duration,
    /// Report what would be deleted, delete nothing.
    pub dry_run: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions { older_than: DEFAULT_GRACE, dry_run: false }
    }
}

/// What a leftover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftoverKind {
    /// A data file no commit record names.
    DataFile,
    /// A temporary file of an interrupted write (local datasets).
    Temporary,
}

/// One file vacuum deleted (or would delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Path relative to the dataset root.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// What it is.
    pub kind: LeftoverKind,
}

/// What [`Lake::vacuum`] did.
#[derive(Debug, Clone, Default)]
pub struct VacuumReport {
    /// The files deleted (with `dry_run`: the files that would be).
    pub removed: Vec<Leftover>,
    /// Files no record names that were kept because they are younger than the grace period.
    pub kept_recent: usize,
    /// Whether nothing was deleted on purpose.
    pub dry_run: bool,
}

impl VacuumReport {
    /// Bytes of the removed files.
    pub fn bytes(&self) -> u64 {
        self.removed.iter().map(|l| l.bytes).sum()
    }
}

/// A file found by listing.
struct Found {
    rel: String,
    bytes: u64,
    modified: SystemTime,
    kind: LeftoverKind,
}

impl Lake {
    /// Deletes data files no commit record names, and temporary files of interrupted writes,
    /// that are older than `options.older_than`. Refuses to run (deleting nothing) when the
    /// root holds no dataset or a commit record cannot be read, since then what is committed
    /// is not known.
    pub async fn vacuum(&self, options: &VacuumOptions) -> Result<VacuumReport> {
        let before = self.referenced_files().await?;
        let found = match self.local_dir() {
            Some(dir) => list_local(dir)?,
            None => self.list_store().await?,
        };
        let cutoff = SystemTime::now().checked_sub(options.older_than).unwrap_or(SystemTime::UNIX_EPOCH);
        let unnamed: Vec<Found> =
            found.into_iter().filter(|f| f.kind == LeftoverKind::Temporary || !before.contains(&f.rel)).collect();
        let (old, recent): (Vec<Found>, Vec<Found>) = unnamed.into_iter().partition(|f| f.modified <= cutoff);
        // A unit committed while we listed names files the first read did not know.
        let after = self.referenced_files().await?;
        let removed: Vec<Leftover> = old
            .into_iter()
            .filter(|f| f.kind == LeftoverKind::Temporary || !after.contains(&f.rel))
            .map(|f| Leftover { path: f.rel, bytes: f.bytes, kind: f.kind })
            .collect();
        if !options.dry_run {
            for leftover in &removed {
                self.delete_leftover(&leftover.path).await?;
            }
        }
        Ok(VacuumReport { removed, kept_recent: recent.len(), dry_run: options.dry_run })
    }

    async fn referenced_files(&self) -> Result<HashSet<String>> {
        let units = self.units().await?;
        Ok(units.into_iter().flat_map(|r| r.files.into_iter().map(|f| f.path)).collect())
    }

    async fn list_store(&self) -> Result<Vec<Found>> {
        let mut found = Vec::new();
        for table in Table::ALL {
            let prefix = child(self.root(), table.name());
            let metas: Vec<_> = self
                .store()
                .list(Some(&prefix))
                .try_collect()
                .await
                .map_err(|e| FormatError::store(self.location(&prefix), e))?;
            for meta in metas {
                let rel = self.relative(&meta.location);
                if !rel.ends_with(".parquet") {
                    continue;
                }
                let millis = u64::try_from(meta.last_modified.timestamp_millis()).unwrap_or(0);
                found.push(Found {
                    rel,
                    bytes: meta.size,
                    modified: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
                    kind: LeftoverKind::DataFile,
                });
            }
        }
        Ok(found)
    }

    async fn delete_leftover(&self, rel: &str) -> Result<()> {
        if let Some(dir) = self.local_dir() {
            let path = dir.join(rel);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(FormatError::io(path, e)),
            }
            remove_empty_parents(dir, &path);
            return Ok(());
        }
        let location = self.absolute(rel);
        match self.store().delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(FormatError::store(self.location(&location), e)),
        }
    }
}

/// Whether `name` is a temporary file of the local store: `NAME#DIGITS`.
fn is_temporary(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Walks the table folders and `_probelake/` of a local dataset without following links.
fn list_local(root: &FsPath) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    for top in Table::ALL.iter().map(|t| t.name()).chain([META_DIR]) {
        walk(root, &root.join(top), top == META_DIR, &mut found)?;
    }
    Ok(found)
}

fn walk(root: &FsPath, dir: &FsPath, metadata_only: bool, found: &mut Vec<Found>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FormatError::io(dir, e)),
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FormatError::io(dir, e))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| FormatError::io(&path, e))?;
        if file_type.is_dir() {
            dirs.push(path);
            continue;
        }
        if !file_type.is_file() {
            continue; // links, sockets, …: never followed, never deleted
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let kind = if is_temporary(&name) {
            LeftoverKind::Temporary
        } else if !metadata_only && name.ends_with(".parquet") {
            LeftoverKind::DataFile
        } else {
            continue;
        };
        let Some(rel) = relative(root, &path) else { continue };
        let meta = entry.metadata().map_err(|e| FormatError::io(&path, e))?;
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        found.push(Found { rel, bytes: meta.len(), modified, kind });
    }
    dirs.sort();
    for sub in dirs {
        walk(root, &sub, metadata_only, found)?;
    }
    Ok(())
}

fn relative(root: &FsPath, path: &FsPath) -> Option<String> {
    let parts: Option<Vec<&str>> = path.strip_prefix(root).ok()?.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// Removes the folders above `file` that are empty now, up to (not including) the table folder.
fn remove_empty_parents(root: &FsPath, file: &FsPath) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        let depth = d.strip_prefix(root).map(|r| r.components().count()).unwrap_or(0);
        if depth <= 1 || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_those_the_local_store_writes() {
        assert!(is_temporary("0123.parquet#1"));
        assert!(is_temporary("rank=0.json#12"));
        assert!(!is_temporary("0123.parquet"));
        assert!(!is_temporary("a#b"));
        assert!(!is_temporary("a#"));
    }
}
