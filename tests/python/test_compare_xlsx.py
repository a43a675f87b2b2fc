"""`probelake compare --xlsx` writes the table of the CSV as a workbook that pandas (openpyxl)
reads back cell for cell: numbers as numbers, `Requires_grad Consistent` as booleans, the rest
as the CSV's text."""

import math

import pandas as pd

from conftest import probelake


def test_xlsx_holds_the_csv_table(demo_lake, tmp_path):
    target, golden = demo_lake / "attnbug", demo_lake / "base"
    unit = ("--step", "1", "--stage", "actor_update")
    probelake("compare", target, golden, *unit, "-o", tmp_path / "csv", "-q", codes=(0, 1))
    probelake("compare", target, golden, *unit, "--xlsx", "-o", tmp_path / "xlsx", "-q", codes=(0, 1))
    [csv_path] = list((tmp_path / "csv").glob("compare_result_*.csv"))
    [xlsx_path] = list((tmp_path / "xlsx").glob("compare_result_*.xlsx"))
    # Named alike, up to the timestamp.
    assert csv_path.stem.rsplit("_", 1)[0] == xlsx_path.stem.rsplit("_", 1)[0] == "compare_result_rank0"

    text = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    book = pd.read_excel(xlsx_path, dtype=object, keep_default_na=False)
    assert list(book.columns) == list(text.columns)
    assert len(book) == len(text) > 0

    numbers = 0
    for column in text.columns:
        for want, got in zip(text[column], book[column]):
            if isinstance(got, bool):
                assert column == "Requires_grad Consistent" and want == str(got)
            elif isinstance(got, (int, float)):
                assert not math.isnan(got) and float(want) == got, (column, want, got)
                numbers += 1
            else:
                assert got == want, (column, want, got)
    assert numbers > len(text), "statistics should be numbers in the workbook"


def test_xlsx_and_another_format_are_refused(demo_lake, tmp_path):
    done = probelake(
        "compare", demo_lake / "attnbug", demo_lake / "base", "--xlsx", "--format", "parquet", "-o", tmp_path, codes=(2,)
    )
    assert "--xlsx" in done.stderr
    assert not any(tmp_path.iterdir())
