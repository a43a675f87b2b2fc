//! Where a recorded tensor's bytes are: host memory (owned, shared or lent) or device memory.
//!
//! The writer reads a tensor after `record` has returned, on its own threads. Whatever the
//! caller passes is therefore either handed over (owned bytes, a shared owner), lent with an
//! explicit release signal (called once the writer is done with the buffer), or device memory
//! that `record` starts copying into pinned host memory before it returns.

use bytes::Bytes;

use crate::device::{CopyCompletion, DeviceSummary, DeviceTensor, PinnedBuffer};

/// The bytes of one tensor: little-endian elements, contiguous, in C order.
pub struct TensorSource(pub(crate) Source);

pub(crate) enum Source {
    Host(Bytes),
    Lent(LentBuffer),
    Device(Box<dyn DeviceTensor>),
    /// A device copy started by `record`, finished on a writer thread.
    Copying(Box<dyn CopyCompletion>, usize),
    /// Bytes made by `record` once the budget admitted them (a snapshot of the caller's memory).
    Deferred(MakeBytes, usize),
    /// No bytes: the statistics, computed on the device, awaited on a writer thread.
    Summarized(Box<dyn DeviceSummary>),
}

/// What makes a [`TensorSource::deferred`] tensor's bytes.
pub(crate) type MakeBytes = Box<dyn FnOnce() -> Result<TensorSource, String> + Send>;

impl TensorSource {
    /// Host bytes handed over to the writer: a `Vec<u8>`, a `bytes::Bytes`, a `&'static [u8]`.
    /// No copy is made.
    pub fn host(bytes: impl Into<Bytes>) -> Self {
        TensorSource(Source::Host(bytes.into()))
    }

    /// Host memory owned by `owner` (a buffer pool's slot, an mmap, an `Arc<Vec<f32>>` made
    /// bytes), kept alive by the writer and dropped when it is done: dropping `owner` is the
    /// release signal. No copy is made.
    pub fn shared<T: AsRef<[u8]> + Send + 'static>(owner: T) -> Self {
        TensorSource(Source::Host(Bytes::from_owner(owner)))
    }

    /// Host memory the caller keeps owning and lends to the writer: `release` is called
    /// exactly once, on a writer thread, when the writer will not read the buffer again
    /// (after its statistics, or after its payload was copied into a batch in task `tensor`;
    /// also when the entry is dropped by back-pressure or the unit is aborted).
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` readable bytes that stay valid and unmodified until `release`
    /// is called (for example a numpy array whose owner is kept alive until then).
    pub unsafe fn lent(ptr: *const u8, len: usize, release: impl FnOnce() + Send + 'static) -> Self {
        TensorSource(Source::Lent(LentBuffer { ptr, len, release: Some(Box::new(release)) }))
    }

    /// Bytes that `make` produces — typically a copy of memory the caller will change right
    /// after `record` returns (a snapshot) — called by `record` on the caller's thread once the
    /// staging budget has admitted the entry's `len` bytes and before it returns, so that the
    /// copy is counted in the budget rather than made beside it. Not called at all when the
    /// entry is refused or dropped by back-pressure. `make` returns the bytes as another source
    /// (host, shared or lent, of exactly `len` bytes) or an error message, which fails `record`.
    pub fn deferred(len: usize, make: impl FnOnce() -> Result<TensorSource, String> + Send + 'static) -> Self {
        TensorSource(Source::Deferred(Box::new(make), len))
    }

    /// Device memory: `record` starts a copy into a pinned host buffer and returns; the copy is
    /// awaited on a writer thread. See [`crate::device`].
    pub fn device(tensor: impl DeviceTensor + 'static) -> Self {
        TensorSource(Source::Device(Box::new(tensor)))
    }

    /// No bytes at all, only the statistics a device computed for the tensor: for units of
    /// task `statistics` in summary mode `statistics`, which need nothing else (`record`
    /// refuses it in the others). The tensor's shape and dtype still describe it; the writer
    /// waits for the values on its own thread.
    pub fn summarized(summary: impl DeviceSummary + 'static) -> Self {
        TensorSource(Source::Summarized(Box::new(summary)))
    }

    /// Size in bytes (0 for [`TensorSource::summarized`]).
    pub fn len(&self) -> usize {
        match &self.0 {
            Source::Host(b) => b.len(),
            Source::Lent(l) => l.len,
            Source::Device(d) => d.len(),
            Source::Copying(_, len) | Source::Deferred(_, len) => *len,
            Source::Summarized(_) => 0,
        }
    }

    pub(crate) fn is_summarized(&self) -> bool {
        matches!(self.0, Source::Summarized(_))
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for TensorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Source::Host(_) => "host",
            Source::Lent(_) => "lent",
            Source::Device(_) => "device",
            Source::Copying(..) => "copying",
            Source::Deferred(..) => "deferred",
            Source::Summarized(_) => "summarized",
        };
        write!(f, "TensorSource({kind}, {} bytes)", self.len())
    }
}

/// A lent host buffer; its release signal fires when it is dropped.
pub(crate) struct LentBuffer {
    ptr: *const u8,
    len: usize,
    release: Option<Box<dyn FnOnce() + Send>>,
}

// SAFETY: the caller of `TensorSource::lent` promised the memory stays valid and unmodified
// until `release` runs, whichever thread reads it; the buffer is only read.
unsafe impl Send for LentBuffer {}
// SAFETY: as above; `&LentBuffer` only gives out shared reads of the bytes.
unsafe impl Sync for LentBuffer {}

impl LentBuffer {
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: `TensorSource::lent`'s contract: `ptr` points to `len` readable bytes that
        // stay valid and unchanged until `release` runs, which happens only in `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for LentBuffer {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

/// A tensor's bytes while the writer works on them.
pub(crate) enum Held {
    Host(Bytes),
    Lent(LentBuffer),
    Pinned(PinnedBuffer),
}

impl Held {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Held::Host(b) => b,
            Held::Lent(l) => l.as_slice(),
            Held::Pinned(p) => p.as_slice(),
        }
    }
}
