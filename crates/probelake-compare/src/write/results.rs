//! Comparing many unit pairs and writing their result files as msprobe names them:
//! [`CompareQueue`] keeps a few units in flight, [`ResultFiles`] writes each result (CSV,
//! .xlsx or Parquet) as soon as it is compared, all or nothing.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::common::runtime::SpawnedTask;
use datafusion::parquet::arrow::ArrowWriter;
use probelake_format::layout::stage_folder_name;
use probelake_format::output_tree::OutputTree;
use probelake_format::Unit;

use crate::comparison::planned::PlannedUnit;
use crate::comparison::{Comparison, UnitComparison};
use crate::error::CompareError;
use crate::runs::pairing::{PairingRule, UnitPair};
use probelake_msprobe::Origin;

/// The files a comparison writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// msprobe's CSV, cell for cell.
    Csv,
    /// msprobe's .xlsx workbook (`msprobe compare --xlsx`): numbers as numbers.
    Xlsx,
    /// The table typed ([`UnitComparison::to_record_batch`]), as Parquet.
    Parquet,
}

impl ResultFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            ResultFormat::Csv => "csv",
            ResultFormat::Xlsx => "xlsx",
            ResultFormat::Parquet => "parquet",
        }
    }
}

/// What a result file is named after.
#[derive(Debug, Clone, Copy)]
pub enum Naming<'a> {
    /// Nothing: a dump.json target.
    File,
    /// The target's rank or proc folder of a step folder.
    Folder(&'a str),
    /// The target's unit.
    Unit,
}

impl<'a> Naming<'a> {
    /// As msprobe names it: after the target's step folder's rank or proc folder, after
    /// nothing for two dump files or any dump.json target, after the unit otherwise.
    pub fn of(pair: &UnitPair<'a>, rule: PairingRule, target_is_file: bool) -> Self {
        match pair.target_folder {
            Some(folder) => Naming::Folder(folder),
            None if rule == PairingRule::DumpFiles || target_is_file => Naming::File,
            None => Naming::Unit,
        }
    }
}

/// msprobe's name for a result: `compare_result_{stamp}` for a dump.json target, suffixed with
/// the target's folder (`_rank{R}`, `_proc{pid}`) for step folders; for other inputs, with the
/// unit's rank, or the pid of its lone process folder (`target_files` as
/// [`PlannedUnit::target_files`]).
pub fn result_file_name(
    unit: &Unit,
    target_files: &[Origin],
    naming: Naming<'_>,
    stamp: &str,
    format: ResultFormat,
) -> String {
    let ext = format.extension();
    let pid = match target_files {
        [Origin { pid: Some(pid), .. }] => Some(*pid),
        _ => None,
    };
    match (naming, unit.rank, pid) {
        (Naming::Folder(folder), _, _) => format!("compare_result_{folder}_{stamp}.{ext}"),
        (Naming::Unit, rank, _) if rank >= 0 => format!("compare_result_rank{rank}_{stamp}.{ext}"),
        (Naming::Unit, _, Some(pid)) => format!("compare_result_proc{pid}_{stamp}.{ext}"),
        _ => format!("compare_result_{stamp}.{ext}"),
    }
}

/// The name of CSV file `i` of `count` whose whole name is `rel`: `rel` itself for one file,
/// else msprobe's `…_part_{i + 1}.csv`.
fn csv_part_name(rel: &Path) -> impl Fn(usize, usize) -> PathBuf + '_ {
    move |count, i| {
        if count == 1 {
            return rel.to_path_buf();
        }
        let stem = rel.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
        rel.with_file_name(format!("{stem}_part_{}.csv", i + 1))
    }
}

/// Whether the pairs span several of the target's (step, stage): then each result goes into
/// `step{N}/{stage}/`. msprobe writes one flat file per rank of a step folder; folders are
/// only needed to keep steps or stages apart.
pub fn needs_folders(pairs: &[UnitPair<'_>]) -> bool {
    pairs.first().is_some_and(|first| {
        let (step, stage) = (first.target.unit.step, &first.target.unit.stage);
        pairs.iter().any(|p| p.target.unit.step != step || &p.target.unit.stage != stage)
    })
}

/// Units compared at once. Two keep both cores busy on small units; more would only hold
/// more rows in memory.
const UNITS_IN_FLIGHT: usize = 2;

/// The pairs of a comparison, planned a few at a time, each on its own task (one unit's query
/// runs while another's rows are built), handed out in pair order so that the first error is
/// the first pair's.
pub struct CompareQueue<'p, 'a> {
    comparison: Arc<Comparison>,
    pairs: std::slice::Iter<'p, UnitPair<'a>>,
    in_flight: VecDeque<(&'p UnitPair<'a>, SpawnedTask<Result<PlannedUnit, CompareError>>)>,
}

impl<'p, 'a> CompareQueue<'p, 'a> {
    /// A queue over `pairs`, compared by `comparison`.
    pub fn new(comparison: Arc<Comparison>, pairs: &'p [UnitPair<'a>]) -> Self {
        CompareQueue { comparison, pairs: pairs.iter(), in_flight: VecDeque::new() }
    }

    /// The next pair and its planned result; `None` when every pair was handed out.
    pub async fn next(&mut self) -> Option<(&'p UnitPair<'a>, Result<PlannedUnit, CompareError>)> {
        while self.in_flight.len() < UNITS_IN_FLIGHT {
            let Some(pair) = self.pairs.next() else { break };
            let (comparison, t, g) = (Arc::clone(&self.comparison), pair.target.clone(), pair.golden.clone());
            self.in_flight.push_back((pair, SpawnedTask::spawn(async move { comparison.plan_unit(&t, &g).await })));
        }
        let (pair, task) = self.in_flight.pop_front()?;
        let planned = match task.join().await {
            Ok(planned) => planned,
            Err(e) => Err(CompareError::Stopped(e.to_string())),
        };
        Some((pair, planned))
    }
}

/// Where each unit's result goes as soon as it is compared, so a run holds only the units in
/// flight: files through one [`OutputTree`], rolled back whole if a later unit fails, so a
/// failure leaves no partial result folder.
pub struct ResultFiles {
    format: ResultFormat,
    output: PathBuf,
    nested: bool,
    stamp: String,
    tree: OutputTree,
    errors: usize,
    written: Vec<PathBuf>,
}

/// A result that could not be written: the comparison's failure, or the file's.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// Building the rows failed.
    #[error(transparent)]
    Compare(Box<CompareError>),
    /// Writing the file failed.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: Box<CompareError>,
    },
}

impl ResultFiles {
    /// Results in `format` under `output`, in `step{N}/{stage}/` folders when `nested`
    /// ([`needs_folders`]), stamped `stamp` ([`local_timestamp`]).
    pub fn new(output: &Path, format: ResultFormat, nested: bool, stamp: String) -> Self {
        ResultFiles {
            format,
            output: output.to_owned(),
            nested,
            stamp,
            tree: OutputTree::new(output, true),
            errors: 0,
            written: Vec::new(),
        }
    }

    /// The path, under the output folder, of the result of `unit`.
    fn relative_path(&self, unit: &Unit, target_files: &[Origin], naming: Naming<'_>) -> PathBuf {
        let dir = if self.nested {
            PathBuf::from(format!("step{}", unit.step)).join(stage_folder_name(&unit.stage))
        } else {
            PathBuf::new()
        };
        dir.join(result_file_name(unit, target_files, naming, &self.stamp, self.format))
    }

    /// Writes one pair's result, named by `naming`, building a CSV as it is written (a CSV is
    /// the largest output: 200 MB for a 100 MB pair).
    pub fn add(&mut self, planned: PlannedUnit, naming: Naming<'_>) -> Result<(), ResultError> {
        if self.format != ResultFormat::Csv {
            let result = planned.collect().map_err(|e| ResultError::Compare(Box::new(e)))?;
            return self.add_table(&result, &result.target_files, naming);
        }
        let rel = self.relative_path(planned.unit(), planned.target_files(), naming);
        // A failure to build the rows is the comparison's, not the file's: kept aside to be
        // reported as such.
        let mut failed = None;
        let written = self.tree.write_parts(csv_part_name(&rel), |parts| match planned.write_csv_files(parts) {
            Ok(counts) => {
                self.errors += counts.errors;
                Ok(())
            }
            Err(CompareError::Write(e)) => Err(e),
            Err(e) => {
                let message = e.to_string();
                failed = Some(e);
                Err(std::io::Error::other(message))
            }
        });
        if let Some(e) = failed {
            return Err(ResultError::Compare(Box::new(e)));
        }
        let written = written.map_err(|e| ResultError::Write {
            path: self.output.join(&rel),
            source: Box::new(CompareError::Format(e)),
        })?;
        self.written.extend(written);
        Ok(())
    }

    /// Writes a result already collected (`target_files` as [`PlannedUnit::target_files`]).
    pub fn add_table(
        &mut self,
        result: &UnitComparison,
        target_files: &[Origin],
        naming: Naming<'_>,
    ) -> Result<(), ResultError> {
        let rel = self.relative_path(&result.unit, target_files, naming);
        let path = self.output.join(&rel);
        let failed = |source| ResultError::Write { path: path.clone(), source: Box::new(source) };
        let written = match self.format {
            ResultFormat::Csv => self.tree.write_parts(csv_part_name(&rel), |parts| result.write_csv_files(parts)),
            ResultFormat::Xlsx | ResultFormat::Parquet => {
                let bytes = match self.format {
                    ResultFormat::Xlsx => crate::write::xlsx::write_table(&result.header, &result.rows, result.mode),
                    _ => parquet_bytes(result),
                }
                .map_err(failed)?;
                self.tree.write(&rel, &bytes).map(|()| vec![path.clone()])
            }
        }
        .map_err(|e| failed(CompareError::Format(e)))?;
        self.errors += result.rows_with_result("error");
        self.written.extend(written);
        Ok(())
    }

    /// Keeps the files; the count of rows whose Result is `error`, and the files written.
    pub fn finish(self) -> (usize, Vec<PathBuf>) {
        self.tree.finish();
        (self.errors, self.written)
    }

    /// Removes every file written.
    pub fn rollback(self) {
        self.tree.rollback();
    }
}

/// A result's typed table as Parquet.
fn parquet_bytes(result: &UnitComparison) -> Result<Vec<u8>, CompareError> {
    let batch = result.to_record_batch()?;
    let mut buf = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buf, batch.schema(), None).map_err(parquet_error)?;
    writer.write(&batch).map_err(parquet_error)?;
    writer.close().map_err(parquet_error)?;
    Ok(buf)
}

fn parquet_error(e: datafusion::parquet::errors::ParquetError) -> CompareError {
    CompareError::Write(std::io::Error::other(e))
}

/// Local time as msprobe stamps its files (`time.strftime("%Y%m%d%H%M%S", time.localtime())`).
pub fn local_timestamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    local_stamp(secs).unwrap_or_else(|| utc_stamp(secs))
}

/// `secs` since the epoch in the local time zone (`TZ`, else /etc/localtime), as
/// `%Y%m%d%H%M%S`; `None` where the C library cannot say.
#[cfg(unix)]
fn local_stamp(secs: i64) -> Option<String> {
    // time_t is 32 bits on some targets.
    #[allow(clippy::useless_conversion)]
    let time: libc::time_t = secs.try_into().ok()?;
    // SAFETY: `tm` is plain data that `localtime_r` fills in; both pointers are valid for the
    // call, and the reentrant form shares no static buffer with other threads.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&time, &mut tm).is_null() {
            return None;
        }
        tm
    };
    Some(format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

#[cfg(not(unix))]
fn local_stamp(_secs: i64) -> Option<String> {
    None
}

/// `secs` since the epoch in UTC, as `%Y%m%d%H%M%S`: where no local time can be had.
fn utc_stamp(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}{m:02}{d:02}{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(utc_stamp(1_795_306_985), "20261122002305");
    }

    #[test]
    fn names_as_msprobe_names_them() {
        let unit = Unit { step: 0, stage: "default".into(), rank: 3 };
        let name =
            |files: &[Origin], naming| result_file_name(&unit, files, naming, "20261127010203", ResultFormat::Csv);
        assert_eq!(name(&[], Naming::File), "compare_result_20261127010203.csv");
        assert_eq!(name(&[], Naming::Folder("rank")), "compare_result_rank_20261127010203.csv");
        assert_eq!(name(&[], Naming::Unit), "compare_result_rank3_20261127010203.csv");
        let proc = Unit { rank: -1, ..unit.clone() };
        assert_eq!(
            result_file_name(
                &proc,
                &[Origin { inner_step: None, pid: Some(6420) }],
                Naming::Unit,
                "1",
                ResultFormat::Xlsx
            ),
            "compare_result_proc6420_1.xlsx"
        );
        assert_eq!(result_file_name(&proc, &[], Naming::Unit, "1", ResultFormat::Parquet), "compare_result_1.parquet");
    }

    #[test]
    fn long_csv_tables_are_named_as_msprobe_names_their_parts() {
        let rel = Path::new("step1/actor/compare_result_rank0_20261127010203.csv");
        let name = csv_part_name(rel);
        assert_eq!(name(1, 0), rel);
        assert_eq!(name(3, 0), Path::new("step1/actor/compare_result_rank0_20261127010203_part_1.csv"));
        assert_eq!(name(3, 2), Path::new("step1/actor/compare_result_rank0_20261127010203_part_3.csv"));
    }
}
