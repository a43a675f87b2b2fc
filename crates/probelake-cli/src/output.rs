//! Writing query results as a table, CSV, JSON, NDJSON or Parquet.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use probelake_format::output_tree::OutputTree;
use probelake_query::datafusion::arrow::csv::WriterBuilder;
use probelake_query::datafusion::arrow::json::{ArrayWriter, LineDelimitedWriter};
use probelake_query::datafusion::arrow::record_batch::RecordBatch;
use probelake_query::datafusion::arrow::util::pretty::pretty_format_batches;
use probelake_query::datafusion::parquet::arrow::ArrowWriter;
use probelake_query::RunSession;

/// Runs `sql` and collects its last statement's rows; an empty result is one batch with no
/// rows, so that a Parquet file or a header can still be written with the result's columns.
pub async fn collect_keeping_schema(session: &RunSession, sql: &str) -> anyhow::Result<Vec<RecordBatch>> {
    let Some(df) = session.sql(sql).await? else { return Ok(Vec::new()) };
    let schema = Arc::clone(df.schema().inner());
    let mut batches = df.collect().await?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(schema));
    }
    Ok(batches)
}

/// Writes `batches` to the file `path` whole or not at all: rendered in memory, then written
/// to a temporary file beside `path` and renamed over it, so a full disk or a killed process
/// never leaves half a result behind. A path that exists and is not a regular file (a FIFO,
/// `/dev/stdout`) is written to directly: renaming over it would replace the device.
pub fn write_batches_to_file(path: &Path, batches: &[RecordBatch], format: OutputFormat) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    write_batches(&mut bytes, batches, format, 0)?;
    let is_special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if is_special {
        return std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("{}: not a file path; pass -o FILE", path.display());
    };
    let mut tree = OutputTree::new(if dir.as_os_str().is_empty() { Path::new(".") } else { dir }, true);
    match tree.write(Path::new(name), &bytes) {
        Ok(()) => {
            tree.finish();
            Ok(())
        }
        Err(e) => {
            tree.rollback();
            Err(e).with_context(|| format!("writing {}", path.display()))
        }
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// An aligned text table (at most --maxrows rows).
    Table,
    /// CSV with a header.
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// A Parquet file (needs -o).
    Parquet,
}

/// Writes `batches` to `out` in `format`; `maxrows` limits the table format (0: all).
pub fn write_batches(
    out: &mut dyn Write,
    batches: &[RecordBatch],
    format: OutputFormat,
    maxrows: usize,
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Table => {
            let total: usize = batches.iter().map(|b| b.num_rows()).sum();
            let shown: Vec<RecordBatch> = if maxrows == 0 || total <= maxrows {
                batches.to_vec()
            } else {
                let mut left = maxrows;
                let mut kept = Vec::new();
                for b in batches {
                    if left == 0 {
                        break;
                    }
                    let n = b.num_rows().min(left);
                    kept.push(b.slice(0, n));
                    left -= n;
                }
                kept
            };
            if shown.iter().all(|b| b.num_rows() == 0) {
                writeln!(out, "(0 rows)")?;
                return Ok(());
            }
            writeln!(out, "{}", pretty_format_batches(&shown)?)?;
            if total > shown.iter().map(|b| b.num_rows()).sum::<usize>() {
                writeln!(out, "({total} rows, first {maxrows} shown; --maxrows 0 shows all)")?;
            } else {
                writeln!(out, "({total} row{})", if total == 1 { "" } else { "s" })?;
            }
        }
        OutputFormat::Csv => {
            let mut w = WriterBuilder::new().with_header(true).build(out);
            for b in batches {
                w.write(b)?;
            }
        }
        OutputFormat::Json => {
            let mut w = ArrayWriter::new(out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        }
        OutputFormat::Ndjson => {
            let mut w = LineDelimitedWriter::new(out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        }
        OutputFormat::Parquet => {
            let Some(first) = batches.first() else {
                bail!("no rows to write as Parquet");
            };
            let mut buf = Vec::new();
            let mut w = ArrowWriter::try_new(&mut buf, first.schema(), None)?;
            for b in batches {
                w.write(b)?;
            }
            w.close()?;
            out.write_all(&buf)?;
        }
    }
    Ok(())
}
