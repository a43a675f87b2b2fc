"""probelake.msprobe: msprobe's dumps routed into a dataset, checked against msprobe's own files.

Each job runs in a fresh process (tests/python/msprobe_job.py): once with msprobe writing its
JSON and `.pt` files, once routed into a dataset, and `probelake export` of the dataset must
give the same files byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "msprobe",
    reason="probelake.msprobe needs mindstudio-probe (pip install mindstudio-probe)",
)
pytest.importorskip("torch")

import probelake
import probelake.msprobe
from conftest import binary

JOB = Path(__file__).with_name("msprobe_job.py")
STAGES = ("actor_compute_log_prob", "ref_compute_log_prob", "actor_update")


def job(
    dump_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(JOB), str(dump_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )


def finish(p: subprocess.Popen[bytes], ok: bool = True) -> str:
    out, _ = p.communicate(timeout=300)
    text = out.decode(errors="replace")
    if ok:
        assert p.returncode == 0, text[-3000:]
    return text


def files(root: Path) -> dict[str, bytes]:
    """Every file below `root` by its path relative to `root`."""
    return {
        "/" + p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def export(lake: Path, out: Path) -> dict[str, bytes]:
    subprocess.run(
        [binary(), "export", str(lake), str(out)], check=True, capture_output=True
    )
    return files(out)


def assert_same_files(exported: dict[str, bytes], written: dict[str, bytes]) -> None:
    assert sorted(exported) == sorted(written)
    for name, body in written.items():
        assert exported[name] == body, f"{name} differs from msprobe's file"


def run_both(tmp_path: Path, *args: str) -> tuple[Path, Path]:
    """Runs the job routed into a dataset, then writing msprobe's files to the same dump_path
    (msprobe writes the path into dump.json)."""
    written, lake = tmp_path / "dump", tmp_path / "lake"
    finish(job(written, *args, "--lake", str(lake)))
    assert not written.exists(), "the routed job wrote outside the dataset"
    finish(job(written, *args))
    return written, lake


MATRIX = [
    (task, mode, level)
    for task in ("statistics", "tensor")
    for mode in ("statistics", "md5")
    for level in ("L0", "L1", "mix")
]


@pytest.mark.parametrize(("task", "summary_mode", "level"), MATRIX)
def test_export_is_what_msprobe_writes(
    tmp_path: Path, task: str, summary_mode: str, level: str
) -> None:
    written, lake = run_both(
        tmp_path, "--task", task, "--summary-mode", summary_mode, "--level", level
    )
    units = probelake.open(lake).units()
    assert [(u.step, u.stage, u.rank) for u in units] == [
        (0, "default", 0),
        (1, "default", 0),
    ]
    expected = files(written)
    if task == "tensor":
        assert any(name.endswith(".pt") for name in expected)
        assert sum(u.tensors for u in units) == sum(
            name.endswith(".pt") for name in expected
        )
    assert_same_files(export(lake, tmp_path / "exported"), expected)


def test_verl_stages_are_units(tmp_path: Path) -> None:
    written, lake = run_both(tmp_path, "--layout", "verl", "--level", "mix")
    units = probelake.open(lake).units()
    assert {(u.step, u.stage, u.rank) for u in units} == {
        (g, s, 0) for g in (0, 1) for s in STAGES
    }
    exported = export(lake, tmp_path / "exported")
    assert_same_files(exported, files(written))
    assert "/step_1/actor_update/step0/rank0/dump.json" in exported


def test_the_environment_variable_routes_every_process(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    out = finish(
        job(
            tmp_path / "dump",
            "--level",
            "L1",
            env={"PROBELAKE_MSPROBE_LAKE": str(lake)},
        )
    )
    # One line in the process's log says it was routed, with no logging set up.
    routed = [line for line in out.splitlines() if "PROBELAKE_MSPROBE_LAKE" in line]
    assert len(routed) == 1 and str(lake) in routed[0], out[-2000:]
    assert not (tmp_path / "dump").exists()
    assert len(probelake.open(lake).units()) == 2


def test_the_start_up_hook_imports_nothing_until_msprobe_is(tmp_path: Path) -> None:
    probe = "import sys; print(sorted(m for m in ('torch', 'msprobe', 'probelake', 'pyarrow') if m in sys.modules))"
    env = {**os.environ, "PROBELAKE_MSPROBE_LAKE": str(tmp_path / "lake")}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
    hooked = "import sys; print(sum(type(f).__name__ == '_PatchAfterImport' for f in sys.meta_path))"
    out = subprocess.run(
        [sys.executable, "-c", hooked],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1", (
        "probelake_msprobe.pth is not installed here, or installed its hook twice"
    )


def test_a_stage_that_raises_is_not_committed(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    out = finish(
        job(
            tmp_path / "dump",
            "--layout",
            "verl",
            "--fail-stage",
            "actor_update",
            "--lake",
            str(lake),
        ),
        ok=False,
    )
    assert "stage actor_update failed" in out
    units = probelake.open(lake).units()
    assert {(u.step, u.stage) for u in units} == {
        (0, "actor_compute_log_prob"),
        (0, "ref_compute_log_prob"),
    }


def test_kill_9_keeps_the_stages_before(tmp_path: Path) -> None:
    written, lake = tmp_path / "dump", tmp_path / "lake"
    killed = job(
        written,
        "--layout",
        "verl",
        "--steps",
        "1",
        "--kill-stage",
        "ref_compute_log_prob",
        "--lake",
        str(lake),
    )
    finish(killed, ok=False)
    assert killed.returncode == -9
    finish(job(written, "--layout", "verl", "--steps", "1"))
    units = probelake.open(lake).units()
    assert [(u.step, u.stage) for u in units] == [(0, "actor_compute_log_prob")]
    vacuum = subprocess.run(
        [binary(), "vacuum", str(lake)], check=False, capture_output=True, text=True
    )
    assert vacuum.returncode == 0, vacuum.stderr
    exported = export(lake, tmp_path / "exported")
    first = {
        k: v
        for k, v in files(written).items()
        if k.startswith("/step_0/actor_compute_log_prob/")
    }
    assert_same_files(exported, first)


def test_four_jobs_routed_into_one_dataset_leave_each_unit_whole(
    tmp_path: Path,
) -> None:
    """Four jobs (as four ranks' launchers restarted onto one dataset would) commit the same
    units at once: each unit ends whole, one job's, and exports as msprobe writes it."""
    written, lake = tmp_path / "dump", tmp_path / "lake"
    args = ("--layout", "verl", "--steps", "1", "--lake", str(lake))
    # The same dump_path for all: msprobe writes it into dump.json, and the export must match.
    running = [job(written, *args) for _ in range(4)]
    for p in running:
        finish(p)
    assert not written.exists(), "a routed job wrote outside the dataset"
    finish(job(written, "--layout", "verl", "--steps", "1"))
    assert [(u.step, u.stage) for u in probelake.open(lake).units()] == [
        (0, stage) for stage in sorted(STAGES)
    ]
    assert_same_files(export(lake, tmp_path / "exported"), files(written))


@pytest.mark.parametrize("delay_ms", [0, 2, 10, 40, 160])
def test_kill_9_during_a_routed_commit_keeps_each_stage_whole_or_absent(
    tmp_path: Path, delay_ms: int
) -> None:
    """The stage before the kill is being committed behind the job: killed at several points
    of that commit, it is there whole or not at all, and the stage before it stays intact."""
    whole = tmp_path / "whole"
    finish(
        job(tmp_path / "w0", "--layout", "verl", "--steps", "1", "--lake", str(whole))
    )
    expected = {
        (u.step, u.stage): (u.entries, u.leaves) for u in probelake.open(whole).units()
    }
    lake = tmp_path / "lake"
    killed = job(
        tmp_path / "w1",
        "--layout",
        "verl",
        "--steps",
        "1",
        "--kill-stage",
        "actor_update",
        "--kill-delay-ms",
        str(delay_ms),
        "--lake",
        str(lake),
    )
    finish(killed, ok=False)
    assert killed.returncode == -9
    got = {
        (u.step, u.stage): (u.entries, u.leaves) for u in probelake.open(lake).units()
    }
    assert set(got) <= {(0, "actor_compute_log_prob"), (0, "ref_compute_log_prob")}
    for key, counts in got.items():
        assert counts == expected[key], key
    vacuum = subprocess.run(
        [binary(), "vacuum", str(lake), "--older-than", "0s"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert vacuum.returncode == 0, vacuum.stderr
    assert {
        (u.step, u.stage): (u.entries, u.leaves) for u in probelake.open(lake).units()
    } == got


def test_a_dataset_that_takes_no_writes_is_refused_at_enable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(probelake.DatasetError, match="a-file"):
        probelake.msprobe.enable(blocker / "lake")
    assert probelake.msprobe.enabled() is None


def test_the_environment_variable_with_a_bad_dataset(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = {"PROBELAKE_MSPROBE_LAKE": str(blocker / "lake")}
    out = finish(job(tmp_path / "dump", "--steps", "1", env=env), ok=False)
    assert "DatasetError" in out and "a-file" in out
    assert not (tmp_path / "dump").exists()
    # With the fallback, msprobe writes its own files and says why.
    out = finish(
        job(
            tmp_path / "dump",
            "--steps",
            "1",
            env={**env, "PROBELAKE_MSPROBE_FALLBACK": "json"},
        )
    )
    assert "msprobe writes its own files" in out
    assert list((tmp_path / "dump").rglob("dump.json"))


def test_a_start_up_failure_a_job_swallows_stays_loud(tmp_path: Path) -> None:
    """verl's precision debugger (`strict: False`) catches a failed import of msprobe and goes
    on; every later import must fail the same way and log why, never let msprobe write JSON."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    swallow = (
        "for attempt in range(3):\n"
        "    try:\n"
        "        import msprobe.pytorch\n"
        "    except Exception as e:\n"
        "        print('refused', type(e).__name__)\n"
        "    else:\n"
        "        print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", swallow],
        env={**os.environ, "PROBELAKE_MSPROBE_LAKE": str(blocker / "lake")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.split("\n")[:3] == ["refused DatasetError"] * 3, (
        out.stdout + out.stderr[-3000:]
    )
    logged = [
        line for line in out.stderr.splitlines() if "msprobe is not started" in line
    ]
    assert len(logged) == 3 and "a-file" in logged[0], out.stderr[-3000:]


def test_an_untested_msprobe_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda d: "1.3.0" if d == "mindstudio-probe" else real(d),
    )
    with pytest.raises(
        probelake.msprobe.IntegrationError,
        match=r"1\.3\.0 has not been tested.*26\.2\.0",
    ):
        probelake.msprobe.enable(tmp_path / "lake")
    assert not (tmp_path / "lake").exists()


def test_missing_msprobe_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.metadata

    def version(dist: str) -> str:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(
        probelake.msprobe.IntegrationError, match="pip install mindstudio-probe"
    ):
        probelake.msprobe.enable(tmp_path / "lake")


def test_a_writer_without_the_api_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from msprobe.core.dump.data_dump import json_writer

    monkeypatch.delattr(json_writer.DataWriter, "write_stack_info_json")
    with pytest.raises(
        probelake.msprobe.IntegrationError, match="write_stack_info_json"
    ):
        probelake.msprobe.enable(tmp_path / "lake")


# How far fast mode's Mean and Norm may be from torch's (docs/msprobe-integration.md): Mean
# relative to the larger of |Max| and |Min| (a mean near zero has no relative precision),
# Norm relative to itself. Max and Min, and everything else, are exact.
FAST_BOUNDS = {
    "torch.float32": 2.0**-22,
    "torch.bfloat16": 2.0**-7,
    "torch.float16": 2.0**-10,
}


def fast_differences(exact: object, fast: object, worst: dict[str, float]) -> list[str]:
    """Walks two dump.json documents; returns what differs beyond the bounds."""
    if isinstance(exact, dict) and isinstance(fast, dict):
        if list(exact) != list(fast):
            return [f"keys {list(exact)} != {list(fast)}"]
        out = []
        for key, value in exact.items():
            if (
                key in ("Mean", "Norm")
                and isinstance(value, float)
                and isinstance(fast[key], float)
            ):
                scale = (
                    max(abs(exact["Max"]), abs(exact["Min"]))
                    if key == "Mean"
                    else abs(value)
                )
                gap = (
                    abs(value - fast[key]) / scale if scale else abs(value - fast[key])
                )
                dtype = str(exact["dtype"])
                worst[dtype] = max(worst.get(dtype, 0.0), gap)
                if gap > FAST_BOUNDS[dtype]:
                    out.append(f"{key} {value} vs {fast[key]} ({dtype})")
            else:
                out += fast_differences(value, fast[key], worst)
        return out
    if isinstance(exact, list) and isinstance(fast, list):
        if len(exact) != len(fast):
            return ["list lengths differ"]
        return [d for a, b in zip(exact, fast) for d in fast_differences(a, b, worst)]
    return (
        []
        if exact == fast and type(exact) is type(fast)
        else [f"{exact!r} != {fast!r}"]
    )


@pytest.mark.parametrize(
    ("task", "level", "dtype", "summary_mode"),
    [
        ("statistics", "L1", "float32", "statistics"),
        ("statistics", "mix", "float32", "statistics"),
        ("statistics", "mix", "bfloat16", "statistics"),
        ("statistics", "mix", "float32", "md5"),
        ("tensor", "L0", "float32", "md5"),
    ],
)
def test_fast_mode_is_exact_but_for_mean_and_norm(
    tmp_path: Path, task: str, level: str, dtype: str, summary_mode: str
) -> None:
    args = ("--task", task, "--level", level, "--dtype", dtype)
    args += ("--summary-mode", summary_mode)
    exports = {}
    for mode in ("exact", "fast"):
        lake = tmp_path / mode
        finish(job(tmp_path / "dump", *args, "--mode", mode, "--lake", str(lake)))
        exports[mode] = export(lake, tmp_path / f"exported-{mode}")
    exact, fast = exports["exact"], exports["fast"]
    assert sorted(exact) == sorted(fast)
    worst: dict[str, float] = {}
    for name in exact:
        if name.endswith("/dump.json"):
            problems = fast_differences(
                json.loads(exact[name]), json.loads(fast[name]), worst
            )
            assert not problems, f"{name}: {problems[:5]}"
        else:
            assert exact[name] == fast[name], name
    assert worst, "no Mean or Norm was compared"


def test_a_commit_that_fails_mid_run(tmp_path: Path) -> None:
    lake, dump = tmp_path / "lake", tmp_path / "dump"
    # The commit of step 1 fails behind the job; step 2's hand-over raises its error.
    out = finish(
        job(dump, "--steps", "3", "--break-lake", "--lake", str(lake)), ok=False
    )
    assert "DatasetError" in out and str(lake) in out
    assert not dump.exists()
    # With the fallback, the step that could not be committed is written as msprobe's files.
    lake.unlink()
    out = finish(
        job(
            dump,
            "--steps",
            "3",
            "--break-lake",
            "--fallback",
            "json",
            "--lake",
            str(lake),
        )
    )
    assert "writing msprobe's files to" in out
    assert sorted(p.relative_to(dump).as_posix() for p in dump.rglob("*.json")) == [
        f"step{s}/rank0/{f}.json"
        for s in (1, 2)
        for f in ("construct", "dump", "stack")
    ]


def test_enable_then_disable_in_process(tmp_path: Path) -> None:
    from msprobe.core.dump.data_dump import data_collector, json_writer

    route = probelake.msprobe.enable(tmp_path / "lake", mode="fast")
    try:
        assert data_collector.DataWriter is not json_writer.DataWriter
        assert probelake.msprobe.enabled() is route
        assert repr(route).endswith(
            "fast', fallback='raise', device_path='auto', counts: device=0, host=0, "
            "msprobe=0: 0 unit(s) committed, 0 dropped)"
        )
        # The dataset exists from the start: a job finds out before training that it is writable.
        assert (tmp_path / "lake" / "_probelake" / "manifest.json").is_file()
    finally:
        probelake.msprobe.disable()
    assert data_collector.DataWriter is json_writer.DataWriter
    assert probelake.msprobe.enabled() is None


def test_a_bad_mode_or_fallback_is_an_argument_error(tmp_path: Path) -> None:
    with pytest.raises(probelake.ArgumentError, match="'exact'.*'fast'"):
        probelake.msprobe.enable(tmp_path / "lake", mode="quick")  # type: ignore[arg-type]
    with pytest.raises(probelake.ArgumentError, match="'raise' or 'json'"):
        probelake.msprobe.enable(tmp_path / "lake", fallback="ignore")  # type: ignore[arg-type]
    assert not (tmp_path / "lake").exists()
