//! `probelake sql`: SQL over runs, from flags, files or an interactive prompt.

use crate::ExitCode;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use probelake_query::datafusion::arrow::record_batch::RecordBatch;
use probelake_query::{Engine, Run, RunSession};

use super::Context;
use crate::damage::naming_damage;
use crate::output::{collect_keeping_schema, write_batches, write_batches_to_file, OutputFormat};
use probelake_format::StorageOptions;

use crate::uri::open_existing;

/// Query runs with SQL.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Every run is a schema with the tables dump, stack, construct, tensor and source; the first run
is also the default schema. Partition columns: step BIGINT, stage VARCHAR, rank BIGINT, api
VARCHAR (dump, tensor). msprobe functions: rel_err, is_finite_stats, shape_numel, item_slot;
table function first_divergence(threshold [, 'target', 'golden']), the rows of
sql/first_divergence.sql read only up to each unit's first divergence (docs/sql.md). Only
committed units are visible. Without -c or -f, an interactive prompt opens
(\\d lists tables, \\d TABLE describes one, \\runs lists runs, \\q quits).

With --cluster HOST:PORT the statements run on a probelake cluster (docs/cluster.md), with the
same results.

Exit code: 0 when every statement ran; 2 when one fails (the statements after it do not run)
or a run cannot be opened; 130 when interrupted by Ctrl-C. At the interactive prompt a failed statement is reported and the prompt goes on; leaving
it (\\q, Ctrl-D) exits 0.

Examples:
  probelake sql ./lake/run-a -c \"SELECT stage, count(*) FROM dump GROUP BY stage\"
  probelake sql --run target=./lake/bug --run golden=./lake/base -f sql/first_divergence.sql
  probelake sql --run target=./lake/bug --run golden=./lake/base -c \"SELECT * FROM first_divergence(0.5)\"
  probelake sql --run a=./lake/a -c \"SELECT * FROM dump WHERE NOT is_finite_stats(max, min, mean, norm)\" --format csv")]
pub struct Args {
    /// A dataset as NAME=PATH (repeatable); NAME becomes its SQL schema.
    #[arg(long = "run", value_name = "NAME=URI")]
    pub runs: Vec<String>,
    /// A dataset given by its path alone (named after its folder).
    #[arg(value_name = "DATASET")]
    pub dataset: Option<String>,
    /// SQL to run (repeatable; several statements may be separated by `;`).
    #[arg(short = 'c', long = "command", value_name = "SQL", allow_hyphen_values = true)]
    pub commands: Vec<String>,
    /// A file of SQL to run (repeatable).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Write results to this file instead of stdout (needed for --format parquet).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Show at most this many rows in table format (0: all).
    #[arg(long, default_value_t = 40)]
    pub maxrows: usize,
    /// Allow statements that write (COPY, INSERT, CREATE EXTERNAL TABLE) or read other files.
    #[arg(long)]
    pub allow_write: bool,
    /// Where the queries run.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArg,
}

/// Turns a folder name into a schema name.
pub fn run_name_from_path(path: &str) -> String {
    let base = path.trim_end_matches('/').rsplit('/').next().unwrap_or("run");
    let mut name: String =
        base.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// Opens the runs named on the command line.
pub async fn open_runs(
    specs: &[String],
    bare: Option<&str>,
    allow_write: bool,
    storage: &StorageOptions,
    engine: &dyn Engine,
) -> anyhow::Result<RunSession> {
    let mut runs = Vec::new();
    if let Some(path) = bare {
        runs.push(Run::new(run_name_from_path(path), open_existing(path, storage)?));
    }
    for spec in specs {
        let Some((name, uri)) = spec.split_once('=') else {
            bail!("--run {spec}: expected NAME=PATH, e.g. --run base=./lake/run-a");
        };
        runs.push(Run::new(name, open_existing(uri, storage)?));
    }
    if runs.is_empty() {
        bail!("no dataset given: pass a path, or --run NAME=PATH (repeatable)");
    }
    Ok(RunSession::open_on(runs, allow_write, engine).await?)
}

impl Args {
    /// Whether this opens the interactive prompt (no `-c` and no `-f`), which handles Ctrl-C
    /// itself: it cancels the running statement instead of ending the program.
    pub fn is_interactive(&self) -> bool {
        self.commands.is_empty() && self.files.is_empty()
    }
}

/// Runs the command.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    if args.format == OutputFormat::Parquet && args.output.is_none() {
        bail!("--format parquet writes a file: add -o FILE");
    }
    let engine = args.cluster.engine().await?;
    let session =
        open_runs(&args.runs, args.dataset.as_deref(), args.allow_write, &ctx.storage, engine.as_ref()).await?;
    let mut scripts: Vec<(String, String)> = args.commands.iter().map(|c| ("-c".to_string(), c.clone())).collect();
    for file in &args.files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        scripts.push((file.display().to_string(), text));
    }
    if args.is_interactive() {
        return crate::repl::run(&session, args.format, args.maxrows).await;
    }
    let mut results: Vec<RecordBatch> = Vec::new();
    let statements = async {
        for (origin, sql) in &scripts {
            let batches = collect_keeping_schema(&session, sql).await.with_context(|| format!("in {origin}"));
            let batches = naming_damage(batches, &session).await?;
            results = batches;
            if args.output.is_none() {
                let mut out = std::io::stdout().lock();
                write_batches(&mut out, &results, args.format, args.maxrows)?;
                out.flush()?;
            }
        }
        anyhow::Ok(())
    };
    args.cluster.within(statements).await?;
    if let Some(path) = &args.output {
        write_batches_to_file(path, &results, args.format)?;
    }
    Ok(ExitCode::SUCCESS)
}
