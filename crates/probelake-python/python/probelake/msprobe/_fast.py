"""`fast` mode: probelake computes msprobe's statistics, once per tensor version.

msprobe's `get_stat_info` runs four torch reductions per tensor and leaves four 0-dim tensors
that each cost an `.item()` when the dump is flushed; half the tensors it reduces in a step
were reduced already (an op's output is the next op's input). Here a CPU tensor of a dtype
probelake summarizes is read once by `_internal.tensor_summary` (Rust, no GIL held), the
values are plain Python numbers, and a tensor seen again unchanged (same object, same
`_version`) reuses them. Anything else (device tensors, complex, float8, msprobe's xor
checksum, high precision) goes to msprobe's own code.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .. import _internal

# Max, Min, Mean, Norm and the CRC-32 (None unless asked for).
Summary = tuple[Any, Any, Any, Any, "str | None"]

# How many recent tensors' statistics are remembered.
_RECENT = 256

_DTYPES = {
    "torch.float32",
    "torch.float16",
    "torch.bfloat16",
    "torch.float64",
    "torch.int8",
    "torch.int16",
    "torch.int32",
    "torch.int64",
    "torch.uint8",
    "torch.bool",
}


class Statistics:
    """msprobe's Max, Min, Mean and Norm of plain CPU tensors, computed by probelake, with the
    recent tensors remembered (`forget()` at each commit)."""

    def __init__(self, const: Any) -> None:
        import torch

        self._functorch = torch._C._functorch
        self._plain = (torch.Tensor, torch.nn.Parameter)
        self._strided = torch.strided
        self.const = const
        self._recent: OrderedDict[tuple[int, int], tuple[weakref.ref[Any], Summary]] = OrderedDict()

    def takes(self, data: Any, config: Any, precision: Any) -> bool:
        """Whether `data` is a tensor probelake summarizes exactly as msprobe's rules say."""
        return (
            type(data) in self._plain
            and str(data.dtype) in _DTYPES
            and data.is_cpu
            and data.layout is self._strided
            and not data.is_meta
            and precision != self.const.DUMP_PRECISION_HIGH
            and config.summary_mode != self.const.XOR_CHECKSUM
            and not self._functorch.is_batchedtensor(data)
            and not self._functorch.is_gradtrackingtensor(data)
        )

    def of(self, data: Any, crc32: bool = False) -> Summary | None:
        """Max, Min, Mean, Norm (and with `crc32`, msprobe's md5 field) of a tensor `takes`
        accepted; None for an empty one."""
        key = (id(data), data._version)
        hit = self._recent.get(key)
        if hit is not None and hit[0]() is data and (hit[1][4] is not None or not crc32):
            self._recent.move_to_end(key)
            return hit[1]
        t = data.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        numel = t.numel()
        if not numel:
            return None
        values = _internal.tensor_summary(str(t.dtype), t.data_ptr(), numel * t.element_size(), t.dim() == 0, crc32)
        # A weak reference: holding the tensors would keep a step's activations alive longer
        # (and make torch allocate fresh memory for the next ones); a dead one never matches,
        # so a new tensor that reuses its id is not mistaken for it.
        self._recent[key] = (weakref.ref(data), values)
        if len(self._recent) > _RECENT:
            self._recent.popitem(last=False)
        return values

    def forget(self) -> None:
        """Drops the remembered tensors: a step's tensors are not the next's."""
        self._recent.clear()


def make_get_stat_info(original: Callable[..., Any], stat_info: type, stats: Statistics) -> Callable[..., Any]:
    """A `PytorchDataProcessor.get_stat_info` that summarizes plain CPU tensors in Rust;
    `stat_info` is msprobe's `TensorStatInfo`."""
    low = stats.const.DUMP_PRECISION_LOW

    def get_stat_info(self: Any, data: Any, async_dump: bool = False, precision: Any = low) -> Any:
        values = stats.of(data) if stats.takes(data, self.config, precision) else None
        if values is None:
            return original(self, data, async_dump, precision)
        return stat_info(*values[:4])

    return get_stat_info


def make_analyze_tensor(original: Callable[..., Any], stats: Statistics) -> Callable[..., Any]:
    """A `PytorchDataProcessor._analyze_tensor` that writes a plain CPU tensor's record with its
    statistics (and in md5 mode its CRC-32) in place, as msprobe's flush would rewrite it (type,
    dtype, shape, Max, Min, Mean, Norm, requires_grad; md5 through msprobe's CRC placeholder):
    no statistics placeholder, no 0-dim tensors, no CRC on a thread pool. Slicing, asynchronous dumps and the
    tensor task's comparison against a bench dump keep msprobe's path."""
    const = stats.const
    modes = (const.STATISTICS, const.MD5)

    def analyze_tensor(self: Any, tensor: Any, suffix: str) -> Any:
        config = self.config
        md5 = config.summary_mode == const.MD5
        if (
            config.summary_mode not in modes
            or config.async_dump
            or config.slice_info
            or (md5 and config.task == const.TENSOR and self.data_writer.bench_dump_file_path is not None)
            or not stats.takes(tensor, config, config.precision)
        ):
            return original(self, tensor, suffix)
        values = stats.of(tensor, crc32=md5)
        if values is None:
            return original(self, tensor, suffix)
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
