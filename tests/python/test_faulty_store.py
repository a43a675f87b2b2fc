"""probelake against a store that fails: a fault-injecting proxy (faulty_proxy.py) between
probelake and moto_server drops connections in the middle of multipart uploads, answers
500/503, stalls for longer than the request timeout, and resets the connection that writes a
commit record. Under each fault, `probelake import` and the Python writer's commit either
complete (object_store retries) or fail with one clear error; no partial unit is ever visible,
and `probelake vacuum` leaves only the committed units' files. A slow store keeps the writer's
memory within its staging budget plus a stated constant."""

import subprocess
import sys
import textwrap
import uuid

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")
boto3 = pytest.importorskip("boto3")

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, binary  # noqa: E402
from conftest import probelake as cli  # noqa: E402
from faulty_proxy import FaultyProxy  # noqa: E402

# Request lines, as the proxy sees them (path-style: /bucket/key).
COMMIT_RECORD = r"^PUT /[^ ]*/_probelake/commits/[^ ]*\.json"
DATA_FILE = r"^PUT /[^ ]*\.parquet"
PART = r"^PUT /[^ ]*partNumber="
TIMEOUT = 2.0  # seconds: the request timeout both faces are given
MIB = 1 << 20


@pytest.fixture(scope="module")
def proxy(moto_endpoint):
    host, port = moto_endpoint.removeprefix("http://").split(":")
    p = FaultyProxy((host, int(port)))
    url = p.start()
    p.url = url
    yield p
    p.stop()


@pytest.fixture
def faults(proxy):
    proxy.clear()
    yield proxy
    proxy.clear()


def storage(endpoint, retries=3):
    return {
        "endpoint": endpoint,
        "access_key_id": S3_KEY,
        "secret_access_key": S3_SECRET,
        "region": "us-east-1",
        "allow_http": True,
        "max_retries": retries,
        "request_timeout": TIMEOUT,
        "retry_timeout": 30.0,
        "multipart_threshold": 5 * MIB,
    }


def fresh_uri():
    return f"s3://{S3_BUCKET}/faults-{uuid.uuid4().hex[:8]}"


def leftovers(uri, endpoint):
    """Parquet objects under the dataset that no committed unit names."""
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
    )  # fmt: skip
    prefix = uri.removeprefix(f"s3://{S3_BUCKET}/") + "/"
    keys = set()
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=S3_BUCKET, Prefix=prefix
    ):
        keys |= {
            o["Key"][len(prefix) :]
            for o in page.get("Contents", [])
            if o["Key"].endswith(".parquet")
        }
    lake = probelake.open(uri, storage_options=storage(endpoint))
    named = set()
    for table in ("dump", "tensor", "stack", "construct", "source"):
        named |= {path for path, _, _ in lake._lake.files(table)}
    schema = {k for k in keys if k.startswith("_probelake/")}
    return keys - named - schema


def vacuum(uri, endpoint):
    done = subprocess.run(
        [binary(), "vacuum", uri, "--older-than", "0s", "--s3-endpoint", endpoint,
         "--s3-allow-http", "--s3-region", "us-east-1",
         "--s3-access-key-id", S3_KEY, "--s3-secret-access-key", S3_SECRET],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_unit(uri, endpoint, step, entries=4, mib_each=3, retries=3):
    """Commits a tensor unit of entries × mib_each MiB (its tensor file goes up in parts)."""
    lake = probelake.open(uri, storage_options=storage(endpoint, retries))
    with lake.unit(step, "default", 0, task="tensor") as u:
        for i in range(entries):
            # Random, so that the tensor file does not compress below the part size.
            u.record(
                f"Functional.a.{i}.forward",
                output=[torch.rand(mib_each * MIB // 4) + step],
            )


def units(uri, endpoint):
    lake = probelake.open(uri, storage_options=storage(endpoint))
    return {(u.step, u.entries) for u in lake.units()}


# (fault, pattern, times, stall seconds): each transient fault is retried away; each
# persistent one fails the commit.
TRANSIENT = [
    ("503", COMMIT_RECORD, 1, 0),
    ("500", DATA_FILE, 2, 0),
    ("drop", PART, 1, 0),
    ("reset", COMMIT_RECORD, 1, 0),
    ("stall", PART, 1, TIMEOUT * 2),
]
PERSISTENT = [
    ("503", COMMIT_RECORD, None, 0),
    ("drop", PART, None, 0),
    ("reset", COMMIT_RECORD, None, 0),
    ("stall", COMMIT_RECORD, None, TIMEOUT * 2),
]


def ids(case):
    return f"{case[0]}-{'record' if case[1] == COMMIT_RECORD else 'part' if case[1] == PART else 'file'}"


@pytest.mark.parametrize("case", TRANSIENT, ids=ids)
def test_writer_commit_retries_a_transient_fault(faults, case):
    fault, pattern, times, stall = case
    uri = fresh_uri()
    write_unit(uri, faults.url, 0, entries=1, mib_each=1)
    faults.add(fault, pattern, times, stall)
    write_unit(uri, faults.url, 1)
    assert faults.injected, f"the fault never applied: {faults.seen}"
    assert units(uri, faults.url) == {(0, 1), (1, 4)}
    assert leftovers(uri, faults.url) == set()


@pytest.mark.parametrize("case", PERSISTENT, ids=ids)
def test_writer_commit_fails_clearly_under_a_persistent_fault(faults, case):
    fault, pattern, times, stall = case
    uri = fresh_uri()
    write_unit(uri, faults.url, 0, entries=1, mib_each=1)
    faults.add(fault, pattern, times, stall)
    with pytest.raises(probelake.ProbelakeError) as failed:
        write_unit(uri, faults.url, 1, retries=1)
    message = str(failed.value)
    assert "step=1" in message or "unit 1" in message or "(1, " in message, message
    assert len(message.splitlines()) < 20, message
    faults.clear()
    # Nothing of the failed unit is visible; the one before is whole.
    assert units(uri, faults.url) == {(0, 1)}
    vacuum(uri, faults.url)
    assert leftovers(uri, faults.url) == set()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults-demo")
    cli("demo", root, "-q")
    return root / "msprobe" / "base"


def run_import(src, uri, endpoint, retries):
    return subprocess.run(
        [binary(), "import", str(src), uri, "-q", "--s3-endpoint", endpoint, "--s3-allow-http",
         "--s3-region", "us-east-1", "--s3-access-key-id", S3_KEY, "--s3-secret-access-key", S3_SECRET,
         "--s3-retries", str(retries), "--s3-timeout", str(TIMEOUT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [c for c in TRANSIENT if c[1] != PART] + [c for c in PERSISTENT if c[1] != PART],
    ids=lambda c: ids(c) + ("-always" if c[2] is None else "-once"),
)
def test_import_under_a_fault(faults, demo_run, case):
    fault, pattern, times, stall = case
    uri = fresh_uri()
    faults.add(fault, pattern, times, stall)
    done = run_import(demo_run, uri, faults.url, retries=1 if times is None else 3)
    assert faults.injected, f"the fault never applied: {faults.seen[:5]}"
    faults.clear()
    visible = probelake.open(uri, storage_options=storage(faults.url)).units()
    if times is None:
        assert done.returncode == 2, done.stderr
        error = done.stderr.strip().splitlines()
        assert error and error[0].startswith("probelake: "), done.stderr
        assert "s3://" in error[0], done.stderr
        # Units committed before the fault stay whole; none after it appears.
        for u in visible:
            assert u.entries > 0
    else:
        assert done.returncode == 0, done.stderr
        assert len(visible) > 0
    vacuum(uri, faults.url)
    assert leftovers(uri, faults.url) == set()


SLOW_WRITER = textwrap.dedent(
    """
    import json, resource, sys, torch, probelake
    storage, budget = json.loads(sys.argv[1]), int(sys.argv[2])
    lake = probelake.open(sys.argv[3], storage_options=storage)
    t = torch.rand(4 << 20 >> 2)  # 4 MiB that do not compress
    def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with lake.unit(9, "slow", 0, task="tensor", budget_bytes=budget, tensor_batch_bytes=8 << 20) as u:
        u.record("Functional.warm.0.forward", output=[t])
        base = rss()
        for i in range(60):  # 240 MiB through a budget of 32 MiB
            u.record(f"Functional.a.{i}.forward", output=[t])
        waits = u.metrics()["waits"]
    print(json.dumps({"base": base, "peak": rss(), "waits": waits}))
    """
)


def test_a_slow_store_holds_the_writer_to_its_budget(faults):
    import json

    budget = 32 * MIB
    faults.delay = 0.05  # 20 MiB/s
    uri = fresh_uri()
    done = subprocess.run(
        [sys.executable, "-c", SLOW_WRITER, json.dumps(storage(faults.url)), str(budget), uri],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    grown = measured["peak"] - measured["base"]
    # docs/reliability.md states the constant: the budget, plus one tensor file being encoded
    # (tensor_batch_bytes) and its multipart buffer, plus 64 MiB for the allocator and the
    # interpreter.
    bound = budget + 2 * 8 * MIB + 64 * MIB
    assert measured["waits"] > 0, "the store was not slow enough to make record() wait"
    assert grown <= bound, (
        f"RSS grew {grown / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB"
    )
    print(
        f"slow store: RSS grew {grown / MIB:.1f} MiB with a {budget / MIB:.0f} MiB budget"
    )
