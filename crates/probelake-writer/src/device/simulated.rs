//! A device without hardware: "device memory" is a host vector, and copies run later, in order,
//! on the device's own copy thread (its copy stream). It exercises the writer's device pipeline
//! — pinned pool, copies started on the caller's thread, completion awaited on a writer thread —
//! exactly as the NPU backend does.
//!
//! ```
//! use probelake_writer::device::simulated::SimulatedDevice;
//! use probelake_writer::device::{DeviceTensor, PinnedPool};
//!
//! let device = SimulatedDevice::new();
//! device.hold(); // copies wait until released, so nothing can complete before `wait`
//! let tensor = device.upload(vec![1, 2, 3, 4]);
//! let copy = Box::new(tensor).start_copy(PinnedPool::heap().take(4).unwrap()).unwrap();
//! assert_eq!(device.completed(), 0);
//! device.release();
//! assert_eq!(copy.wait().unwrap().as_slice(), &[1, 2, 3, 4]);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::{CopyCompletion, DeviceError, DeviceTensor, PinnedBuffer};

struct CopyJob {
    src: Arc<Vec<u8>>,
    fail: bool,
    dst: PinnedBuffer,
    done: Sender<Result<PinnedBuffer, DeviceError>>,
}

struct Shared {
    held: Mutex<bool>,
    opened: Condvar,
    latency: Duration,
    started: AtomicU64,
    completed: AtomicU64,
}

/// A simulated device with one copy stream.
pub struct SimulatedDevice {
    stream: Mutex<Sender<CopyJob>>,
    shared: Arc<Shared>,
}

impl Default for SimulatedDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl SimulatedDevice {
    /// A device whose copies complete as soon as its copy thread gets to them.
    pub fn new() -> Self {
        Self::with_latency(Duration::ZERO)
    }

    /// A device whose copies each take at least `latency`.
    pub fn with_latency(latency: Duration) -> Self {
        let (tx, rx) = channel::<CopyJob>();
        let shared = Arc::new(Shared {
            held: Mutex::new(false),
            opened: Condvar::new(),
            latency,
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        });
        let worker = Arc::clone(&shared);
        // The copy stream: jobs run in order; the thread ends when the device is dropped.
        let spawned = std::thread::Builder::new()
            .name("probelake-simulated-copy".into())
            .spawn(move || copy_stream(&rx, &worker));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "simulated device: no copy thread; copies will fail");
        }
        SimulatedDevice { stream: Mutex::new(tx), shared }
    }

    /// Puts `bytes` into "device memory".
    pub fn upload(&self, bytes: Vec<u8>) -> SimulatedTensor {
        self.tensor(bytes, false)
    }

    /// A tensor whose copy fails, to test error paths.
    pub fn upload_failing(&self, bytes: Vec<u8>) -> SimulatedTensor {
        self.tensor(bytes, true)
    }

    fn tensor(&self, bytes: Vec<u8>, fail: bool) -> SimulatedTensor {
        let stream = self.stream.lock().map(|s| s.clone()).ok();
        SimulatedTensor { mem: Arc::new(bytes), fail, stream, shared: Arc::clone(&self.shared) }
    }

    /// Makes copies wait (they are queued, not run) until [`SimulatedDevice::release`].
    pub fn hold(&self) {
        if let Ok(mut held) = self.shared.held.lock() {
            *held = true;
        }
    }

    /// Lets held copies run.
    pub fn release(&self) {
        if let Ok(mut held) = self.shared.held.lock() {
            *held = false;
        }
        self.shared.opened.notify_all();
    }

    /// Copies started so far.
    pub fn started(&self) -> u64 {
        self.shared.started.load(Ordering::SeqCst)
    }

    /// Copies completed so far.
    pub fn completed(&self) -> u64 {
        self.shared.completed.load(Ordering::SeqCst)
    }
}

fn copy_stream(rx: &Receiver<CopyJob>, shared: &Shared) {
    while let Ok(mut job) = rx.recv() {
        if let Ok(mut held) = shared.held.lock() {
            while *held {
                held = match shared.opened.wait(held) {
                    Ok(h) => h,
                    Err(_) => break,
                };
            }
        }
        if !shared.latency.is_zero() {
            std::thread::sleep(shared.latency);
        }
        let result = if job.fail {
            Err(DeviceError("simulated device: copy failed".into()))
        } else if job.dst.len() != job.src.len() {
            Err(DeviceError(format!("destination holds {} bytes, tensor {}", job.dst.len(), job.src.len())))
        } else {
            job.dst.as_mut_slice().copy_from_slice(&job.src);
            Ok(job.dst)
        };
        shared.completed.fetch_add(1, Ordering::SeqCst);
        // The writer may have gone (an aborted unit); the buffer then returns to the pool.
        let _ = job.done.send(result);
    }
}

/// A tensor in simulated device memory.
pub struct SimulatedTensor {
    mem: Arc<Vec<u8>>,
    fail: bool,
    stream: Option<Sender<CopyJob>>,
    shared: Arc<Shared>,
}

impl DeviceTensor for SimulatedTensor {
    fn len(&self) -> usize {
        self.mem.len()
    }

    fn start_copy(self: Box<Self>, dst: PinnedBuffer) -> Result<Box<dyn CopyCompletion>, DeviceError> {
        let stream = self.stream.ok_or_else(|| DeviceError("simulated device is gone".into()))?;
        let (done, rx) = channel();
        self.shared.started.fetch_add(1, Ordering::SeqCst);
        stream
            .send(CopyJob { src: self.mem, fail: self.fail, dst, done })
            .map_err(|_| DeviceError("simulated copy stream stopped".into()))?;
        Ok(Box::new(SimulatedCopy { rx }))
    }
}

struct SimulatedCopy {
    rx: Receiver<Result<PinnedBuffer, DeviceError>>,
}

impl CopyCompletion for SimulatedCopy {
    fn wait(self: Box<Self>) -> Result<PinnedBuffer, DeviceError> {
        self.rx.recv().map_err(|_| DeviceError("simulated copy stream stopped".into()))?
    }
}
