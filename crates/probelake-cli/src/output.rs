//! Writing query results as a table, CSV, JSON, NDJSON or Parquet.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use probelake_format::output_tree::OutputTree;
use probelake_query::datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use probelake_query::datafusion::arrow::csv::WriterBuilder;
use probelake_query::datafusion::arrow::datatypes::{DataType, Field, Schema};
use probelake_query::datafusion::arrow::json::{ArrayWriter, LineDelimitedWriter};
use probelake_query::datafusion::arrow::record_batch::RecordBatch;
use probelake_query::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
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

/// `batch` with every nested column (lists such as `dump.shape` and `stack.frames`, structs,
/// maps) replaced by a string column of each value as the table format prints it: `[2, 8]`,
/// a null item inside a list as nothing (`[1, , 3]`), a null value as a null. CSV has no nested
/// values (arrow's CSV writer refuses them), and the table's text is what a user has already
/// seen. Other columns are kept as they are.
fn nested_as_text(batch: &RecordBatch) -> anyhow::Result<RecordBatch> {
    if !batch.columns().iter().any(|c| c.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    // The table format's options (`pretty_format_batches`) but for errors, which fail the
    // write rather than printing into a cell.
    let options = FormatOptions::default();
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !column.data_type().is_nested() {
            fields.push(Arc::clone(field));
            columns.push(Arc::clone(column));
            continue;
        }
        let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
        let mut text = StringBuilder::with_capacity(column.len(), column.len() * 8);
        let mut cell = String::new();
        for row in 0..column.len() {
            if column.is_null(row) {
                text.append_null();
                continue;
            }
            cell.clear();
            formatter.value(row).write(&mut cell)?;
            text.append_value(&cell);
        }
        fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, true)));
        columns.push(Arc::new(text.finish()));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), columns)?)
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
///
/// A write that failed because the reader closed the pipe (`probelake sql … | head`) comes
/// back as that `io::Error` whatever the format, which the CLI's error report takes for no
/// error: arrow's CSV writer alone would report it as text ("Csv error: Broken pipe").
pub fn write_batches(
    out: &mut dyn Write,
    batches: &[RecordBatch],
    format: OutputFormat,
    maxrows: usize,
) -> anyhow::Result<()> {
    let mut watched = PipeWatch { inner: out, closed: false };
    match write_formatted(&mut watched, batches, format, maxrows) {
        Err(_) if watched.closed => Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into()),
        result => result,
    }
}

/// A writer that remembers whether a write failed because the reader closed the pipe.
struct PipeWatch<'a> {
    inner: &'a mut dyn Write,
    closed: bool,
}

impl PipeWatch<'_> {
    fn watch<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result {
            self.closed |= e.kind() == std::io::ErrorKind::BrokenPipe;
        }
        result
    }
}

impl Write for PipeWatch<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.inner.write(buf);
        self.watch(result)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.inner.flush();
        self.watch(result)
    }
}

fn write_formatted(
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
                w.write(&nested_as_text(b)?)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use probelake_query::datafusion::arrow::array::{Int64Array, ListBuilder, StringArray, StructArray};
    use probelake_query::datafusion::arrow::array::{Int64Builder, StringBuilder as Strings};

    fn csv(batch: &RecordBatch) -> String {
        let mut out = Vec::new();
        write_batches(&mut out, std::slice::from_ref(batch), OutputFormat::Csv, 0).expect("csv");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn lists_and_structs_are_written_as_the_table_shows_them() {
        let mut shapes = ListBuilder::new(Int64Builder::new());
        shapes.values().append_value(2);
        shapes.values().append_value(8);
        shapes.append(true);
        shapes.append(false); // a null list
        shapes.values().append_value(1);
        shapes.values().append_null();
        shapes.values().append_value(3);
        shapes.append(true); // a null inside a list
        shapes.append(true); // an empty list
        let mut nested = ListBuilder::new(ListBuilder::new(Strings::new()));
        let rows: Vec<Vec<Vec<&str>>> =
            vec![vec![vec!["a", "b"], vec!["c"]], vec![], vec![vec![]], vec![vec!["x,\"y\""]]];
        for row in &rows {
            for inner in row {
                for s in inner {
                    nested.values().values().append_value(s);
                }
                nested.values().append(true);
            }
            nested.append(true);
        }
        let structs = StructArray::from(vec![
            (
                Arc::new(Field::new("k", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("p"), None, Some("r"), Some("s")])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("n", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef,
            ),
        ]);
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![Some(10), None, Some(12), Some(13)]));
        let batch = RecordBatch::try_from_iter([
            ("id", ids),
            ("shape", Arc::new(shapes.finish()) as ArrayRef),
            ("nested", Arc::new(nested.finish()) as ArrayRef),
            ("st", Arc::new(structs) as ArrayRef),
        ])
        .expect("batch");
        let text = csv(&batch);
        assert_eq!(
            text,
            "id,shape,nested,st\n\
             10,\"[2, 8]\",\"[[a, b], [c]]\",\"{k: p, n: 1}\"\n\
             ,,[],\"{k: , n: 2}\"\n\
             12,\"[1, , 3]\",[[]],\"{k: r, n: 3}\"\n\
             13,[],\"[[x,\"\"y\"\"]]\",\"{k: s, n: 4}\"\n"
        );
        // Each cell says what the table format says for it.
        let mut table = Vec::new();
        write_batches(&mut table, std::slice::from_ref(&batch), OutputFormat::Table, 0).expect("table");
        let table = String::from_utf8(table).expect("utf-8");
        for cell in ["[2, 8]", "[1, , 3]", "[[a, b], [c]]", "[[]]", "{k: p, n: 1}", "{k: , n: 2}"] {
            assert!(table.contains(&format!(" {cell} ")), "{cell} not in\n{table}");
        }
    }

    /// A pipe whose reader has gone after `room` bytes.
    struct ClosedAfter {
        room: usize,
    }

    impl Write for ClosedAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_a_broken_pipe_in_every_format() {
        let rows: ArrayRef = Arc::new(Int64Array::from((0..100_000).collect::<Vec<i64>>()));
        let batch = RecordBatch::try_from_iter([("x", rows)]).expect("batch");
        for format in [OutputFormat::Table, OutputFormat::Csv, OutputFormat::Json, OutputFormat::Ndjson] {
            let err = write_batches(&mut ClosedAfter { room: 10 }, std::slice::from_ref(&batch), format, 0)
                .expect_err("the pipe is closed");
            let io = err.downcast_ref::<std::io::Error>().map(std::io::Error::kind);
            assert_eq!(io, Some(std::io::ErrorKind::BrokenPipe), "{format:?}: {err:#}");
        }
    }

    #[test]
    fn flat_batches_are_written_unchanged() {
        let batch =
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)]).expect("batch");
        assert_eq!(csv(&batch), "x\n1\n2\n");
    }
}
