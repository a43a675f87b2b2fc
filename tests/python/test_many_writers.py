"""Many processes writing one dataset at once, as the ranks of a training job do, into a local
folder and into an S3 bucket (moto_server): no unit is lost, and two processes committing the
same unit leave one of them whole, never a mix."""

import json
import pathlib
import subprocess
import sys
import time
import uuid

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
pytest.importorskip("torch")

from conftest import S3_BUCKET, S3_KEY, S3_SECRET  # noqa: E402

JOB = pathlib.Path(__file__).with_name("writer_job.py")
PROCESSES, UNITS = 8, 10
ENTRIES = 5  # writer_job.ENTRIES
RACES = 5


@pytest.fixture(params=["local", "s3"])
def dataset(request, tmp_path):
    """A fresh dataset's URI and the storage options that reach it."""
    if request.param == "local":
        return str(tmp_path / "lake"), {}
    endpoint = request.getfixturevalue("moto_endpoint")
    storage = {
        "endpoint": endpoint,
        "access_key_id": S3_KEY,
        "secret_access_key": S3_SECRET,
        "region": "us-east-1",
        "allow_http": True,
    }
    return f"s3://{S3_BUCKET}/many-{uuid.uuid4().hex[:8]}", storage


def run_jobs(uri, storage, jobs):
    """Starts one process per (marker, units), all committing from the same instant."""
    start_at = time.time() + 3.0  # after every interpreter has imported torch
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(JOB),
                uri,
                json.dumps(storage),
                str(marker),
                str(start_at),
                json.dumps(units),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for marker, units in jobs
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err


def rows_per_unit(uri, storage):
    lake = probelake.open(uri, storage_options=storage or None)
    return {
        (r["step"], r["stage"], r["rank"]): r
        for r in pa.table(
            probelake.sql(
                "SELECT step, stage, rank, count(*) AS leaves, min(max) AS lo, max(max) AS hi "
                "FROM dump GROUP BY step, stage, rank",
                storage_options=storage or None,
                w=uri,
            )
        ).to_pylist()
    }, {(u.step, u.stage, u.rank) for u in lake.units()}


def test_eight_processes_ten_units_each(dataset):
    uri, storage = dataset
    jobs = [(p, [[s, "many", p] for s in range(UNITS)]) for p in range(PROCESSES)]
    run_jobs(uri, storage, jobs)
    rows, units = rows_per_unit(uri, storage)
    assert len(units) == PROCESSES * UNITS
    for (step, stage, rank), r in rows.items():
        # Each unit holds its own process's rows, all of them.
        assert (r["leaves"], r["lo"], r["hi"]) == (ENTRIES, rank, rank), (step, rank)
    assert len(rows) == PROCESSES * UNITS


def test_two_processes_committing_the_same_unit_leave_one_whole(dataset):
    uri, storage = dataset
    same = [[r, "same", 0] for r in range(RACES)]
    run_jobs(uri, storage, [(1, same), (2, same)])
    rows, units = rows_per_unit(uri, storage)
    assert units == {(r, "same", 0) for r in range(RACES)}
    for key, r in rows.items():
        # One writer's entries, all of them: never some of each.
        assert r["leaves"] == ENTRIES and r["lo"] == r["hi"] and r["lo"] in (1, 2), key
