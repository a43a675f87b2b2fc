"""`probelake compare --xlsx` writes the table of the CSV as msprobe 26.2's `--xlsx` writes it:
each cell is the Python object msprobe's DataFrame holds, as pandas' `to_excel` (openpyxl)
stores it. `expected_cell` is that rule, column by column, from msprobe's source
(mindstudio-probe 26.2.0, `msprobe/core/compare/`); `MSPROBE_CELLS` pins cells read back from
workbooks msprobe itself wrote for fixture pairs."""

import csv
import math
import pathlib
import re

import openpyxl
import pytest
from conftest import FIXTURES, probelake

RUNS = FIXTURES / "runs"
GENERATED = FIXTURES / "msprobe" / "generated-head-8ff00da3-pytorch2.8-cpu"

# Tensor mode's metric columns: the algorithms' floats, or tokens (`unsupported`, `Nan`, ...).
METRICS = {
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
}
STATS = re.compile(r"^(NPU|Bench) (max|min|mean|l2norm)$")
# Python's repr of an int or a finite float.
PY_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[-+]\d+)?$")
PY_FLOAT = re.compile(r"^-?\d+(\.\d+(e[-+]\d+)?|e[-+]\d+)$")

Cell = tuple[str, object]  # openpyxl's (data_type, value)


def g16(x: float) -> int | float:
    """What openpyxl reads back from a number it wrote: the text `"%.16g" % x`, an int unless
    that text has a `.` or an exponent."""
    text = f"{x:.16g}"
    return float(text) if any(c in text for c in ".eE") else int(text)


def number_or_text(text: str) -> Cell:
    """A cell msprobe holds as a Python number when it is one: the CSV's ` inf` is a float
    infinity, which `to_excel` writes as the text `inf` (`inf_rep`); `Nan`, `None`, tokens and
    strings are text."""
    if text in (" inf", " -inf"):
        return "s", text.strip()
    if PY_NUMBER.match(text):
        return "n", g16(float(text))
    return "s", text


def expected_cell(mode: str, column: str, text: str, row: dict[str, str]) -> Cell:
    """The cell msprobe 26.2's `--xlsx` writes where its CSV has `text`, in a table of mode
    `mode` (`statistics`, `md5`, `tensor`)."""
    if column == "Requires_grad Consistent":
        # make_result_df: `result[NPU_REQ_GRAD] == result[BENCH_REQ_GRAD]`, a bool Series.
        return "b", text == "True"
    if mode == "tensor" and column in METRICS:
        return number_or_text(text)
    if column in ("NPU MD5", "BENCH MD5"):
        # The leaf's `md5` as json.load gives it: a digest string, or (xor mode, 0-d float
        # tensor) a float, which Python prints with a `.` or a signed exponent.
        return number_or_text(text) if PY_FLOAT.match(text) else ("s", text)
    stat = STATS.match(column)
    if stat:
        # gen_op_item: a tensor's Max/Min/Mean/Norm as json.load gives them, booleans (a bool
        # tensor's Max/Min) and None as str; a scalar argument's `value` in all four, a bool
        # staying a bool; a peer rank (`...src`/`...dst`, dtype its JSON type) str(value).
        side = stat.group(1)
        dtype, name = row[f"{side} Dtype"], row[f"{side} Name"]
        if dtype == "<class 'bool'>" and text in ("True", "False"):
            return "b", text == "True"
        if dtype.startswith("<class '") and dtype not in (
            "<class 'int'>",
            "<class 'float'>",
        ):
            return "s", text
        if name.rsplit(".", 1)[-1] in ("src", "dst", "group_src", "group_dst") and dtype == "int":
            return "s", text
        return number_or_text(text)
    # Names, dtypes, shapes, Requires_grad (gen_op_item's str(bool)), Result, Err_message,
    # stack, Data_name, and in statistics mode the differences and relative errors
    # (CalcStatsDiff.calc_summary_diff: '0', tokens, `diff.astype(str)`).
    return "s", text


def mode_of(header: list[str]) -> str:
    return "tensor" if "Cosine" in header else "md5" if "NPU MD5" in header else "statistics"


# Cells of workbooks written by `msprobe compare -tp TARGET -gp GOLDEN -o OUT --xlsx`
# (mindstudio-probe 26.2.0, pandas 3.1.1, openpyxl 3.1.5) for fixture pairs, as openpyxl reads
# them back: (pair, NPU Name, column) -> (data_type, value).
MSPROBE_CELLS: dict[tuple[str, str, str], Cell] = {
    # Statistics differences and relative errors are strings, even `0` and `-10.0`.
    ("stats-2rank", "Functional.embedding.0.forward.input.0", "Max diff"): ("s", "0"),
    ("stats-2rank", "Functional.embedding.0.forward.input.0", "Min diff"): (
        "s",
        "-10.0",
    ),
    ("stats-2rank", "Functional.embedding.0.forward.input.0", "MinRelativeErr"): (
        "s",
        "83.33333333333334%",
    ),
    ("stats-2rank", "Functional.embedding.0.forward.input.0", "NPU max"): ("n", 57),
    ("stats-2rank", "Functional.embedding.0.forward.input.0", "NPU Requires_grad"): (
        "s",
        "False",
    ),
    (
        "stats-2rank",
        "Functional.embedding.0.forward.input.0",
        "Requires_grad Consistent",
    ): ("b", True),
    # A bool tensor's Max is the string 'True', a bool argument's value the bool False.
    ("mix-statistics", "Tensor.__gt__.0.forward.output.0", "NPU max"): ("s", "True"),
    ("mix-statistics", "Tensor.__gt__.0.forward.output.0", "NPU mean"): ("s", "None"),
    ("mix-statistics", "Functional.relu.0.forward.input.inplace", "NPU max"): (
        "b",
        False,
    ),
    ("mix-statistics", "Torch.sum.0.forward.input.dtype", "NPU max"): (
        "s",
        "torch.int64",
    ),
    # Float infinity and NaN: `inf` (pandas' inf_rep) and msprobe's string `Nan`.
    ("mix-statistics", "Torch.mul.0.forward.input.0", "NPU max"): ("s", "inf"),
    ("mix-statistics", "Torch.add.0.forward.input.0", "NPU max"): ("s", "Nan"),
    # openpyxl writes `%.16g`: an exponent from 1e16 up, read back as a float.
    ("mix-statistics", "Torch.mul.2.forward.input.0", "NPU max"): (
        "n",
        1.000000020040877e20,
    ),
    ("mix-statistics", "Torch.mul.2.forward.input.0", "NPU min"): (
        "n",
        -3.499999934319931e-07,
    ),
    ("mix-statistics", "Functional.linear.0.forward.input.0", "NPU max"): (
        "n",
        1.688101530075073,
    ),
    # md5 digests are strings, also when they are all digits.
    ("md5-nan", "Tensor.masked_fill.1.forward.output.0", "NPU MD5"): ("s", "22121996"),
    # Tensor-mode metrics are numbers or tokens.
    ("tensor", "Functional.embedding.0.forward.input.2", "MaxRelativeErr"): (
        "s",
        "unsupported",
    ),
    ("tensor", "Functional.embedding.0.forward.output.0", "Cosine"): ("n", 1),
    ("tensor", "Functional.embedding.0.forward.input.5", "NPU max"): ("b", False),
}

PAIRS: dict[str, tuple[pathlib.Path, pathlib.Path]] = {
    "stats-2rank": (
        RUNS / "plain-mix-stats-2rank/step0/rank1/dump.json",
        RUNS / "plain-mix-stats-2rank/step0/rank0/dump.json",
    ),
    "mix-statistics": (
        GENERATED / "mix-statistics/step1/proc24249/dump.json",
        GENERATED / "mix-statistics/step0/proc24249/dump.json",
    ),
    "md5-nan": (RUNS / "plain-l1-md5-bf16-nan", RUNS / "plain-l1-md5-bf16-base"),
    "tensor": (RUNS / "plain-l1-tensor-attnbug", RUNS / "plain-l1-tensor-base"),
}


def one_dump(path: pathlib.Path) -> pathlib.Path:
    """`path` itself when it is a dump.json, else the single `step0/proc*/dump.json` under it."""
    if path.suffix == ".json":
        return path
    [dump] = sorted(path.glob("step0/proc*/dump.json"))
    return dump


def read_book(path: pathlib.Path) -> tuple[list[str], list[list[Cell]]]:
    """The header and the rows of every sheet (in order) of a workbook, as openpyxl reads it."""
    book = openpyxl.load_workbook(path)
    rows: list[list[Cell]] = []
    header: list[str] = []
    for sheet in book.worksheets:
        cells = [[(c.data_type, c.value) for c in row] for row in sheet.iter_rows()]
        header = [str(v) for _, v in cells[0]]
        rows += cells[1:]
    return header, rows


def compare_both(target: pathlib.Path, golden: pathlib.Path, out: pathlib.Path, *unit: str):
    """The CSV rows and the workbook of one compare."""
    probelake("compare", target, golden, *unit, "-o", out / "csv", "-q", codes=(0, 1))
    probelake(
        "compare",
        target,
        golden,
        *unit,
        "--xlsx",
        "-o",
        out / "xlsx",
        "-q",
        codes=(0, 1),
    )
    [csv_path] = list((out / "csv").glob("compare_result_*.csv"))
    [xlsx_path] = list((out / "xlsx").glob("compare_result_*.xlsx"))
    # Named alike, up to the timestamp.
    assert csv_path.stem.rsplit("_", 1)[0] == xlsx_path.stem.rsplit("_", 1)[0]
    with open(csv_path, newline="") as f:
        text = list(csv.reader(f))
    return text, read_book(xlsx_path)


def same(got: Cell, want: Cell) -> bool:
    """Equal data type, Python type and value (NaN never occurs: msprobe writes `Nan`)."""
    (gt, gv), (wt, wv) = got, want
    if isinstance(wv, float) and math.isnan(wv):
        return False
    return gt == wt and type(gv) is type(wv) and gv == wv


def check_rule(text: list[list[str]], header: list[str], rows: list[list[Cell]]) -> dict[str, int]:
    """Asserts that every workbook cell is `expected_cell` of its CSV text; returns how many
    cells of each data type there were."""
    assert header == text[0]
    assert len(rows) == len(text) - 1 > 0
    mode = mode_of(header)
    kinds = {"s": 0, "n": 0, "b": 0}
    for csv_row, book_row in zip(text[1:], rows):
        named = dict(zip(header, csv_row))
        for column, value, got in zip(header, csv_row, book_row):
            want = expected_cell(mode, column, value, named)
            assert same(got, want), (named["NPU Name"], column, value, got, want)
            kinds[got[0]] += 1
    return kinds


def test_xlsx_holds_the_csv_table(demo_lake, tmp_path):
    target, golden = demo_lake / "attnbug", demo_lake / "base"
    text, (header, rows) = compare_both(target, golden, tmp_path, "--step", "1", "--stage", "actor_update")
    kinds = check_rule(text, header, rows)
    assert mode_of(header) == "statistics"
    # Statistics are numbers, Requires_grad Consistent booleans, the differences text.
    assert kinds["n"] > len(rows) and kinds["b"] >= len(rows), kinds
    at = header.index("Max diff")
    assert all(row[at][0] == "s" for row in rows)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_xlsx_cells_are_msprobes(pair, tmp_path):
    target, golden = (one_dump(p) for p in PAIRS[pair])
    text, (header, rows) = compare_both(target, golden, tmp_path)
    kinds = check_rule(text, header, rows)
    # md5 mode has no statistics columns: nothing but text and Requires_grad Consistent.
    assert kinds["s"] and kinds["b"] and (kinds["n"] > 0) == (mode_of(header) != "md5"), kinds
    pinned = {(name, column): cell for (p, name, column), cell in MSPROBE_CELLS.items() if p == pair}
    assert pinned, "no msprobe cell pinned for this pair"
    at = {column: i for i, column in enumerate(header)}
    for (name, column), want in pinned.items():
        [row] = [r for r in rows if r[0][1] == name]
        assert same(row[at[column]], want), (name, column, row[at[column]], want)


def test_xlsx_and_another_format_are_refused(demo_lake, tmp_path):
    done = probelake(
        "compare",
        demo_lake / "attnbug",
        demo_lake / "base",
        "--xlsx",
        "--format",
        "parquet",
        "-o",
        tmp_path,
        codes=(2,),
    )
    assert "--xlsx" in done.stderr
    assert not any(tmp_path.iterdir())
