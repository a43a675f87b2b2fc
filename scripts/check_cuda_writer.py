#!/usr/bin/env python3
"""Checks the probelake writer's device path on a CUDA device.

Records CUDA tensors (float32, bfloat16, float16, a non-contiguous view, a 64 MiB float32 one)
and changes each in place on the same stream right after `record` (`x.mul_(-3).relu_()`). The
recorded statistics must be those of a CPU copy taken before `record`: max and min exactly; mean
and norm within a relative 1e-6 for float32 and within two units in the last place of the dtype
for bfloat16 (2⁻⁷) and float16 (2⁻¹⁰), as the writer rounds them to the tensor's dtype, or
equal to what torch's `mean` and `norm` give for that copy on the tensor's device (the device
path computes them with those ops, as msprobe does; on CPU torch's float32 `norm` of a large
tensor is itself further than 1e-6 from the exact value). With
`task="tensor"` the stored elements must equal that copy byte for byte. In task `statistics` the
statistics of a CUDA tensor are computed on the device and only they are copied back; in task
`tensor` its bytes are copied non-blocking into pinned memory. Prints the time `record` held
the calling thread next to a synchronous `tensor.cpu()` of the same tensor.

    python scripts/check_cuda_writer.py                 # exits 0 with a notice without CUDA
    python scripts/check_cuda_writer.py --device cpu    # the same checks on CPU tensors
    python scripts/check_cuda_writer.py --device cpu --device-path always   # CPU tensors down the device path

Exits 1 on any mismatch, printing what differed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Literal

import probelake
import pyarrow.dataset as ds
import torch

MiB = 1 << 20
Task = Literal["statistics", "tensor"]
TOLERANCE = {torch.float32: 1e-6, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


def cases(device: str) -> dict[str, Callable[[], torch.Tensor]]:
    """Tensors of positive values (mean ≈ 1, so relative errors mean something), made on `device`."""

    def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (torch.rand(*shape, device=device) + 0.5).to(dtype)

    return {
        "fp32": lambda: rand(1024, 1024),
        "bf16": lambda: rand(1024, 1024, dtype=torch.bfloat16),
        "fp16": lambda: rand(1024, 1024, dtype=torch.float16),
        "noncontiguous": lambda: rand(2048, 1024)[:, ::2].t(),
        "large_64mib": lambda: rand(64 * MiB // 4),
    }


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def record_round(
    lake: probelake.Lake, step: int, device: str, task: Task, always: bool
) -> tuple[dict, dict, dict, list[str]]:
    """Records every case in unit (step, "check", 0); returns the CPU copies taken before
    `record`, torch's mean and norm of each tensor then (msprobe's values), the caller-thread
    times of `record` and of a synchronous copy, and the case order."""
    before: dict[str, torch.Tensor] = {}
    torch_values: dict[str, dict[str, float]] = {}
    times: dict[str, tuple[float, float]] = {}
    with lake.unit(step, "check", 0, task=task) as u:
        u._writer._set_device_path_always(always)
        for name, make in cases(device).items():
            x = make()
            before[name] = x.cpu().clone()  # synchronous, before record
            torch_values[name] = {"mean": torch.mean(x).item(), "norm": torch.norm(x).item()}
            sync(device)
            start = time.perf_counter()
            u.record(f"Functional.{name}.0.forward", output=[x])
            held = time.perf_counter() - start
            x.mul_(-3).relu_()  # at once, same stream: must not reach the recorded values
            sync(device)
            start = time.perf_counter()
            x.cpu() if device == "cuda" else x.clone()
            times[name] = (held, time.perf_counter() - start)
    return before, torch_values, times, list(before)


def check_round(
    lake: probelake.Lake,
    step: int,
    before: dict[str, torch.Tensor],
    torch_values: dict[str, dict[str, float]],
    task: Task,
) -> list[str]:
    errors: list[str] = []
    cols = ["item", "dtype", "shape", "max", "min", "mean", "norm"]
    stats = lake.to_pandas("dump", cols, filter=ds.field("step") == step).set_index("item")
    payloads = {}
    if task == "tensor":
        table = lake.to_arrow("tensor", ["item", "data"], filter=ds.field("step") == step)
        payloads = dict(zip(table["item"].to_pylist(), table["data"].to_pylist(), strict=True))
    for name, x in before.items():
        item = f"Functional.{name}.0.forward.output.0"
        if item not in stats.index:
            errors.append(f"step {step} {name}: no row {item}")
            continue
        row = stats.loc[item]
        x64 = x.double()
        want = {stat: getattr(x64, stat)().item() for stat in ("max", "min", "mean", "norm")}
        rel = TOLERANCE[x.dtype]
        as_torch = torch_values[name]
        for stat, value in want.items():
            got = float(row[stat])
            ok = (
                got == value
                if stat in ("max", "min")
                else abs(got - value) <= rel * abs(value) or got == as_torch[stat]
            )
            if not ok:
                errors.append(f"step {step} {name}: {stat} recorded {got!r}, before record {value!r} (rel {rel:g})")
        if list(row["shape"]) != list(x.shape):
            errors.append(f"step {step} {name}: shape recorded {list(row['shape'])}, tensor {list(x.shape)}")
        if task == "tensor":
            expected = x.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            data = payloads.get(item)
            if data != expected:
                pairs = enumerate(zip(data or b"", expected, strict=False))
                where = next((i for i, (a, b) in pairs if a != b), None)
                size = None if data is None else len(data)
                errors.append(f"step {step} {name}: payload ({size} bytes) differs from the tensor before record "
                              f"({len(expected)} bytes), first at byte {where}")  # fmt: skip
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--device-path", choices=["auto", "always"], default="auto")
    args = parser.parse_args()
    device: str = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("check_cuda_writer: torch.cuda.is_available() is False: nothing checked (skipped)")
        return 0
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"probelake {probelake.__version__}, torch {torch.__version__}, device {where}")
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="check-writer-") as root:
        lake = probelake.open(root)
        # Step 0 warms up (pinned-memory allocations, writer threads); step 1 keeps payloads too.
        rounds: tuple[tuple[int, Task], ...] = ((0, "statistics"), (1, "tensor"))
        for step, task in rounds:
            before, torch_values, times, order = record_round(lake, step, device, task, args.device_path == "always")
            errors += check_round(lake, step, before, torch_values, task)
            copy = "x.cpu()" if device == "cuda" else "x.clone()"
            print(f"step {step} (task={task}): caller-thread time of record vs a synchronous {copy}")
            for name in order:
                held, copied = times[name]
                size = before[name].numel() * before[name].element_size() / MiB
                print(f"  {name:14} {size:7.2f} MiB  record {held * 1e6:9.1f} µs   {copy} {copied * 1e6:9.1f} µs")
    for error in errors:
        print("MISMATCH", error)
    print("check_cuda_writer:", "FAILED" if errors else "every statistic and payload as before record")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
