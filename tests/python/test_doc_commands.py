"""Every console block of README.md and docs/*.md marked runnable runs as written.

A block is marked by the line `<!-- runnable -->` just above its ```console fence. Its `$ `
lines (with `\\` continuations) run in order in one bash, in a fresh empty folder per page
(blocks of one page share it, so a later block can use what an earlier one made), with the
probelake under test and this venv's python first on PATH. A command may exit 0, or 1 where the
answer is "the runs differ" (`compare`, `divergence`); exit 2 and above fails the test. Lines
that are not commands are what the command printed, shown for the reader and not checked.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT, binary

MARK = "<!-- runnable -->"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable_blocks(page: pathlib.Path) -> list[list[str]]:
    """The commands of each runnable block of `page`, continuations joined."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert fence == "```console", (
            f"{page.name}:{i + 1}: {MARK} must stand just above a ```console fence"
        )
        end = lines.index("```", i + 2)
        commands, pending = [], None
        for text in lines[i + 2 : end]:
            if pending is not None:
                pending += "\n" + text
            elif text.startswith("$ "):
                pending = text[2:]
            else:
                continue
            if not pending.endswith("\\"):
                commands.append(pending)
                pending = None
        assert commands, f"{page.name}:{i + 1}: a runnable block with no `$ ` line"
        blocks.append(commands)
    return blocks


MARKED = {page.relative_to(ROOT).as_posix(): runnable_blocks(page) for page in PAGES}
MARKED = {name: blocks for name, blocks in MARKED.items() if blocks}


def script(commands: list[str]) -> str:
    """Bash that runs `commands` in order and stops at the first that exits 2 or more."""
    out = ["set -o pipefail"]
    for n, command in enumerate(commands):
        out.append(command)
        out.append(
            f'rc=$?; if [ $rc -gt 1 ]; then echo "command {n + 1} exited $rc" >&2; exit 3; fi'
        )
    return "\n".join(out)


def test_the_getting_started_page_and_the_readme_have_runnable_blocks():
    assert "docs/getting-started.md" in MARKED and "README.md" in MARKED, sorted(MARKED)


@pytest.mark.parametrize("page", sorted(MARKED))
def test_runnable_commands(page, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "probelake").symlink_to(pathlib.Path(binary()).resolve())
    work = tmp_path / "work"
    work.mkdir()
    # The canned queries (`-f sql/…`) are named relative to a clone's root.
    (work / "sql").symlink_to(ROOT / "sql")
    venv_bin = pathlib.Path(sys.executable).parent
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(bin_dir), str(venv_bin), os.environ["PATH"]]),
    )
    for n, commands in enumerate(MARKED[page]):
        done = subprocess.run(
            ["bash", "-c", script(commands)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (
            f"{page}, runnable block {n + 1}:\n{done.stderr[-3000:]}"
        )
