//! A pool of pinned host buffers: device copies land here, and buffers are reused because
//! pinning memory is slow (milliseconds per allocation on Ascend).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::DeviceError;

/// One block of host memory the device can copy into.
pub trait HostMemory: Send + Sync {
    /// The whole block.
    fn as_slice(&self) -> &[u8];
    /// The whole block, writable.
    fn as_mut_slice(&mut self) -> &mut [u8];
}

/// Allocates [`HostMemory`] blocks (page-locked for a real device).
pub trait HostAllocator: Send + Sync + 'static {
    /// A block of at least `len` bytes.
    fn alloc(&self, len: usize) -> Result<Box<dyn HostMemory>, DeviceError>;
}

/// Ordinary heap memory: for the simulated device and for tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeapAllocator;

impl HostMemory for Vec<u8> {
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

impl HostAllocator for HeapAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn HostMemory>, DeviceError> {
        Ok(Box::new(vec![0u8; len]))
    }
}

/// Buffers are sized in powers of two from this up, so a freed buffer fits later tensors.
const MIN_CLASS: usize = 64 * 1024;

/// Pinned host buffers for device copies, reused across tensors and units.
///
/// # Memory
///
/// The pool allocates only for tensors the staging budget admitted, so what is in use is
/// bounded by the budget (rounded up to size classes, at most 2×). Freed buffers are kept for
/// reuse up to `cache_bytes`; beyond that they are freed.
pub struct PinnedPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    allocator: Box<dyn HostAllocator>,
    cache_bytes: usize,
    free: Mutex<FreeLists>,
}

#[derive(Default)]
struct FreeLists {
    by_class: HashMap<usize, Vec<Box<dyn HostMemory>>>,
    cached: usize,
    allocations: u64,
}

impl PinnedPool {
    /// A pool allocating with `allocator`, keeping up to `cache_bytes` of freed buffers.
    pub fn new(allocator: impl HostAllocator, cache_bytes: usize) -> Self {
        PinnedPool {
            inner: Arc::new(PoolInner {
                allocator: Box::new(allocator),
                cache_bytes,
                free: Mutex::new(FreeLists::default()),
            }),
        }
    }

    /// A heap-backed pool keeping up to 256 MiB for reuse.
    pub fn heap() -> Self {
        PinnedPool::new(HeapAllocator, 256 << 20)
    }

    /// A buffer of `len` bytes (from the cache when one of its size class is free).
    pub fn take(&self, len: usize) -> Result<PinnedBuffer, DeviceError> {
        let class = len.max(MIN_CLASS).checked_next_power_of_two().unwrap_or(len);
        let cached = self.inner.free.lock().ok().and_then(|mut f| {
            let block = f.by_class.get_mut(&class).and_then(Vec::pop);
            if block.is_some() {
                f.cached = f.cached.saturating_sub(class);
            }
            block
        });
        let block = match cached {
            Some(b) => b,
            None => {
                if let Ok(mut f) = self.inner.free.lock() {
                    f.allocations += 1;
                }
                self.inner.allocator.alloc(class)?
            }
        };
        if block.as_slice().len() < len {
            return Err(DeviceError(format!("allocator gave {} bytes for {len}", block.as_slice().len())));
        }
        Ok(PinnedBuffer { block: Some(block), len, class, pool: Arc::clone(&self.inner) })
    }

    /// How many blocks were allocated so far (the rest were reused).
    pub fn allocations(&self) -> u64 {
        self.inner.free.lock().map_or(0, |f| f.allocations)
    }
}

impl Clone for PinnedPool {
    fn clone(&self) -> Self {
        PinnedPool { inner: Arc::clone(&self.inner) }
    }
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool").field("cache_bytes", &self.inner.cache_bytes).finish_non_exhaustive()
    }
}

/// A buffer from a [`PinnedPool`]; it goes back to the pool when dropped.
pub struct PinnedBuffer {
    block: Option<Box<dyn HostMemory>>,
    len: usize,
    class: usize,
    pool: Arc<PoolInner>,
}

impl PinnedBuffer {
    /// The tensor's bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.block.as_ref().and_then(|b| b.as_slice().get(..self.len)).unwrap_or_default()
    }

    /// The tensor's bytes, writable (where a copy lands).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        match self.block.as_mut() {
            Some(b) => b.as_mut_slice().get_mut(..len).unwrap_or_default(),
            None => &mut [],
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let Some(block) = self.block.take() else { return };
        if let Ok(mut f) = self.pool.free.lock() {
            if f.cached + self.class <= self.pool.cache_bytes {
                f.cached += self.class;
                f.by_class.entry(self.class).or_default().push(block);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_within_the_cache_limit() {
        let pool = PinnedPool::new(HeapAllocator, MIN_CLASS);
        let a = pool.take(10).unwrap();
        assert_eq!(a.len(), 10);
        drop(a);
        let b = pool.take(MIN_CLASS).unwrap();
        assert_eq!(pool.allocations(), 1, "the freed block was reused");
        let c = pool.take(1).unwrap();
        assert_eq!(pool.allocations(), 2);
        drop((b, c));
        // Only one block fits the cache; the other was freed.
        let _d = pool.take(1).unwrap();
        let _e = pool.take(1).unwrap();
        assert_eq!(pool.allocations(), 3);
    }
}
