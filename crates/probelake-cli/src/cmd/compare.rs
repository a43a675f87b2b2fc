//! `probelake compare TARGET GOLDEN`: msprobe's compare table for every unit in both runs.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use probelake_format::layout::stage_folder_name;
use probelake_format::output_tree::OutputTree;
use probelake_format::{Lake, StorageOptions, Unit};
use probelake_msprobe::{import, ImportOptions, NoProgress, Progress as _};
use probelake_query::compare::pairing::PairingRule;
use probelake_query::compare::{CompareError, CompareMode, CompareOptions, Comparison, PlannedUnit, UnitComparison};

use super::Context;
use crate::progress::Bar;
use crate::unit_pairs::{pair_text, Runs, UnitArgs, PAIRING_HELP};
use crate::uri::{local_dir, open_lake};

/// The compare mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Detect it from the dumps, as msprobe does.
    Auto,
    /// Max/Min/Mean/Norm differences.
    Statistics,
    /// CRC-32 equality.
    Md5,
    /// Metrics over the dumped tensors.
    Tensor,
}

/// Where results go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// msprobe's CSV files.
    Csv,
    /// The same table as Parquet files, typed (numbers as float64, shapes as lists of int64,
    /// `N/A` as null) and led by step, stage and rank columns; see docs/compare.md.
    Parquet,
    /// A text table on stdout (the first columns).
    Table,
}

/// Compare a target run with a golden run, as `msprobe compare` does.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// The target run (dataset, msprobe folder or dump.json).
    pub target: String,
    /// The golden run (dataset, msprobe folder or dump.json).
    pub golden: String,
    /// Folder for the result files.
    #[arg(short = 'o', long = "output", default_value = "./output")]
    pub output: PathBuf,
    /// The comparison mode.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// Write msprobe's .xlsx workbooks instead of .csv files (numbers as numbers).
    #[arg(long)]
    pub xlsx: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: CompareFormat,
    /// Which units are compared with which.
    #[command(flatten)]
    pub units: UnitArgs,
}

fn after_help() -> String {
    format!(
        "\
TARGET (the NPU side) and GOLDEN (the bench side) are datasets, or msprobe dump folders /
dump.json files, which are imported into a temporary dataset first.

{PAIRING_HELP}
The output is msprobe 26.2's table, cell for cell, named as msprobe names it:
compare_result_{{timestamp}}.csv for a dump.json target; compare_result_rank{{R}}_{{timestamp}}.csv
(after the target's rank folder for step folders, its rank otherwise; compare_result_proc{{pid}}_...
for a process folder) side by side for the ranks of a step, in OUTDIR/step{{N}}/{{stage}}/ when
several of the target's steps or stages are compared. The timestamp is local time, as msprobe's.

Exit code: 0 when no row's Result is `error`, 1 when some are, 2 on errors.

Examples:
  probelake compare ./lake/npu ./lake/gpu -o ./cmp
  probelake compare run/step1 run/step0 -o ./cmp          # rank folders by position
  probelake compare run/step0/rank1/dump.json run/step0/rank0/dump.json -o ./cmp
  probelake compare ./lake/run ./lake/run --target-step 2 --golden-step 1 -o ./cmp
  probelake compare ./lake/npu ./lake/gpu --step 0 --target-rank 1 --golden-rank 0 -o ./cmp"
    )
}

/// A run given on the command line: an existing dataset, or msprobe files imported into a
/// temporary one (kept alive by the guard).
pub struct Opened {
    /// The dataset.
    pub lake: Lake,
    _tmp: Option<Arc<tempfile::TempDir>>,
}

impl Opened {
    /// The same run again, for the other side of a comparison within one run: the temporary
    /// dataset lives until both are dropped.
    pub fn share(&self) -> Opened {
        Opened { lake: self.lake.clone(), _tmp: self._tmp.clone() }
    }
}

/// Opens `arg` as a dataset, importing msprobe files on the fly.
pub async fn open_run(arg: &str, what: &str, storage: &StorageOptions) -> anyhow::Result<Opened> {
    if let Some(dir) = local_dir(arg) {
        if !dir.exists() {
            bail!("{what} {arg}: no such file or folder");
        }
        if !dir.join("_probelake/manifest.json").exists() {
            let tmp = tempfile::tempdir().context("creating a temporary dataset")?;
            let lake = Lake::local(tmp.path())?;
            import(&dir, &lake, &ImportOptions::default(), &NoProgress)
                .await
                .with_context(|| format!("importing {what} {arg}"))?;
            return Ok(Opened { lake, _tmp: Some(Arc::new(tmp)) });
        }
    }
    Ok(Opened { lake: open_lake(arg, storage)?, _tmp: None })
}

/// msprobe's name for a result: `compare_result_{ts}` for a dump.json target, suffixed with
/// the target's folder (`_rank{R}`, `_proc{pid}`) for step folders; for other inputs, with the
/// unit's rank, or the pid of its lone process folder.
fn file_name(
    unit: &Unit,
    target_files: &[(Option<i64>, Option<i64>)],
    naming: Naming<'_>,
    stamp: &str,
    ext: &str,
) -> String {
    let pid = match target_files {
        [(_, Some(pid))] => Some(*pid),
        _ => None,
    };
    match (naming, unit.rank, pid) {
        (Naming::Folder(folder), _, _) => format!("compare_result_{folder}_{stamp}.{ext}"),
        (Naming::Unit, rank, _) if rank >= 0 => format!("compare_result_rank{rank}_{stamp}.{ext}"),
        (Naming::Unit, _, Some(pid)) => format!("compare_result_proc{pid}_{stamp}.{ext}"),
        _ => format!("compare_result_{stamp}.{ext}"),
    }
}

/// What a result file is named after.
#[derive(Debug, Clone, Copy)]
enum Naming<'a> {
    /// Nothing: a dump.json target.
    File,
    /// The target's rank or proc folder of a step folder.
    Folder(&'a str),
    /// The target's unit.
    Unit,
}

impl<'a> Naming<'a> {
    /// As msprobe names it: after the target's step folder's `folder`, after nothing for
    /// two dump files or any dump.json target, after the unit otherwise.
    fn of(folder: Option<&'a str>, rule: PairingRule, target_is_file: bool) -> Self {
        match folder {
            Some(folder) => Naming::Folder(folder),
            None if rule == PairingRule::DumpFiles || target_is_file => Naming::File,
            None => Naming::Unit,
        }
    }
}

/// Units compared at once. Two keep both cores busy on small units; more would only hold
/// more rows in memory.
const UNITS_IN_FLIGHT: usize = 2;

/// Runs the comparison.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    if args.xlsx && args.format != CompareFormat::Csv {
        bail!("--xlsx replaces the CSV files; leave out --format {:?}", args.format);
    }
    let mode = match args.mode {
        ModeArg::Auto => None,
        ModeArg::Statistics => Some(CompareMode::Statistics),
        ModeArg::Md5 => Some(CompareMode::Md5),
        ModeArg::Tensor => Some(CompareMode::Tensor),
    };
    let choice = args.units.choice()?;
    let runs = Runs::open(&args.target, &args.golden, &ctx.storage).await?;
    let (target, golden) = (&runs.target, &runs.golden);
    let pairing = runs.pair(ctx, &choice)?;
    let (pairs, skipped) = (&pairing.pairs, &pairing.skipped);
    let target_is_file = Path::new(&args.target).is_file();
    // msprobe writes one flat compare_result_rank{R}_*.csv per rank of a step folder; folders
    // are only needed to keep several steps or stages apart.
    let nested = pairs.first().is_some_and(|first| {
        let (step, stage) = (first.target.unit.step, &first.target.unit.stage);
        pairs.iter().any(|p| p.target.unit.step != step || &p.target.unit.stage != stage)
    });
    let comparison = Arc::new(Comparison::new(target.lake.clone(), golden.lake.clone(), CompareOptions { mode }));
    let mut sink = Sink::new(&args, nested, timestamp());
    // Counted in the target's dump.json bytes, as import and export count.
    let bar = Bar::new("comparing", ctx.quiet);
    bar.start(pairs.iter().map(|p| p.target.counts.json_bytes).sum(), pairs.len());
    // A few units in flight, each its own task: one unit's query runs while another's rows
    // are built. Results are taken in unit order, so the first error is the first unit's.
    let compared = async {
        let mut in_flight = VecDeque::new();
        let mut queue = pairs.iter();
        loop {
            while in_flight.len() < UNITS_IN_FLIGHT {
                let Some(pair) = queue.next() else { break };
                let (comparison, unit_t, unit_g) = (Arc::clone(&comparison), pair.target.clone(), pair.golden.clone());
                let task = async move { comparison.plan_unit(&unit_t, &unit_g).await };
                in_flight.push_back((pair, tokio::spawn(task)));
            }
            let Some((pair, task)) = in_flight.pop_front() else { break };
            let (t, g) = (pair.target, pair.golden);
            let result = match task.await.context("a comparison task failed")? {
                Ok(result) => result,
                Err(e) => {
                    let e = anyhow::Error::new(e).context(format!("comparing {}", pair_text(t, g)));
                    let damaged = async {
                        match target.lake.first_damaged_file(std::slice::from_ref(t)).await {
                            Some(damage) => Some(damage),
                            None => golden.lake.first_damaged_file(std::slice::from_ref(g)).await,
                        }
                    };
                    return Err(crate::damage::name_damaged_file(e, damaged).await);
                }
            };
            sink.add(result, Naming::of(pair.target_folder, pairing.rule, target_is_file), &pair_text(t, g))?;
            bar.advance(t.counts.json_bytes);
        }
        anyhow::Ok(())
    };
    let compared = compared.await;
    bar.finish();
    let (errors, written) = match compared {
        Ok(()) => sink.finish()?,
        Err(e) => {
            sink.rollback();
            return Err(e);
        }
    };
    ctx.note(&format!(
        "compared {} unit(s) ({} skipped); {} row(s) with Result `error`",
        pairs.len(),
        skipped.len(),
        errors
    ));
    for path in &written {
        ctx.note(&format!("  {}", path.display()));
    }
    Ok(if errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Where each unit's result goes as soon as it is compared, so a run holds only the units in
/// flight: files through one [`OutputTree`], rolled back whole if a later unit fails, so a
/// failure still leaves no partial result folder; a table is printed only once every unit
/// compared.
struct Sink {
    format: CompareFormat,
    xlsx: bool,
    output: PathBuf,
    nested: bool,
    stamp: String,
    tree: OutputTree,
    tables: Vec<UnitComparison>,
    errors: usize,
    written: Vec<PathBuf>,
}

impl Sink {
    fn new(args: &Args, nested: bool, stamp: String) -> Self {
        Sink {
            format: args.format,
            xlsx: args.xlsx,
            output: args.output.clone(),
            nested,
            stamp,
            tree: OutputTree::new(&args.output, true),
            tables: Vec::new(),
            errors: 0,
            written: Vec::new(),
        }
    }

    /// Writes (or keeps) one pair's result, named by `naming`; `what` names the pair in errors.
    fn add(&mut self, planned: PlannedUnit, naming: Naming<'_>, what: &str) -> anyhow::Result<()> {
        let ext = match self.format {
            CompareFormat::Table => {
                let result = collect(planned, what)?;
                self.errors += result.rows_with_result("error");
                self.tables.push(result);
                return Ok(());
            }
            _ if self.xlsx => "xlsx",
            CompareFormat::Csv => "csv",
            CompareFormat::Parquet => "parquet",
        };
        let unit = planned.unit().clone();
        let dir = if self.nested {
            PathBuf::from(format!("step{}", unit.step)).join(stage_folder_name(&unit.stage))
        } else {
            PathBuf::new()
        };
        let rel = dir.join(file_name(&unit, planned.target_files(), naming, &self.stamp, ext));
        let written = match self.format {
            // Built as it is written: a CSV is the largest output (200 MB for a 100 MB pair).
            CompareFormat::Csv if !self.xlsx => {
                // A failure to build the rows is the comparison's, not the file's: kept aside
                // to be reported as such.
                let mut failed = None;
                let written = self.tree.write_with(&rel, |file| match planned.write_csv(file) {
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
                    return Err(anyhow::Error::new(e).context(format!("comparing {what}")));
                }
                written.map_err(anyhow::Error::from)
            }
            _ => {
                let result = collect(planned, what)?;
                self.errors += result.rows_with_result("error");
                render_result(&result, self.xlsx)
                    .and_then(|bytes| self.tree.write(&rel, &bytes).map_err(anyhow::Error::from))
            }
        };
        written.with_context(|| format!("writing {}", self.output.join(&rel).display()))?;
        self.written.push(self.output.join(rel));
        Ok(())
    }

    /// Keeps the files (or prints the tables); the count of `error` rows and the files written.
    fn finish(self) -> anyhow::Result<(usize, Vec<PathBuf>)> {
        // Kept before printing: a closed stdout does not undo the files.
        self.tree.finish();
        for result in &self.tables {
            print_table(result)?;
        }
        Ok((self.errors, self.written))
    }

    fn rollback(self) {
        self.tree.rollback();
    }
}

/// The whole table of a planned unit (`what` names the pair in errors).
fn collect(planned: PlannedUnit, what: &str) -> anyhow::Result<UnitComparison> {
    planned.collect().with_context(|| format!("comparing {what}"))
}

/// The bytes of a Parquet or .xlsx result.
fn render_result(result: &UnitComparison, xlsx: bool) -> anyhow::Result<Vec<u8>> {
    if xlsx {
        return crate::xlsx::write_table(&result.header, &result.rows, result.mode);
    }
    let batch = result.to_record_batch()?;
    let mut buf = Vec::new();
    crate::output::write_batches(&mut buf, &[batch], crate::output::OutputFormat::Parquet, 0)?;
    Ok(buf)
}

fn print_table(result: &UnitComparison) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} ({:?} mode)", result.unit, result.mode)?;
    let keep = [
        "NPU Name",
        "NPU Dtype",
        "Bench Dtype",
        "MaxRelativeErr",
        "NormRelativeErr",
        "Cosine",
        "NPU MD5",
        "BENCH MD5",
        "Result",
    ];
    let cols: Vec<usize> =
        result.header.iter().enumerate().filter(|(_, h)| keep.contains(&h.as_str())).map(|(i, _)| i).collect();
    let line = |cells: Vec<&str>| cells.join(" | ");
    writeln!(out, "{}", line(cols.iter().filter_map(|&i| result.header.get(i).map(String::as_str)).collect()))?;
    for row in &result.rows {
        writeln!(out, "{}", line(cols.iter().filter_map(|&i| row.get(i)).collect()))?;
    }
    Ok(())
}

/// Local time as msprobe stamps its files (`time.strftime("%Y%m%d%H%M%S", time.localtime())`).
fn timestamp() -> String {
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
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(super::utc_stamp(1_795_306_985), "20261122002305");
    }
}
