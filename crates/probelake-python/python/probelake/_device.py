"""Device tensors (CUDA, or NPU through torch_npu) on their way to the writer.

`stage` runs on the caller's thread inside `Unit.record`: it enqueues a non-blocking copy into
pinned host memory on the tensor's current stream, records an event after it, and returns at
once. A writer thread later calls `event.synchronize()` (torch releases the GIL while it waits)
and reads the host copy. Later kernels on the same stream are ordered after the copy, so an
in-place change right after `record` does not reach the recorded values.
"""

from __future__ import annotations

from typing import Any, Protocol


class Waiter(Protocol):
    """What `stage` returns beside the host copy: its `synchronize()` returns once the copy is
    complete."""

    def synchronize(self) -> None: ...


def stage(tensor: Any) -> tuple[Any, Waiter]:
    """Enqueues a copy of device `tensor` into a new pinned, contiguous CPU tensor."""
    import torch

    backend = getattr(torch, tensor.device.type, None)
    if backend is None or not hasattr(backend, "Event"):
        raise TypeError(f"tensors on {tensor.device} cannot be recorded: torch.{tensor.device.type} has no Event")
    try:
        host = torch.empty(tuple(tensor.shape), dtype=tensor.dtype, device="cpu", pin_memory=True)
    except RuntimeError:
        # No pinned allocator for this device: the copy below is then synchronous.
        host = torch.empty(tuple(tensor.shape), dtype=tensor.dtype, device="cpu")
    host.copy_(tensor.detach().resolve_conj().resolve_neg(), non_blocking=True)
    event = backend.Event()
    event.record(backend.current_stream(tensor.device))
    return host, event
