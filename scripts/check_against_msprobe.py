#!/usr/bin/env python3
"""Runs `msprobe compare` and `probelake compare` on the same pairs of real msprobe runs and
checks that the CSVs agree cell for cell (the rules of tests/e2e/compare.rs); with --da also
`msprobe compare -da` against `probelake divergence` on multi-rank step folders.

The runs are made by scripts/gen_msprobe_runs.py (a small transformer trained on CPU
under msprobe's PrecisionDebugger) into a data folder outside the repository, once; later
calls reuse them. scripts/check-against-msprobe.sh sets up the msprobe venv and calls this;
tests/python/test_against_msprobe.py runs the same checks under pytest.

Standard library only, so that it runs under any Python 3.10+.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_GEN = ROOT / "scripts" / "gen_msprobe_runs.py"

# Run name -> arguments of gen_msprobe_runs.py. Pairs share a seed (same weights and batches)
# unless the point is that everything differs.
RUNS = {
    "verl-mix-l4-base": ["--layout", "verl", "--level", "mix", "--layers", "4"],
    "verl-mix-l4-attnbug": ["--layout", "verl", "--level", "mix", "--layers", "4", "--bug", "attn_scale"],
    "verl-mix-2rank-base": ["--layout", "verl", "--level", "mix", "--ranks", "2"],
    "verl-mix-2rank-attnbug": ["--layout", "verl", "--level", "mix", "--ranks", "2", "--bug", "attn_scale"],
    "plain-mix-md5-base": ["--level", "mix", "--task", "md5"],
    "plain-mix-md5-nan": ["--level", "mix", "--task", "md5", "--bug", "nan"],
    "plain-mix-tensor-base": ["--level", "mix", "--task", "tensor", "--steps", "1"],
    "plain-mix-tensor-bf16": ["--level", "mix", "--task", "tensor", "--steps", "1", "--dtype", "bf16"],
    "plain-mix-tensor-nan": ["--level", "mix", "--task", "tensor", "--steps", "1", "--bug", "nan"],
    "plain-l0-stats-seed0": ["--level", "L0"],
    "plain-l0-stats-seed1": ["--level", "L0", "--seed", "1"],
    "plain-mix-stats-2rank-base": ["--level", "mix", "--ranks", "2", "--steps", "3"],
    "plain-mix-stats-2rank-nan": ["--level", "mix", "--ranks", "2", "--steps", "3", "--bug", "nan"],
    "plain-l1-stats-l8w64-base": ["--level", "L1", "--layers", "8", "--width", "64"],
    "plain-l1-stats-l8w64-attnbug": ["--level", "L1", "--layers", "8", "--width", "64", "--bug", "attn_scale"],
}


@dataclasses.dataclass(frozen=True)
class Pair:
    """A target run compared with a golden run.

    form: "files" compares every dump.json of the target with the golden's at the same place
    (proc<pid> folders matched by position); "steps" compares every folder holding rank*
    (or one proc<pid> folder), as directories (msprobe's step-folder form, one CSV per rank).
    """

    name: str
    target: str
    golden: str
    form: str
    what: str


PAIRS = [
    Pair("verl-mix-l4__attnbug_vs_base", "verl-mix-l4-attnbug", "verl-mix-l4-base", "files",
         "verl layout, level mix (modules + APIs), 4 layers, 2 steps x 3 stages, attention-scale bug"),
    Pair("verl-mix-2rank__attnbug_vs_base", "verl-mix-2rank-attnbug", "verl-mix-2rank-base", "steps",
         "verl layout, mix, 2 ranks (all_reduce of grads), step folders compared as directories"),
    Pair("plain-mix-md5__nan_vs_base", "plain-mix-md5-nan", "plain-mix-md5-base", "steps",
         "md5 mode, mix, fp32, 0/0 bug spreading NaN/inf"),
    Pair("plain-mix-tensor__bf16_vs_fp32", "plain-mix-tensor-bf16", "plain-mix-tensor-base", "files",
         "tensor mode, mix (forward + backward tensors), bf16 target vs fp32 golden"),
    Pair("plain-mix-tensor__nan_vs_base", "plain-mix-tensor-nan", "plain-mix-tensor-base", "files",
         "tensor mode, mix, NaN/inf at places the golden has none"),
    Pair("plain-l0-stats__seed1_vs_seed0", "plain-l0-stats-seed1", "plain-l0-stats-seed0", "files",
         "statistics, L0 (modules only, backward renumbering of modules), every value differs"),
    Pair("plain-mix-stats-2rank__nan_vs_base", "plain-mix-stats-2rank-nan", "plain-mix-stats-2rank-base", "steps",
         "statistics, mix, 2 ranks x 3 steps, NaN/inf bug"),
    Pair("plain-l1-stats-l8w64__attnbug_vs_base", "plain-l1-stats-l8w64-attnbug", "plain-l1-stats-l8w64-base",
         "files", "statistics, L1, 8 layers of width 64, attention-scale bug"),
]

# A 2-rank pair made by editing a generated run (see make_asymmetric): only rank 0 parts
# before the all_reduce.
ASYMMETRIC = "plain-mix-stats-2rank__edited_rank0_before_rank1_after_comm"

# Pairs whose step folders hold rank folders: where `-da` applies.
DA_PAIRS = ["verl-mix-2rank__attnbug_vs_base", "plain-mix-stats-2rank__nan_vs_base", ASYMMETRIC]
DA_ONLY = [Pair(ASYMMETRIC, "", "", "steps", "2 ranks: rank 0 parts before the all_reduce, rank 1 only after it")]

STAMP = re.compile(r"_\d{14}(?=(_part_\d+)?\.csv$)")
PROC = re.compile(r"^proc\d+$")
RANK = re.compile(r"^rank(0|[1-9][0-9]*)?$")


@dataclasses.dataclass
class Tools:
    msprobe: pathlib.Path
    probelake: pathlib.Path
    gen: pathlib.Path
    data: pathlib.Path

    @property
    def python(self) -> pathlib.Path:
        """The interpreter of msprobe's venv (gen_msprobe_runs.py needs torch and msprobe)."""
        return self.msprobe.parent / "python"


def ensure_run(tools: Tools, name: str, log=print) -> pathlib.Path:
    """The run folder, generated on first use (into a temporary name, renamed when complete)."""
    final = tools.data / name
    if final.is_dir():
        return final
    tools.data.mkdir(parents=True, exist_ok=True)
    tmp = tools.data / f".{name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"generating {name}: gen_msprobe_runs.py {' '.join(RUNS[name])}")
    proc = subprocess.run([str(tools.python), str(tools.gen), str(tmp), *RUNS[name]],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"gen_msprobe_runs.py {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    tmp.rename(final)
    return final


def _normalised(rel: pathlib.Path) -> tuple:
    return tuple("proc" if PROC.match(p) else p for p in rel.parts)


def invocations(pair: Pair, target: pathlib.Path, golden: pathlib.Path) -> list:
    """(label, target path, golden path) for each compare call of a pair, as msprobe takes them."""
    out = []
    if pair.form == "files":
        goldens = {_normalised(p.relative_to(golden)): p for p in sorted(golden.rglob("dump.json"))}
        for t in sorted(target.rglob("dump.json")):
            key = _normalised(t.relative_to(target))
            if key in goldens:
                out.append(("/".join(key[:-1]), t, goldens[key]))
    else:
        for t in sorted(p for p in target.rglob("*") if p.is_dir()):
            if any(RANK.match(c.name) or PROC.match(c.name) for c in t.iterdir() if c.is_dir()):
                g = golden / t.relative_to(target)
                if g.is_dir():
                    out.append((str(t.relative_to(target)), t, g))
    return out


def read_csvs(out: pathlib.Path) -> dict:
    """Every CSV below `out`, keyed by its relative path without msprobe's timestamp."""
    found = {}
    for p in sorted(out.rglob("*.csv")):
        with open(p, newline="", encoding="utf-8") as f:
            found[STAMP.sub("", str(p.relative_to(out)))] = list(csv.reader(f))
    return found


def same_cell(column: str, ours: str, theirs: str) -> bool:
    """msprobe's cell rules of tests/e2e/compare.rs: text equality after one leading space is
    dropped (` inf`); Cosine and EucDist may differ in the last bits (BLAS order)."""
    ours, theirs = ours.removeprefix(" "), theirs.removeprefix(" ")
    if ours == theirs:
        return True
    if column in ("Cosine", "EucDist"):
        try:
            a, b = float(ours), float(theirs)
        except ValueError:
            return False
        return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300)
    return False


def table_differences(ours: list, theirs: list, limit: int = 5) -> list:
    """The first differences between two CSV tables (header row first)."""
    diffs = []
    if not ours or not theirs:
        return [f"empty table: ours {len(ours)} rows, msprobe {len(theirs)}"]
    if ours[0] != theirs[0]:
        return [f"header differs:\n  ours    {ours[0]}\n  msprobe {theirs[0]}"]
    header = theirs[0]
    for i, (a, b) in enumerate(zip(ours[1:], theirs[1:]), start=1):
        for j, column in enumerate(header):
            x = a[j] if j < len(a) else "<missing>"
            y = b[j] if j < len(b) else "<missing>"
            if not same_cell(column, x, y):
                diffs.append(f"row {i} ({b[0] if b else ''}), {column}: ours {x!r}, msprobe {y!r}")
                if len(diffs) >= limit:
                    return diffs
    if len(ours) != len(theirs):
        diffs.append(f"ours {len(ours) - 1} rows, msprobe {len(theirs) - 1}")
    return diffs


def dir_differences(ours: pathlib.Path, theirs: pathlib.Path) -> tuple:
    """(CSV files, rows, differences) between two output folders, files matched by name
    without the timestamp."""
    a, b = read_csvs(ours), read_csvs(theirs)
    diffs = []
    if sorted(a) != sorted(b):
        diffs.append(f"files differ: ours {sorted(a)}, msprobe {sorted(b)}")
    if not b:
        diffs.append("msprobe wrote no CSV")
    rows = 0
    for name in sorted(set(a) & set(b)):
        rows += len(b[name]) - 1
        diffs.extend(f"{name}: {d}" for d in table_differences(a[name], b[name]))
    return len(b), rows, diffs


def _run(cmd: list, what: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # probelake compare exits 1 when some Result is `error`
        raise RuntimeError(f"{what} failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stderr[-3000:]}")
    return proc


@dataclasses.dataclass
class Checked:
    label: str
    files: int
    rows: int
    differences: list


def check_pair(tools: Tools, pair: Pair, work: pathlib.Path, log=print, calls: int | None = None) -> list:
    """Runs both tools on every invocation of a pair (the first `calls` of them when given);
    one `Checked` per invocation."""
    target, golden = ensure_run(tools, pair.target, log), ensure_run(tools, pair.golden, log)
    results = []
    for n, (label, t, g) in enumerate(invocations(pair, target, golden)[:calls]):
        ms_out, pl_out = work / pair.name / f"{n}-msprobe", work / pair.name / f"{n}-probelake"
        _run([tools.msprobe, "compare", "-tp", t, "-gp", g, "-o", ms_out], "msprobe compare")
        _run([tools.probelake, "compare", t, g, "-o", pl_out], "probelake compare")
        files, rows, diffs = dir_differences(pl_out, ms_out)
        results.append(Checked(label, files, rows, diffs))
        log(f"  {pair.name} {label}: {files} CSV, {rows} rows, {'OK' if not diffs else 'DIFFERENT'}")
    if not results:
        raise RuntimeError(f"{pair.name}: no dump files to compare under {target}")
    return results


# ---- first divergence: msprobe compare -da vs probelake divergence -------------------------


def msprobe_da(tools: Tools, t: pathlib.Path, g: pathlib.Path, out: pathlib.Path) -> dict:
    """rank -> [op_name, ...] that `msprobe compare -da` reports (empty when it finds none)."""
    _run([tools.msprobe, "compare", "-tp", t, "-gp", g, "-o", out, "-da"], "msprobe compare -da")
    reports = sorted(glob.glob(str(out / "diff_analyze_*.json")))
    if not reports:
        return {}
    with open(reports[-1], encoding="utf-8") as f:
        report = json.load(f)
    return {int(k.removeprefix("rank_")): [n["op_name"] for n in v] for k, v in report.items()}


def probelake_divergence(tools: Tools, t: pathlib.Path, g: pathlib.Path) -> dict:
    """rank -> (first diverging entry, whether a communication op ran before it), as
    `probelake divergence` reports them for one step folder."""
    proc = _run([tools.probelake, "divergence", t, g, "--format", "csv"], "probelake divergence")
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    return {int(r["rank"]): (r["first_divergence"], r["after_communication"] == "true")
            for r in rows if r.get("first_divergence")}


def as_msprobe_da(found: dict) -> dict:
    """What msprobe -da reports, from probelake's per-rank answers: the ranks that part before
    any communication when there are such ranks (msprobe's first stage), else every rank's
    first divergence (msprobe then walks its communication graph, which this does not)."""
    before = {rank: [name] for rank, (name, after) in found.items() if not after}
    return before or {rank: [name] for rank, (name, _) in found.items()}


@dataclasses.dataclass
class DaChecked:
    label: str
    msprobe: dict
    probelake: dict

    @property
    def expected(self) -> dict:
        return as_msprobe_da(self.probelake)

    @property
    def same(self) -> bool:
        return self.msprobe == self.expected


def check_da(tools: Tools, pair: Pair, work: pathlib.Path, log=print, calls: int | None = None) -> list:
    """`-da` on every step folder of a multi-rank pair (the first `calls` of them when given),
    next to `probelake divergence`."""
    if pair.name == ASYMMETRIC:
        target, golden = make_asymmetric(tools, log)
    else:
        target, golden = ensure_run(tools, pair.target, log), ensure_run(tools, pair.golden, log)
    results = []
    for n, (label, t, g) in enumerate(invocations(dataclasses.replace(pair, form="steps"), target, golden)[:calls]):
        ms = msprobe_da(tools, t, g, work / pair.name / f"{n}-da")
        r = DaChecked(label, ms, probelake_divergence(tools, t, g))
        results.append(r)
        log(f"  {pair.name} {label}: msprobe -da {ms}, probelake {r.probelake}: {'same' if r.same else 'DIFFERENT'}")
    return results


def make_asymmetric(tools: Tools, log=print) -> tuple:
    """A 2-rank pair where rank 0 parts before the all_reduce (a gelu output's norm x3) and
    rank 1 only after it (the first in-place add after the all_reduce): step0 of
    plain-mix-stats-2rank-base, edited with Python's json (same formatting as msprobe)."""
    base = ensure_run(tools, "plain-mix-stats-2rank-base", log)
    root = tools.data / ASYMMETRIC
    if not root.is_dir():
        tmp = tools.data / f".{ASYMMETRIC}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        for side in ("target", "golden"):
            shutil.copytree(base / "step0", tmp / side / "step0")
        for rank, where in ((0, "before"), (1, "after")):
            path = tmp / "target" / "step0" / f"rank{rank}" / "dump.json"
            with open(path, encoding="utf-8") as f:
                dump = json.load(f)
            keys = list(dump["data"])
            comm = next(i for i, k in enumerate(keys) if k.startswith("Distributed.all_reduce"))
            if where == "before":
                key = next(k for k in keys[:comm] if k.startswith("Functional.gelu"))
            else:
                key = next(k for k in keys[comm + 1:] if k.startswith("Tensor.add_"))
            out = dump["data"][key]["output"]
            leaf = out[0] if isinstance(out, list) else out
            leaf["Norm"] = leaf["Norm"] * 3
            with open(path, "w", encoding="utf-8") as f:
                json.dump(dump, f, indent=1)
        tmp.rename(root)
    return root / "target", root / "golden"


def tools_from(args) -> Tools:
    msprobe = args.msprobe or os.environ.get("PROBELAKE_MSPROBE") or shutil.which("msprobe")
    if not msprobe:
        sys.exit("no msprobe: pass --msprobe or set PROBELAKE_MSPROBE (scripts/check-against-msprobe.sh sets one up)")
    binary = args.probelake or os.environ.get("PROBELAKE_BIN") or shutil.which("probelake")
    if not binary:
        sys.exit("no probelake binary: pass --probelake or set PROBELAKE_BIN")
    return Tools(pathlib.Path(msprobe), pathlib.Path(binary), pathlib.Path(args.gen), pathlib.Path(args.data))


def default_data() -> pathlib.Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(os.environ.get("PROBELAKE_MSPROBE_DATA") or os.path.join(cache, "probelake", "msprobe-runs"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--msprobe", help="msprobe executable (default $PROBELAKE_MSPROBE, then PATH)")
    p.add_argument("--probelake", help="probelake binary (default $PROBELAKE_BIN, then PATH)")
    p.add_argument("--gen", default=os.environ.get("PROBELAKE_GEN_MSPROBE", str(DEFAULT_GEN)),
                   help="gen_msprobe_runs.py")
    p.add_argument("--data", default=str(default_data()),
                   help="where generated runs are kept (default $PROBELAKE_MSPROBE_DATA or ~/.cache/probelake/msprobe-runs)")
    p.add_argument("--work", help="keep both tools' outputs here (default: a temporary folder)")
    p.add_argument("--pairs", nargs="*", help="only these pairs (names as listed by --list)")
    p.add_argument("--da", action="store_true", help="also compare `msprobe compare -da` with `probelake divergence`")
    p.add_argument("--only-da", action="store_true", help="only the -da comparison")
    p.add_argument("--list", action="store_true", help="list the pairs and exit")
    p.add_argument("--diff-dirs", nargs=2, metavar=("OURS", "MSPROBE"),
                   help="only compare two folders of compare results already written, and exit")
    args = p.parse_args()
    if args.diff_dirs:
        files, rows, diffs = dir_differences(*map(pathlib.Path, args.diff_dirs))
        print(f"{files} CSV, {rows} rows: {'same, cell for cell' if not diffs else 'DIFFERENT'}", *diffs, sep="\n")
        return 1 if diffs else 0
    if args.list:
        for pair in PAIRS:
            print(f"{pair.name:42} {pair.what}")
        return 0
    tools = tools_from(args)
    pairs = [q for q in PAIRS if (not args.pairs or q.name in args.pairs) and not args.only_da]
    work = pathlib.Path(args.work) if args.work else pathlib.Path(tempfile.mkdtemp(prefix="probelake-vs-msprobe-"))
    failed = 0
    print("| pair | compare calls | CSV files | rows | result |")
    summary = []
    for pair in pairs:
        results = check_pair(tools, pair, work, log=lambda m: print(m, file=sys.stderr))
        bad = [r for r in results if r.differences]
        failed += len(bad)
        for r in bad:
            print(f"{pair.name} {r.label}:", *r.differences, sep="\n  ", file=sys.stderr)
        summary.append(f"| {pair.name} | {len(results)} | {sum(r.files for r in results)} | "
                       f"{sum(r.rows for r in results)} | {'cell for cell' if not bad else f'{len(bad)} differ'} |")
    print("\n".join(summary))
    if args.da or args.only_da:
        print("\n| pair | step folder | msprobe -da | probelake divergence (name, after_communication) | agree |")
        for pair in (q for q in PAIRS + DA_ONLY if q.name in DA_PAIRS and (not args.pairs or q.name in args.pairs)):
            for r in check_da(tools, pair, work, log=lambda m: print(m, file=sys.stderr)):
                print(f"| {pair.name} | {r.label} | {r.msprobe} | {r.probelake} | {'yes' if r.same else 'no'} |")
                failed += not r.same
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
