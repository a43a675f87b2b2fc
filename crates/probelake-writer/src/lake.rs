//! [`Lake`]: a dataset opened for writing, with the writer's I/O runtime and pinned pool.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use probelake_format::Unit;

use crate::device::PinnedPool;
use crate::error::{Result, WriterError};
use crate::io_runtime::IoRuntime;
use crate::options::WriterOptions;
use crate::pipeline::assembler::Assembler;
use crate::pipeline::{worker, Shared, WorkerHandle};
use crate::unit::UnitWriter;

/// A dataset to record into. Cheap to clone; every clone shares one I/O runtime (a tokio
/// runtime of one thread, private to the writer, so callers need none) and one pinned pool.
#[derive(Clone)]
pub struct Lake {
    inner: Arc<LakeInner>,
    pool: PinnedPool,
}

struct LakeInner {
    lake: probelake_format::Lake,
    io: Arc<IoRuntime>,
    /// The units opened here, for [`Lake::quiesce`]; an entry lives as long as its unit.
    units: Mutex<Vec<Weak<Shared>>>,
}

/// How often [`Lake::quiesce`] looks whether the units' work is done.
const QUIET_POLL: Duration = Duration::from_millis(1);

impl Lake {
    /// Opens the dataset at `uri` — a local path, `file://` or (in builds with object storage)
    /// `s3://bucket/prefix` — exactly as `probelake import` does; a local folder is created if
    /// missing, and the dataset itself on the first commit.
    pub fn open(uri: &str) -> Result<Lake> {
        let lake = probelake_format::Lake::open(uri).map_err(|e| WriterError::Open(Box::new(e)))?;
        Lake::from_format(lake)
    }

    /// Writes into an already opened dataset (any `ObjectStore`, e.g. `InMemory` in tests).
    pub fn from_format(lake: probelake_format::Lake) -> Result<Lake> {
        let io = Arc::new(IoRuntime::new());
        // Started now, so that a machine that cannot start it says so here rather than at the
        // first file stored.
        io.handle()?;
        let inner = LakeInner { lake, io, units: Mutex::new(Vec::new()) };
        Ok(Lake { inner: Arc::new(inner), pool: PinnedPool::heap() })
    }

    /// Uses `pool` for device copies (for example pinned memory from the NPU backend).
    pub fn with_pinned_pool(mut self, pool: PinnedPool) -> Lake {
        self.pool = pool;
        self
    }

    /// The dataset, for reading what was committed.
    pub fn format(&self) -> &probelake_format::Lake {
        &self.inner.lake
    }

    /// The pool device copies land in.
    pub fn pinned_pool(&self) -> &PinnedPool {
        &self.pool
    }

    /// Starts writing `unit`. Its threads start now; nothing is visible until
    /// [`UnitWriter::commit`].
    pub fn unit(&self, unit: Unit, options: WriterOptions) -> Result<UnitWriter> {
        options.check()?;
        let threads = options.thread_count();
        let shared = Arc::new(Shared::new(unit, options));
        {
            let mut units = self.inner.units.lock().unwrap_or_else(|p| p.into_inner());
            units.retain(|u| u.strong_count() > 0);
            units.push(Arc::downgrade(&shared));
        }
        let (to_assembler, from_workers) = std::sync::mpsc::channel();
        let spawn_error = |e: std::io::Error| WriterError::Internal(format!("cannot start a writer thread: {e}"));

        let assembler =
            Assembler::new(Arc::clone(&shared), self.inner.lake.clone(), Arc::clone(&self.inner.io), threads);
        std::thread::Builder::new()
            .name("probelake-assemble".into())
            .spawn(move || assembler.run(&from_workers))
            .map_err(spawn_error)?;

        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let (tx, rx) = crate::pipeline::inbox::inbox();
            let pending = Arc::new(AtomicU64::new(0));
            let (out, shared, load) = (to_assembler.clone(), Arc::clone(&shared), Arc::clone(&pending));
            std::thread::Builder::new()
                .name(format!("probelake-stats-{i}"))
                .spawn(move || worker::run(&rx, &out, &shared, &load))
                .map_err(spawn_error)?;
            workers.push(WorkerHandle { tx, pending });
        }
        Ok(UnitWriter::new(shared, workers, to_assembler, self.pool.clone()))
    }

    /// Waits until no unit of this dataset has work in flight (a `record` call, an entry being
    /// summarized, a file being stored, a commit or an abort), then stops the I/O thread. It
    /// starts again on the next file to store.
    ///
    /// For a process about to `fork`: a child inherits the memory of every thread but only the
    /// forking one, so a lock held by a writer thread at the fork stays held in the child for
    /// ever. After `quiesce`, the units' threads wait on their inboxes and hold none; the
    /// caller makes sure no new work starts before the fork (the Python package does it while
    /// holding the GIL). Open units stay open and commit as usual afterwards.
    pub fn quiesce(&self) {
        loop {
            let units: Vec<Arc<Shared>> = {
                let mut units = self.inner.units.lock().unwrap_or_else(|p| p.into_inner());
                units.retain(|u| u.strong_count() > 0);
                units.iter().filter_map(Weak::upgrade).collect()
            };
            if units.iter().all(|u| u.quiet()) {
                break;
            }
            drop(units);
            std::thread::sleep(QUIET_POLL);
        }
        self.inner.io.stop();
    }
}

/// A [`Lake`] that does not keep it open, for a list of the datasets a process writes to
/// (which [`Lake::quiesce`] walks before a fork).
#[derive(Clone)]
pub struct WeakLake {
    inner: Weak<LakeInner>,
    pool: PinnedPool,
}

impl Lake {
    /// This lake, without keeping it open.
    pub fn downgrade(&self) -> WeakLake {
        WeakLake { inner: Arc::downgrade(&self.inner), pool: self.pool.clone() }
    }
}

impl WeakLake {
    /// The lake, while something else keeps it open.
    pub fn upgrade(&self) -> Option<Lake> {
        Some(Lake { inner: self.inner.upgrade()?, pool: self.pool.clone() })
    }
}

impl std::fmt::Debug for Lake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lake").field("dataset", &self.inner.lake.display()).finish_non_exhaustive()
    }
}
