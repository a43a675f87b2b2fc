//! `probelake files DATASET --table T`: the committed files of a table, for other engines.

use crate::ExitCode;
use std::io::Write as _;

use probelake_format::Table;

use super::Context;
use crate::uri::open_existing;

/// The list's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FilesFormat {
    /// One file URI per line.
    Text,
    /// A JSON object: the dataset, the table, and each file with its partition values, rows
    /// and bytes.
    Json,
}

/// List the committed files of one table of a dataset.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exactly the files that committed units name, as URIs other engines open (a local dataset's
files as absolute paths, an s3:// dataset's as s3:// URLs): files of unfinished or crashed
writes, which a folder listing would show, are left out. Spark, for example, reads a table of
exactly the committed units from this list with `basePath` set to the dataset and the schema in
_probelake/schema/<table>.parquet (docs/cluster.md has the recipe).

Exit code: 0, or 2 on an error (no dataset there, a damaged manifest or commit record).

Examples:
  probelake files ./lake/run-a --table dump
  probelake files s3://bucket/run-a --table dump --format json > files.json")]
pub struct Args {
    /// The dataset: a folder, file:// or s3:// URL.
    pub src: String,
    /// The table (dump, stack, construct, tensor, source).
    #[arg(long, value_parser = parse_table, default_value = "dump")]
    pub table: Table,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: FilesFormat,
}

fn parse_table(name: &str) -> Result<Table, String> {
    Table::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
        let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        format!("no table `{name}`; the tables are {}", names.join(", "))
    })
}

/// Prints the list.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let lake = open_existing(&args.src, &ctx.storage)?;
    let units = lake.units().await?;
    let root = match lake.local_dir() {
        Some(dir) => dir.display().to_string(),
        None => lake.display().trim_end_matches('/').to_string(),
    };
    let mut out = std::io::stdout().lock();
    let mut listed = Vec::new();
    for record in &units {
        for file in record.files_of(args.table) {
            let uri = format!("{root}/{}", file.path);
            match args.format {
                FilesFormat::Text => writeln!(out, "{uri}")?,
                FilesFormat::Json => listed.push(serde_json::json!({
                    "uri": uri,
                    "path": file.path,
                    "step": record.unit.step,
                    "stage": record.unit.stage,
                    "rank": record.unit.rank,
                    "api": file.api,
                    "rows": file.rows,
                    "bytes": file.bytes,
                })),
            }
        }
    }
    if args.format == FilesFormat::Json {
        let doc = serde_json::json!({
            "dataset": root,
            "table": args.table.name(),
            "schema": format!("{root}/_probelake/schema/{}.parquet", args.table.name()),
            "units": units.len(),
            "files": listed,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    }
    Ok(ExitCode::SUCCESS)
}
