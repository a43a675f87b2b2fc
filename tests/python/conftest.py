"""Shared helpers: the probelake binary, the fixtures, and datasets imported from them."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "fixtures"


def binary():
    """The probelake binary under test: $PROBELAKE_BIN, or the debug build of this clone."""
    return os.environ.get("PROBELAKE_BIN", str(ROOT / "target" / "debug" / "probelake"))


def run(argv, codes=(0,), **kwargs):
    """Runs `argv` and returns its completed process (text output captured); fails the test
    unless its exit code is one of `codes` (compare and divergence exit 1 when runs differ)."""
    argv = [str(a) for a in argv]
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode in codes, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}"
    return done


def probelake(*args, codes=(0,), cwd=None):
    """Runs the probelake binary under test, as `run` does."""
    return run([binary(), *args], codes=codes, cwd=cwd)


def fixture_runs():
    """Every run folder under tests/data/fixtures/{runs,msprobe}."""
    return sorted(p for group in ("runs", "msprobe") for p in (FIXTURES / group).iterdir() if p.is_dir())


@pytest.fixture(scope="session")
def demo_lake(tmp_path_factory):
    """The demo's two datasets (made by `probelake demo`, no fixtures needed)."""
    root = tmp_path_factory.mktemp("demo")
    probelake("demo", root, "-q")
    return root / "lake"


S3_KEY, S3_SECRET = "testing-key", "testing-secret"
S3_BUCKET = "lake"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    """A moto_server (from this venv) on 127.0.0.1 at a free port, with the bucket S3_BUCKET;
    yields its URL and stops it by its pid at the end of the session."""
    server = pathlib.Path(sys.executable).parent / "moto_server"
    port = free_port()
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline, "moto_server did not start"
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET
        ).create_bucket(Bucket=S3_BUCKET)
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
