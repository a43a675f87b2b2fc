#!/usr/bin/env python3
"""What msprobe adds to a training step, writing its JSON or routed into probelake.

Runs tests/python/msprobe_job.py (a small transformer-like model on CPU, forward, backward and
an optimizer step under msprobe's PrecisionDebugger, statistics task) in a fresh process per
run, torch on one thread, in four modes:

- `baseline`: no msprobe;
- `msprobe`: msprobe writing dump.json, stack.json and construct.json;
- `exact`: `probelake.msprobe.enable(mode="exact")`, msprobe computes every value;
- `fast`: `probelake.msprobe.enable(mode="fast")`, probelake computes the statistics.

Each run records every step's wall and CPU time; the first WARMUP steps are dropped and the
median of the rest is the run's figure. Runs go in ABBA order (baseline, msprobe, exact,
fast, then the reverse) ROUNDS times, and a mode's figure is the median over its runs. Prints,
per level, each mode's step time and its added time (over baseline) as a ratio of msprobe's.
With `--layers` several values, also how the step grows with the number of entries (msprobe
rewrites its files whole at every flush). Asserts nothing about speed.

    python benches/side_by_side/training_overhead.py [--levels L1 mix] [--steps 20] [--rounds 2]
        [--layers 2 16] [--width 256] [--tokens 256]

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


def run(
    mode: str, level: str, layers: int, steps: int, folder: Path
) -> tuple[float, float, int]:
    """One fresh process; (median wall, median CPU) seconds per step and the entries of a step."""
    dump, lake, times = folder / "dump", folder / "lake", folder / "times.json"
    args = [
        sys.executable,
        str(JOB),
        str(dump),
        "--level",
        level,
        "--layers",
        str(layers),
    ]
    args += [*SHAPE, "--steps", str(steps), "--times", str(times)]
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
    return (
        statistics.median(w for w, _ in per_step),
        statistics.median(c for _, c in per_step),
        entries,
    )


def measure(
    level: str, layers: int, steps: int, rounds: int
) -> dict[str, tuple[float, float, int]]:
    runs: dict[str, list[tuple[float, float, int]]] = {m: [] for m in MODES}
    order = [*MODES, *reversed(MODES)] * rounds
    for i, mode in enumerate(order):
        with tempfile.TemporaryDirectory() as folder:
            runs[mode].append(run(mode, level, layers, steps, Path(folder)))
        print(
            f"  {level} layers={layers} run {i + 1}/{len(order)} {mode}",
            file=sys.stderr,
        )
    return {
        m: (
            statistics.median(r[0] for r in rs),
            statistics.median(r[1] for r in rs),
            max(r[2] for r in rs),
        )
        for m, rs in runs.items()
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--levels", nargs="+", default=["L1", "mix"])
    p.add_argument("--layers", nargs="+", type=int, default=[2])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--width", type=int, default=256, help="the model's hidden size")
    p.add_argument(
        "--tokens", type=int, default=256, help="tokens per sequence (2 a batch)"
    )
    args = p.parse_args()
    SHAPE.extend(["--width", str(args.width), "--tokens", str(args.tokens)])
    print(
        "| level | layers | entries/step | mode | step wall ms | step CPU ms | added wall, × msprobe's | added CPU, × msprobe's |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for level in args.levels:
        for layers in args.layers:
            figures = measure(level, layers, args.steps, args.rounds)
            base_wall, base_cpu, _ = figures["baseline"]
            ms_wall, ms_cpu, _ = figures["msprobe"]
            entries = figures["msprobe"][2]
            for mode in MODES:
                wall, cpu, _ = figures[mode]
                if mode == "baseline":
                    added = "—"
                    added_cpu = "—"
                else:
                    added = f"{(wall - base_wall) / (ms_wall - base_wall):.2f} ({wall / base_wall:.2f}× baseline)"
                    added_cpu = f"{(cpu - base_cpu) / (ms_cpu - base_cpu):.2f}"
                print(
                    f"| {level} | {layers} | {entries} | {mode} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} "
                    f"| {added} | {added_cpu} |"
                )


if __name__ == "__main__":
    main()
