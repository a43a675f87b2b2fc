"""fork after probelake was used: the child's calls work, it never hangs, and the parent loses
nothing. The parent stays busy throughout: a thread running queries, a thread writing and
committing units, a unit held open across every fork, and for some forks a query result read
halfway."""

import faulthandler
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
th = pytest.importorskip("torch")

# 200 in CI; PROBELAKE_FORKS=10000 for the longer run docs/reliability.md records.
FORKS = int(os.environ.get("PROBELAKE_FORKS", "200"))
CHILD_DEADLINE = 60.0
COUNT = "SELECT count(*) AS n FROM dump"


def count(base) -> int:
    return pa.table(probelake.sql(COUNT, base=base))["n"][0].as_py()


def child(base, target, k, expected, inherited_unit, tracebacks) -> int:
    """What each forked child does; its exit code says what went wrong."""
    # Should the child hang: its Python stacks, written before the parent gives up on it.
    faulthandler.dump_traceback_later(CHILD_DEADLINE - 15, file=open(tracebacks, "w"))
    if count(base) != expected:
        return 2
    with probelake.open(target).unit(k, "child", 0) as u:
        for i in range(3):
            u.record(f"Functional.relu.{i}.forward", output=[th.full((8,), float(k))])
    if k == 0:
        try:
            inherited_unit.record("Functional.b.0.forward", output=[None])
            return 3
        except probelake.InternalError:
            pass
    return 0


def test_forks_while_the_parent_is_busy(demo_lake, tmp_path):
    base = demo_lake / "base"
    expected = count(base)
    target = tmp_path / "w"
    lake = probelake.open(target)
    held = lake.unit(1, "held", 0)
    stop = threading.Event()
    failures: list[BaseException] = []
    parent_steps: list[int] = []

    def guarded(loop):
        def run():
            try:
                loop()
            except BaseException as e:  # reported by the test, not lost in the thread
                failures.append(e)

        return run

    @guarded
    def queries():
        while not stop.is_set():
            assert count(base) == expected

    @guarded
    def writes():
        step = 10_000
        while not stop.is_set():
            with lake.unit(step, "parent", 0) as u:
                for i in range(20):
                    u.record(f"Functional.gelu.{i}.forward", output=[th.ones(256) * i])
            parent_steps.append(step)
            step += 1

    threads = [threading.Thread(target=queries), threading.Thread(target=writes)]
    for t in threads:
        t.start()
    reader = None
    try:
        for k in range(FORKS):
            # For a stretch of forks, a query result stays open, read partly.
            if k == FORKS // 2:
                result = probelake.sql("SELECT name FROM dump", base=base)
                reader = pa.RecordBatchReader.from_stream(result)
                first = reader.read_next_batch().num_rows
            held.record(
                f"Functional.held.{k}.forward", output=[th.full((4,), float(k))]
            )
            tracebacks = tmp_path / f"child-{k}.txt"
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = child(base, target, k, expected, held, tracebacks)
                finally:
                    os._exit(code)
            wait_for(pid, tracebacks, k)
            if reader is not None and k == FORKS // 2 + 20:
                rest = sum(b.num_rows for b in reader)
                assert first + rest == expected
                reader = None
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures
    held.commit()

    units = {(u.step, u.stage) for u in lake.units()}
    assert {(k, "child") for k in range(FORKS)} <= units
    assert {(s, "parent") for s in parent_steps} <= units
    assert (1, "held") in units
    per_stage = pa.table(
        probelake.sql(
            "SELECT stage, step, count(*) AS leaves, min(max) AS lo, max(max) AS hi "
            "FROM dump GROUP BY stage, step",
            w=target,
        )
    ).to_pylist()
    for row in per_stage:
        if row["stage"] == "child":
            # Each child's own rows: three leaves, all equal to its fork number.
            assert (row["leaves"], row["lo"], row["hi"]) == (
                3,
                row["step"],
                row["step"],
            )
        elif row["stage"] == "parent":
            assert row["leaves"] == 20
        else:
            assert row["leaves"] == FORKS and row["hi"] == FORKS - 1


def wait_for(pid: int, tracebacks: pathlib.Path, k: int) -> None:
    deadline = time.time() + CHILD_DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            pytest.fail(
                f"fork {k}: the child hung\n{hung_process_report(pid, tracebacks)}"
            )
        time.sleep(0.002)
    assert os.waitstatus_to_exitcode(status) == 0, f"fork {k}"


def hung_process_report(pid: int, tracebacks: pathlib.Path) -> str:
    """The Python stacks a hung child wrote, and its native threads' stacks where gdb is
    installed; the child is killed after."""
    report = (
        tracebacks.read_text() if tracebacks.exists() else "(no Python stacks written)"
    )
    try:
        if shutil.which("gdb"):
            native = subprocess.run(
                ["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            # Frames only, shortened: the native threads' stacks, all of them.
            frames = [
                line[:160]
                for line in native.stdout.splitlines()
                if line.startswith(("Thread ", "#"))
            ]
            report += "\n" + "\n".join(frames)
    except subprocess.TimeoutExpired:
        report += "\n(gdb gave no stacks within 60 s)"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return report
