//! Ascend NPU tensors (feature `npu`): device-to-host copies on a copy stream into pinned host
//! buffers from `aclrtMallocHost`, through the `cann` crate (device selection, errors) and
//! `cann-sys` for what the safe layer lacks — adopting the caller's stream (a raw
//! `aclrtStream`, e.g. torch_npu's current stream) and events on it.
//!
//! For each tensor, on the caller's thread, `record` enqueues and returns:
//!
//! 1. an event recorded on the caller's stream (the tensor is ready when the stream reaches it),
//! 2. the copy stream waits for that event, then `aclrtMemcpyAsync` device → pinned host,
//! 3. a `done` event on the copy stream; by default the caller's stream also waits for it, so
//!    kernels enqueued later on the caller's stream cannot overwrite the tensor before it is
//!    copied (turn off with [`NpuTensor::without_stream_guard`] when the caller keeps the
//!    memory alive itself, e.g. with torch's `record_stream`).
//!
//! A writer thread then blocks in `aclrtSynchronizeEvent(done)` and hands the pinned buffer to
//! the statistics. Nothing here waits on the caller's thread.
//!
//! Without the CANN toolkit this module type-checks (`cargo check --features npu`) but does
//! not link; a binary using it links `libascendcl`.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

use cann_sys::acl_memory::{aclrtFreeHost, aclrtMallocHost, aclrtMemcpyAsync, ACL_MEMCPY_DEVICE_TO_HOST};
use cann_sys::{
    aclError, aclrtCreateEvent, aclrtCreateStream, aclrtDestroyEvent, aclrtDestroyStream, aclrtRecordEvent,
    aclrtStreamWaitEvent, aclrtSynchronizeEvent, ACL_SUCCESS,
};

use super::{CopyCompletion, DeviceError, DeviceTensor, HostAllocator, HostMemory, PinnedBuffer, PinnedPool};

fn check(what: &str, code: aclError) -> Result<(), DeviceError> {
    if code == ACL_SUCCESS {
        Ok(())
    } else {
        Err(DeviceError(format!("{what}: {}", cann::Error::from(code))))
    }
}

thread_local! {
    /// The device this thread has bound with `aclrtSetDevice` (it counts references, so each
    /// writer thread binds once).
    static BOUND: Cell<Option<u32>> = const { Cell::new(None) };
}

fn bind(device: u32) -> Result<(), DeviceError> {
    if BOUND.with(Cell::get) == Some(device) {
        return Ok(());
    }
    cann::device::set_device(device).map_err(|e| DeviceError(format!("aclrtSetDevice({device}): {e}")))?;
    BOUND.with(|b| b.set(Some(device)));
    Ok(())
}

/// One NPU and the writer's copy stream on it.
#[derive(Clone)]
pub struct Npu {
    inner: Arc<NpuInner>,
}

struct NpuInner {
    device: u32,
    copy_stream: *mut c_void,
}

// SAFETY: an aclrtStream handle may be used from any thread bound to its device (every use
// here binds first); the handle itself is never mutated after creation.
unsafe impl Send for NpuInner {}
// SAFETY: as above; ACL serialises operations on one stream internally.
unsafe impl Sync for NpuInner {}

impl Drop for NpuInner {
    fn drop(&mut self) {
        if bind(self.device).is_ok() {
            // SAFETY: the stream was created by `aclrtCreateStream` in `Npu::new` and is
            // destroyed once, here, after every copy holding an `Arc` to it is gone.
            let _ = unsafe { aclrtDestroyStream(self.copy_stream) };
        }
    }
}

impl Npu {
    /// Binds `device` on this thread and creates the writer's copy stream on it. ACL must be
    /// initialised already (torch_npu does it; otherwise use `cann::Context::new()`).
    pub fn new(device: u32) -> Result<Npu, DeviceError> {
        bind(device)?;
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: `stream` is a valid out-pointer; the device is bound on this thread.
        check("aclrtCreateStream", unsafe { aclrtCreateStream(&mut stream) })?;
        Ok(Npu { inner: Arc::new(NpuInner { device, copy_stream: stream }) })
    }

    /// A pool of pinned host buffers (`aclrtMallocHost`) keeping up to `cache_bytes` for reuse;
    /// give it to [`crate::Lake::with_pinned_pool`].
    pub fn pinned_pool(&self, cache_bytes: usize) -> PinnedPool {
        PinnedPool::new(NpuHostAllocator, cache_bytes)
    }

    /// A device tensor of `len` bytes at `ptr`, produced by work on the caller's `stream`.
    ///
    /// # Safety
    ///
    /// `ptr` must be device memory of at least `len` bytes on this NPU, and `stream` a live
    /// `aclrtStream` of this device (e.g. `torch_npu.npu.current_stream().npu_stream`). The
    /// memory must not be freed or rewritten by work on other streams until the copy is done
    /// (on `stream` itself the stream guard takes care of it).
    pub unsafe fn tensor(&self, ptr: *const c_void, len: usize, stream: *mut c_void) -> NpuTensor {
        NpuTensor { npu: Arc::clone(&self.inner), ptr, len, stream, guard: true }
    }
}

/// A tensor in NPU memory; see [`Npu::tensor`].
pub struct NpuTensor {
    npu: Arc<NpuInner>,
    ptr: *const c_void,
    len: usize,
    stream: *mut c_void,
    guard: bool,
}

// SAFETY: the pointers are device addresses and a stream handle, used only through ACL calls
// after binding the device; `Npu::tensor`'s contract keeps them valid until the copy is done.
unsafe impl Send for NpuTensor {}

impl NpuTensor {
    /// Does not make the caller's stream wait for the copy: the caller guarantees the memory
    /// stays untouched until the copy is done (torch: `tensor.record_stream(copy_stream)`).
    pub fn without_stream_guard(mut self) -> Self {
        self.guard = false;
        self
    }
}

struct Event(*mut c_void);

// SAFETY: an aclrtEvent handle is usable from any thread bound to its device.
unsafe impl Send for Event {}

impl Event {
    fn new() -> Result<Event, DeviceError> {
        let mut event: *mut c_void = std::ptr::null_mut();
        // SAFETY: `event` is a valid out-pointer; the caller bound the device.
        check("aclrtCreateEvent", unsafe { aclrtCreateEvent(&mut event) })?;
        Ok(Event(event))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by `aclrtCreateEvent`, destroyed once.
        let _ = unsafe { aclrtDestroyEvent(self.0) };
    }
}

impl DeviceTensor for NpuTensor {
    fn len(&self) -> usize {
        self.len
    }

    fn start_copy(self: Box<Self>, mut dst: PinnedBuffer) -> Result<Box<dyn CopyCompletion>, DeviceError> {
        bind(self.npu.device)?;
        let copy_stream = self.npu.copy_stream;
        let ready = Event::new()?;
        let done = Event::new()?;
        let host = dst.as_mut_slice();
        let (host_ptr, host_len) = (host.as_mut_ptr().cast::<c_void>(), host.len());
        // SAFETY: `ready`/`done` are live events and `self.stream`/`copy_stream` live streams of
        // the bound device (`Npu::tensor`'s contract); `host_ptr` is `host_len` bytes of pinned
        // memory owned by `dst`, which `NpuCopy` keeps alive until `done` completes; `self.ptr`
        // is `self.len` bytes of device memory kept valid by the same contract.
        unsafe {
            check("aclrtRecordEvent (caller's stream)", aclrtRecordEvent(ready.0, self.stream))?;
            check("aclrtStreamWaitEvent (copy stream)", aclrtStreamWaitEvent(copy_stream, ready.0))?;
            check(
                "aclrtMemcpyAsync",
                aclrtMemcpyAsync(host_ptr, host_len, self.ptr, self.len, ACL_MEMCPY_DEVICE_TO_HOST, copy_stream),
            )?;
            check("aclrtRecordEvent (copy stream)", aclrtRecordEvent(done.0, copy_stream))?;
            if self.guard {
                check("aclrtStreamWaitEvent (caller's stream)", aclrtStreamWaitEvent(self.stream, done.0))?;
            }
        }
        Ok(Box::new(NpuCopy {
            device: self.npu.device,
            _npu: Arc::clone(&self.npu),
            _ready: ready,
            done,
            dst: Some(dst),
        }))
    }
}

struct NpuCopy {
    device: u32,
    _npu: Arc<NpuInner>,
    _ready: Event,
    done: Event,
    dst: Option<PinnedBuffer>,
}

impl NpuCopy {
    fn synchronize(&self) -> Result<(), DeviceError> {
        bind(self.device)?;
        // SAFETY: `done` is a live event recorded on the copy stream.
        check("aclrtSynchronizeEvent", unsafe { aclrtSynchronizeEvent(self.done.0) })
    }
}

impl CopyCompletion for NpuCopy {
    fn wait(mut self: Box<Self>) -> Result<PinnedBuffer, DeviceError> {
        self.synchronize()?;
        self.dst.take().ok_or_else(|| DeviceError("copy already taken".into()))
    }
}

impl Drop for NpuCopy {
    fn drop(&mut self) {
        // A copy given up before `wait` (an aborted unit) may still be writing into the buffer:
        // wait for it before the buffer can go back to the pool.
        if self.dst.is_some() && self.synchronize().is_err() {
            // The device is unusable; leak the buffer rather than let the DMA hit reused memory.
            std::mem::forget(self.dst.take());
        }
    }
}

/// `aclrtMallocHost` memory.
struct NpuHostAllocator;

struct NpuHostMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: page-locked host memory is ordinary host memory to the CPU; `&self` only reads.
unsafe impl Send for NpuHostMemory {}
// SAFETY: as above.
unsafe impl Sync for NpuHostMemory {}

impl HostAllocator for NpuHostAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn HostMemory>, DeviceError> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; ACL is initialised (see `Npu::new`).
        check("aclrtMallocHost", unsafe { aclrtMallocHost(&mut ptr, len) })?;
        if ptr.is_null() {
            return Err(DeviceError("aclrtMallocHost returned null".into()));
        }
        Ok(Box::new(NpuHostMemory { ptr: ptr.cast(), len }))
    }
}

impl HostMemory for NpuHostMemory {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is `len` bytes from `aclrtMallocHost`, freed only in `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for NpuHostMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by `aclrtMallocHost`, freed once.
        let _ = unsafe { aclrtFreeHost(self.ptr.cast()) };
    }
}
