"""msprobe's Max, Min, Mean and Norm of a tensor, computed on the tensor's own device and read
back without a host sync on the caller's thread.

Per tensor, on its current stream: one `aminmax` (two for `bool`: `any`, `all`), and for the
float dtypes msprobe reduces, `mean` and `norm`, the same torch ops in the same dtype as
msprobe's `get_stat_info` (so the values are msprobe's, bit for bit, where torch's kernels
are deterministic). The four results are stacked, viewed as integers of their width (exact,
and no float64 on devices that lack it) and copied into one row of a preallocated device
buffer: `ROWS` rows, one buffer per (device, stream). A full buffer, and every open one at
`seal()` (a commit), is copied into pinned host memory with `non_blocking=True` and an event
is recorded after it. `Row.values()` then waits on that event, on whichever thread asks (a
commit thread, a writer thread), and decodes the row into the Python numbers `.item()` would
have given.
"""

from __future__ import annotations

import threading
from typing import Any

from ._device import Waiter, current_stream, pinned, protect, record_event

#: Rows of a device buffer before it is copied to the host.
ROWS = 1024

# Stats = Max, Min, Mean, Norm as Python values (None where msprobe writes null).
Stats = tuple[Any, Any, Any, Any]

# How a row's integers turn back into values: the dtype's bits, or plain integers.
_FLOAT_BITS = ("torch.float32", "torch.float16", "torch.bfloat16", "torch.float64")
_INTEGER = ("torch.int8", "torch.int16", "torch.int32", "torch.int64", "torch.uint8")
#: The dtypes this path summarizes; fast mode's host path (`_internal.tensor_summary`) takes
#: the same ones, so a tensor's dtype sends it to msprobe or to probelake alike on either.
DTYPES = frozenset((*_FLOAT_BITS, *_INTEGER, "torch.bool"))


class Batch:
    """One device buffer of rows; sealed once, then read on the host."""

    def __init__(self, device: Any, stream: Any | None, rows: int) -> None:
        import torch

        self.device = device
        self.stream = stream
        self._buffer: Any = torch.empty((rows, 4), dtype=torch.int64, device=device)
        # Per row: (dtype name, how many of the four are set).
        self.kinds: list[tuple[str, int]] = []
        self._host: Any = None
        self._event: Waiter | None = None
        self._values: list[Stats] | None = None
        self._lock = threading.Lock()

    @property
    def full(self) -> bool:
        return len(self.kinds) == self._buffer.shape[0] if self._buffer is not None else True

    @property
    def sealed(self) -> bool:
        return self._buffer is None

    def add(self, t: Any) -> int:
        """Enqueues `t`'s statistics into the next row; returns the row's index."""
        import torch

        i = len(self.kinds)
        row = self._buffer[i]
        name = str(t.dtype)
        if t.dtype is torch.bool:
            row[:2].copy_(torch.stack((t.any(), t.all())))
            self.kinds.append((name, 2))
        elif t.dim() == 0:
            # msprobe: all four are the value itself, whatever the dtype.
            row.copy_(_bits(t.reshape(1)).expand(4))
            self.kinds.append((name, 4))
        else:
            low, high = torch.aminmax(t)
            if t.is_floating_point() and t.dtype is not torch.float64:
                row.copy_(_bits(torch.stack((high, low, torch.mean(t), torch.norm(t)))))
                self.kinds.append((name, 4))
            else:
                row[:2].copy_(_bits(torch.stack((high, low))))
                self.kinds.append((name, 2))
        return i

    def seal(self) -> None:
        """Enqueues the copy of the filled rows to the host, and the event after it; the buffer
        takes no more rows. Called on the thread and stream that filled it, or under `_lock`."""
        with self._lock:
            self._seal()

    def _seal(self) -> None:
        if self._buffer is None:
            return
        n = len(self.kinds)
        import torch

        host = pinned((n, 4), torch.int64, self.device)
        if n:
            if self.stream is not None and current_stream(self.device) != self.stream:
                # Sealed from another thread (a writer waiting on a row): on the batch's stream.
                with torch.get_device_module(self.device).stream(self.stream):
                    host.copy_(self._buffer[:n], non_blocking=True)
                    self._event = record_event(self.device, self.stream)
            else:
                host.copy_(self._buffer[:n], non_blocking=True)
                self._event = record_event(self.device, self.stream)
        else:
            self._event = record_event(self.device, None)
        self._host = host
        # The allocator hands the buffer's memory out again only after the copy, in stream order.
        self._buffer = None

    def values(self) -> list[Stats]:
        """Every row's values; waits for the copy (seals the batch first if nobody has)."""
        with self._lock:
            if self._values is None:
                self._seal()
                assert self._event is not None
                self._event.synchronize()
                self._values = _decode(self._host.numpy(), self.kinds)
                self._host = None
            return self._values


class Row:
    """One tensor's statistics in a `Batch`."""

    __slots__ = ("batch", "index", "count")

    def __init__(self, batch: Batch, index: int, count: int) -> None:
        self.batch = batch
        self.index = index
        self.count = count

    def values(self) -> Stats:
        """Max, Min, Mean, Norm; waits for the device's copy when it is not done yet."""
        return self.batch.values()[self.index]

    def placeholders(self) -> list[Any]:
        """msprobe's stat vector (Max, Min, Mean, Norm, checksum) for `append_stat_to_buffer`:
        each value resolves at its flush through `.item()`."""
        return [Stat(self, i) if i < self.count else None for i in range(4)] + [None]


class Stat:
    """One value of a `Row`, as msprobe's flush reads it: `.item()`."""

    __slots__ = ("row", "column")

    def __init__(self, row: Row, column: int) -> None:
        self.row = row
        self.column = column

    def item(self) -> Any:
        return self.row.values()[self.column]


class DeviceStatistics:
    """Open batches per (device, stream) of the calling thread; `summarize` fills them."""

    def __init__(self, rows: int = ROWS) -> None:
        self.rows = rows
        self._open: dict[tuple[Any, Any], Batch] = {}
        self._lock = threading.Lock()

    def summarize(self, t: Any) -> Row:
        """Enqueues the statistics of `t` (a dtype of `DTYPES`, strided, non-empty) on its
        device's current stream."""
        data = t.detach()
        device = data.device
        stream = current_stream(device)
        key = (device, stream)
        with self._lock:
            while True:
                batch = self._open.get(key)
                if batch is None:
                    batch = self._open[key] = Batch(device, stream, self.rows)
                with batch._lock:
                    if batch.sealed:
                        # A reader sealed it from its own thread: rows go to a new one.
                        del self._open[key]
                        continue
                    protect(data, stream)
                    index = batch.add(data)
                    if batch.full:
                        batch._seal()
                        del self._open[key]
                    return Row(batch, index, batch.kinds[index][1])

    def seal(self) -> None:
        """Seals every open batch: their copies are enqueued, and their rows can be read."""
        with self._lock:
            batches = list(self._open.values())
            self._open.clear()
        for batch in batches:
            batch.seal()


def _bits(values: Any) -> Any:
    """Float values viewed as the integers of their width (bit patterns); others as they are."""
    import torch

    views = {
        torch.float32: torch.int32,
        torch.float16: torch.int16,
        torch.bfloat16: torch.int16,
        torch.float64: torch.int64,
    }
    view = views.get(values.dtype)
    return values.view(view) if view is not None else values


def _decode(rows: Any, kinds: list[tuple[str, int]]) -> list[Stats]:
    """The host copy's integers back into `.item()`'s Python values, one dtype at a time."""
    import numpy as np

    out: list[Stats] = [(None, None, None, None)] * len(kinds)
    by_dtype: dict[str, list[int]] = {}
    for i, (name, _) in enumerate(kinds):
        by_dtype.setdefault(name, []).append(i)
    for name, index in by_dtype.items():
        block = rows[index]
        if name == "torch.float32":
            decoded = block.astype(np.int32).view(np.float32).astype(np.float64).tolist()
        elif name == "torch.bfloat16":
            bits = block.astype(np.int32) << 16
            decoded = bits.view(np.float32).astype(np.float64).tolist()
        elif name == "torch.float16":
            decoded = block.astype(np.int16).view(np.float16).astype(np.float64).tolist()
        elif name == "torch.float64":
            decoded = block.view(np.float64).tolist()
        elif name == "torch.bool":
            decoded = [[bool(v) for v in r] for r in block.tolist()]
        else:
            decoded = block.tolist()
        for i, values in zip(index, decoded, strict=True):
            count = kinds[i][1]
            out[i] = tuple(values[c] if c < count else None for c in range(4))  # type: ignore[assignment]
    return out


# The Python writer's (`Unit.record`) device statistics: sealed after each entry.
_writer_statistics = DeviceStatistics()


def summarize(t: Any) -> Row:
    """`Unit.record`'s device path: enqueues `t`'s statistics (see `DeviceStatistics`)."""
    return _writer_statistics.summarize(t)


def seal() -> None:
    """Enqueues the host copies of what `summarize` enqueued (after each recorded entry)."""
    _writer_statistics.seal()
