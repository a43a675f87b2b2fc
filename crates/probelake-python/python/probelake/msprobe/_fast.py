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

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .. import _internal

# Recent tensors and their statistics. Holding the tensor keeps its id from being reused
# while the entry lives; a small bound keeps the memory that holds alive small.
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


def make_get_stat_info(original: Callable[..., Any], stat_info: type, const: Any) -> Callable[..., Any]:
    """A `PytorchDataProcessor.get_stat_info` that summarizes CPU tensors in Rust; `stat_info`
    is msprobe's `TensorStatInfo`."""
    import torch

    plain = (torch.Tensor, torch.nn.Parameter)
    recent: OrderedDict[tuple[int, int], tuple[Any, tuple[Any, Any, Any, Any]]] = OrderedDict()
    strided = torch.strided

    def get_stat_info(self: Any, data: Any, async_dump: bool = False, precision: Any = const.DUMP_PRECISION_LOW) -> Any:
        dtype = str(data.dtype)
        if (
            dtype not in _DTYPES
            or not data.is_cpu
            or data.layout is not strided
            or precision == const.DUMP_PRECISION_HIGH
            or self.config.summary_mode == const.XOR_CHECKSUM
            or type(data) not in plain
            or data.is_meta
        ):
            return original(self, data, async_dump, precision)
        key = (id(data), data._version)
        hit = recent.get(key)
        if hit is not None and hit[0] is data:
            recent.move_to_end(key)
            values = hit[1]
        else:
            t = data.detach()
            if not t.is_contiguous():
                t = t.contiguous()
            numel = t.numel()
            if not numel:
                return original(self, data, async_dump, precision)
            values = _internal.tensor_summary(dtype, t.data_ptr(), numel * t.element_size(), t.dim() == 0)
            recent[key] = (data, values)
            if len(recent) > _RECENT:
                recent.popitem(last=False)
        return stat_info(*values)

    get_stat_info.probelake_recent = recent  # type: ignore[attr-defined]
    return get_stat_info


def forget(get_stat_info: Callable[..., Any]) -> None:
    """Drops the remembered tensors (at each commit: a step's tensors are not the next's)."""
    recent = getattr(get_stat_info, "probelake_recent", None)
    if recent is not None:
        recent.clear()
