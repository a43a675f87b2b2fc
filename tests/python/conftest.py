"""Shared helpers: the probelake binary, the fixtures, and datasets imported from them."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"


def binary():
    """The probelake binary under test: $PROBELAKE_BIN, or the debug build of this clone."""
    return os.environ.get("PROBELAKE_BIN", str(ROOT / "target" / "debug" / "probelake"))


def probelake(*args, codes=(0,), cwd=None):
    """Runs the probelake binary and returns its completed process; fails the test unless its
    exit code is one of `codes` (compare and divergence exit 1 when runs differ)."""
    done = subprocess.run([binary(), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode in codes, f"probelake {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr}"
    return done


def fixture_runs():
    """Every run folder under ../shared/fixtures/{runs,msprobe}, or [] when absent."""
    if not FIXTURES.is_dir():
        return []
    return sorted(p for group in ("runs", "msprobe") for p in (FIXTURES / group).iterdir() if p.is_dir())


@pytest.fixture(scope="session")
def demo_lake(tmp_path_factory):
    """The demo's two datasets (made by `probelake demo`, no fixtures needed)."""
    root = tmp_path_factory.mktemp("demo")
    probelake("demo", root, "-q")
    return root / "lake"
