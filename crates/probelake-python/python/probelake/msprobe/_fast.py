"""`fast` mode: probelake computes msprobe's statistics, once per tensor version.

msprobe's `get_stat_info` runs four torch reductions per tensor and leaves four 0-dim tensors
that each cost an `.item()` when the dump is flushed; half the tensors it reduces in a step
were reduced already (an op's output is the next op's input). Each tensor takes one of three
paths, counted in `Route.counts`:

- `device`: a tensor on an accelerator (or any tensor with `device_path="always"`) is
  summarized on its own device with no host sync on the training thread (`_device_path`);
- `host`: a CPU tensor is read once by `_internal.tensor_summary` (Rust, no GIL held), the
  values are plain Python numbers;
- `msprobe`: anything else (complex, float8, sparse, subclasses, msprobe's xor checksum,
  `precision: high`, sliced or asynchronous dumps) goes to msprobe's own code, with one
  warning per reason for accelerator tensors.

A tensor seen again unchanged (same object, same `_version`) reuses its values.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, Literal, TypeVar

from .. import _internal
from .._device import Staging
from .._device_stats import DTYPES, Row
from ._device_path import DevicePath

log = logging.getLogger("probelake.msprobe")

DevicePathChoice = Literal["auto", "always"]
Path = Literal["device", "host", "msprobe"]

# Max, Min, Mean, Norm and the CRC-32 (None unless asked for).
Summary = tuple[Any, Any, Any, Any, "str | None"]

# How many recent tensors' statistics are remembered.
_RECENT = 256

V = TypeVar("V")


class RecentTensors(Generic[V]):
    """What was computed for the last `_RECENT` tensors, by object and version: a tensor seen
    again unchanged (same object, same `_version`; an op's output is the next op's input)
    finds it. A weak reference to each: holding the tensors would keep a step's activations
    alive longer (and make torch allocate fresh memory for the next ones); a dead one never
    matches, so a new tensor that reuses its id is not mistaken for it."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[int, int], tuple[weakref.ref[Any], V]] = OrderedDict()

    def get(self, data: Any) -> V | None:
        key = (id(data), data._version)
        hit = self._entries.get(key)
        if hit is None or hit[0]() is not data:
            return None
        self._entries.move_to_end(key)
        return hit[1]

    def put(self, data: Any, value: V) -> None:
        self._entries[(id(data), data._version)] = (weakref.ref(data), value)
        if len(self._entries) > _RECENT:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


class Statistics:
    """msprobe's Max, Min, Mean and Norm of plain CPU tensors, computed by probelake, with the
    recent tensors remembered (`forget()` at each commit)."""

    def __init__(self, const: Any) -> None:
        self.const = const
        self._recent: RecentTensors[Summary] = RecentTensors()

    def of(self, data: Any, crc32: bool = False) -> Summary | None:
        """Max, Min, Mean, Norm (and with `crc32`, msprobe's md5 field) of a CPU tensor that
        `FastPath.path` sent here; None for an empty one."""
        hit = self._recent.get(data)
        if hit is not None and (hit[4] is not None or not crc32):
            return hit
        t = data.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        numel = t.numel()
        if not numel:
            return None
        values = _internal.tensor_summary(str(t.dtype), t.data_ptr(), numel * t.element_size(), t.dim() == 0, crc32)
        self._recent.put(data, values)
        return values

    def forget(self) -> None:
        """Drops the remembered tensors: a step's tensors are not the next's."""
        self._recent.clear()


class FastPath:
    """Which path computes each tensor's values, and the paths themselves."""

    def __init__(self, const: Any, device_path: DevicePathChoice, staging_bytes: int) -> None:
        import torch

        self.const = const
        self.device_path = device_path
        self.host = Statistics(const)
        self.device = DevicePath(const, Staging(staging_bytes))
        #: Tensors whose values each path computed.
        self.counts: dict[Path, int] = {"device": 0, "host": 0, "msprobe": 0}
        self._functorch = torch._C._functorch
        self._plain = (torch.Tensor, torch.nn.Parameter)
        self._strided = torch.strided
        self._warned: set[str] = set()
        # Recent device tensors' rows and CRCs, as `Statistics` remembers CPU tensors' values.
        self._recent: RecentTensors[tuple[Row | None, Future[str | None] | None]] = RecentTensors()

    def path(self, data: Any, config: Any, precision: Any) -> tuple[Path, str]:
        """The path for `data`, and when that is msprobe's, why."""
        const = self.const
        if type(data) not in self._plain:
            return "msprobe", f"tensor subclass {type(data).__name__}"
        dtype = str(data.dtype)
        if data.layout is not self._strided:
            return "msprobe", f"layout {data.layout}"
        if data.is_meta:
            return "msprobe", "meta tensor"
        if precision == const.DUMP_PRECISION_HIGH:
            return "msprobe", "precision: high"
        if config.summary_mode == const.XOR_CHECKSUM:
            return "msprobe", "summary_mode: xor"
        if self._functorch.is_batchedtensor(data) or self._functorch.is_gradtrackingtensor(data):
            return "msprobe", "functorch-wrapped tensor"
        # One set of dtypes for both paths: those msprobe reduces, but complex and float8.
        if dtype not in DTYPES:
            return "msprobe", f"dtype {dtype}"
        return ("host", "") if data.is_cpu and self.device_path == "auto" else ("device", "")

    def warn_fallback(self, data: Any, reason: str) -> None:
        """Warns once per reason when an accelerator tensor is left to msprobe (which counts
        it, in `get_stat_info`)."""
        if not data.is_cpu and reason not in self._warned:
            self._warned.add(reason)
            log.warning(
                "probelake: fast mode leaves %s tensors with %s to msprobe, which syncs the device for their values",
                data.device.type,
                reason,
            )

    def on_device(self, data: Any, crc32: bool) -> tuple[Row | None, Future[str | None] | None]:
        """The statistics row (and with `crc32`, the md5 field's future) of a tensor sent to
        the device path; one tensor seen again unchanged reuses them."""
        hit = self._recent.get(data)
        if hit is not None and (hit[1] is not None or not crc32):
            return hit
        t = data.detach()
        row = self.device.stat_row(t)
        crc = self.device.crc32(t) if crc32 else None
        self._recent.put(data, (row, crc))
        return row, crc

    def seal(self) -> None:
        """At each commit: the device's statistics buffers start their copies to the host."""
        self.device.seal()

    def forget(self) -> None:
        """At each commit: a step's tensors are not the next's."""
        self.host.forget()
        self._recent.clear()


def make_get_stat_info(original: Callable[..., Any], stat_info: type, fast: FastPath) -> Callable[..., Any]:
    """A `PytorchDataProcessor.get_stat_info` that summarizes plain CPU tensors in Rust;
    `stat_info` is msprobe's `TensorStatInfo`. (msprobe calls it from `_analyze_tensor`, which
    `make_analyze_tensor` replaces; this is the path of the records it leaves to msprobe.)"""
    low = fast.const.DUMP_PRECISION_LOW

    def get_stat_info(self: Any, data: Any, async_dump: bool = False, precision: Any = low) -> Any:
        path, _ = fast.path(data, self.config, precision)
        values = fast.host.of(data) if path == "host" else None
        if values is None:
            fast.counts["msprobe"] += 1
            return original(self, data, async_dump, precision)
        fast.counts["host"] += 1
        return stat_info(*values[:4])

    return get_stat_info


def make_analyze_tensor(original: Callable[..., Any], fast: FastPath) -> Callable[..., Any]:
    """A `PytorchDataProcessor._analyze_tensor` for `fast` mode.

    A CPU tensor's record is written with its statistics (and in md5 mode its CRC-32) in place,
    as msprobe's flush would rewrite it (type, dtype, shape, Max, Min, Mean, Norm,
    requires_grad; md5 through msprobe's CRC placeholder): no statistics placeholder, no 0-dim
    tensors, no CRC on a thread pool. A device tensor's record holds msprobe's placeholders,
    resolved on the commit thread (`_device_path`). Slicing, asynchronous dumps and the tensor
    task's comparison against a bench dump keep msprobe's path."""
    const = fast.const
    modes = (const.STATISTICS, const.MD5)

    def analyze_tensor(self: Any, tensor: Any, suffix: str) -> Any:
        config = self.config
        md5 = config.summary_mode == const.MD5
        if config.summary_mode not in modes:
            path, reason = "msprobe", f"summary_mode: {config.summary_mode}"
        elif config.async_dump:
            path, reason = "msprobe", "async_dump"
        elif config.slice_info:
            path, reason = "msprobe", "slice_info"
        elif md5 and config.task == const.TENSOR and self.data_writer.bench_dump_file_path is not None:
            path, reason = "msprobe", "a bench dump to compare against"
        else:
            path, reason = fast.path(tensor, config, config.precision)
        if path == "device":
            row, crc = fast.on_device(tensor, md5)
            fast.counts["device"] += 1
            return fast.device.record(self, tensor, row, crc)
        values = fast.host.of(tensor, crc32=md5) if path == "host" else None
        if values is None:
            if path == "msprobe" and isinstance(tensor, fast._plain):
                fast.warn_fallback(tensor, reason)
            return original(self, tensor, suffix)
        fast.counts["host"] += 1
        record = {
            "type": const.TENSOR_TYPE,
            "dtype": str(tensor.dtype),
            "shape": tensor.shape,
            const.MAX: values[0],
            const.MIN: values[1],
            const.MEAN: values[2],
            const.NORM: values[3],
            "requires_grad": tensor.requires_grad,
        }
        if md5:
            # Through msprobe's own CRC placeholder, already resolved: its flush appends `md5`
            # after whatever the processor adds later (the tensor task's `data_name`), as for
            # a CRC from its thread pool.
            crc: Future[str | None] = Future()
            crc.set_result(values[4])
            record[const.MD5_INDEX] = self.data_writer.append_crc32_to_buffer(crc)
        return record

    return analyze_tensor
