"""`fast` mode on the device: a tensor's record made with no host sync on the training thread.

msprobe's processor, for a tensor on an accelerator, runs four reductions and leaves four 0-dim
device tensors that its flush turns into floats with a blocking `.item()` each; in md5 mode it
copies the tensor to the host and calls `synchronize()` before every CRC; in task `tensor` its
`torch.save` copies every tensor to the host where the hook runs. Here, on the training thread,
the statistics are enqueued into a device buffer (`probelake._device_stats`), the bytes that
md5 and task `tensor` need are copied non-blocking into pinned staging memory
(`probelake._device.Staging`, bounded, with back-pressure), and the record holds msprobe's own
placeholders. They resolve on the commit thread: statistics once the buffer's copy has landed,
CRCs and `.pt` files on the staging threads once the tensor's copy has.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from .._device import Staging
from .._device_stats import DeviceStatistics, Row

T = TypeVar("T")

# The location `torch.save` writes for the storages this thread serializes (see `saved_on`).
_location = threading.local()
_tagger_lock = threading.Lock()
_tagger_registered = False


@contextlib.contextmanager
def msprobe_hooks_off() -> Iterator[None]:
    """msprobe's API hooks stay out of the torch calls made inside (on probelake's own threads:
    staging, commit). msprobe's hooks are global and record every hooked torch API any thread
    calls while a dump is on, unless that thread's `inner_switch` is set, which is how msprobe
    keeps its own torch calls out of the dump."""
    from msprobe.core.dump.hook_manager import BaseHookManager

    tid = threading.get_ident()
    before = BaseHookManager.inner_switch[tid]
    BaseHookManager.inner_switch[tid] = True
    try:
        yield
    finally:
        # msprobe may have replaced the table meanwhile (it does at a reset).
        BaseHookManager.inner_switch[tid] = before


def quietly(work: Callable[[Any], T]) -> Callable[[Any], T]:
    """`work` run with msprobe's hooks off for the calling thread."""

    def run(value: Any) -> T:
        with msprobe_hooks_off():
            return work(value)

    return run


class DevicePath:
    """Statistics, CRCs and payloads of the tensors `fast` mode sends to their device."""

    def __init__(self, const: Any, staging: Staging) -> None:
        self.const = const
        self.statistics = DeviceStatistics()
        self.staging = staging

    def stat_row(self, tensor: Any) -> Row | None:
        """The tensor's statistics row (None for an empty tensor: all four null)."""
        if not tensor.numel():
            return None
        return self.statistics.summarize(tensor)

    def crc32(self, tensor: Any) -> Future[str | None]:
        """msprobe's md5 field: the CRC-32 of the tensor's bytes, computed on a staging thread
        from a copy taken now."""
        if not tensor.numel():
            done: Future[str | None] = Future()
            done.set_result(f"{zlib.crc32(b''):08x}")
            return done
        staged = self.staging.copy(tensor)
        return self.staging.then(staged, quietly(_crc32))

    def record(self, processor: Any, tensor: Any, row: Row | None, crc: Future[str | None] | None) -> dict[str, Any]:
        """The record msprobe's `_analyze_tensor` makes, with the same placeholders: its flush
        (here, the commit thread) orders the keys as for msprobe's own values."""
        const = self.const
        writer = processor.data_writer
        stats = row.placeholders() if row is not None else [None] * 5
        record: dict[str, Any] = {
            "type": const.TENSOR_TYPE,
            "dtype": str(tensor.dtype),
            "shape": tensor.shape,
            const.TENSOR_STAT_INDEX: writer.append_stat_to_buffer(stats),
            "requires_grad": tensor.requires_grad,
        }
        if crc is not None:
            record[const.MD5_INDEX] = writer.append_crc32_to_buffer(crc)
        return record

    def payload(self, tensor: Any) -> Future[bytes] | None:
        """What `torch.save(tensor, path)` would write, serialized on a staging thread from a
        copy taken now; None where that copy would not be the whole of what torch saves (a
        view of a larger storage, a tensor that requires grad)."""
        if (
            tensor.requires_grad
            or not tensor.is_contiguous()
            or tensor.storage_offset() != 0
            or tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size()
        ):
            return None
        dtype, shape, device = tensor.dtype, tuple(tensor.shape), tensor.device
        staged = self.staging.copy(tensor)
        return self.staging.then(staged, quietly(lambda host: saved_on(host, dtype, shape, device)))

    def seal(self) -> None:
        """Enqueues the copies of every open statistics buffer (at each commit)."""
        self.statistics.seal()


def _crc32(host: Any) -> str:
    # The bytes read in place, as msprobe's `tensor_bytes_view_cpu` reads them.
    size = host.numel()
    view = (ctypes.c_ubyte * size).from_address(host.data_ptr()) if size else b""
    return f"{zlib.crc32(view):08x}"


def saved_on(host: Any, dtype: Any, shape: tuple[int, ...], device: Any) -> bytes:
    """`torch.save` of the tensor whose bytes `host` holds, as if it still lived on `device`
    (the storage's location is the one thing of the device in torch's file)."""
    import torch

    _register_tagger()
    tensor = host.view(dtype).reshape(shape)
    buffer = io.BytesIO()
    _location.tag = None if device.type == "cpu" else str(device)
    try:
        torch.save(tensor, buffer)
    finally:
        _location.tag = None
    return buffer.getvalue()


def _tag(storage: Any) -> str | None:
    return getattr(_location, "tag", None)


def _no_restore(obj: Any, location: str) -> None:
    return None


def _register_tagger() -> None:
    """Puts `_tag` before torch's own location taggers; it answers only inside `saved_on`."""
    global _tagger_registered
    with _tagger_lock:
        if not _tagger_registered:
            import torch

            torch.serialization.register_package(0, _tag, _no_restore)
            _tagger_registered = True
