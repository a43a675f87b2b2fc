"""`fast` mode's device path, driven on CPU through its seam (`device_path="always"`): the same
torch ops, buffers and "non-blocking" copies an accelerator tensor takes.

Each job runs under msprobe 26.2 as tests/python/msprobe_job.py drives it, in a fresh process;
a `TorchDispatchMode` on the training thread counts its host syncs (`aten._local_scalar_dense`).

On a machine with an accelerator, `PROBELAKE_TEST_DEVICE=cuda` (or `npu`) runs the jobs there
instead, through fast mode's default `device_path="auto"`.
"""

from __future__ import annotations

import io
import json
import logging
import os
import zlib
from pathlib import Path

import pytest

pytest.importorskip(
    "msprobe",
    reason="probelake.msprobe needs mindstudio-probe (pip install mindstudio-probe)",
)
torch = pytest.importorskip("torch")

import probelake
import probelake.msprobe
from test_msprobe_route import export, fast_differences, files, finish, job

ON = os.environ.get("PROBELAKE_TEST_DEVICE", "cpu")
if ON == "cuda" and not torch.cuda.is_available():
    pytest.skip(
        "PROBELAKE_TEST_DEVICE=cuda: torch sees no CUDA device", allow_module_level=True
    )
# The job's device, and fast mode down the device path (on CPU through its seam).
WHERE = ("--device", ON)
DEVICE = ("--mode", "fast", "--device-path", "always" if ON == "cpu" else "auto")


def syncs(report: Path) -> dict[str, object]:
    return json.loads(report.read_text())


@pytest.mark.parametrize(
    ("task", "level", "summary_mode", "layout"),
    [
        ("statistics", "L1", "statistics", "verl"),
        ("statistics", "mix", "md5", "verl"),
        ("tensor", "L1", "statistics", "verl"),
        ("tensor", "mix", "md5", "plain"),
    ],
)
def test_the_device_path_syncs_nothing_and_writes_what_msprobe_writes(
    tmp_path: Path, task: str, level: str, summary_mode: str, layout: str
) -> None:
    # verl's layout: one debugger, a dump_path per step and stage, reset_status() after each.
    args = ("--task", task, "--level", level, "--summary-mode", summary_mode)
    args += ("--layout", layout)
    args += ("--steps", "3", *WHERE)
    # The training code's own syncs, with no debugger at all.
    base = tmp_path / "base.json"
    finish(job(tmp_path / "none", *args, "--no-debugger", "--count-syncs", str(base)))
    # msprobe writing its own files (md5: the optimizer steps outside the dump window, so
    # msprobe's CRCs, computed on a thread pool, do not race with it).
    written = tmp_path / "dump"
    finish(job(written, *args))
    # Routed, exact: msprobe's flush turns every statistic into a float on the training thread.
    exact = tmp_path / "exact.json"
    lake_exact = tmp_path / "lake-exact"
    finish(job(written, *args, "--lake", str(lake_exact), "--count-syncs", str(exact)))
    # Routed, fast, down the device path.
    fast = tmp_path / "fast.json"
    lake = tmp_path / "lake"
    finish(
        job(written, *args, *DEVICE, "--lake", str(lake), "--count-syncs", str(fast))
    )

    baseline, exact_report, report = syncs(base), syncs(exact), syncs(fast)
    assert report["syncs"] == baseline["syncs"], (report, baseline)
    assert sum(exact_report["syncs"]) > sum(baseline["syncs"]), (
        "the counter sees msprobe's .item() calls"
    )
    counts = report["counts"]
    assert counts["device"] > 0, counts
    if ON == "cpu":
        assert counts["host"] == 0, counts

    expected, exported = files(written), export(lake, tmp_path / "exported")
    assert sorted(exported) == sorted(expected)
    if task == "tensor":
        assert any(name.endswith(".pt") for name in expected)
    worst: dict[str, float] = {}
    for name, body in expected.items():
        if name.endswith("/dump.json"):
            problems = fast_differences(
                json.loads(body), json.loads(exported[name]), worst
            )
            assert not problems, f"{name}: {problems[:5]}"
        else:
            assert exported[name] == body, f"{name} differs from msprobe's file"
    assert worst, "no Mean or Norm was compared"
    if ON == "cpu":
        # The same torch ops in the same dtype as msprobe's: on CPU the values are msprobe's.
        assert max(worst.values()) == 0.0, worst


def test_a_record_holds_the_values_at_hook_time(tmp_path: Path) -> None:
    # The job changes a hooked linear's output in place right after the hook: the statistics,
    # the CRC and the saved tensor are those of the values the hook saw.
    lake = tmp_path / "lake"
    args = ("--task", "tensor", "--summary-mode", "md5", "--level", "L1", "--inplace")
    args += WHERE
    finish(job(tmp_path / "dump", *args, *DEVICE, "--lake", str(lake)))
    exported = export(lake, tmp_path / "exported")
    checked = 0
    for name, body in exported.items():
        if not name.endswith("/dump.json"):
            continue
        folder = name.rsplit("/", 1)[0]
        for entry_name, entry in json.loads(body)["data"].items():
            if (
                not entry_name.startswith("Functional.linear")
                or "forward" not in entry_name
            ):
                continue
            for record in entry["output"]:
                saved = torch.load(
                    io.BytesIO(
                        exported[f"{folder}/dump_tensor_data/{record['data_name']}"]
                    )
                )
                saved = saved.cpu()
                assert record["md5"] == f"{zlib.crc32(saved.numpy().tobytes()):08x}"
                assert (
                    record["Max"] == saved.max().item()
                    and record["Min"] == saved.min().item()
                )
                checked += 1
    assert checked >= 4


def test_a_staging_budget_below_a_step_applies_back_pressure_and_loses_nothing(
    tmp_path: Path,
) -> None:
    args = ("--task", "tensor", "--summary-mode", "md5", "--level", "L1", *WHERE)
    written, lake, report = tmp_path / "dump", tmp_path / "lake", tmp_path / "r.json"
    finish(job(written, *args))
    budget = 4096  # a step's payloads are ~60 KB, the largest one tensor 2 KB
    finish(
        job(
            written,
            *args,
            *DEVICE,
            "--staging-bytes",
            str(budget),
            "--lake",
            str(lake),
            "--count-syncs",
            str(report),
        )
    )
    staging = syncs(report)["staging"]
    assert staging["waits"] > 0, "the training thread never waited for the budget"
    assert staging["peak"] <= budget, staging
    expected = files(written)
    assert files_equal(export(lake, tmp_path / "exported"), expected)


def files_equal(exported: dict[str, bytes], expected: dict[str, bytes]) -> bool:
    assert sorted(exported) == sorted(expected)
    for name, body in expected.items():
        assert exported[name] == body, f"{name} differs from msprobe's file"
    return True


def test_route_counts_and_repr(tmp_path: Path) -> None:
    route = probelake.msprobe.enable(
        tmp_path / "lake", mode="fast", device_path="always"
    )
    try:
        assert probelake.msprobe.enabled() is route
        assert route.counts == {"device": 0, "host": 0, "msprobe": 0}
        assert "device_path='always', counts: device=0, host=0, msprobe=0" in repr(
            route
        )
    finally:
        probelake.msprobe.disable()
    with pytest.raises(probelake.ArgumentError, match="'auto'.*'always'"):
        probelake.msprobe.enable(tmp_path / "lake", mode="fast", device_path="gpu")  # type: ignore[arg-type]
    with pytest.raises(probelake.ArgumentError, match="staging_bytes"):
        probelake.msprobe.enable(tmp_path / "lake", mode="fast", staging_bytes=0)


def test_an_accelerator_tensor_left_to_msprobe_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from msprobe.core.common.const import Const
    from probelake.msprobe._fast import FastPath

    fast = FastPath(Const, "always", 1 << 20)
    meta = torch.empty(
        4, device="meta"
    )  # not on the CPU: what an accelerator tensor looks like here
    path, reason = fast.path(
        torch.zeros(2, dtype=torch.complex64), _Config(), Const.DUMP_PRECISION_LOW
    )
    assert (path, reason) == ("msprobe", "dtype torch.complex64")
    path, reason = fast.path(meta, _Config(), Const.DUMP_PRECISION_HIGH)
    assert path == "msprobe"
    with caplog.at_level(logging.WARNING, logger="probelake.msprobe"):
        for _ in range(3):
            fast.warn_fallback(meta, "precision: high")
    warnings = [r for r in caplog.records if "precision: high" in r.getMessage()]
    assert len(warnings) == 1 and "meta tensors" in warnings[0].getMessage()


class _Config:
    summary_mode = "statistics"


def test_the_python_writer_summarizes_on_the_device_path(tmp_path: Path) -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Syncs(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func is torch.ops.aten._local_scalar_dense.default:
                Syncs.count += 1
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(3)
    tensors = [
        torch.randn(33, 7, generator=g),
        torch.randn(5, 9, generator=g).to(torch.bfloat16).t(),
        torch.randn(64, generator=g).to(torch.float16),
        torch.randn(10, generator=g).double(),
        torch.tensor(-3.25),
        torch.randint(-100, 100, (12,), generator=g),
        torch.tensor([True, False, True]),
        torch.tensor(7, dtype=torch.int32),
    ]
    lake = probelake.open(tmp_path / "w")
    for step, on_device in ((0, False), (1, True)):
        u = lake.unit(step, "default", 0)
        u._writer._set_device_path_always(on_device)
        with Syncs():
            for i, t in enumerate(tensors):
                u.record(f"Functional.x.{i}.forward", output=[t])
        u.commit()
    assert Syncs.count == 0
    frame = lake.to_pandas(
        "dump", ["step", "name", "dtype", "max", "min", "mean", "norm"]
    )
    host = frame[frame.step == 0].sort_values("name").reset_index(drop=True)
    device = frame[frame.step == 1].sort_values("name").reset_index(drop=True)
    assert len(host) == len(device) == len(tensors)
    assert host[["name", "dtype", "max", "min"]].equals(
        device[["name", "dtype", "max", "min"]]
    )
    for column in ("mean", "norm"):
        a, b = host[column], device[column]
        close = (a - b).abs() <= 1e-2 * a.abs().clip(lower=1)
        assert (close | (a.isna() & b.isna())).all(), (column, a.tolist(), b.tolist())
    # A unit that needs the bytes (md5) stages them instead.
    u = lake.unit(2, "default", 0, summary_mode="md5")
    u._writer._set_device_path_always(True)
    u.record("Functional.y.0.forward", output=[tensors[0]])
    u.commit()
    md5 = lake.to_pandas("dump", ["step", "md5"])
    assert md5[md5.step == 2]["md5"].tolist() == [
        f"{zlib.crc32(tensors[0].numpy().tobytes()):08x}"
    ]
