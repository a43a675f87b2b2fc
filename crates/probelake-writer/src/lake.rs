//! [`Lake`]: a dataset opened for writing, with the writer's I/O runtime and pinned pool.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use probelake_format::Unit;

use crate::device::PinnedPool;
use crate::error::{Result, WriterError};
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
    runtime: IoRuntime,
}

/// Owns the runtime and shuts it down without blocking, so a `Lake` may be dropped anywhere,
/// async code included.
struct IoRuntime(Option<tokio::runtime::Runtime>);

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("probelake-writer-io")
            .enable_all()
            .build()
            .map_err(|e| WriterError::Internal(format!("cannot start the writer's I/O runtime: {e}")))?;
        Ok(Lake { inner: Arc::new(LakeInner { lake, runtime: IoRuntime(Some(runtime)) }), pool: PinnedPool::heap() })
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
        let rt = self
            .inner
            .runtime
            .0
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or_else(|| WriterError::Internal("the writer's I/O runtime is gone".into()))?;
        let threads = options.thread_count();
        let shared = Arc::new(Shared::new(unit, options));
        let (to_assembler, from_workers) = std::sync::mpsc::channel();
        let spawn_error = |e: std::io::Error| WriterError::Internal(format!("cannot start a writer thread: {e}"));

        let assembler = Assembler::new(Arc::clone(&shared), self.inner.lake.clone(), rt, threads);
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
}

impl std::fmt::Debug for Lake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lake").field("dataset", &self.inner.lake.display()).finish_non_exhaustive()
    }
}
