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
//!
//! # A folder with no manifest
//!
//! An import writes the manifest with its first commit, so one killed before that leaves data
//! files and no manifest, and no record says which files are probelake's. A wrong path given
//! to vacuum looks the same, so there, and only with [`VacuumOptions::without_manifest`],
//! vacuum removes nothing but files at the exact paths the layout gives them
//! ([`is_layout_data_path`]: a known table, canonical `step=`/`stage=`/`rank=`/`api=` folders,
//! a UUID name), the local store's temporaries of such files (`NAME#N`), and the reader schemas
//! and manifest temporaries the first commit writes (`_probelake/schema/<table>.parquet`,
//! `_probelake/manifest.json#N`), after the same grace period; then the layout folders left
//! empty. Every other file is kept and counted ([`VacuumReport::kept_foreign`]). Commit
//! records without a manifest mean a dataset lost its manifest, not an interrupted import:
//! vacuum then refuses, since the records' files are data. A manifest that appears while vacuum
//! lists (an import committed) turns it into the ordinary vacuum above.

use std::collections::HashSet;
use std::path::{Path as FsPath, PathBuf};
use std::time::{Duration, SystemTime};

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{FormatError, Result};
use crate::lake::Lake;
use crate::layout::{
    child, is_layout_data_path, is_layout_folder, Table, COMMITS_DIR, MANIFEST_FILE, META_DIR, SCHEMA_DIR,
};
use crate::readers::reader_schema_path;

/// How long a file must have existed before vacuum may delete it, unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// What to vacuum.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    /// Only files last modified at least this long ago are deleted.
    pub older_than: Duration,
    /// Report what would be deleted, delete nothing.
    pub dry_run: bool,
    /// Also vacuum a root with no manifest (an import killed before its first commit), where
    /// only files at the layout's exact paths are removed; see the module documentation.
    /// Without it such a root is refused, as one holding no dataset.
    pub without_manifest: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions { older_than: DEFAULT_GRACE, dry_run: false, without_manifest: false }
    }
}

/// What a leftover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftoverKind {
    /// A data file no commit record names.
    DataFile,
    /// A temporary file of an interrupted write (local datasets).
    Temporary,
    /// A reader schema (`_probelake/schema/<table>.parquet`) of a root with no manifest: the
    /// first commit writes them just before the manifest.
    ReaderSchema,
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
    /// Whether the root had no manifest, so that only files at the layout's exact paths were
    /// considered ([`VacuumOptions::without_manifest`]).
    pub without_manifest: bool,
    /// Without a manifest: the files (and links, and other entries) under the table folders
    /// and `_probelake/` that are not at a layout path, which were kept. 0 otherwise.
    pub kept_foreign: usize,
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
    ///
    /// With [`VacuumOptions::without_manifest`], a root with no manifest is vacuumed too, but
    /// only of files at the layout's exact paths (see the module documentation).
    pub async fn vacuum(&self, options: &VacuumOptions) -> Result<VacuumReport> {
        if options.without_manifest && self.manifest().await?.is_none() {
            return self.vacuum_without_manifest(options).await;
        }
        self.vacuum_unnamed(options).await
    }

    /// [`Lake::vacuum`] of a dataset: the files no commit record names.
    async fn vacuum_unnamed(&self, options: &VacuumOptions) -> Result<VacuumReport> {
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
        Ok(VacuumReport {
            removed,
            kept_recent: recent.len(),
            dry_run: options.dry_run,
            without_manifest: false,
            kept_foreign: 0,
        })
    }

    /// [`Lake::vacuum`] of a root with no manifest: see the module documentation.
    async fn vacuum_without_manifest(&self, options: &VacuumOptions) -> Result<VacuumReport> {
        self.refuse_records_without_manifest().await?;
        let listing = match self.local_dir() {
            Some(dir) => list_local_layout(dir)?,
            None => self.list_store_layout().await?,
        };
        // An import that committed while we listed wrote the manifest first: from then on its
        // records say which files are data, and the ordinary vacuum reads them.
        if self.manifest().await?.is_some() {
            return self.vacuum_unnamed(options).await;
        }
        let cutoff = SystemTime::now().checked_sub(options.older_than).unwrap_or(SystemTime::UNIX_EPOCH);
        let (old, recent): (Vec<Found>, Vec<Found>) = listing.files.into_iter().partition(|f| f.modified <= cutoff);
        let removed: Vec<Leftover> =
            old.into_iter().map(|f| Leftover { path: f.rel, bytes: f.bytes, kind: f.kind }).collect();
        if !options.dry_run {
            for leftover in &removed {
                self.delete_leftover(&leftover.path).await?;
            }
            if let Some(dir) = self.local_dir() {
                remove_empty_folders(dir, listing.folders);
            }
        }
        Ok(VacuumReport {
            removed,
            kept_recent: recent.len(),
            dry_run: options.dry_run,
            without_manifest: true,
            kept_foreign: listing.foreign,
        })
    }

    /// Refuses a root whose manifest is gone but whose commit records are there: their files
    /// are a dataset's data, which only the records can tell from leftovers.
    async fn refuse_records_without_manifest(&self) -> Result<()> {
        let prefix = child(self.root(), COMMITS_DIR);
        let first = self
            .store()
            .list(Some(&prefix))
            .try_next()
            .await
            .map_err(|e| FormatError::store(self.location(&prefix), e))?;
        match first {
            None => Ok(()),
            Some(_) => Err(FormatError::Corrupt {
                location: self.location(&prefix),
                message: format!(
                    "commit records but no {MANIFEST_FILE}: the manifest is missing, and vacuum \
                     without it would not know which files the records name; copy \
                     {MANIFEST_FILE} from another dataset (it is the same for every dataset of \
                     this probelake) and run vacuum again; nothing was deleted"
                ),
            }),
        }
    }

    /// Without a manifest, on an object store: the objects at layout paths under the table
    /// folders and the reader schemas (no temporaries: the local store alone writes them).
    async fn list_store_layout(&self) -> Result<Listing> {
        let mut listing = Listing::default();
        let schemas: Vec<String> = Table::ALL.iter().map(|t| reader_schema_path(*t)).collect();
        for top in Table::ALL.iter().map(|t| t.name()).chain([SCHEMA_DIR]) {
            for mut found in self.objects_below(top).await? {
                found.kind = if is_layout_data_path(&found.rel) {
                    LeftoverKind::DataFile
                } else if schemas.contains(&found.rel) {
                    LeftoverKind::ReaderSchema
                } else {
                    listing.foreign += 1;
                    continue;
                };
                listing.files.push(found);
            }
        }
        Ok(listing)
    }

    async fn referenced_files(&self) -> Result<HashSet<String>> {
        let units = self.units().await?;
        Ok(units.into_iter().flat_map(|r| r.files.into_iter().map(|f| f.path)).collect())
    }

    async fn list_store(&self) -> Result<Vec<Found>> {
        let mut found = Vec::new();
        for table in Table::ALL {
            found.extend(self.objects_below(table.name()).await?.into_iter().filter(|f| f.rel.ends_with(".parquet")));
        }
        Ok(found)
    }

    /// Every object below the dataset's top folder `top`, as a data file until its lister
    /// decides otherwise.
    async fn objects_below(&self, top: &str) -> Result<Vec<Found>> {
        let prefix = child(self.root(), top);
        let metas: Vec<_> = self
            .store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| FormatError::store(self.location(&prefix), e))?;
        Ok(metas
            .into_iter()
            .map(|meta| {
                let millis = u64::try_from(meta.last_modified.timestamp_millis()).unwrap_or(0);
                Found {
                    rel: self.relative(&meta.location),
                    bytes: meta.size,
                    modified: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
                    kind: LeftoverKind::DataFile,
                }
            })
            .collect())
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
    temporary_of(name).is_some()
}

/// The file a temporary of the local store (`NAME#DIGITS`) was to become: `NAME`.
fn temporary_of(name: &str) -> Option<&str> {
    name.rsplit_once('#').filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).map(|(f, _)| f)
}

/// What a root with no manifest holds, as far as vacuum is concerned.
#[derive(Default)]
struct Listing {
    /// Files at layout paths.
    files: Vec<Found>,
    /// Layout folders (local datasets), to remove when emptied.
    folders: Vec<PathBuf>,
    /// Everything else found.
    foreign: usize,
}

/// What the file at `rel` (relative to a root with no manifest) is, when it is one vacuum may
/// remove there.
fn layout_leftover(rel: &str) -> Option<LeftoverKind> {
    let is_schema = |path: &str| Table::ALL.iter().any(|t| reader_schema_path(*t) == path);
    if is_layout_data_path(rel) {
        return Some(LeftoverKind::DataFile);
    }
    if is_schema(rel) {
        return Some(LeftoverKind::ReaderSchema);
    }
    let target = temporary_of(rel)?;
    (is_layout_data_path(target) || is_schema(target) || target == MANIFEST_FILE).then_some(LeftoverKind::Temporary)
}

/// Walks the table folders and `_probelake/` of a local root with no manifest, without
/// following links, sorting what it finds into layout files, layout folders and the rest.
fn list_local_layout(root: &FsPath) -> Result<Listing> {
    let mut listing = Listing::default();
    for top in Table::ALL.iter().map(|t| t.name()).chain([META_DIR]) {
        let path = root.join(top);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => walk_layout(root, &path, &mut listing)?,
            // A file or a link (never followed) where a layout folder would be.
            Ok(_) => listing.foreign += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FormatError::io(path, e)),
        }
    }
    Ok(listing)
}

fn walk_layout(root: &FsPath, dir: &FsPath, listing: &mut Listing) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FormatError::io(dir, e)),
    };
    let is_layout = |rel: &str| is_layout_folder(rel) || rel == META_DIR || rel == SCHEMA_DIR;
    match relative(root, dir) {
        Some(rel) if is_layout(&rel) => listing.folders.push(dir.to_path_buf()),
        // A folder of the user's: nothing in it is probelake's.
        _ => {
            listing.foreign += 1;
            return Ok(());
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FormatError::io(dir, e))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| FormatError::io(&path, e))?;
        if file_type.is_dir() {
            dirs.push(path);
            continue;
        }
        let kind = match relative(root, &path) {
            // Links, sockets, …: never followed, never deleted.
            Some(rel) if file_type.is_file() => layout_leftover(&rel).map(|kind| (rel, kind)),
            _ => None,
        };
        let Some((rel, kind)) = kind else {
            listing.foreign += 1;
            continue;
        };
        let meta = entry.metadata().map_err(|e| FormatError::io(&path, e))?;
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        listing.files.push(Found { rel, bytes: meta.len(), modified, kind });
    }
    dirs.sort();
    for sub in dirs {
        walk_layout(root, &sub, listing)?;
    }
    Ok(())
}

/// Removes those of `folders` (layout folders, found by [`list_local_layout`]) that are empty,
/// deepest first, so that a folder emptied by removing its empty subfolders goes too. A folder
/// holding anything else stays.
fn remove_empty_folders(root: &FsPath, mut folders: Vec<PathBuf>) {
    folders.sort_by_key(|f| std::cmp::Reverse(f.components().count()));
    for folder in folders {
        if folder != root && folder.starts_with(root) {
            // Fails, and keeps the folder, when it is not empty.
            let _ = std::fs::remove_dir(&folder);
        }
    }
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
    use crate::lake::StagedUnit;
    use crate::layout::Unit;
    use crate::schema::schema_of;
    use arrow::record_batch::RecordBatch;
    use object_store::path::Path;

    /// Every file and link below `dir` (links not followed), relative, sorted.
    fn entries_below(dir: &FsPath) -> Vec<String> {
        fn walk(root: &FsPath, dir: &FsPath, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() {
                    walk(root, &entry.path(), out);
                } else {
                    out.push(relative(root, &entry.path()).unwrap());
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    fn put(root: &FsPath, rel: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, rel).unwrap();
    }

    const NAME: &str = "0123456789abcdef0123456789abcdef.parquet";

    /// What an import killed before its first commit leaves (a data file of every table and
    /// a temporary), and what a user may keep beside it. Returns (layout files, foreign files).
    async fn killed_import_and_user_files(root: &FsPath, lake: &Lake) -> (Vec<String>, Vec<String>) {
        let unit = Unit::new(1, "actor update", 0);
        let mut ours = Vec::new();
        for table in Table::ALL {
            let api = table.has_api_partition().then_some("Functional");
            let file = lake.write_batch(&unit, table, api, &RecordBatch::new_empty(schema_of(table))).await.unwrap();
            ours.push(file.path);
        }
        let temporary =
            format!("{}#1", Unit::new(2, "x", 3).new_file_path(&Path::default(), Table::Dump, Some("Torch")));
        put(root, &temporary);
        ours.push(temporary);
        put(root, "_probelake/schema/dump.parquet");
        ours.push("_probelake/schema/dump.parquet".into());
        ours.sort();
        let foreign: Vec<String> = [
            "notes.txt".to_string(),
            "dump/readme.parquet".into(),
            "dump/step=1/x.parquet".into(),
            "dump/step=1/stage=actor%20update/rank=0/api=Functional/notes.parquet".into(),
            format!("dump/step=1/stage=actor%20update/rank=0/api=Functional/{}", NAME.to_uppercase()),
            format!("dump/step=01/stage=a/rank=0/api=Functional/{NAME}"),
            format!("dump/step=1/stage=a/rank=0/api=F/mine/{NAME}"),
            format!("stack/step=1/stage=a/rank=0/api=Functional/{NAME}"),
            format!("results/step=1/stage=a/rank=0/{NAME}"),
            "results/summary.csv".into(),
            "_probelake/notes.txt".into(),
        ]
        .into();
        for f in &foreign {
            put(root, f);
        }
        (ours, foreign)
    }

    #[tokio::test]
    async fn without_a_manifest_only_layout_files_go_and_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        let lake = Lake::local(&root).unwrap();
        let (ours, foreign) = killed_import_and_user_files(&root, &lake).await;
        // A link at a layout path: never followed, never deleted.
        let precious = dir.path().join("precious.parquet");
        std::fs::write(&precious, "keep").unwrap();
        let link = format!("source/step=1/stage=actor%20update/rank=0/{}", NAME.replace('0', "f"));
        std::os::unix::fs::symlink(&precious, root.join(&link)).unwrap();
        // An empty folder of the user's inside a layout folder keeps it; an empty layout folder goes.
        std::fs::create_dir_all(root.join("stack/step=5/stage=a/rank=0/mine")).unwrap();
        std::fs::create_dir_all(root.join("tensor/step=9/stage=a/rank=0/api=Torch")).unwrap();
        let before = entries_below(&root);

        // Without the option, a root with no manifest is refused as before.
        let zero = VacuumOptions { older_than: Duration::ZERO, dry_run: false, without_manifest: false };
        let err = lake.vacuum(&zero).await.unwrap_err();
        assert!(err.to_string().contains("no probelake dataset here"), "{err}");
        assert_eq!(entries_below(&root), before);

        // A dry run lists exactly the layout files and deletes nothing.
        let dry = VacuumOptions { dry_run: true, without_manifest: true, ..zero.clone() };
        let report = lake.vacuum(&dry).await.unwrap();
        let mut listed: Vec<&str> = report.removed.iter().map(|l| l.path.as_str()).collect();
        listed.sort_unstable();
        assert_eq!(listed, ours.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(report.dry_run && report.without_manifest);
        // dump: 4 files and 2 folders not of the layout; stack: 2 folders; the link; _probelake/notes.txt.
        assert_eq!(report.kept_foreign, 10);
        assert_eq!(entries_below(&root), before);

        // Young files are kept, as with a manifest: an import may be writing them.
        let young = lake.vacuum(&VacuumOptions { older_than: DEFAULT_GRACE, ..dry.clone() }).await.unwrap();
        assert!(young.removed.is_empty());
        assert_eq!(young.kept_recent, ours.len());

        let report = lake.vacuum(&VacuumOptions { dry_run: false, ..dry.clone() }).await.unwrap();
        assert_eq!(report.removed.len(), ours.len());
        let mut left = foreign.clone();
        left.push(link);
        left.sort();
        assert_eq!(entries_below(&root), left);
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
        // The folders only our files were in are gone, the user's and those holding theirs stay.
        for gone in ["construct", "tensor", "stack/step=1/stage=actor%20update", "dump/step=2", "_probelake/schema"] {
            assert!(!root.join(gone).exists(), "{gone}");
        }
        for kept in [
            "stack/step=5/stage=a/rank=0/mine",
            "dump/step=1/stage=actor%20update/rank=0/api=Functional",
            "source/step=1/stage=actor%20update/rank=0",
        ] {
            assert!(root.join(kept).is_dir(), "{kept}");
        }

        // Once a unit is committed the root is a dataset and the ordinary vacuum applies.
        let unit = Unit::new(3, "s", 0);
        let file = lake
            .write_batch(&unit, Table::Stack, None, &RecordBatch::new_empty(schema_of(Table::Stack)))
            .await
            .unwrap();
        lake.commit(StagedUnit { unit, files: vec![file], counts: Default::default() }).await.unwrap();
        let report = lake.vacuum(&dry).await.unwrap();
        assert!(!report.without_manifest && report.kept_foreign == 0, "{report:?}");
    }

    #[tokio::test]
    async fn commit_records_without_a_manifest_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        let lake = Lake::local(&root).unwrap();
        let (_, _) = killed_import_and_user_files(&root, &lake).await;
        // A dataset whose manifest was deleted: its records name data, not leftovers.
        put(&root, "_probelake/commits/step=1/stage=actor%20update/rank=0.json");
        let before = entries_below(&root);
        let options = VacuumOptions { older_than: Duration::ZERO, dry_run: false, without_manifest: true };
        let err = lake.vacuum(&options).await.unwrap_err();
        assert!(matches!(err, FormatError::Corrupt { .. }), "{err}");
        assert!(
            err.to_string().contains("manifest is missing") && err.to_string().contains("nothing was deleted"),
            "{err}"
        );
        assert_eq!(entries_below(&root), before);
    }

    #[test]
    fn temporary_names_are_those_the_local_store_writes() {
        assert!(is_temporary("0123.parquet#1"));
        assert!(is_temporary("rank=0.json#12"));
        assert!(!is_temporary("0123.parquet"));
        assert!(!is_temporary("a#b"));
        assert!(!is_temporary("a#"));
    }

    #[test]
    fn without_a_manifest_only_layout_paths_are_leftovers() {
        let data = "dump/step=1/stage=a/rank=0/api=Torch/0123456789abcdef0123456789abcdef.parquet";
        assert_eq!(layout_leftover(data), Some(LeftoverKind::DataFile));
        assert_eq!(layout_leftover(&format!("{data}#3")), Some(LeftoverKind::Temporary));
        assert_eq!(layout_leftover("_probelake/schema/stack.parquet"), Some(LeftoverKind::ReaderSchema));
        assert_eq!(layout_leftover("_probelake/schema/stack.parquet#1"), Some(LeftoverKind::Temporary));
        assert_eq!(layout_leftover("_probelake/manifest.json#2"), Some(LeftoverKind::Temporary));
        for foreign in [
            "_probelake/manifest.json",
            "_probelake/schema/stacks.parquet",
            "_probelake/notes.txt#1",
            "dump/readme.parquet",
            "dump/step=1/x.parquet",
            "dump/step=1/stage=a/rank=0/api=Torch/notes.txt#1",
            "dump/step=1/stage=a/rank=0/api=Torch/0123456789abcdef0123456789abcdef.parquet#",
            "notes.txt",
        ] {
            assert_eq!(layout_leftover(foreign), None, "{foreign}");
        }
    }
}
