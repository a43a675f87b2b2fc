//! The threads behind a unit writer, and what they pass each other.
//!
//! ```text
//!  record() ──Job──► stats worker 1..N ──EntryRows──► assembler ──encode──► I/O runtime ──put──► store
//!  (caller)          statistics, CRC, copies awaited   order by seq, Arrow      uploads        commit record last
//! ```
//!
//! Workers take entries in any order and in parallel; the assembler puts their rows back in
//! `seq` order (dump.json order), appends them to the format crate's Arrow builders, flushes
//! them as Parquet files, and on commit writes the remaining files and the commit record.

pub(crate) mod assembler;
pub(crate) mod inbox;
pub(crate) mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use probelake_format::Unit;

use crate::budget::Budget;
use crate::entry::Entry;
use crate::metrics::{Histogram, Metrics};
use crate::options::WriterOptions;

/// Budget charged per leaf for its row while it waits to be appended.
pub(crate) const LEAF_OVERHEAD: u64 = 256;

/// One recorded entry on its way to a worker.
pub(crate) struct Job {
    pub seq: i64,
    pub entry: Entry,
    /// Tensor bytes charged to the budget.
    pub tensor_bytes: u64,
    /// Row overhead charged to the budget.
    pub overhead: u64,
}

pub(crate) enum Work {
    Entry(Job),
    Finish,
}

/// What the assembler receives.
pub(crate) enum ToAssembler {
    Rows(Box<worker::EntryRows>),
    WorkerDone,
    /// Each ending carries a [`Busy`] guard: the unit is not quiet until it is done.
    Commit(tokio::sync::oneshot::Sender<crate::Result<probelake_format::CommitRecord>>, Busy),
    Abort(std::sync::mpsc::Sender<()>, Busy),
}

/// State shared by the caller-facing handle and the threads.
pub(crate) struct Shared {
    pub unit: Unit,
    pub options: WriterOptions,
    pub budget: Budget,
    pub latency: Histogram,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub drops: AtomicU64,
    pub dropped_bytes: AtomicU64,
    pub waits: AtomicU64,
    pub queue_depth: AtomicU64,
    pub leaves: AtomicU64,
    /// Work under way outside the queues: callers inside `record`, files being stored, an
    /// ending (commit or abort) the assembler has not finished. See [`Shared::quiet`].
    busy: AtomicU64,
    stopped: AtomicBool,
    failure: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new(unit: Unit, options: WriterOptions) -> Self {
        let budget = Budget::new(options.budget_bytes);
        Shared {
            unit,
            options,
            budget,
            latency: Histogram::new(),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            queue_depth: AtomicU64::new(0),
            leaves: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// Counts one piece of work under way until the returned guard is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    /// [`Shared::busy`] for work that ends before its caller returns (`record`): no `Arc` to
    /// clone on the hot path.
    pub(crate) fn busy_here(&self) -> BusyHere<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        BusyHere(self)
    }

    /// Whether nothing of this unit is under way: no entry queued or being summarized, no
    /// caller in `record`, no file being stored, no ending in progress.
    pub(crate) fn quiet(&self) -> bool {
        self.busy.load(Ordering::SeqCst) == 0 && self.queue_depth.load(Ordering::SeqCst) == 0
    }

    /// Whether the unit stopped (failed or aborted): no more work is done for it.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops the unit; the first failure is the one reported.
    pub(crate) fn stop(&self, why: &str) {
        if let Ok(mut f) = self.failure.lock() {
            if f.is_none() {
                *f = Some(why.to_string());
            }
        }
        self.stopped.store(true, Ordering::Release);
        self.budget.wake_all();
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    pub(crate) fn metrics(&self) -> Metrics {
        let ns = std::time::Duration::from_nanos;
        Metrics {
            records: self.records.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            drops: self.drops.load(Ordering::Relaxed),
            dropped_bytes: self.dropped_bytes.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            queue_depth: self.queue_depth.load(Ordering::Relaxed),
            staged_bytes: self.budget.used(),
            leaves: self.leaves.load(Ordering::Relaxed),
            record_p50: ns(self.latency.quantile(0.5)),
            record_p99: ns(self.latency.quantile(0.99)),
            record_max: ns(self.latency.max()),
        }
    }
}

/// One piece of a unit's work under way ([`Shared::busy`]); ends when dropped.
pub(crate) struct Busy(Arc<Shared>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// [`Busy`], borrowed ([`Shared::busy_here`]).
pub(crate) struct BusyHere<'a>(&'a Shared);

impl Drop for BusyHere<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A worker as the dispatcher sees it.
pub(crate) struct WorkerHandle {
    pub tx: inbox::InboxSender<Work>,
    /// Bytes queued to it and not processed yet: new entries go to the least loaded worker.
    pub pending: Arc<AtomicU64>,
}
