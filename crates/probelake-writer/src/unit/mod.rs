//! [`UnitWriter`]: records entries of one (step, stage, rank) and commits them as one unit.
//!
//! ```text
//!  Lake::unit ──► UnitWriter ──record()*──► commit().await ──► CommitRecord   (visible)
//!                     │                  └─► commit_blocking()
//!                     └──────── abort() / drop ──► files removed            (never visible)
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use probelake_format::{CommitRecord, Unit};
use probelake_msprobe::json::{parse, Arena, Value as Json};
use probelake_msprobe::{is_parameters_grad, slot_suffix};

use crate::device::PinnedPool;
use crate::entry::{Entry, Value};
use crate::error::{Result, WriterError};
use crate::metrics::Metrics;
use crate::options::{Backpressure, SummaryMode, Task};
use crate::pipeline::inbox::Urgency;
use crate::pipeline::{Job, Shared, ToAssembler, Work, WorkerHandle, LEAF_OVERHEAD};
use crate::source::{Source, TensorSource};

/// Tensor bytes from which an entry wakes a napping worker at once: below it, the entry's
/// statistics take a few microseconds and can wait for the nap to end
/// ([`crate::pipeline::inbox`]).
const WAKE_BYTES: u64 = 256 * 1024;

/// What `record` did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Queued; it will be in the unit when it is committed.
    Queued,
    /// Dropped because the staging budget was full ([`Backpressure::Drop`]).
    Dropped,
}

/// Records the entries of one unit off the caller's thread, and commits them atomically.
///
/// `record` takes `&self`, so several threads may record into one unit (share it by reference
/// or in an `Arc`); entries land in dump.json in the order `record` accepted them. `commit` and
/// `abort` take the writer by value. Dropping it without either aborts the unit: nothing of it
/// becomes visible and its files are removed in the background.
///
/// # Memory
///
/// Tensor bytes are staged from `record` until their statistics are computed (task `tensor`:
/// until their Parquet file is stored), plus 256 bytes per leaf until its row is in a batch;
/// that total is bounded by [`crate::WriterOptions::budget_bytes`]. Beyond it, the writer holds
/// the Arrow builders of one batch (`batch_rows` rows; `tensor_batch_bytes` of payload) and the
/// unit's skeleton (a few hundred bytes per entry) until commit.
pub struct UnitWriter {
    shared: Arc<Shared>,
    workers: Vec<WorkerHandle>,
    assembler: Sender<ToAssembler>,
    next_seq: AtomicI64,
    pool: PinnedPool,
    ended: bool,
}

/// What `record` found in an entry before admitting it.
struct Plan {
    tensor_bytes: u64,
    leaves: u64,
    /// Device and deferred tensors: `enqueue` makes or starts their bytes.
    devices: usize,
    /// Tensors whose statistics a device computed ([`TensorSource::summarized`]).
    summaries: usize,
}

impl UnitWriter {
    pub(crate) fn new(
        shared: Arc<Shared>,
        workers: Vec<WorkerHandle>,
        assembler: Sender<ToAssembler>,
        pool: PinnedPool,
    ) -> Self {
        UnitWriter { shared, workers, assembler, next_seq: AtomicI64::new(0), pool, ended: false }
    }

    /// The unit being written.
    pub fn unit(&self) -> &Unit {
        &self.shared.unit
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> Metrics {
        self.shared.metrics()
    }

    /// Records one entry and returns at once: the statistics, checksums and rows are computed
    /// on the writer's threads. With [`Backpressure::Wait`] it blocks while the staging budget
    /// is full (use [`UnitWriter::record_async`] in async code).
    ///
    /// # Errors
    ///
    /// An entry msprobe could not have written (a tensor whose bytes do not match its shape, a
    /// malformed JSON literal) is refused here, with nothing recorded. A full budget under
    /// [`Backpressure::Error`] gives [`WriterError::BudgetFull`]. After a failure of the
    /// writer's threads every call gives [`WriterError::Stopped`].
    pub fn record(&self, entry: Entry) -> Result<Recorded> {
        let _busy = self.shared.busy_here();
        let start = Instant::now();
        let plan = self.admit(&entry)?;
        let charge = plan.tensor_bytes + LEAF_OVERHEAD * plan.leaves;
        if !self.shared.budget.try_acquire(charge) {
            match self.shared.options.backpressure {
                Backpressure::Wait => {
                    self.shared.waits.fetch_add(1, Ordering::Relaxed);
                    self.nudge_workers();
                    let shared = &self.shared;
                    if !shared.budget.acquire_blocking(charge, &|| shared.stopped()) {
                        return Err(self.stopped());
                    }
                }
                _ => return self.refuse(entry, &plan, charge),
            }
        }
        let queued = self.enqueue(entry, plan, charge);
        self.shared.latency.add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        queued
    }

    /// [`UnitWriter::record`] for async code: waits for the budget without blocking the thread.
    pub async fn record_async(&self, entry: Entry) -> Result<Recorded> {
        let _busy = self.shared.busy_here();
        let start = Instant::now();
        let plan = self.admit(&entry)?;
        let charge = plan.tensor_bytes + LEAF_OVERHEAD * plan.leaves;
        if !self.shared.budget.try_acquire(charge) {
            match self.shared.options.backpressure {
                Backpressure::Wait => {
                    self.shared.waits.fetch_add(1, Ordering::Relaxed);
                    self.nudge_workers();
                    let shared = &self.shared;
                    if !shared.budget.acquire_async(charge, &|| shared.stopped()).await {
                        return Err(self.stopped());
                    }
                }
                _ => return self.refuse(entry, &plan, charge),
            }
        }
        let queued = self.enqueue(entry, plan, charge);
        self.shared.latency.add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        queued
    }

    fn stopped(&self) -> WriterError {
        let message = self.shared.failure().unwrap_or_else(|| "stopped".into());
        WriterError::Stopped { unit: self.shared.unit.clone(), message }
    }

    fn admit(&self, entry: &Entry) -> Result<Plan> {
        if self.shared.stopped() {
            return Err(self.stopped());
        }
        let plan = plan(entry)?;
        let options = &self.shared.options;
        if plan.summaries > 0 && (options.task == Task::Tensor || options.summary_mode != SummaryMode::Statistics) {
            return Err(WriterError::invalid(
                &entry.name,
                format!(
                    "a tensor summarized on its device carries no bytes, and this unit (task {:?}, summary mode \
                     {:?}) needs them: pass its bytes (a host or device source) instead",
                    options.task, options.summary_mode
                ),
            ));
        }
        Ok(plan)
    }

    fn refuse(&self, entry: Entry, plan: &Plan, charge: u64) -> Result<Recorded> {
        if self.shared.options.backpressure == Backpressure::Error {
            return Err(WriterError::BudgetFull {
                needed: charge,
                used: self.shared.budget.used(),
                budget: self.shared.budget.limit(),
            });
        }
        self.shared.drops.fetch_add(1, Ordering::Relaxed);
        self.shared.dropped_bytes.fetch_add(plan.tensor_bytes, Ordering::Relaxed);
        // Dropping the entry fires the release signals of its lent buffers.
        drop(entry);
        Ok(Recorded::Dropped)
    }

    /// Starts device copies, numbers the entry and hands it to the least loaded worker.
    /// Wakes napping workers: the caller is about to wait for the budget they release.
    fn nudge_workers(&self) {
        for w in &self.workers {
            w.tx.nudge();
        }
    }

    fn enqueue(&self, mut entry: Entry, plan: Plan, charge: u64) -> Result<Recorded> {
        if plan.devices > 0 {
            if let Err(e) = start_copies(&mut entry, &self.pool) {
                self.shared.budget.release(charge);
                return Err(e);
            }
        }
        let seq = self.next_seq.fetch_add(1, Ordering::AcqRel);
        let worker = self
            .workers
            .iter()
            .min_by_key(|w| w.pending.load(Ordering::Relaxed))
            .ok_or_else(|| WriterError::Internal("a unit writer without workers".into()))?;
        worker.pending.fetch_add(plan.tensor_bytes, Ordering::AcqRel);
        self.shared.queue_depth.fetch_add(1, Ordering::Relaxed);
        let job = Job { seq, entry, tensor_bytes: plan.tensor_bytes, overhead: charge - plan.tensor_bytes };
        // A small entry waits for its worker's next nap to end, sparing this thread a wake-up;
        // a large one is taken at once.
        let urgency = if plan.tensor_bytes >= WAKE_BYTES { Urgency::Now } else { Urgency::Soon };
        if worker.tx.push(Work::Entry(job), urgency).is_err() {
            self.shared.stop("a statistics thread ended unexpectedly");
            return Err(self.stopped());
        }
        self.shared.records.fetch_add(1, Ordering::Relaxed);
        self.shared.bytes.fetch_add(plan.tensor_bytes, Ordering::Relaxed);
        Ok(Recorded::Queued)
    }

    fn end(&mut self, message: ToAssembler) -> Result<()> {
        self.ended = true;
        for w in &self.workers {
            let _ = w.tx.push(Work::Finish, Urgency::Now);
        }
        self.assembler
            .send(message)
            .map_err(|_| WriterError::Internal("the writer's assembler thread ended unexpectedly".into()))
    }

    /// Writes what is staged and makes the unit visible, replacing an earlier commit of the same
    /// unit. On error nothing of it is visible and its files are removed.
    pub async fn commit(mut self) -> Result<CommitRecord> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.end(ToAssembler::Commit(tx, self.shared.busy()))?;
        rx.await.map_err(|_| WriterError::Internal("the writer's assembler thread ended without an answer".into()))?
    }

    /// [`UnitWriter::commit`] for callers without an async runtime.
    pub fn commit_blocking(self) -> Result<CommitRecord> {
        futures::executor::block_on(self.commit())
    }

    /// Gives the unit up: nothing of it becomes visible, and the files it stored are removed
    /// before this returns. Blocks briefly (for the deletes).
    pub fn abort(mut self) {
        self.shared.stop("aborted");
        let (tx, rx) = std::sync::mpsc::channel();
        if self.end(ToAssembler::Abort(tx, self.shared.busy())).is_ok() {
            let _ = rx.recv();
        }
    }
}

impl Drop for UnitWriter {
    fn drop(&mut self) {
        if !self.ended {
            self.shared.stop("dropped without commit");
            let (tx, _rx) = std::sync::mpsc::channel();
            let _ = self.end(ToAssembler::Abort(tx, self.shared.busy()));
        }
    }
}

impl std::fmt::Debug for UnitWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitWriter").field("unit", &self.shared.unit).field("workers", &self.workers.len()).finish()
    }
}

/// Checks an entry and counts its tensor bytes and leaves, without touching tensor data.
fn plan(entry: &Entry) -> Result<Plan> {
    let name = entry.name.as_str();
    if name.is_empty() {
        return Err(WriterError::invalid(name, "an entry needs a name"));
    }
    let grads = is_parameters_grad(name);
    let mut plan = Plan { tensor_bytes: 0, leaves: 0, devices: 0, summaries: 0 };
    for (section, value) in &entry.sections {
        if slot_suffix(section, grads).is_some() {
            plan_value(name, section, value, &mut plan)?;
            continue;
        }
        match value {
            Value::Json(text) => {
                parse(text.as_bytes(), &Arena::new())
                    .map_err(|e| WriterError::invalid(name, format!("section `{section}`: {e}")))?;
            }
            _ => {
                return Err(WriterError::invalid(
                    name,
                    format!(
                    "section `{section}` is not a value slot (input_args, input_kwargs, input, output, parameters); \
                         it can only hold a Value::json literal"
                ),
                ))
            }
        }
    }
    Ok(plan)
}

fn plan_value(name: &str, section: &str, value: &Value, plan: &mut Plan) -> Result<()> {
    match value {
        Value::Null => plan.leaves += 1,
        Value::Scalar { kind, value } => {
            parse(value.as_bytes(), &Arena::new())
                .map_err(|e| WriterError::invalid(name, format!("{section}: the `{kind}` value is not JSON: {e}")))?;
            plan.leaves += 1;
        }
        Value::Tensor(t) => {
            let mut numel: u64 = 1;
            for &d in &t.shape {
                let d = u64::try_from(d).map_err(|_| {
                    WriterError::invalid(name, format!("{section}: negative dimension in shape {:?}", t.shape))
                })?;
                numel = numel
                    .checked_mul(d)
                    .ok_or_else(|| WriterError::invalid(name, format!("{section}: shape {:?} overflows", t.shape)))?;
            }
            if t.source.is_summarized() {
                plan.leaves += 1;
                plan.summaries += 1;
                return Ok(());
            }
            let want = numel.checked_mul(t.dtype.itemsize() as u64);
            let have = t.source.len() as u64;
            if want != Some(have) {
                return Err(WriterError::invalid(
                    name,
                    format!(
                        "{section}: {have} bytes for shape {:?} of {} ({} bytes per element, so {} expected)",
                        t.shape,
                        t.dtype,
                        t.dtype.itemsize(),
                        want.map_or_else(|| "too many".to_string(), |w| w.to_string())
                    ),
                ));
            }
            plan.tensor_bytes += have;
            plan.leaves += 1;
            plan.devices += usize::from(matches!(t.source.0, Source::Device(_) | Source::Deferred(..)));
        }
        Value::List(items) => {
            for item in items {
                plan_value(name, section, item, plan)?;
            }
        }
        Value::Map(members) => {
            for (key, item) in members {
                if key == "type" || key == "class_type" {
                    return Err(WriterError::invalid(
                        name,
                        format!("{section}: a map with a `{key}` key reads back as a leaf; use Value::scalar"),
                    ));
                }
                plan_value(name, section, item, plan)?;
            }
        }
        Value::Json(text) => {
            let arena = Arena::new();
            let node = parse(text.as_bytes(), &arena)
                .map_err(|e| WriterError::invalid(name, format!("{section}: bad JSON literal {text:?}: {e}")))?;
            if !matches!(node.value, Json::Number(_) | Json::Str(_) | Json::Bool(_)) {
                return Err(WriterError::invalid(
                    name,
                    format!(
                        "{section}: {text:?} inside a value slot must be a number, string or boolean \
                         (use Value::null, Value::list or Value::map for the others)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Makes the bytes of every deferred tensor of the entry (its budget is taken) and starts the
/// device-to-host copy of every device tensor.
fn start_copies(entry: &mut Entry, pool: &PinnedPool) -> Result<()> {
    fn walk(value: &mut Value, pool: &PinnedPool, name: &str) -> Result<()> {
        match value {
            Value::Tensor(t) => {
                if matches!(t.source.0, Source::Deferred(..)) {
                    let taken = std::mem::replace(&mut t.source, TensorSource(Source::Host(Bytes::new())));
                    if let Source::Deferred(make, len) = taken.0 {
                        let made = make().map_err(|message| WriterError::invalid(name, message))?;
                        if made.len() != len || matches!(made.0, Source::Deferred(..)) {
                            return Err(WriterError::invalid(
                                name,
                                format!("a deferred tensor of {len} bytes made {} ({made:?})", made.len()),
                            ));
                        }
                        t.source = made;
                    }
                }
                if matches!(t.source.0, Source::Device(_)) {
                    let taken = std::mem::replace(&mut t.source, TensorSource(Source::Host(Bytes::new())));
                    if let Source::Device(device) = taken.0 {
                        let len = device.len();
                        let device_error = |e: crate::device::DeviceError| WriterError::Device {
                            item: name.to_string(),
                            message: e.0,
                        };
                        let buffer = pool.take(len).map_err(device_error)?;
                        let copy = device.start_copy(buffer).map_err(device_error)?;
                        t.source = TensorSource(Source::Copying(copy, len));
                    }
                }
            }
            Value::List(items) => {
                for item in items {
                    walk(item, pool, name)?;
                }
            }
            Value::Map(members) => {
                for (_, item) in members {
                    walk(item, pool, name)?;
                }
            }
            Value::Null | Value::Scalar { .. } | Value::Json(_) => {}
        }
        Ok(())
    }
    let Entry { name, sections, .. } = entry;
    for (_, value) in sections {
        walk(value, pool, name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
