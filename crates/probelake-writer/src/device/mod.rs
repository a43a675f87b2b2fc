//! Device tensors: copied to pinned host memory on a copy stream, awaited off the caller's thread.
//!
//! ```text
//!  caller thread (record)                         writer thread
//!  ───────────────────────                        ─────────────────────────────
//!  PinnedPool::take(len) ─► PinnedBuffer
//!  DeviceTensor::start_copy(buffer)  ──────────►  CopyCompletion::wait() ─► PinnedBuffer
//!    (enqueue the copy, return at once)             (block until the copy is done)
//!                                                 statistics / CRC / payload
//!                                                 drop(PinnedBuffer) ─► back to the pool
//! ```
//!
//! A device backend implements [`DeviceTensor`] (start a copy, on the caller's thread, without
//! waiting) and [`CopyCompletion`] (wait for it, on a writer thread), and a [`HostAllocator`] for
//! the pool's pinned buffers. [`simulated`] is a backend without hardware whose copies complete
//! later on its own thread: it drives the same pipeline the NPU backend (feature `npu`, module
//! `npu`) does, so the pipeline is tested everywhere.
//!
//! Where only the statistics are needed (task `statistics`, summary mode `statistics`), a
//! device can compute them itself and hand over a [`DeviceSummary`] instead: no bytes cross to
//! the host but the four values, and the writer waits for them on its own thread.

pub mod pool;
pub mod simulated;

#[cfg(feature = "npu")]
pub mod npu;

pub use pool::{HeapAllocator, HostAllocator, HostMemory, PinnedBuffer, PinnedPool};

use crate::stats::Summary;

/// Why a device operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError(pub String);

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeviceError {}

/// A tensor in device memory.
pub trait DeviceTensor: Send {
    /// Size in bytes.
    fn len(&self) -> usize;

    /// Whether the tensor has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts copying the tensor into `dst` (exactly [`DeviceTensor::len`] bytes, pinned host
    /// memory from the pool). Called on the caller's thread inside `record`: it must enqueue the
    /// copy and return without waiting for it.
    fn start_copy(self: Box<Self>, dst: PinnedBuffer) -> Result<Box<dyn CopyCompletion>, DeviceError>;
}

/// A copy started by [`DeviceTensor::start_copy`].
pub trait CopyCompletion: Send {
    /// Blocks until the copy is done and gives the filled buffer back. Called on a writer thread.
    fn wait(self: Box<Self>) -> Result<PinnedBuffer, DeviceError>;
}

/// A tensor's Max, Min, Mean and Norm computed on its device (msprobe's rules, as
/// [`crate::stats::summarize`] applies them to bytes), on their way to the host.
pub trait DeviceSummary: Send {
    /// Blocks until the values are on the host. Called on a writer thread.
    fn wait(self: Box<Self>) -> Result<Summary, DeviceError>;
}
