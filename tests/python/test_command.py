"""The `probelake` command that `pip install` gives: the command line, run by the package's native
module (`probelake._cli:main`, `python -m probelake`), answers as the binary does."""

import signal
import subprocess
import sys
import time
import tomllib

import pytest

from conftest import ROOT, probelake, run

pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
import probelake as package  # noqa: E402


def command(*args, codes=(0,), **kwargs):
    """Runs the package's command (as its console script does), as `run` does."""
    return run([sys.executable, "-m", "probelake", *args], codes=codes, **kwargs)


def test_the_console_script_enters_the_command_line():
    project = tomllib.loads(
        (ROOT / "crates/probelake-python/pyproject.toml").read_text()
    )["project"]
    assert project["scripts"] == {"probelake": "probelake._cli:main"}
    from probelake import _cli

    assert callable(_cli.main)


def test_version_is_the_same_in_both_faces():
    ours = command("--version").stdout.strip()
    assert (
        ours
        == probelake("--version").stdout.strip()
        == f"probelake {package.__version__}"
    )


def test_demo_info_and_export_match_the_binary(tmp_path):
    command("demo", tmp_path / "demo", "-q")
    lake = tmp_path / "demo" / "lake" / "base"
    assert command("info", lake).stdout == probelake("info", lake).stdout
    command("export", lake, tmp_path / "back", "-q")
    probelake("export", lake, tmp_path / "back-binary", "-q")
    files = sorted(
        p.relative_to(tmp_path / "back")
        for p in (tmp_path / "back").rglob("*")
        if p.is_file()
    )
    assert files and all(
        (tmp_path / "back" / f).read_bytes()
        == (tmp_path / "back-binary" / f).read_bytes()
        for f in files
    )


def test_exit_codes_and_errors_are_the_binarys(demo_lake, tmp_path):
    # compare exits 1 when some row is `error`, as the binary (and diff) does.
    ours = command(
        "compare",
        demo_lake / "attnbug",
        demo_lake / "base",
        "-o",
        tmp_path / "a",
        "-q",
        codes=(1,),
    )
    theirs = probelake(
        "compare",
        demo_lake / "attnbug",
        demo_lake / "base",
        "-o",
        tmp_path / "b",
        "-q",
        codes=(1,),
    )
    assert ours.stdout == theirs.stdout
    # An error: exit 2 and the same message on stderr.
    missing = tmp_path / "nowhere"
    ours = command("info", missing, codes=(2,))
    assert ours.stderr == probelake("info", missing, codes=(2,)).stderr
    assert ours.stderr.startswith("probelake: ") and str(missing) in ours.stderr
    # A usage mistake: exit 2 and clap's message, naming the program as `probelake`.
    ours = command("import", codes=(2,))
    assert "Usage: probelake import" in ours.stderr


def test_ctrl_c_stops_the_command_with_130(demo_lake):
    long_query = (
        "SELECT count(*) FROM dump a, dump b, dump c WHERE a.norm + b.norm > c.norm"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "probelake",
            "sql",
            demo_lake / "base",
            "-c",
            long_query,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # past Python's start-up and the query's planning
    assert proc.poll() is None, proc.communicate()
    start = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.perf_counter() - start < 10
    assert "interrupted" in err


def test_help_lists_every_command_as_the_binary_does():
    names = [
        "import",
        "export",
        "info",
        "sql",
        "compare",
        "divergence",
        "plot",
        "report",
        "vacuum",
        "synth",
    ]
    names += ["demo", "files", "cluster"]
    helped = command("--help").stdout
    assert helped == probelake("--help").stdout
    for name in names:
        assert f"  {name}" in helped, name
