//! `import`: msprobe dump trees into a dataset, one committed unit per (step, stage, rank).
//!
//! Every unit is built and its files written (invisible) before any unit is committed, and a
//! commit that fails undoes the commits before it, so bad input anywhere (or a store failing
//! half way) leaves the dataset as it was.

use std::path::Path;

use crate::error::{MsprobeError, Result};
use futures::StreamExt;

use crate::tensor_file::{read_tensor_file, write_tensor_file};
use probelake_format::lake::{encode_batch, CommitRecord, DataFile, EncodedFile, Lake, StagedUnit, UnitCounts};
use probelake_format::layout::{Table, Unit};

use crate::columns::{
    ConstructColumns, DumpColumns, Origin, SourceColumns, StackColumns, TensorColumns, TensorRow, UnitColumns,
};
use crate::discover::{by_unit, discover, DumpDir, Overrides};
use crate::dump_folder::{read_dump_files, DumpFiles, Reading};
use crate::in_order::map_in_order;
use crate::read_file::read_file;

/// Receives progress of a long import or export; every method has a no-op default.
pub trait Progress: Send + Sync {
    /// The work ahead: `bytes` of input in `units` units.
    fn start(&self, _bytes: u64, _units: usize) {}
    /// `bytes` more of the input were processed.
    fn advance(&self, _bytes: u64) {}
    /// The work is over.
    fn finish(&self) {}
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;
impl Progress for NoProgress {}

/// What to import and how.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Layout, step, stage or rank given by the user instead of detected.
    pub overrides: Overrides,
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// The committed units.
    pub units: Vec<CommitRecord>,
    /// Bytes of dump files read.
    pub json_bytes: u64,
}

/// Imports the msprobe dump tree (or single dump file) at `src` into `lake`, replacing units
/// that are already there.
pub async fn import(src: &Path, lake: &Lake, options: &ImportOptions, progress: &dyn Progress) -> Result<ImportReport> {
    let dirs = discover(src, &options.overrides)?;
    let units: Vec<(Unit, Vec<&DumpDir>)> = by_unit(&dirs);
    let replaced: Vec<Unit> = units.iter().map(|(unit, _)| unit.clone()).collect();
    lake.check_writable(&replaced).await?;
    let total: u64 = dirs.iter().map(DumpDir::dump_bytes).sum();
    progress.start(total, units.len());

    // Units are built a wave at a time, one per thread, and stored before the next wave, so
    // memory holds a wave's files rather than the whole import's (tensor data can be large).
    let threads = available_threads();
    let mut staged: Vec<StagedUnit> = Vec::with_capacity(units.len());
    let mut failure = None;
    'waves: for wave in units.chunks(threads) {
        let built = build_units(wave, threads, progress);
        for ((unit, _), result) in wave.iter().zip(built) {
            let stored = match result {
                Ok((encoded, counts)) => store_unit(lake, unit, encoded, counts).await,
                Err(e) => Err(e),
            };
            match stored {
                Ok(s) => staged.push(s),
                Err(e) => {
                    failure = Some(e);
                    break 'waves;
                }
            }
        }
    }
    if let Some(e) = failure {
        let files: Vec<DataFile> = staged.into_iter().flat_map(|s| s.files).collect();
        lake.discard(&files).await;
        progress.finish();
        return Err(e);
    }
    let json_bytes = staged.iter().map(|s| s.counts.json_bytes).sum();
    let result = commit_all(lake, staged).await;
    progress.finish();
    Ok(ImportReport { units: result?, json_bytes })
}

/// Commits every staged unit, or none: when a commit fails, the units committed before it get
/// their replaced records back. Replaced files are deleted only once all units are committed.
async fn commit_all(lake: &Lake, staged: Vec<StagedUnit>) -> Result<Vec<CommitRecord>> {
    let mut pending = Vec::with_capacity(staged.len());
    let mut rest = staged.into_iter();
    while let Some(unit) = rest.next() {
        match lake.commit_pending(unit).await {
            Ok(p) => pending.push(p),
            Err(e) => {
                // The failed unit's own files stay: its record may have landed before the
                // error (a timed-out request), and `vacuum` removes them if it did not.
                let mut orphans: Vec<DataFile> = rest.flat_map(|s| s.files).collect();
                for p in pending.iter().rev() {
                    match lake.undo_commit(p).await {
                        Ok(()) => orphans.extend(p.record.files.iter().cloned()),
                        Err(undo) => tracing::warn!(
                            unit = %p.record.unit,
                            error = %probelake_format::storage::redact(&undo.to_string()),
                            "could not undo the commit of a unit; it stays committed"
                        ),
                    }
                }
                lake.discard(&orphans).await;
                return Err(e.into());
            }
        }
    }
    let mut records = Vec::with_capacity(pending.len());
    for p in pending {
        records.push(lake.finish_commit(p).await);
    }
    Ok(records)
}

type BuiltUnit = Result<(Vec<EncodedFile>, UnitCounts)>;

/// Reads, checks and encodes `units` (at most `threads` of them), a thread each and the
/// `threads` left over shared among them: units are independent and this part is all CPU.
/// Results come back in `units` order ([`map_in_order`]).
fn build_units(units: &[(Unit, Vec<&DumpDir>)], threads: usize, progress: &dyn Progress) -> Vec<BuiltUnit> {
    let jobs: Vec<&[&DumpDir]> = units.iter().map(|(_, members)| members.as_slice()).collect();
    // The threads a wave leaves over go to its units' files: one large file alone uses them all.
    let per_unit = (threads / units.len().max(1)).max(1);
    let units_at_once = jobs.len();
    map_in_order(jobs, units_at_once, |members| build_unit(members, per_unit, progress))
}

/// The threads work may run on: one per CPU this process may use.
fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).max(1)
}

/// Reads one unit's dump folders into columns and encodes its files, on up to `threads`
/// threads.
fn build_unit(dirs: &[&DumpDir], threads: usize, progress: &dyn Progress) -> BuiltUnit {
    let mut columns = UnitColumns::default();
    let mut counts = UnitCounts::default();
    for dir in dirs {
        read_dump_dir(dir, &mut columns, &mut counts, Reading::Import, threads)?;
        progress.advance(dir.dump_bytes());
    }
    let started = std::time::Instant::now();
    let encoded = encode_unit(&mut columns, threads)?;
    tracing::debug!(files = encoded.len(), elapsed = ?started.elapsed(), "unit encoded");
    Ok((encoded, counts))
}

/// Encodes a unit's columns into its Parquet files, on up to `threads` threads.
pub(crate) fn encode_unit(columns: &mut UnitColumns, threads: usize) -> Result<Vec<EncodedFile>> {
    let UnitColumns { dump, stack, construct, tensor, source, has_stack, has_construct } = columns;
    let mut jobs: Vec<Encode<'_>> = Vec::with_capacity(dump.len() + tensor.len() + 3);
    jobs.extend(dump.iter_mut().map(|(api, cols)| Encode::Dump(api, cols)));
    jobs.extend(tensor.iter_mut().map(|(api, cols)| Encode::Tensor(api, cols)));
    if *has_stack {
        jobs.push(Encode::Stack(stack));
    }
    if *has_construct {
        jobs.push(Encode::Construct(construct));
    }
    jobs.push(Encode::Source(source));
    map_in_order(jobs, threads, |job| {
        Ok(match job {
            Encode::Dump(api, cols) => encode_batch(Table::Dump, Some(api), &cols.finish()?)?,
            Encode::Tensor(api, cols) => encode_batch(Table::Tensor, Some(api), &cols.finish()?)?,
            Encode::Stack(cols) => encode_batch(Table::Stack, None, &cols.finish()?)?,
            Encode::Construct(cols) => encode_batch(Table::Construct, None, &cols.finish()?)?,
            Encode::Source(cols) => encode_batch(Table::Source, None, &cols.finish()?)?,
        })
    })
    .into_iter()
    .collect()
}

/// One file of a unit to encode, from its columns.
enum Encode<'c> {
    Dump(&'c str, &'c mut DumpColumns),
    Tensor(&'c str, &'c mut TensorColumns),
    Stack(&'c mut StackColumns),
    Construct(&'c mut ConstructColumns),
    Source(&'c mut SourceColumns),
}

/// Stores a built unit's files, invisible until it is committed.
pub(crate) async fn store_unit(
    lake: &Lake,
    unit: &Unit,
    encoded: Vec<EncodedFile>,
    counts: UnitCounts,
) -> Result<StagedUnit> {
    // Object stores answer each request after a round trip; several in flight hide it.
    let results: Vec<Result<DataFile, probelake_format::FormatError>> = futures::stream::iter(encoded)
        .map(|file| lake.put_encoded(unit, file))
        .buffered(UPLOADS_IN_FLIGHT)
        .collect()
        .await;
    let mut files = Vec::with_capacity(results.len());
    let mut failure = None;
    for result in results {
        match result {
            Ok(f) => files.push(f),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(e) = failure {
        lake.discard(&files).await;
        return Err(e.into());
    }
    Ok(StagedUnit { unit: unit.clone(), files, counts })
}

/// Uploads of one unit's files that may be under way at once.
const UPLOADS_IN_FLIGHT: usize = 8;

/// Reads one dump folder into the unit's columns, on up to `threads` threads.
pub(crate) fn read_dump_dir(
    dir: &DumpDir,
    columns: &mut UnitColumns,
    counts: &mut UnitCounts,
    reading: Reading,
    threads: usize,
) -> Result<()> {
    let origin = Origin { inner_step: dir.inner_step, pid: dir.pid };
    let bytes = read_file(&dir.path, threads)?;
    let stack_path = dir.dir.join("stack.json");
    let construct_path = dir.dir.join("construct.json");
    let (stack, construct) = match reading {
        Reading::Import => (read_if_present(&stack_path)?, read_if_present(&construct_path)?),
        Reading::Compare => (None, None),
    };
    let files = DumpFiles {
        path: &dir.path,
        file: &dir.file,
        kind: dir.kind,
        origin,
        dump: &bytes,
        stack: stack.as_deref().map(|b| (stack_path.as_path(), b)),
        construct: construct.as_deref().map(|b| (construct_path.as_path(), b)),
        relayout: None,
        reading,
        threads,
    };
    read_dump_files(&files, columns, counts)?;
    counts.tensors += read_tensors(&dir.dir.join("dump_tensor_data"), columns, origin)?;
    Ok(())
}

/// Reads a file that may be absent.
pub(crate) fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MsprobeError::io(path, e)),
    }
}

fn read_tensors(dir: &Path, columns: &mut UnitColumns, origin: Origin) -> Result<u64> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(MsprobeError::io(dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| MsprobeError::io(dir, e))?;
        if entry.file_type().map_err(|e| MsprobeError::io(entry.path(), e))?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    let mut n = 0;
    for name in names {
        let path = dir.join(&name);
        let bytes = read_file(&path, 1)?;
        push_tensor_file(&name, &bytes, &path, None, columns, origin)?;
        n += 1;
    }
    Ok(n)
}

/// Adds one tensor file (`name` as in dump_tensor_data) to the unit's columns. `archive`, when
/// given, is the `.pt` archive folder torch would have used (the file stem) for bytes that
/// `torch.save` wrote into memory, where torch names the folder `archive`.
pub(crate) fn push_tensor_file(
    name: &str,
    bytes: &[u8],
    path: &Path,
    archive: Option<&str>,
    columns: &mut UnitColumns,
    origin: Origin,
) -> Result<()> {
    let tensor_error = |source| MsprobeError::TensorFile { file: path.to_path_buf(), source };
    let (data, mut meta) = read_tensor_file(name, bytes).map_err(tensor_error)?;
    let rebuilt = write_tensor_file(&data, &meta).map_err(tensor_error)?;
    let original = (rebuilt != bytes).then_some(bytes);
    if let (Some(archive), Some(pt)) = (archive, meta.pt.as_mut()) {
        if original.is_some() {
            return Err(MsprobeError::TensorFile {
                file: path.to_path_buf(),
                source: crate::tensor_file::TensorFileError::Data(
                    "torch.save wrote an archive probelake cannot re-create byte for byte".into(),
                ),
            });
        }
        pt.archive = archive.to_string();
    }
    let item = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let api = name.split('.').next().unwrap_or_default();
    let container = if name.ends_with(".npy") { "npy" } else { "pt" };
    let meta_json = meta.to_json().map_err(tensor_error)?;
    let row = TensorRow {
        data_name: name,
        item,
        dtype: &data.dtype,
        shape: &data.shape,
        data: &data.data,
        container,
        meta: &meta_json,
        original,
    };
    columns.tensor.entry(api.to_string()).or_default().push(&row, origin);
    Ok(())
}
