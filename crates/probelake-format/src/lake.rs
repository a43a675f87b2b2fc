//! A dataset on an object store: writing data files, committing units, listing what is visible.
//!
//! # Commit protocol
//!
//! ```text
//!  write_batch ──► DataFile (unique name, invisible) ──┐
//!  write_batch ──► DataFile ───────────────────────────┼─► commit(StagedUnit) ──► CommitRecord
//!                                                      │     1. reader schemas and manifest written if missing
//!                                                      │     2. commit record put (atomic)  ◄── the unit is visible from here
//!                                                      │     3. files of the replaced record deleted
//!  discard(files) ◄── on any error before step 2 ──────┘
//! ```
//!
//! [`Lake::commit_pending`] stops after step 2 and keeps what step 3 would delete, so that a
//! writer committing several units can still undo them all ([`Lake::undo_commit`]) when a later
//! one fails. Files that no record names (a killed writer's, or those step 3 could not delete)
//! are removed by [`Lake::vacuum`].
//!
//! It rests on two store guarantees: a `put` is atomic (readers see the old object or the new
//! one, never a mix), and a `put` that returned is durable and listed. Local disks (write to a
//! temporary file, then rename) and S3-compatible stores both give them. Readers list commit
//! records and read only the files a record names, so files of an unfinished or crashed write are
//! never seen by probelake (plain Parquet readers do see them until `vacuum` removes them).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowFilter,
};
use parquet::arrow::ProjectionMask;
use parquet::schema::types::SchemaDescriptor;
use serde::{Deserialize, Serialize};

pub use crate::encode::{encode_batch, EncodedFile};
use crate::error::{FormatError, Result};
use crate::layout::{child, is_unit_data_path, parse_unit_path, Table, Unit, COMMITS_DIR, MANIFEST_FILE};

/// The version of the dataset format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// `_probelake/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `probelake`.
    pub format: String,
    /// See [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The program that created the dataset.
    pub created_by: String,
    /// The tables, as folder names.
    pub tables: Vec<Table>,
}

/// One data file of a unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataFile {
    /// Its table.
    pub table: Table,
    /// The API family partition (`dump` and `tensor` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Path relative to the dataset root.
    pub path: String,
    /// Rows in the file.
    pub rows: u64,
    /// Size in bytes.
    pub bytes: u64,
}

/// What a unit holds, for `info` and for checks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitCounts {
    /// dump.json / debug.json files.
    pub dump_files: u64,
    /// Entries (keys of `data`).
    pub entries: u64,
    /// Rows of `dump`.
    pub leaves: u64,
    /// Rows of `tensor`.
    pub tensors: u64,
    /// Bytes of the imported dump files.
    pub json_bytes: u64,
    /// `task` of the dump files (the first one's).
    pub task: Option<String>,
    /// `level`.
    pub level: Option<String>,
    /// `framework`.
    pub framework: Option<String>,
}

/// `_probelake/commits/step=…/stage=…/rank=….json`: the files that make up a visible unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// See [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The unit.
    pub unit: Unit,
    /// A fresh id per commit.
    pub commit_id: String,
    /// Seconds since the Unix epoch.
    pub committed_at: u64,
    /// The program that wrote it.
    pub writer: String,
    /// The unit's files.
    pub files: Vec<DataFile>,
    /// What the unit holds.
    pub counts: UnitCounts,
}

impl CommitRecord {
    /// The files of `table`.
    pub fn files_of(&self, table: Table) -> impl Iterator<Item = &DataFile> {
        self.files.iter().filter(move |f| f.table == table)
    }

    /// Bytes of all the unit's files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// Data files written for a unit that is not committed yet.
#[derive(Debug, Clone)]
pub struct StagedUnit {
    /// The unit.
    pub unit: Unit,
    /// Its files so far.
    pub files: Vec<DataFile>,
    /// Its counts.
    pub counts: UnitCounts,
}

/// A unit made visible whose replaced record's files are still there, so the commit can be
/// undone: see [`Lake::commit_pending`].
#[derive(Debug, Clone)]
pub struct PendingCommit {
    /// The record now visible.
    pub record: CommitRecord,
    /// The record it replaced.
    pub replaced: Option<CommitRecord>,
}

/// A dataset: an object store and the prefix of its root.
#[derive(Debug, Clone)]
pub struct Lake {
    store: Arc<dyn ObjectStore>,
    root: Path,
    display: String,
    multipart_threshold: usize,
    local_dir: Option<std::path::PathBuf>,
    /// See [`Lake::store_location`].
    location: Option<(String, Path)>,
}

impl Lake {
    /// A dataset at `root` inside `store`; `display` names it in messages (a URL without secrets).
    pub fn new(store: Arc<dyn ObjectStore>, root: Path, display: impl Into<String>) -> Self {
        Lake { store, root, display: display.into(), multipart_threshold: usize::MAX, local_dir: None, location: None }
    }

    /// Uploads files of at least `bytes` in parts (clamped to S3's 5 MiB minimum part size), so a
    /// large file never travels in one request that a dropped connection restarts from zero.
    pub fn with_multipart_threshold(mut self, bytes: usize) -> Self {
        self.multipart_threshold = bytes.max(crate::storage::MIN_PART_SIZE);
        self
    }

    /// Names the dataset `display` in messages.
    pub fn with_display(mut self, display: impl Into<String>) -> Self {
        self.display = display.into();
        self
    }

    /// Opens the dataset at `uri` (a path, `file://` or `s3://` URL), configured from the
    /// environment; see [`crate::storage`].
    pub fn open(uri: &str) -> Result<Self> {
        crate::storage::open(uri, &crate::storage::StorageOptions::from_env())
    }

    /// A dataset in a local folder, created if missing.
    pub fn local(dir: &std::path::Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        let abs = std::fs::canonicalize(dir).map_err(|e| FormatError::io(dir, e))?;
        let store = LocalFileSystem::new_with_prefix(&abs)
            .map_err(|e| FormatError::store(abs.display(), e))?
            .with_automatic_cleanup(true);
        let mut lake = Lake::new(Arc::new(store), Path::default(), dir.display().to_string());
        lake.location = Path::from_absolute_path(&abs).ok().map(|root| ("file:///".to_string(), root));
        lake.local_dir = Some(abs);
        Ok(lake)
    }

    /// The dataset's folder (canonical) when it is a local one.
    pub fn local_dir(&self) -> Option<&std::path::Path> {
        self.local_dir.as_deref()
    }

    /// Where the dataset is as any process can name it: the URL of a store's root (`file:///`,
    /// `s3://bucket`) and the dataset's prefix in that store. A plan run by other processes (a
    /// cluster) names files this way, and each process opens the store from the URL and its
    /// own environment. `None` for a dataset made from a store handed in ([`Lake::new`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let lake = probelake_format::Lake::local(dir.path()).unwrap();
    /// let (url, root) = lake.store_location().unwrap();
    /// assert_eq!(url, "file:///");
    /// assert!(dir.path().canonicalize().unwrap().ends_with(root.as_ref()));
    /// ```
    pub fn store_location(&self) -> Option<(&str, &Path)> {
        self.location.as_ref().map(|(url, root)| (url.as_str(), root))
    }

    /// Sets [`Lake::store_location`]: the dataset is at `root` in the store at `url`.
    pub fn with_store_location(mut self, url: impl Into<String>, root: Path) -> Self {
        self.location = Some((url.into(), root));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The root prefix inside the store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How the dataset is named in messages.
    pub fn display(&self) -> &str {
        &self.display
    }

    pub(crate) fn location(&self, path: &Path) -> String {
        let rel = path.as_ref().strip_prefix(self.root.as_ref()).unwrap_or(path.as_ref()).trim_start_matches('/');
        format!("{}/{}", self.display.trim_end_matches('/'), rel)
    }

    /// Writes `batch` as a new Parquet file of `unit`'s `table`. The file is invisible until the
    /// unit is committed with it.
    pub async fn write_batch(
        &self,
        unit: &Unit,
        table: Table,
        api: Option<&str>,
        batch: &RecordBatch,
    ) -> Result<DataFile> {
        let encoded = encode_batch(table, api, batch)?;
        self.put_encoded(unit, encoded).await
    }

    /// Stores a file made by [`encode_batch`] as a new data file of `unit`, invisible until the
    /// unit is committed with it.
    pub async fn put_encoded(&self, unit: &Unit, encoded: EncodedFile) -> Result<DataFile> {
        let EncodedFile { table, api, rows, bytes: buf } = encoded;
        let path = unit.new_file_path(&self.root, table, api.as_deref());
        let location = self.location(&path);
        let bytes = buf.len() as u64;
        self.upload(&path, Bytes::from(buf)).await.map_err(|e| FormatError::store(&location, e))?;
        Ok(DataFile { table, api, path: self.relative(&path), rows, bytes })
    }

    /// One `put`, or a multipart upload for large files; a failed multipart upload is aborted so
    /// the store keeps no orphaned parts.
    async fn upload(&self, path: &Path, buf: Bytes) -> object_store::Result<()> {
        if buf.len() < self.multipart_threshold {
            self.store.put(path, PutPayload::from(buf)).await?;
            return Ok(());
        }
        let mut upload = self.store.put_multipart(path).await?;
        let part_size = self.multipart_threshold.min(64 * 1024 * 1024);
        let mut rest = buf;
        let mut parts = Vec::new();
        while !rest.is_empty() {
            let part = rest.split_to(part_size.min(rest.len()));
            parts.push(upload.put_part(PutPayload::from(part)));
        }
        let uploaded = match futures::future::try_join_all(parts).await {
            Ok(_) => upload.complete().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if uploaded.is_err() {
            // Best effort: parts left behind cost storage but are never listed as objects.
            let _ = upload.abort().await;
        }
        uploaded
    }

    pub(crate) fn relative(&self, path: &Path) -> String {
        path.as_ref().strip_prefix(self.root.as_ref()).unwrap_or(path.as_ref()).trim_start_matches('/').to_string()
    }

    pub(crate) fn absolute(&self, rel: &str) -> Path {
        child(&self.root, rel)
    }

    /// Makes a staged unit visible, replacing any earlier commit of the same unit.
    #[tracing::instrument(skip(self, staged), fields(step = staged.unit.step, stage = %staged.unit.stage, rank = staged.unit.rank))]
    pub async fn commit(&self, staged: StagedUnit) -> Result<CommitRecord> {
        let pending = self.commit_pending(staged).await?;
        Ok(self.finish_commit(pending).await)
    }

    /// Makes a staged unit visible (steps 1 and 2 of the protocol) but keeps the files of the
    /// record it replaces until [`Lake::finish_commit`], so that [`Lake::undo_commit`] can still
    /// bring the old record back whole.
    pub async fn commit_pending(&self, staged: StagedUnit) -> Result<PendingCommit> {
        self.ensure_manifest().await?;
        let path = staged.unit.commit_path(&self.root);
        let replaced = self.read_record(&path).await?;
        let record = CommitRecord {
            format_version: FORMAT_VERSION,
            unit: staged.unit,
            commit_id: uuid::Uuid::new_v4().simple().to_string(),
            committed_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            writer: format!("probelake {}", env!("CARGO_PKG_VERSION")),
            files: staged.files,
            counts: staged.counts,
        };
        self.put_record(&path, &record).await?;
        Ok(PendingCommit { record, replaced })
    }

    /// Checks, before anything is written, that `units` can be committed here: the manifest
    /// (if any) and the records the commits would replace are readable. A writer that finds
    /// out only at commit time has already stored its data files.
    pub async fn check_writable(&self, units: &[Unit]) -> Result<()> {
        self.manifest().await?;
        // Owned paths: a stream of futures borrowing the units trips up `Send` inference when
        // an import runs inside `tokio::spawn`.
        let paths: Vec<Path> = units.iter().map(|unit| unit.commit_path(&self.root)).collect();
        futures::stream::iter(paths)
            .map(|path| async move { self.read_record(&path).await })
            .buffer_unordered(16)
            .try_for_each(|_| async { Ok(()) })
            .await
    }

    async fn put_record(&self, path: &Path, record: &CommitRecord) -> Result<()> {
        let body = serde_json::to_vec_pretty(record).map_err(|e| FormatError::Internal(e.to_string()))?;
        self.store.put(path, PutPayload::from(body)).await.map_err(|e| FormatError::store(self.location(path), e))?;
        Ok(())
    }

    /// Step 3: deletes the files of the replaced record that the new one does not name. Best
    /// effort: a file left behind is invisible, and [`Lake::vacuum`] removes it.
    pub async fn finish_commit(&self, pending: PendingCommit) -> CommitRecord {
        let PendingCommit { record, replaced } = pending;
        if let Some(previous) = replaced {
            let keep: std::collections::HashSet<&str> = record.files.iter().map(|f| f.path.as_str()).collect();
            for file in previous.files.iter().filter(|f| !keep.contains(f.path.as_str())) {
                if !is_unit_data_path(&previous.unit, file.table, file.api.as_deref(), &file.path) {
                    // Records are checked when read; this is a second guard, never a delete
                    // outside the unit's own folders.
                    continue;
                }
                if let Err(e) = self.store.delete(&self.absolute(&file.path)).await {
                    tracing::warn!(path = %file.path, error = %crate::storage::redact(&e.to_string()), "could not delete a replaced file");
                }
            }
        }
        record
    }

    /// Undoes a [`Lake::commit_pending`]: the replaced record is put back (or the unit's record
    /// deleted when it replaced none). Does nothing when the record is no longer this commit's
    /// (another writer has committed the unit since). The new record's files are left to the
    /// caller to [`discard`](Lake::discard).
    pub async fn undo_commit(&self, pending: &PendingCommit) -> Result<()> {
        let path = pending.record.unit.commit_path(&self.root);
        let current = self.read_record(&path).await?;
        if current.as_ref().map(|r| r.commit_id.as_str()) != Some(pending.record.commit_id.as_str()) {
            return Ok(());
        }
        match &pending.replaced {
            Some(previous) => self.put_record(&path, previous).await,
            None => match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(FormatError::store(self.location(&path), e)),
            },
        }
    }

    /// Deletes data files of a unit that will not be committed. Best effort: the files are
    /// invisible either way, and when the store has just failed (the usual reason to discard)
    /// waiting for it again per file only delays the error the caller is about to report.
    pub async fn discard(&self, files: &[DataFile]) {
        for (i, file) in files.iter().enumerate() {
            if let Err(e) = self.store.delete(&self.absolute(&file.path)).await {
                tracing::info!(
                    error = %crate::storage::redact(&e.to_string()),
                    "left {} uncommitted file(s) behind; they are invisible to readers",
                    files.len() - i
                );
                return;
            }
        }
    }

    /// Checks that the store takes writes here before a long job starts writing: creates the
    /// dataset if it has no manifest, then writes and deletes a small object under
    /// `_probelake/`. A dataset that exists but is read-only fails here, not at the first commit.
    pub async fn check_takes_writes(&self) -> Result<()> {
        self.ensure_manifest().await?;
        let path = child(&self.root, &format!("_probelake/write-check-{}", uuid::Uuid::new_v4().simple()));
        self.store
            .put(&path, PutPayload::from_static(b"probelake"))
            .await
            .map_err(|e| FormatError::store(self.location(&path), e))?;
        self.store.delete(&path).await.map_err(|e| FormatError::store(self.location(&path), e))?;
        Ok(())
    }

    async fn ensure_manifest(&self) -> Result<()> {
        // Read, not only looked for: committing into a dataset whose manifest is damaged (or
        // from a newer probelake) would hide the damage behind a successful import.
        if self.manifest().await?.is_some() {
            return Ok(());
        }
        let path = child(&self.root, MANIFEST_FILE);
        // Before the manifest, so that every dataset with a manifest has them.
        for table in Table::ALL {
            let path = child(&self.root, &crate::readers::reader_schema_path(table));
            let body = crate::readers::encode_reader_schema(table)?;
            self.store
                .put(&path, PutPayload::from(body))
                .await
                .map_err(|e| FormatError::store(self.location(&path), e))?;
        }
        let manifest = Manifest {
            format: "probelake".into(),
            format_version: FORMAT_VERSION,
            created_by: format!("probelake {}", env!("CARGO_PKG_VERSION")),
            tables: Table::ALL.to_vec(),
        };
        let body = serde_json::to_vec_pretty(&manifest).map_err(|e| FormatError::Internal(e.to_string()))?;
        self.store.put(&path, PutPayload::from(body)).await.map_err(|e| FormatError::store(self.location(&path), e))?;
        Ok(())
    }

    /// Reads the manifest; `None` when the root holds no dataset.
    pub async fn manifest(&self) -> Result<Option<Manifest>> {
        let path = child(&self.root, MANIFEST_FILE);
        let Some(bytes) = self.get_optional(&path).await? else {
            return Ok(None);
        };
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| FormatError::Corrupt { location: self.location(&path), message: e.to_string() })?;
        if manifest.format != "probelake" || manifest.format_version > FORMAT_VERSION {
            return Err(FormatError::Corrupt {
                location: self.location(&path),
                message: format!(
                    "format {} version {} is not readable by this probelake (reads version ≤ {FORMAT_VERSION}); upgrade probelake",
                    manifest.format, manifest.format_version
                ),
            });
        }
        Ok(Some(manifest))
    }

    async fn get_optional(&self, path: &Path) -> Result<Option<Bytes>> {
        match self.store.get(path).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(|e| FormatError::store(self.location(path), e))?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(FormatError::store(self.location(path), e)),
        }
    }

    async fn read_record(&self, path: &Path) -> Result<Option<CommitRecord>> {
        let Some(bytes) = self.get_optional(path).await? else {
            return Ok(None);
        };
        let corrupt = |message: String| FormatError::Corrupt { location: self.location(path), message };
        let record: CommitRecord =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("commit record: {e}")))?;
        if record.format_version > FORMAT_VERSION {
            return Err(corrupt(format!(
                "commit record of format version {} is not readable by this probelake (reads version ≤ {FORMAT_VERSION}); upgrade probelake",
                record.format_version
            )));
        }
        // A record is trusted only for its own unit's files: one crafted by hand (or damaged)
        // must not make readers open, or a later commit delete, anything else in the dataset.
        if record.unit.commit_path(&self.root) != *path {
            return Err(corrupt(format!("the commit record is for {}, not for the unit its name says", record.unit)));
        }
        if let Some(bad) =
            record.files.iter().find(|f| !is_unit_data_path(&record.unit, f.table, f.api.as_deref(), &f.path))
        {
            return Err(corrupt(format!(
                "the commit record names {:?}, which is not a {} data file of {}",
                bad.path,
                bad.table.name(),
                record.unit
            )));
        }
        Ok(Some(record))
    }

    /// The committed units, in (step, stage, rank) order. Errors if the root holds no dataset.
    pub async fn units(&self) -> Result<Vec<CommitRecord>> {
        if self.manifest().await?.is_none() {
            return Err(FormatError::Corrupt {
                location: self.display.clone(),
                message: format!("no probelake dataset here (no {MANIFEST_FILE}); create one with `probelake import`"),
            });
        }
        let prefix = child(&self.root, COMMITS_DIR);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| FormatError::store(self.location(&prefix), e))?;
        let wanted = metas.into_iter().filter(|meta| {
            let rel = meta.location.as_ref().strip_prefix(prefix.as_ref()).unwrap_or_default().trim_start_matches('/');
            rel.strip_suffix(".json").is_some_and(|unit| parse_unit_path(unit).is_some())
        });
        // Records are small and independent; on object stores latency, not bandwidth, dominates.
        let mut records: Vec<CommitRecord> = futures::stream::iter(wanted)
            .map(|meta| async move { self.read_record(&meta.location).await })
            .buffer_unordered(16)
            .try_filter_map(|record| async move { Ok(record) })
            .try_collect()
            .await?;
        records.sort_by(|a, b| a.unit.cmp(&b.unit));
        Ok(records)
    }

    /// Reads one data file.
    pub async fn read_file(&self, file: &DataFile) -> Result<Vec<RecordBatch>> {
        self.fetch_file(file).await?.decode()
    }

    /// The first data file of `records` (units of this dataset) that cannot be read or does not
    /// decode, as the error that names it; `None` when every one decodes.
    ///
    /// It reads and decodes every file of those units, so it is for explaining a query that
    /// failed on data (DataFusion's decode errors do not say which file), not for a hot path.
    pub async fn first_damaged_file(&self, records: &[CommitRecord]) -> Option<FormatError> {
        for record in records {
            for table in Table::ALL {
                for file in record.files_of(table) {
                    if let Err(damage) = self.read_file(file).await {
                        return Some(damage);
                    }
                }
            }
        }
        None
    }

    /// Reads one data file's bytes without decoding them, so that the decoding (all CPU) can
    /// run on another thread: [`FetchedFile::decode`].
    pub async fn fetch_file(&self, file: &DataFile) -> Result<FetchedFile> {
        let path = self.absolute(&file.path);
        let location = self.location(&path);
        let bytes = self.store.get(&path).await.map_err(|e| FormatError::store(&location, e))?;
        let bytes = bytes.bytes().await.map_err(|e| FormatError::store(&location, e))?;
        Ok(FetchedFile { location, bytes })
    }
}

/// `schema` with the `Utf8` columns named in `names`, or the `Utf8` items of such list
/// columns, read as `Dictionary(Int32, Utf8)`.
fn dictionary_hint(schema: &SchemaRef, names: &[&str]) -> SchemaRef {
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| {
            let hinted = match field.data_type() {
                _ if !names.contains(&field.name().as_str()) => None,
                DataType::Utf8 => Some(dictionary.clone()),
                DataType::List(item) if item.data_type() == &DataType::Utf8 => {
                    Some(DataType::List(Arc::new(item.as_ref().clone().with_data_type(dictionary.clone()))))
                }
                _ => None,
            };
            match hinted {
                Some(data_type) => field.as_ref().clone().with_data_type(data_type),
                None => field.as_ref().clone(),
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A data file's bytes as [`Lake::fetch_file`] read them, not yet decoded.
#[derive(Debug, Clone)]
pub struct FetchedFile {
    location: String,
    bytes: Bytes,
}

impl FetchedFile {
    /// Decodes the Parquet file into record batches.
    pub fn decode(self) -> Result<Vec<RecordBatch>> {
        self.decode_columns(None, &[])
    }

    /// Decodes only the columns named in `only` (all of them for `None`), in the file's order.
    /// A name the file lacks is left out, for the caller to report as it would a missing column.
    ///
    /// The string (or list-of-string) columns named in `as_dictionary` come back as
    /// `Dictionary(Int32, Utf8)` values: a column whose values repeat, such as the stack table's
    /// frames, is then decoded once per distinct value rather than copied out per row.
    pub fn decode_columns(self, only: Option<&[&str]>, as_dictionary: &[&str]) -> Result<Vec<RecordBatch>> {
        let FetchedFile { location, bytes } = self;
        let reader = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new())
            .and_then(|metadata| {
                if as_dictionary.is_empty() {
                    return Ok(metadata);
                }
                let hinted = dictionary_hint(metadata.schema(), as_dictionary);
                ArrowReaderMetadata::try_new(
                    Arc::clone(metadata.metadata()),
                    ArrowReaderOptions::new().with_schema(hinted),
                )
            })
            .and_then(|metadata| {
                let builder =
                    ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, metadata).with_batch_size(64 * 1024);
                let builder = match only {
                    Some(names) => {
                        let mask = named_roots(builder.schema(), builder.parquet_schema(), names);
                        builder.with_projection(mask)
                    }
                    None => builder,
                };
                builder.build()
            });
        match reader {
            Ok(reader) => FileBatches { location, reader }.collect(),
            Err(source) => Err(FormatError::Parquet { location, source }),
        }
    }

    /// The file's rows in file order as batches of at most `batch_size` rows, each decoded only
    /// when asked for: a reader that stops early leaves the rest of the file undecoded. Only the
    /// columns named in `only` are read (in the file's order; a name the file lacks is left
    /// out), and with `keep = Some((column, value))` only the rows whose string column
    /// `column` equals `value`: that column is decoded first, the others only for those rows.
    pub fn batches(self, only: &[&str], keep: Option<(&str, &str)>, batch_size: usize) -> Result<FileBatches> {
        let FetchedFile { location, bytes } = self;
        let parquet_error = |source| FormatError::Parquet { location: location.clone(), source };
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(parquet_error)?;
        let mask = named_roots(builder.schema(), builder.parquet_schema(), only);
        let mut builder = builder.with_projection(mask).with_batch_size(batch_size.max(1));
        if let Some((column, value)) = keep {
            let index = builder.schema().index_of(column).map_err(|_| FormatError::Corrupt {
                location: location.clone(),
                message: format!("no column `{column}`"),
            })?;
            let value = arrow::array::StringArray::new_scalar(value);
            let on = ProjectionMask::roots(builder.parquet_schema(), [index]);
            let predicate = ArrowPredicateFn::new(on, move |batch: RecordBatch| {
                arrow::compute::kernels::cmp::eq(batch.column(0), &value)
            });
            builder = builder.with_row_filter(RowFilter::new(vec![Box::new(predicate)]));
        }
        let reader = builder.build().map_err(parquet_error)?;
        Ok(FileBatches { location, reader })
    }
}

/// The root columns of a file named in `names`; a name the file lacks is left out.
fn named_roots(schema: &Schema, parquet_schema: &SchemaDescriptor, names: &[&str]) -> ProjectionMask {
    ProjectionMask::roots(parquet_schema, names.iter().filter_map(|n| schema.index_of(n).ok()))
}

/// Batches of one file, decoded as they are asked for ([`FetchedFile::batches`]).
pub struct FileBatches {
    location: String,
    reader: ParquetRecordBatchReader,
}

impl FileBatches {
    /// The file, as errors name it.
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl Iterator for FileBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let location = &self.location;
        // A page that does not decode is a damaged file: say which.
        self.reader.next().map(|batch| {
            batch.map_err(|e| FormatError::Corrupt {
                location: location.clone(),
                message: format!("cannot decode: {e}"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use parquet::arrow::ArrowWriter;

    /// A file of 1,000 rows: `seq` 0.., `section` alternating input/output, `item` per row.
    fn fetched() -> FetchedFile {
        let n = 1000;
        let batch = RecordBatch::try_from_iter([
            ("seq", Arc::new(Int64Array::from_iter_values(0..n)) as arrow::array::ArrayRef),
            ("section", Arc::new(StringArray::from_iter_values((0..n).map(|i| ["input", "output"][i as usize % 2])))),
            ("item", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("item {i}"))))),
        ])
        .expect("batch");
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        FetchedFile { location: "mem/file.parquet".into(), bytes: Bytes::from(bytes) }
    }

    #[test]
    fn batches_keep_the_rows_asked_for_a_batch_at_a_time() {
        let mut batches = fetched().batches(&["seq", "item", "nope"], Some(("section", "output")), 100).expect("open");
        let first = batches.next().expect("a batch").expect("decodes");
        // Only the columns named (one the file lacks is left out), only `output` rows.
        assert_eq!(first.schema().fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["seq", "item"]);
        assert_eq!(first.num_rows(), 100);
        let seq = first.column(0).as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!((seq.value(0), seq.value(99)), (1, 199));
        assert_eq!(first.column(1).as_string::<i32>().value(0), "item 1");
        let rest: usize = batches.map(|b| b.expect("decodes").num_rows()).sum();
        assert_eq!(rest, 400);
    }

    #[test]
    fn batches_name_the_file_when_it_is_not_parquet() {
        let file = FetchedFile { location: "mem/bad.parquet".into(), bytes: Bytes::from_static(b"not parquet") };
        let err = file.batches(&["seq"], None, 10).err().expect("refused").to_string();
        assert!(err.contains("mem/bad.parquet"), "{err}");
        let err = fetched().batches(&["seq"], Some(("nope", "x")), 10).err().expect("refused").to_string();
        assert!(err.contains("mem/file.parquet") && err.contains("`nope`"), "{err}");
    }
}
