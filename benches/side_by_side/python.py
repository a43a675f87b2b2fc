#!/usr/bin/env python3
"""The probelake Python package side by side with what a Python user would use instead.

1. `Unit.record()` on the calling thread, p50/p99 over CALLS calls after a warm-up, while the
   writer's threads are busy with the calls before it, for a 4 KiB and a 4 MiB float32 CPU
   tensor, interleaved call by call with `torch.clone` of the same tensor (the copy that
   `record` makes so that the caller may change the tensor right after).
2. Into pandas, next to DuckDB's `duckdb.sql(...).df()` on the same files: `SELECT * FROM dump`
   of the ~100 MB synthesized tree (`probelake synth --layers 64 --steps 1 --ranks 23`,
   imported), through `probelake.sql(...).to_pandas()` and `lake.to_pandas()`, and README's
   cross-run join (against a second run made with `--bug`) through `probelake.sql`. Medians of
   RUNS interleaved runs.

Prints markdown rows with ratios; asserts nothing about speed. The `probelake` command comes
from $PROBELAKE_BIN or PATH; the package and torch from the running Python.

    python benches/side_by_side/python.py [--runs 5] [--calls 10000] [--only record|pandas]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import probelake
import torch

# README's cross-run comparison, with a total order so that both engines return the same rows.
JOIN = """SELECT t.item, t.norm, g.norm AS golden_norm, rel_err(t.norm, g.norm) AS rel
FROM {target} t JOIN {golden} g USING (step, stage, rank, item)
WHERE t.section = 'output' ORDER BY rel DESC NULLS LAST, t.item, t.stage LIMIT 10"""
# probelake's `rel_err` for DuckDB (docs/sql.md; as in first_divergence.sh).
REL_ERR = """CREATE MACRO rel_err(t, g) AS CASE
    WHEN t = g OR (isnan(t) AND isnan(g)) THEN 0.0
    WHEN t IS NULL OR g IS NULL OR NOT isfinite(t) OR NOT isfinite(g) OR g = 0 THEN NULL
    ELSE abs((t - g) / g) END"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_record(calls: int, warmup: int) -> None:
    print("| `record()` on the caller thread | p50 | p99 | `torch.clone`, same run: p50 | p99 | p99 ratio |")
    print("|---|---|---|---|---|---|")
    for label, numel in (("4 KiB", 1024), ("4 MiB", 1 << 20)):
        x = torch.rand(numel)
        with tempfile.TemporaryDirectory(prefix="bench-record-") as root:
            lake = probelake.open(root)
            rec: list[float] = []
            clone: list[float] = []
            with lake.unit(0, "bench", 0) as u:
                for i in range(warmup + calls):
                    t0 = time.perf_counter_ns()
                    u.record(f"Functional.relu.{i}.forward", output=[x])
                    t1 = time.perf_counter_ns()
                    y = torch.clone(x)
                    t2 = time.perf_counter_ns()
                    del y
                    if i >= warmup:
                        rec.append(float(t1 - t0))
                        clone.append(float(t2 - t1))
                m = u.metrics()
            r50, r99, c50, c99 = (percentile(v, q) for v in (rec, clone) for q in (0.5, 0.99))
            print(
                f"| {label} float32 CPU tensor, {calls:,} calls | {r50 / 1e3:.2f} µs "
                f"| **{r99 / 1e3:.2f} µs** | {c50 / 1e3:.2f} µs | {c99 / 1e3:.2f} µs | **{r99 / c99:.2f}x** |"
            )
            print(
                f"<!-- writer's own record p50 {m['record_p50'] * 1e6:.2f} µs, p99 {m['record_p99'] * 1e6:.2f} µs,"
                f" waits {m['waits']:.0f}, queue at the end {m['queue_depth']:.0f} -->"
            )


def timed(runs: int, cases: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Runs the cases interleaved `runs` times; the median seconds and the last result of each."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    last: dict[str, Any] = {}
    for _ in range(runs):
        for name, run in cases.items():
            start = time.perf_counter()
            last[name] = run()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t), last[name]) for name, t in times.items()}


def duckdb_df(query: str, setup: str = "") -> Any:
    con = duckdb.connect()
    if setup:
        con.execute(setup)
    try:
        return con.sql(query).df()
    finally:
        con.close()


def make_runs(data: Path, cli: str) -> tuple[Path, Path]:
    lakes = data / "lake"
    for name, extra in (("base", []), ("bug", ["--bug"])):
        if not (lakes / name / "_probelake").is_dir():
            tree = data / "msprobe" / name
            shutil.rmtree(tree, ignore_errors=True)
            args = ["--layers", "64", "--steps", "1", "--ranks", "23", "-q", *extra]
            subprocess.run([cli, "synth", str(tree), *args], check=True)
            subprocess.run([cli, "import", str(tree), str(lakes / name), "-q"], check=True)
    return lakes / "base", lakes / "bug"


def bench_pandas(runs: int, data: Path, cli: str) -> None:
    base, bug = make_runs(data, cli)
    size = sum(f.stat().st_size for f in (data / "msprobe" / "base").rglob("dump.json"))
    files = {r: f"read_parquet('{r}/dump/**/*.parquet', hive_partitioning = true)" for r in (base, bug)}
    lake = probelake.open(base)
    select = timed(
        runs,
        {
            "sql": lambda: probelake.sql("SELECT * FROM dump", base=base).to_pandas(),
            "lake": lambda: lake.to_pandas("dump"),
            "duckdb": lambda: duckdb_df(f"SELECT * FROM {files[base]}"),
        },
    )
    join = timed(
        runs,
        {
            "sql": lambda: probelake.sql(
                JOIN.format(target="bug.dump", golden="base.dump"), bug=bug, base=base
            ).to_pandas(),
            "duckdb": lambda: duckdb_df(JOIN.format(target=files[bug], golden=files[base]), REL_ERR),
        },
    )
    rows = {name: len(df) for name, (_, df) in select.items()}
    assert len(set(rows.values())) == 1, f"SELECT * row counts differ: {rows}"
    same = join["sql"][1]["item"].tolist() == join["duckdb"][1]["item"].tolist()
    duck, duck_join = select["duckdb"][0], join["duckdb"][0]
    print(f"\n| into pandas ({runs} runs, medians) | probelake | DuckDB `.df()`, same run | ratio |")
    print("|---|---|---|---|")
    what = f"{size / 1e6:.0f} MB of dump.json, {rows['duckdb']:,} rows"
    for name, call in (("sql", "`probelake.sql(...).to_pandas()`"), ("lake", "`lake.to_pandas()`")):
        t = select[name][0]
        print(f"| `SELECT * FROM dump`, {what}, {call} | {t:.3f} s | {duck:.3f} s | **{t / duck:.2f}x** |")
    t = join["sql"][0]
    note = "" if same else " (top 10 items differ!)"
    print(f"| README's join, 2 runs, `probelake.sql(...).to_pandas()`{note} | {t:.3f} s | {duck_join:.3f} s "
          f"| **{t / duck_join:.2f}x** |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per median of the pandas part")
    parser.add_argument("--calls", type=int, default=10_000, help="timed record() calls per size")
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--only", choices=["record", "pandas"])
    parser.add_argument("--data", type=Path, default=Path.home() / ".cache/probelake/side-by-side/python")
    args = parser.parse_args()
    cli = os.environ.get("PROBELAKE_BIN") or shutil.which("probelake") or "probelake"
    native = Path(probelake._internal.__file__)
    print(f"<!-- probelake {probelake.__version__} ({native.name}, {native.stat().st_size / 1e6:.0f} MB), "
          f"torch {torch.__version__}, duckdb {duckdb.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} -->")  # fmt: skip
    if args.only in (None, "record"):
        bench_record(args.calls, args.warmup)
    if args.only in (None, "pandas"):
        bench_pandas(args.runs, args.data, cli)
    print(f"<!-- load average at the end {os.getloadavg()[0]:.1f} -->")


if __name__ == "__main__":
    main()
