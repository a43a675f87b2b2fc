#!/usr/bin/env python3
"""What msprobe adds to a training step, writing its JSON or routed into probelake.

Runs tests/python/msprobe_job.py (a transformer-like model, forward, backward and an optimizer
step under msprobe's PrecisionDebugger, statistics task) in a fresh process per run, torch on
one thread, on `--device` (cpu, cuda or npu), in four modes:

- `baseline`: no msprobe;
- `msprobe`: msprobe writing dump.json, stack.json and construct.json;
- `exact`: `probelake.msprobe.enable(mode="exact")`, msprobe computes every value;
- `fast`: `probelake.msprobe.enable(mode="fast")`, probelake computes the statistics (of
  device tensors on their device, with no host sync on the training thread).

Each run records every step's wall and CPU time; the first WARMUP steps are dropped and the
median of the rest is the run's figure. Runs go in ABBA order (baseline, msprobe, exact,
fast, then the reverse) ROUNDS times, and a mode's figure is the median over its runs. Prints,
per level and summary mode (`statistics`, `md5`), each mode's step time, its added time (over
baseline) as a ratio of msprobe's, and the host syncs (`aten._local_scalar_dense`) the
training thread makes per step, counted with a `TorchDispatchMode`. On an accelerator the step
time includes waiting for the device at the end of each step. With `--layers` several values,
also how the step grows with the number of entries (msprobe rewrites its files whole at every
flush). Asserts nothing about speed.

    python benches/side_by_side/training_overhead.py [--levels L1 mix] [--summary-modes statistics md5]
        [--steps 20] [--rounds 2] [--layers 2 16] [--width 256] [--tokens 256]
    python benches/side_by_side/training_overhead.py --device cuda   # 12 layers, width 1024, bf16

The package's native module should be a release build (`pip install ./crates/probelake-python`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = Path(__file__).resolve().parents[2] / "tests" / "python" / "msprobe_job.py"
MODES = ("baseline", "msprobe", "exact", "fast")
WARMUP = 3
# --width and --tokens for every job.
SHAPE: list[str] = []


Figures = tuple[float, float, int, float]


def run(
    mode: str, level: str, summary: str, layers: int, steps: int, folder: Path
) -> Figures:
    """One fresh process; (median wall, median CPU) seconds per step, the entries of a step,
    and the median host syncs per step on the training thread."""
    dump, lake, times = folder / "dump", folder / "lake", folder / "times.json"
    counted = folder / "syncs.json"
    args = [
        sys.executable,
        str(JOB),
        str(dump),
        "--level",
        level,
        "--summary-mode",
        summary,
        "--layers",
        str(layers),
    ]
    args += [*SHAPE, "--steps", str(steps), "--times", str(times)]
    args += ["--count-syncs", str(counted)]
    if mode == "baseline":
        args.append("--no-debugger")
    elif mode in ("exact", "fast"):
        args += ["--lake", str(lake), "--mode", mode]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PROBELAKE_MSPROBE_LAKE", None)
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {level}: {done.stderr[-2000:]}")
    per_step = json.loads(times.read_text())[WARMUP:]
    entries = 0
    for path in dump.rglob("dump.json") if dump.exists() else []:
        entries = max(entries, len(json.loads(path.read_text()).get("data", {})))
    if lake.exists():
        import probelake

        entries = max((u.entries for u in probelake.open(lake).units()), default=0)
    syncs = json.loads(counted.read_text())["syncs"][WARMUP:]
    return (
        statistics.median(w for w, _ in per_step),
        statistics.median(c for _, c in per_step),
        entries,
        statistics.median(syncs),
    )


def measure(
    level: str, summary: str, layers: int, steps: int, rounds: int
) -> dict[str, Figures]:
    runs: dict[str, list[Figures]] = {m: [] for m in MODES}
    order = [*MODES, *reversed(MODES)] * rounds
    for i, mode in enumerate(order):
        with tempfile.TemporaryDirectory() as folder:
            runs[mode].append(run(mode, level, summary, layers, steps, Path(folder)))
        print(
            f"  {level} {summary} layers={layers} run {i + 1}/{len(order)} {mode}",
            file=sys.stderr,
        )
    return {
        m: (
            statistics.median(r[0] for r in rs),
            statistics.median(r[1] for r in rs),
            max(r[2] for r in rs),
            statistics.median(r[3] for r in rs),
        )
        for m, rs in runs.items()
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or npu")
    p.add_argument("--levels", nargs="+", default=["L1", "mix"])
    p.add_argument(
        "--summary-modes",
        nargs="+",
        default=None,
        help="statistics, md5 (default: both on a device)",
    )
    p.add_argument(
        "--layers", nargs="+", type=int, default=None, help="default 2 (12 on a device)"
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--width",
        type=int,
        default=None,
        help="the model's hidden size (256; 1024 on a device)",
    )
    p.add_argument(
        "--tokens", type=int, default=256, help="tokens per sequence (2 a batch)"
    )
    p.add_argument("--dtype", default=None, help="float32 (bfloat16 on a device)")
    args = p.parse_args()
    on_device = args.device != "cpu"
    layers = args.layers or ([12] if on_device else [2])
    width = args.width or (1024 if on_device else 256)
    dtype = args.dtype or ("bfloat16" if on_device else "float32")
    summaries = args.summary_modes or (
        ["statistics", "md5"] if on_device else ["statistics"]
    )
    SHAPE.extend(["--width", str(width), "--tokens", str(args.tokens)])
    SHAPE.extend(["--dtype", dtype, "--device", args.device])
    print(
        f"device {args.device}, width {width}, {dtype}, {args.tokens} tokens x 2, {args.steps} steps"
    )
    print(
        "| level | summary | layers | entries/step | mode | step wall ms | step CPU ms "
        "| added wall, × msprobe's | added CPU, × msprobe's | host syncs/step |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for level in args.levels:
        for summary in summaries:
            for n in layers:
                figures = measure(level, summary, n, args.steps, args.rounds)
                base_wall, base_cpu, _, _ = figures["baseline"]
                ms_wall, ms_cpu, entries, _ = figures["msprobe"]
                for mode in MODES:
                    wall, cpu, _, syncs = figures[mode]
                    if mode == "baseline":
                        added = added_cpu = "—"
                    else:
                        added = f"{(wall - base_wall) / (ms_wall - base_wall):.2f} ({wall / base_wall:.2f}× baseline)"
                        added_cpu = f"{(cpu - base_cpu) / (ms_cpu - base_cpu):.2f}"
                    print(
                        f"| {level} | {summary} | {n} | {entries} | {mode} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} "
                        f"| {added} | {added_cpu} | {syncs:g} |"
                    )


if __name__ == "__main__":
    main()
