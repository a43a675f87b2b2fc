"""Tensors on an accelerator (CUDA, NPU through torch_npu, any device `torch.accelerator`
knows) on their way to the host, without a host sync on the caller's thread.

Everything here runs in two halves. The caller's (training) thread only enqueues work on the
tensor's current stream: reductions, a copy into pinned host memory with `non_blocking=True`,
and an event recorded after it. Another thread (a writer thread, msprobe's commit thread)
waits on that event and reads the host copy. Later kernels on the same stream run after the
copy, so an in-place change right after the hook does not reach the values read; a tensor
allocated on another stream is marked with `record_stream`, so the allocator does not hand its
memory out before the copy has run.

Only device-generic torch calls are used (`tensor.device`, `torch.get_device_module(device)`
and its `current_stream`, `Event` and `stream`, `Tensor.record_stream`); nothing names CUDA.
CPU tensors can be sent down the same path (`stage`, `Staging.copy`,
`probelake._device_stats`) to test it without an accelerator: the same torch ops and buffers,
the "non-blocking" copies complete at once and the events are already done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Waiter(Protocol):
    """What a copy's event offers: `synchronize()` returns once the copy is complete."""

    def synchronize(self) -> None: ...


class HostEvent:
    """The event of work done synchronously on the host (CPU tensors): already complete."""

    __slots__ = ()

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True


_DONE = HostEvent()


def current_stream(device: Any) -> Any | None:
    """The device's current stream on this thread; None for the CPU."""
    if device.type == "cpu":
        return None
    import torch

    return torch.get_device_module(device).current_stream(device)


def record_event(device: Any, stream: Any | None) -> Waiter:
    """An event recorded on `stream` after the work enqueued so far (complete at once on the
    CPU, which has no events)."""
    if stream is None:
        return _DONE
    import torch

    # The device module's own event type takes its own stream type (torch.cuda.Event and
    # torch.cuda.Stream, torch.npu.Event and torch.npu.Stream).
    event = torch.get_device_module(device).Event()
    event.record(stream)
    return event


def protect(tensor: Any, stream: Any | None) -> None:
    """Keeps the allocator from reusing `tensor`'s memory before the work enqueued on `stream`
    has run, whichever stream allocated it (a no-op on the CPU)."""
    if stream is not None:
        tensor.record_stream(stream)


def pinned(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """An empty host tensor for a non-blocking copy from `device`: pinned where the device
    has a pinned allocator, plain memory otherwise (then the copy is synchronous)."""
    import torch

    if device.type != "cpu":
        try:
            return torch.empty(shape, dtype=dtype, device="cpu", pin_memory=True)
        except RuntimeError:
            pass
    return torch.empty(shape, dtype=dtype, device="cpu")


def stage(tensor: Any) -> tuple[Any, Waiter]:
    """Enqueues a copy of `tensor` into a new pinned, contiguous CPU tensor; returns the copy
    and the event to wait on before reading it (the Python writer's payloads)."""
    device = tensor.device
    stream = current_stream(device)
    host = pinned(tuple(tensor.shape), tensor.dtype, device)
    source = tensor.detach().resolve_conj().resolve_neg()
    protect(source, stream)
    host.copy_(source, non_blocking=True)
    return host, record_event(device, stream)


class Staged:
    """A tensor's bytes being copied into pinned host memory, counted in a `Staging` budget
    until released."""

    __slots__ = ("host", "event", "nbytes")

    def __init__(self, host: Any, event: Waiter, nbytes: int) -> None:
        self.host = host
        self.event = event
        self.nbytes = nbytes


class Staging:
    """Pinned host copies of tensors' bytes, at most `budget` bytes of them in flight, read on
    `threads` threads of their own once their copy is complete.

    `copy` (caller's thread) waits while the budget is spent: back-pressure, as the Rust
    writer applies, rather than a queue that grows with the device's lead. A tensor larger than
    the whole budget is admitted alone. The pinned blocks come from torch's caching host
    allocator, which keeps a block until the copies that used it are done.
    """

    def __init__(self, budget: int, threads: int = 2) -> None:
        if budget <= 0:
            raise ValueError(f"staging budget {budget}: expected a positive number of bytes")
        self.budget = budget
        self._used = 0
        self._cond = threading.Condition()
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        #: The most bytes in flight at once, and how often `copy` waited for the budget.
        self.peak = 0
        self.waits = 0

    @property
    def used(self) -> int:
        """Bytes in flight now."""
        return self._used

    def _admit(self, nbytes: int) -> None:
        with self._cond:
            if self._used and self._used + nbytes > self.budget:
                self.waits += 1
                while self._used and self._used + nbytes > self.budget:
                    self._cond.wait()
            self._used += nbytes
            self.peak = max(self.peak, self._used)

    def _release(self, nbytes: int) -> None:
        with self._cond:
            self._used -= nbytes
            self._cond.notify_all()

    def copy(self, tensor: Any) -> Staged:
        """Enqueues a copy of `tensor`'s bytes (contiguous, C order) into pinned host memory on
        its current stream, once the budget admits them."""
        import torch

        source = tensor.detach()
        if not source.is_contiguous():
            source = source.contiguous()
        nbytes = source.numel() * source.element_size()
        self._admit(nbytes)
        try:
            device = source.device
            stream = current_stream(device)
            host = pinned((nbytes,), torch.uint8, device)
            if nbytes:
                protect(source, stream)
                host.copy_(source.reshape(-1).view(torch.uint8), non_blocking=True)
            return Staged(host, record_event(device, stream), nbytes)
        except BaseException:
            self._release(nbytes)
            raise

    def then(self, staged: Staged, read: Callable[[Any], T]) -> Future[T]:
        """`read(host_bytes)` on a staging thread once `staged`'s copy is complete; the bytes
        leave the budget when it returns."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="probelake-staging")

        def run() -> T:
            try:
                staged.event.synchronize()
                return read(staged.host)
            finally:
                staged.host = None
                self._release(staged.nbytes)

        return self._pool.submit(run)

    def __repr__(self) -> str:
        return f"Staging(budget={self.budget}, in_flight={self._used}, peak={self.peak}, waits={self.waits})"
