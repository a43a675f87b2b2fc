"""A small training job under msprobe's PrecisionDebugger, run by the msprobe integration tests
and benchmarks in a fresh process each: msprobe's hooks are global to a process.

The model covers what msprobe records: module and API calls forward and backward, keyword
arguments, a module returning a namedtuple, and parameter gradients. Everything is seeded and
torch runs on one CPU thread, so two runs compute the same values.

    python msprobe_job.py DUMP_PATH --task statistics --level L1 [--summary-mode md5]
        [--layout plain|verl] [--steps 2] [--lake URI] [--fail-stage NAME] [--kill-stage NAME] [--kill-delay-ms MS]
        [--mode fast --device-path always] [--inplace] [--count-syncs FILE]

`--lake` routes the dumps into a dataset with `probelake.msprobe.enable` (left out: msprobe
writes its own files, or `PROBELAKE_MSPROBE_LAKE` routes them). `--fail-stage` raises inside
that stage (verl resets msprobe in a `finally`); `--kill-stage` ends the process with SIGKILL
in the middle of that stage. `--inplace` changes a hooked op's output in place right after the
hook ran; `--count-syncs` counts, per step, the host syncs (`aten._local_scalar_dense`, what
`.item()` runs) the training thread makes, with a `TorchDispatchMode`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

STAGES = ("actor_compute_log_prob", "ref_compute_log_prob", "actor_update")


class Heads(NamedTuple):
    logits: torch.Tensor
    hidden: torch.Tensor


class Block(nn.Module):
    def __init__(self, d: int, inplace: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)
        self.inplace = inplace

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        h = F.gelu(self.up(self.norm(x)))
        if self.inplace:
            # The hooked linear's output, changed right after its hook recorded it.
            out = self.down(h)
            return x + out.mul_(scale)
        return x + self.down(h) * scale


class Head(nn.Module):
    def __init__(self, d: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> Heads:
        return Heads(logits=self.proj(x), hidden=x)


class TinyModel(nn.Module):
    def __init__(
        self, d: int = 16, vocab: int = 32, layers: int = 2, inplace: bool = False
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, inplace) for _ in range(layers))
        self.head = Head(d, vocab)

    def forward(self, ids: torch.Tensor) -> Heads:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, scale=0.5)
        return self.head(x)


class SyncCounter(TorchDispatchMode):
    """Counts the host syncs of the thread that enters it: `aten._local_scalar_dense`, which
    `.item()`, `.tolist()` and Python's `float(t)` run (dispatch modes are per thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten._local_scalar_dense.default:
            self.syncs += 1
        return func(*args, **(kwargs or {}))


def config(args: argparse.Namespace, dump_path: str, folder: str) -> str:
    body = {
        "scope": [],
        "list": [],
        "data_mode": ["all"],
        "summary_mode": args.summary_mode,
    }
    cfg = {
        "task": args.task,
        "dump_path": dump_path,
        "rank": [],
        "step": [],
        "level": args.level,
        "async_dump": False,
        args.task: body,
    }
    path = os.path.join(folder, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dump_path")
    p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
    p.add_argument(
        "--summary-mode", default="statistics", choices=["statistics", "md5"]
    )
    p.add_argument("--level", default="L1", choices=["L0", "L1", "mix"])
    p.add_argument("--layout", default="plain", choices=["plain", "verl"])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=16)
    p.add_argument(
        "--tokens",
        type=int,
        default=8,
        help="tokens per sequence (2 sequences a batch)",
    )
    p.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "float16"]
    )
    p.add_argument("--lake")
    p.add_argument("--mode", default="exact", choices=["exact", "fast"])
    p.add_argument("--device-path", default="auto", choices=["auto", "always"])
    p.add_argument("--staging-bytes", type=int, default=256 << 20)
    p.add_argument("--inplace", action="store_true")
    p.add_argument(
        "--count-syncs",
        help="write each step's host syncs on the training thread to this JSON file",
    )
    p.add_argument(
        "--device", default="cpu", help="where the model runs (cpu, cuda, npu)"
    )
    p.add_argument("--fallback", default="raise", choices=["raise", "json"])
    p.add_argument(
        "--break-lake",
        action="store_true",
        help="after the first step, make the dataset a file",
    )
    p.add_argument("--fail-stage")
    p.add_argument("--kill-stage")
    p.add_argument(
        "--kill-delay-ms",
        type=float,
        help="with --kill-stage: kill this long after the stage before ended, its commit "
        "possibly still under way, instead of waiting for that commit",
    )
    p.add_argument(
        "--no-debugger", action="store_true", help="the baseline: no msprobe at all"
    )
    p.add_argument(
        "--times", help="write each step's wall and CPU seconds to this JSON file"
    )
    args = p.parse_args()

    if args.device.startswith("npu"):
        import torch_npu  # noqa: F401 - registers the NPU device with torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    folder = tempfile.mkdtemp()
    # A process group of one makes msprobe name the folder rank0 rather than proc{pid}: the
    # pid is part of dump.json's dump_data_dir, and two runs must write the same bytes.
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{folder}/group", rank=0, world_size=1
    )
    if args.lake:
        import probelake.msprobe

        probelake.msprobe.enable(
            args.lake,
            mode=args.mode,
            fallback=args.fallback,
            device_path=args.device_path,
            staging_bytes=args.staging_bytes,
        )
    from msprobe.pytorch import PrecisionDebugger

    dtype = getattr(torch, args.dtype)
    device = torch.device(args.device)
    model = TinyModel(d=args.width, layers=args.layers, inplace=args.inplace)
    model = model.to(device=device, dtype=dtype)
    ref = TinyModel(d=args.width, layers=args.layers, inplace=args.inplace)
    ref = ref.to(device=device, dtype=dtype)
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    dbg = (
        None
        if args.no_debugger
        else PrecisionDebugger(config_path=config(args, args.dump_path, folder))
    )

    # msprobe computes md5 (CRC32) on a thread pool while the job runs on: the optimizer's
    # in-place updates race with it, and two md5 runs differ. They run outside the dump there.
    step_outside = args.summary_mode == "md5"

    def run_stage(stage: str, ids: torch.Tensor) -> None:
        if stage == args.kill_stage:
            # Commits run behind the job: kill once the stage before is in (a kill inside
            # that window of milliseconds loses that stage whole, never half of it).
            import probelake.msprobe

            route = probelake.msprobe.enabled()
            if args.kill_delay_ms is not None:
                time.sleep(args.kill_delay_ms / 1000)
                os.kill(os.getpid(), signal.SIGKILL)
            deadline = time.monotonic() + 60
            while (
                route is not None
                and not route.committed
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        if stage == "actor_update":
            out = model(ids)
            loss = F.cross_entropy(
                out.logits.reshape(-1, out.logits.shape[-1]), ids.reshape(-1)
            )
            loss.backward()
            if not step_outside:
                opt.step()
                opt.zero_grad()
        else:
            with torch.no_grad():
                net = model if stage.startswith("actor") else ref
                torch.log_softmax(net(ids).logits, dim=-1)
        if stage == args.fail_stage:
            raise RuntimeError(f"stage {stage} failed")

    times: list[tuple[float, float]] = []
    syncs: list[int] = []
    for step in range(args.steps):
        ids = torch.randint(0, 32, (2, args.tokens), generator=gen).to(device)
        counter = SyncCounter() if args.count_syncs else contextlib.nullcontext()
        wall, cpu = time.perf_counter(), time.process_time()
        with counter:
            if dbg is None:
                run_stage("actor_update", ids)
                if step_outside:
                    opt.step()
                    opt.zero_grad()
            elif args.layout == "plain":
                dbg.start(model=model)
                run_stage("actor_update", ids)
                dbg.stop()
                if step_outside:
                    opt.step()
                    opt.zero_grad()
                dbg.step()
            else:
                # As verl's precision_debugger profiler drives msprobe: one debugger, a
                # dump_path per global step and stage, reset_status() in a finally.
                for stage in STAGES:
                    dbg.service.config.dump_path = os.path.join(
                        args.dump_path, f"step_{step}", stage
                    )
                    dbg.start(model=model if stage != "ref_compute_log_prob" else ref)
                    try:
                        run_stage(stage, ids)
                    finally:
                        dbg.stop()
                        dbg.service.reset_status()
        if device.type != "cpu":
            # The step's device work is part of its time (outside the sync count).
            torch.accelerator.synchronize()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
        if isinstance(counter, SyncCounter):
            syncs.append(counter.syncs)
        if args.break_lake and step == 0:
            # The store goes away mid-run, once step 0 is in: the dataset's folder becomes a file.
            import probelake.msprobe

            probelake.msprobe.flush()
            shutil.rmtree(args.lake)
            with open(args.lake, "w") as f:
                f.write("gone")
    if args.times:
        with open(args.times, "w") as f:
            json.dump(times, f)
    if args.count_syncs:
        import probelake.msprobe

        route = probelake.msprobe.enabled() if args.lake else None
        probelake.msprobe.flush()
        staging = route.fast.device.staging if route and route.fast else None
        report = {
            "syncs": syncs,
            "counts": route.counts if route else None,
            "staging": None
            if staging is None
            else {
                "budget": staging.budget,
                "peak": staging.peak,
                "waits": staging.waits,
            },
        }
        with open(args.count_syncs, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    sys.exit(main())
