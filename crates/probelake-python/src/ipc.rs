//! Record batches as Arrow IPC streams, which `pyarrow.ipc.open_stream` reads without copying.

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use arrow_ipc::writer::StreamWriter;

use crate::error::Result;

/// One IPC stream: `schema`, then `batches`.
pub fn stream(schema: &Schema, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(batches.iter().map(RecordBatch::get_array_memory_size).sum::<usize>() + 1024);
    let mut writer = StreamWriter::try_new(&mut out, schema)?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    drop(writer);
    Ok(out)
}
