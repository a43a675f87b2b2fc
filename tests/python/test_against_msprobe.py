"""`probelake compare` next to `msprobe compare` on fresh msprobe runs, cell for cell.

Runs only when PROBELAKE_MSPROBE names an msprobe executable (its venv must also hold torch:
the runs are made by ../shared/tools/gen_msprobe_runs.py with that venv's python); the runs
are kept in $PROBELAKE_MSPROBE_DATA (default ~/.cache/probelake/msprobe-runs). The first
call generates them (about a minute per run); every msprobe compare takes 10-40 s.
`scripts/check-against-msprobe.sh` runs the same checks and prints a table.
"""

import os
import pathlib
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_against_msprobe as check  # noqa: E402

MSPROBE = os.environ.get("PROBELAKE_MSPROBE")
pytestmark = pytest.mark.skipif(
    not MSPROBE, reason="PROBELAKE_MSPROBE not set: no msprobe to compare with (scripts/check-against-msprobe.sh)"
)


@pytest.fixture(scope="module")
def tools():
    gen = pathlib.Path(os.environ.get("PROBELAKE_GEN_MSPROBE", str(check.DEFAULT_GEN)))
    if not gen.is_file():
        pytest.skip(f"{gen} not found")
    binary = os.environ.get("PROBELAKE_BIN", str(ROOT / "target" / "debug" / "probelake"))
    return check.Tools(pathlib.Path(MSPROBE), pathlib.Path(binary), gen, check.default_data())


@pytest.mark.parametrize("pair", check.PAIRS, ids=lambda p: p.name)
def test_compare_matches_msprobe(pair, tools, tmp_path):
    results = check.check_pair(tools, pair, tmp_path)
    assert results, "no compare call"
    assert all(r.files > 0 and r.rows > 0 for r in results), results
    differing = {r.label: r.differences for r in results if r.differences}
    assert not differing, differing


@pytest.mark.parametrize("pair", [p for p in check.PAIRS + check.DA_ONLY if p.name in check.DA_PAIRS],
                         ids=lambda p: p.name)
def test_divergence_agrees_with_msprobe_da(pair, tools, tmp_path):
    """msprobe -da names, per step folder, the ranks that part before any communication when
    there are such ranks; probelake names every rank's first divergence and says whether it
    came after a communication op, which gives msprobe's answer back."""
    results = check.check_da(tools, pair, tmp_path)
    assert results, "no step folder"
    for r in results:
        assert r.same, (r.label, r.msprobe, r.probelake)
