//! A unit pair whose plans ran: its table is built when it is written or collected.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;

use probelake_format::Unit;

use crate::comparison::{result_column, rows_with_result, UnitComparison};
use crate::error::CompareError;
use crate::join::load::{DumpFile, TensorData};
use crate::join::plan::PlanOutput;
use crate::mode::CompareMode;
use crate::table::build::{build_chunks, FilePair};
use crate::table::cells::Rows;
use crate::table::csv;
use probelake_format::output_tree::Parts;
use probelake_msprobe::Origin;

/// A compared unit pair before its rows are built: what [`Comparison::plan_unit`] returns.
///
/// [`write_csv`](Self::write_csv) builds the rows a few thousand at a time and writes each
/// chunk while the next ones are built, so memory never holds the whole table (several times
/// the dump.json files' size) and the writing overlaps the building.
/// [`collect`](Self::collect) builds the whole table as a [`UnitComparison`].
///
/// ```no_run
/// # async fn demo(target: probelake_format::Lake, golden: probelake_format::Lake) -> Result<(), Box<dyn std::error::Error>> {
/// use probelake_compare::{CompareOptions, Comparison};
///
/// let (t, g) = (&target.units().await?[0], &golden.units().await?[0]);
/// let comparison = Comparison::new(target.clone(), golden.clone(), CompareOptions::default());
/// let planned = comparison.plan_unit(t, g).await?;
/// let mut file = std::fs::File::create("compare_result.csv")?;
/// let counts = planned.write_csv(&mut file)?;
/// println!("{} rows, {} with Result `error`", counts.rows, counts.errors);
/// # Ok(()) }
/// ```
///
/// [`Comparison::plan_unit`]: crate::Comparison::plan_unit
pub struct PlannedUnit {
    pub(crate) unit: Unit,
    pub(crate) mode: CompareMode,
    pub(crate) header: Vec<String>,
    pub(crate) stack: bool,
    pub(crate) target_files: Vec<Origin>,
    pub(crate) plan: PlanOutput,
    /// The target's dump files (their stacks).
    pub(crate) context: BTreeMap<Origin, DumpFile>,
    /// The rows of a tensor-mode pair, built while each file pair's tensors were read.
    pub(crate) built: Option<Rows>,
}

/// What [`PlannedUnit::write_csv`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCounts {
    /// Rows below the header.
    pub rows: usize,
    /// Rows whose `Result` is `error`.
    pub errors: usize,
}

impl std::fmt::Debug for PlannedUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedUnit").field("unit", &self.unit).field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl PlannedUnit {
    /// The target unit.
    pub fn unit(&self) -> &Unit {
        &self.unit
    }

    /// The mode the table is built in.
    pub fn mode(&self) -> CompareMode {
        self.mode
    }

    /// Column names, as msprobe's CSV header.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// `(inner_step, pid)` of each target dump file, in pairing order.
    pub fn target_files(&self) -> &[Origin] {
        &self.target_files
    }

    /// Builds the whole table.
    pub fn collect(mut self) -> Result<UnitComparison, CompareError> {
        let started = std::time::Instant::now();
        let rows = match self.built.take() {
            Some(rows) => rows,
            None => {
                let mut rows = Rows::new(self.header.len());
                self.build(Ok, |chunk| {
                    rows.append(chunk);
                    Ok(())
                })?;
                rows
            }
        };
        tracing::debug!(unit = %self.unit, rows = rows.len(), elapsed = ?started.elapsed(), "compare rows built");
        let PlannedUnit { unit, mode, header, target_files, .. } = self;
        Ok(UnitComparison { unit, mode, header, rows, target_files })
    }

    /// Writes the table as `msprobe compare` writes its CSV (pandas `to_csv(index=False)`),
    /// building it chunk by chunk on every core while earlier chunks are written. All rows go
    /// to `out`, however many: cut as msprobe cuts a long table with
    /// [`ResultFiles`](crate::ResultFiles).
    pub fn write_csv(&self, out: &mut impl Write) -> Result<TableCounts, CompareError> {
        out.write_all(&csv::header_line(&self.header))?;
        self.write_rows(&mut csv::Whole(out))
    }

    /// Writes the table as [`write_csv`](Self::write_csv) does, into files of at most
    /// [`csv::MAX_CSV_ROWS`] rows each.
    pub(crate) fn write_csv_files(&self, parts: &mut Parts) -> Result<TableCounts, CompareError> {
        self.write_rows(&mut csv::CutFiles::as_msprobe(parts, &self.header)?)
    }

    fn write_rows(&self, out: &mut impl csv::RowSink) -> Result<TableCounts, CompareError> {
        let started = std::time::Instant::now();
        let result = result_column(&self.header);
        let counts_of = |rows: &Rows| TableCounts { rows: rows.len(), errors: rows_with_result(rows, result, "error") };
        let mut counts = TableCounts::default();
        let mut add = |c: TableCounts| {
            counts.rows += c.rows;
            counts.errors += c.errors;
        };
        match &self.built {
            Some(rows) => {
                csv::write_rows(rows, out)?;
                add(counts_of(rows));
            }
            None => self.build(
                |rows| Ok((csv::render_rows(&rows), counts_of(&rows))),
                |(text, c)| {
                    out.write_rows(&text)?;
                    add(c);
                    Ok(())
                },
            )?,
        }
        tracing::debug!(unit = %self.unit, rows = counts.rows, elapsed = ?started.elapsed(), "compare rows written");
        Ok(counts)
    }

    /// Builds the rows of every file pair, chunk by chunk (see [`build_chunks`]).
    fn build<T: Send>(
        &self,
        map: impl Fn(Rows) -> Result<T, CompareError> + Sync,
        mut sink: impl FnMut(T) -> Result<(), CompareError>,
    ) -> Result<(), CompareError> {
        let no_tensors = HashMap::new();
        for file_no in (1i64..).take(self.target_files.len()) {
            self.build_file(file_no, [&no_tensors, &no_tensors], &map, &mut sink)?;
        }
        Ok(())
    }

    /// Builds the rows of the `file_no`-th (1-based) file pair, whose target and golden tensors
    /// (tensor mode) are `tensors`.
    pub(crate) fn build_file<T: Send>(
        &self,
        file_no: i64,
        tensors: [&HashMap<String, Arc<TensorData>>; 2],
        map: impl Fn(Rows) -> Result<T, CompareError> + Sync,
        sink: impl FnMut(T) -> Result<(), CompareError>,
    ) -> Result<(), CompareError> {
        let empty = DumpFile::default();
        let key = usize::try_from(file_no - 1).ok().and_then(|k| self.target_files.get(k));
        let pair = FilePair {
            mode: self.mode,
            stack: self.stack,
            npu_file: key.and_then(|key| self.context.get(key)).unwrap_or(&empty),
            rows: self.plan.file_rows(file_no),
            plan: &self.plan,
            ttensors: tensors[0],
            gtensors: tensors[1],
        };
        build_chunks(&pair, map, sink)
    }
}
