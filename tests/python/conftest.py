"""Shared helpers: the probelake binary, the fixtures, and datasets imported from them."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"


def probelake(*args):
    """Runs the probelake binary and returns its completed process (raises on failure)."""
    binary = os.environ.get("PROBELAKE_BIN", str(ROOT / "target" / "debug" / "probelake"))
    return subprocess.run([binary, *map(str, args)], check=True, capture_output=True, text=True)


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
