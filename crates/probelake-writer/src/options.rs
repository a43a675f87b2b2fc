//! How a unit is written: msprobe's task and summary mode, the header, and the memory bounds.

use crate::error::{Result, WriterError};

/// msprobe's `task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Task {
    /// Statistics only (and the `md5` field, by [`SummaryMode`]).
    #[default]
    Statistics,
    /// Statistics plus every non-empty tensor's bytes, in the `tensor` table (exported as
    /// `dump_tensor_data/*.pt`).
    Tensor,
}

impl Task {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Task::Statistics => "statistics",
            Task::Tensor => "tensor",
        }
    }
}

/// msprobe's `summary_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SummaryMode {
    /// Max/Min/Mean/Norm.
    #[default]
    Statistics,
    /// Max/Min/Mean/Norm plus `md5`: the CRC-32 of the raw bytes.
    Md5,
    /// `md5` = XOR of the 64-bit words, in place of the statistics.
    Xor,
}

/// What `record` does when the staging budget is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backpressure {
    /// Block the caller until enough staged bytes are written out (`record_async` awaits).
    #[default]
    Wait,
    /// Return [`WriterError::BudgetFull`]; the entry is not recorded.
    Error,
    /// Drop the entry, count it in [`crate::Metrics::drops`], and return
    /// [`crate::Recorded::Dropped`]. The dump then lacks the entry, as if msprobe had filtered it.
    Drop,
}

/// Options of one unit writer.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// `task` in the header; `Tensor` also stores tensor payloads.
    pub task: Task,
    /// `summary_mode`: what goes in the statistics and `md5` fields.
    pub summary_mode: SummaryMode,
    /// `level` in the header: `L0`, `L1`, `mix`.
    pub level: String,
    /// `framework` in the header.
    pub framework: String,
    /// Bytes of tensor data (and a fixed 256 bytes per leaf) that may be staged — recorded but
    /// not yet reduced, or in task `tensor` not yet uploaded. An entry larger than the whole
    /// budget is admitted alone, when nothing else is staged.
    pub budget_bytes: u64,
    /// What `record` does when the budget is full.
    pub backpressure: Backpressure,
    /// Threads computing statistics; 0 picks half the available cores, between 1 and 4.
    pub threads: usize,
    /// `dump` rows per Parquet file flush (all API families are flushed together).
    pub batch_rows: usize,
    /// Tensor payload bytes per `tensor` file flush.
    pub tensor_batch_bytes: u64,
    /// Write stack.json and construct.json (msprobe's `extra_info`), as exported files.
    pub extra_info: bool,
    /// The pid of a `proc{pid}` folder, for units with a negative rank; default: this process.
    pub pid: Option<i64>,
    /// `dump_data_dir` in the header of a `tensor` task; default: the export's folder
    /// `…/dump_tensor_data`, relative.
    pub dump_data_dir: Option<String>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            task: Task::Statistics,
            summary_mode: SummaryMode::Statistics,
            level: "L1".into(),
            framework: "pytorch".into(),
            budget_bytes: 256 << 20,
            backpressure: Backpressure::Wait,
            threads: 0,
            batch_rows: 64 * 1024,
            tensor_batch_bytes: 64 << 20,
            extra_info: true,
            pid: None,
            dump_data_dir: None,
        }
    }
}

impl WriterOptions {
    pub(crate) fn check(&self) -> Result<()> {
        if self.budget_bytes == 0 {
            return Err(WriterError::Options("budget_bytes must be at least 1".into()));
        }
        if self.batch_rows == 0 {
            return Err(WriterError::Options("batch_rows must be at least 1".into()));
        }
        if self.level.is_empty() || self.framework.is_empty() {
            return Err(WriterError::Options("level and framework must not be empty".into()));
        }
        Ok(())
    }

    pub(crate) fn thread_count(&self) -> usize {
        if self.threads > 0 {
            return self.threads.min(64);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / 2).clamp(1, 4)
    }
}
