"""kill -9 in the middle of a Python writer's commit, at several points of it: while its tensor
files are stored, while its commit record is written, while the files of the unit it replaces
are deleted. Whatever the point, the unit reads as before or as after, whole, the units
committed before stay intact, and `probelake vacuum` removes what the killed process left."""

import signal
import subprocess
import sys
import textwrap

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")

from conftest import binary  # noqa: E402

ENTRIES = 40
# Milliseconds from the start of the commit to the kill. The commit stores ~80 MB of tensor
# rows, then its record, then deletes the replaced unit's files: the delays fall across all of it.
DELAYS_MS = [0, 20, 60, 150, 300, 600, 1200, 2400]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time, torch, probelake
    root, delay = sys.argv[1], float(sys.argv[2]) / 1000
    u = probelake.open(root).unit(1, "default", 0, task="tensor")
    for i in range(int(sys.argv[3])):
        u.record(f"Functional.a.{i}.forward", output=[torch.full((1 << 19,), 2.0)])
    threading.Thread(target=u.commit, daemon=True).start()
    time.sleep(delay)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def unit_state(root):
    """(entries, markers) of unit 1, and step 0's leaves."""
    rows = pa.table(
        probelake.sql(
            "SELECT step, count(*) AS leaves, min(max) AS lo, max(max) AS hi FROM dump GROUP BY step",
            w=root,
        )
    ).to_pylist()
    return {r["step"]: (r["leaves"], r["lo"], r["hi"]) for r in rows}


def vacuum(root):
    # --older-than 0s: nothing writes to the dataset now, so young files are leftovers too.
    done = subprocess.run(
        [binary(), "vacuum", str(root), "--older-than", "0s"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("delay_ms", DELAYS_MS)
def test_kill_during_a_commit_leaves_before_or_after_whole(tmp_path, delay_ms):
    root = tmp_path / "lake"
    lake = probelake.open(root)
    with lake.unit(0, "default", 0) as u:
        u.record("Functional.kept.0.forward", output=[torch.ones(3)])
    with lake.unit(1, "default", 0, task="tensor") as u:
        for i in range(3):
            u.record(f"Functional.a.{i}.forward", output=[torch.full((4,), 1.0)])
    before = unit_state(root)
    assert before == {0: (1, 1.0, 1.0), 1: (3, 1.0, 1.0)}

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(delay_ms), str(ENTRIES)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr

    after = unit_state(root)
    assert after[0] == before[0], "a unit committed before changed"
    # Before (3 entries of 1.0) or after (all of the new entries, 2.0): never a mix.
    assert after[1] in (before[1], (ENTRIES, 2.0, 2.0)), after[1]
    tensors = pa.table(
        probelake.sql("SELECT count(*) AS n FROM tensor WHERE step = 1", w=root)
    )["n"][0].as_py()
    assert tensors == after[1][0]

    vacuum(root)
    assert unit_state(root) == after
    # Whatever was left is gone: a second vacuum finds nothing more.
    assert "removed 0 file(s)" in vacuum(root)
