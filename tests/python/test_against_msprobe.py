"""`probelake compare` next to `msprobe compare` on fresh msprobe runs, cell for cell.

msprobe is the test venv's (mindstudio-probe and torch are in tests/python/requirements.txt),
or the executable $PROBELAKE_MSPROBE names. The runs are made by scripts/gen_msprobe_runs.py (a
small transformer trained on CPU under msprobe) with that venv's python, about 15 s each, and
kept in $PROBELAKE_MSPROBE_DATA (default ~/.cache/probelake/msprobe-runs) for the next run.
Each pair checks its first $PROBELAKE_MSPROBE_CALLS compare calls (default 2, 0 for all of them;
every msprobe compare takes about 5-10 s): `scripts/check-against-msprobe.sh` runs them all and
prints a table.
"""

import os
import pathlib
import sys

import pytest
from conftest import ROOT, binary

sys.path.insert(0, str(ROOT / "scripts"))
import check_against_msprobe as check  # noqa: E402


def msprobe() -> pathlib.Path | None:
    """$PROBELAKE_MSPROBE, else the msprobe of the venv running the tests."""
    named = os.environ.get("PROBELAKE_MSPROBE")
    if named:
        return pathlib.Path(named)
    beside = pathlib.Path(sys.executable).parent / "msprobe"
    return beside if beside.is_file() else None


MSPROBE = msprobe()
pytestmark = pytest.mark.skipif(
    MSPROBE is None,
    reason="no msprobe: this venv lacks mindstudio-probe (tests/python/requirements.txt) and PROBELAKE_MSPROBE is unset",
)
CALLS = int(os.environ.get("PROBELAKE_MSPROBE_CALLS", "2")) or None


@pytest.fixture(scope="module")
def tools():
    gen = pathlib.Path(os.environ.get("PROBELAKE_GEN_MSPROBE", str(check.DEFAULT_GEN)))
    assert MSPROBE is not None and gen.is_file(), gen
    return check.Tools(MSPROBE, pathlib.Path(binary()), gen, check.default_data())


@pytest.mark.parametrize("pair", check.PAIRS, ids=lambda p: p.name)
def test_compare_matches_msprobe(pair, tools, tmp_path):
    results = check.check_pair(tools, pair, tmp_path, calls=CALLS)
    assert results, "no compare call"
    assert all(r.files > 0 and r.rows > 0 for r in results), results
    differing = {r.label: r.differences for r in results if r.differences}
    assert not differing, differing


@pytest.mark.parametrize(
    "pair",
    [p for p in check.PAIRS + check.DA_ONLY if p.name in check.DA_PAIRS],
    ids=lambda p: p.name,
)
def test_divergence_agrees_with_msprobe_da(pair, tools, tmp_path):
    """msprobe -da names, per step folder, the ranks that part before any communication when
    there are such ranks; probelake names every rank's first divergence and says whether it
    came after a communication op, which gives msprobe's answer back."""
    results = check.check_da(tools, pair, tmp_path, calls=CALLS)
    assert results, "no step folder"
    for r in results:
        assert r.same, (r.label, r.msprobe, r.probelake)
