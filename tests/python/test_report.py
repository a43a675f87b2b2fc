"""`probelake report` in a real browser: Debian's Chromium renders the page (`--dump-dom`,
`--screenshot`), and `tests/report/interact.mjs` (playwright-core driving the same Chromium)
clicks through it. The page's verdict must name the op `probelake divergence` names, its
counts must be `compare`'s, and it must make no request but `file:` and `data:`.

The browser and playwright-core are set up by scripts/test-all.sh (apt's chromium, npm's
playwright-core); without them these tests say what is missing."""

import csv
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

import probelake
from conftest import ROOT, probelake as cli

BROWSERS = ("chromium-headless-shell", "chromium")
# Headless, and without the browser's own background traffic: only the page is under test.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INTERACT = ROOT / "tests" / "report" / "interact.mjs"


def chromium():
    found = os.environ.get("PROBELAKE_CHROMIUM") or next(
        filter(None, map(shutil.which, BROWSERS)), None
    )
    if not found:
        pytest.fail(
            "no Chromium: `apt-get install chromium-headless-shell` (scripts/test-all.sh does)"
        )
    return found


def dump_dom(page: pathlib.Path) -> str:
    done = subprocess.run(
        [chromium(), *FLAGS, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def embedded(page: pathlib.Path) -> dict:
    text = page.read_text(encoding="utf-8")
    data = re.search(
        r'<script type="application/json" id="probelake-data">(.*?)</script>',
        text,
        re.S,
    )
    assert data, "no data element"
    return json.loads(data.group(1))


def compare_counts(target, golden, out: pathlib.Path) -> dict:
    """The counts the page must show, from `probelake compare`'s CSV files."""
    cli("compare", target, golden, "-o", out, "-q", codes=(0, 1))
    counts = {"rows": 0, "errors": 0, "unmatched": 0, "nan_inf": 0}
    for f in sorted(out.rglob("*.csv")):
        for row in csv.DictReader(f.open(newline="")):
            counts["rows"] += 1
            counts["errors"] += row["Result"] == "error"
            counts["unmatched"] += row["Bench Name"] == "N/A"
            stats = [row.get(f"NPU {s}", "") for s in ("max", "min", "mean", "l2norm")]
            counts["nan_inf"] += any(s.lower() in ("nan", "inf", "-inf") for s in stats)
    return counts


def first_divergence(target, golden, threshold):
    """`probelake divergence`'s first row (its rows come ordered by step, stage and rank)."""
    done = cli(
        "divergence",
        target,
        golden,
        "--threshold",
        threshold,
        "--format",
        "json",
        "-q",
        codes=(0, 1),
    )
    rows = json.loads(done.stdout)
    return rows[0]["first_divergence"] if rows else None


def no_external_urls(html: str):
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(
        r"url\(\s*['\"]?([^'\")]*)", html
    )
    external = [
        r
        for r in refs
        if re.match(r"^[a-z][a-z0-9+.-]*:", r, re.I)
        and not r.startswith(("data:", "file:"))
    ]
    external += [r for r in refs if r.startswith("//")]
    assert not external, external


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """Two synthesized runs with a bug, larger than the demo's (4 ranks, 3 steps)."""
    root = tmp_path_factory.mktemp("synth")
    for name, extra in (("base", []), ("bug", ["--bug-layer", "1"])):
        cli(
            "synth",
            root / "msprobe" / name,
            "--layers",
            "4",
            "--ranks",
            "4",
            "--steps",
            "3",
            "-q",
            *extra,
        )
        cli("import", root / "msprobe" / name, root / "lake" / name, "-q")
    return root / "lake"


@pytest.mark.parametrize("runs", ["demo", "synthesized"])
def test_the_page_renders_names_divergences_op_and_counts_compares_rows(
    runs, demo_lake, synthesized, tmp_path
):
    lakes = {
        "demo": (demo_lake / "attnbug", demo_lake / "base"),
        "synthesized": (synthesized / "bug", synthesized / "base"),
    }
    target, golden = lakes[runs]
    page = tmp_path / "report.html"
    cli("report", target, golden, "-o", page, "--threshold", "0", "-q")
    html = page.read_text(encoding="utf-8")
    no_external_urls(html)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    dom = dump_dom(page)
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-ready="1"' in body and 'data-errors=""' in body, body
    op = first_divergence(target, golden, 0)
    assert op is not None
    shown = re.search(r'id="verdict-op"[^>]*>([^<]*)<', dom).group(1)
    assert shown == op
    want = compare_counts(target, golden, tmp_path / "cmp")
    for key, element in (
        ("errors", "count-errors"),
        ("nan_inf", "count-nan"),
        ("unmatched", "count-unmatched"),
    ):
        got = re.search(rf'id="{element}"[^>]*>([^<]*)<', dom).group(1)
        assert int(got) == want[key], (key, got, want)
    data = embedded(page)
    assert data["counts"]["rows"] == want["rows"] and data["first"]["op"] == op
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--screenshot={shot}",
            "--window-size=1400,2000",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.stat().st_size > 20_000, done.stderr


def test_clicking_through_the_page_makes_no_request_but_file_and_data(
    demo_lake, tmp_path
):
    if not (ROOT / "tests" / "report" / "node_modules" / "playwright-core").is_dir():
        pytest.fail(
            "playwright-core missing: `npm ci` in tests/report (scripts/test-all.sh does)"
        )
    target, golden = demo_lake / "attnbug", demo_lake / "base"
    page = tmp_path / "report.html"
    cli("report", target, golden, "-o", page, "-q")
    op = first_divergence(target, golden, 0.5)
    done = subprocess.run(
        ["node", str(INTERACT), str(page), "--expect-op", op],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PROBELAKE_CHROMIUM": chromium()},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for check in (
        "clicking heatmap cell",
        "#node-stack shows",
        "requests after interaction are file: or data:",
    ):
        assert check in done.stdout, (check, done.stdout)


def test_python_writes_the_same_page_and_says_what_it_found(demo_lake, tmp_path):
    target, golden = demo_lake / "attnbug", demo_lake / "base"
    written = probelake.report(
        target, golden, tmp_path / "py.html", threshold=0.0, stage="actor_update"
    )
    cli(
        "report",
        target,
        golden,
        "-o",
        tmp_path / "cli.html",
        "--threshold",
        "0",
        "--stage",
        "actor_update",
        "-q",
    )
    ours, theirs = embedded(written.path), embedded(tmp_path / "cli.html")
    for d in (ours, theirs):
        d.pop("generated")
    assert ours == theirs
    assert (
        written.first == ours["first"]["op"]
        and written.units == len(ours["units"]["step"]) > 0
    )
    assert written.errors == ours["counts"]["errors"] and str(written.path) in repr(
        written
    )
    assert set(ours["units"]["stage"]) == {"actor_update"}
    few = probelake.report(
        target, golden, tmp_path / "few.html", threshold=0.0, worst=3
    )
    assert len(embedded(few.path)["worst"]["name"]) == 3
    with pytest.raises(probelake.ArgumentError, match="threshold"):
        probelake.report(target, golden, tmp_path / "bad.html", threshold=-1)
    assert not (tmp_path / "bad.html").exists()


def test_a_comparison_shows_itself_in_a_notebook(demo_lake):
    result = probelake.compare(demo_lake / "attnbug", demo_lake / "base")
    html = result._repr_html_()
    assert (
        f"<b>{result.errors}</b>" in html
        and html.count("<tr>") == min(result.errors, 20) + 1
    )
