"""Every recipe of docs/python.md runs as written, and gives what probelake itself counts.

The `console` blocks of the page are run first (with the probelake binary under test), in a
fresh folder; then each `python` block runs there, in order, and the check registered for its
heading compares its variables with `probelake sql` counts. Blocks that import the `probelake`
package (or torch) are skipped where it is not installed.
"""

import json
import os
import shlex

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, S3_KEY, S3_SECRET, probelake

DOC = ROOT / "docs" / "python.md"


def blocks(kind):
    """(heading, code) for every ```kind block of the page; heading is `Section / Subsection`."""
    found, section, sub = [], "", ""
    lines = DOC.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section, sub = line[3:].strip(), ""
        elif line.startswith("### "):
            sub = line[4:].strip()
        elif line.strip() == f"```{kind}":
            end = lines.index("```", i + 1)
            found.append((f"{section} / {sub}" if sub else section, "\n".join(lines[i + 1 : end])))
            i = end
        i += 1
    return found


def count(sql, *runs):
    """One number from `probelake sql` over runs given as (name, path)."""
    args = [a for name, path in runs for a in ("--run", f"{name}={path}")]
    rows = json.loads(probelake("sql", *args, "-c", sql, "--format", "json").stdout)
    return list(rows[0].values())[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder where the page's commands have run: lake/base, lake/bug, cmp, first_divergence."""
    work = tmp_path_factory.mktemp("recipes")
    for _, text in blocks("console"):
        for line in text.splitlines():
            if line.startswith("$ probelake "):
                args = shlex.split(line[len("$ probelake ") :])
                probelake(*args, "-q", codes=(0, 1), cwd=work)
    return work


def runs(work):
    return ("base", work / "lake" / "base"), ("bug", work / "lake" / "bug")


def leaves(work, where="true"):
    return count(f"SELECT count(*) FROM dump WHERE {where}", runs(work)[0])


UPDATE_2 = "stage = 'actor_update' AND step = 2"


def check_pandas_types(df):
    assert str(df["step"].dtype) == "int64" and str(df["rank"].dtype) == "int64", df.dtypes
    assert not isinstance(df["stage"].dtype, pd.CategoricalDtype), df.dtypes
    for stat in ("max", "min", "mean", "norm"):
        assert str(df[stat].dtype) == "float64"
    shapes = df["shape"].dropna()
    assert len(shapes) and all(s.dtype == np.int64 for s in shapes)


def check_polars_types(df):
    import polars as pl

    want = {"step": pl.Int64, "rank": pl.Int64, "stage": pl.String, "shape": pl.List(pl.Int64)}
    want.update({stat: pl.Float64 for stat in ("max", "min", "mean", "norm")})
    assert "step" in df.schema
    for column, dtype in want.items():
        assert column not in df.schema or df.schema[column] == dtype, (column, df.schema)


def load_pandas(ns, work):
    check_pandas_types(ns["df"])
    assert len(ns["df"]) == leaves(work)


def load_polars(ns, work):
    check_polars_types(ns["df"])
    assert ns["df"].height == leaves(work)


def load_pyarrow(ns, work):
    import pyarrow as pa

    t = ns["table"]
    assert t.num_rows == leaves(work)
    assert t.schema.field("step").type == pa.int64() and t.schema.field("rank").type == pa.int64()
    assert t.schema.field("shape").type == pa.list_(pa.int64())
    assert all(t.schema.field(s).type == pa.float64() for s in ("max", "min", "mean", "norm"))


def load_duckdb(ns, work):
    types = dict(ns["con"].sql("SELECT column_name, column_type FROM (DESCRIBE dump)").fetchall())
    assert types["step"] == "BIGINT" and types["rank"] == "BIGINT", types
    assert types["shape"] == "BIGINT[]" and types["norm"] == "DOUBLE", types
    rows = ns["leaves"].fetchall()
    assert sum(r[3] for r in rows) == leaves(work)
    want = count("SELECT count(*) FROM (SELECT DISTINCT step, stage, rank FROM dump)", runs(work)[0])
    assert len(rows) == want


def filter_polars(ns, work):
    check_polars_types(ns["update"])
    assert ns["update"].height == leaves(work, UPDATE_2) > 0
    assert set(ns["update"]["step"].to_list()) == {2}


def filter_pandas(ns, work):
    check_pandas_types(ns["update"])
    assert len(ns["update"]) == leaves(work, UPDATE_2) > 0
    assert set(ns["update"]["stage"]) == {"actor_update"}


JOIN = """SELECT {what} FROM bug.dump t JOIN base.dump g
          ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank AND t.item = g.item
          WHERE t.section = 'output'"""


def join_polars(ns, work):
    import polars as pl

    out = ns["outputs"]
    check_polars_types(out)
    assert out.height == count(JOIN.format(what="count(*)"), *runs(work)) > 0
    finite = out.filter(pl.col("rel_err").is_finite())["rel_err"].max()
    want = count(JOIN.format(what="max(rel_err(t.norm, g.norm))"), *runs(work))
    assert finite == pytest.approx(want, rel=1e-12) and want > 0


def join_duckdb(ns, work):
    rows = ns["outputs"].fetchall()
    assert len(rows) == count(JOIN.format(what="count(*)"), *runs(work))
    finite = max(r[6] for r in rows if r[6] is not None and np.isfinite(r[6]))
    assert finite == pytest.approx(count(JOIN.format(what="max(rel_err(t.norm, g.norm))"), *runs(work)), rel=1e-12)
    types = dict(zip(ns["outputs"].columns, map(str, ns["outputs"].types)))
    assert types["step"] == "BIGINT" and types["rel_err"] == "DOUBLE", types


def plot_matplotlib(ns, work):
    png = work / "layer_norm_norm.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    lines = ns["ax"].get_lines()
    assert [line.get_label() for line in lines] == ["base", "bug"]
    where = "op = 'Functional.layer_norm' AND direction = 'forward' AND section = 'output' AND path = '0'"
    where += " AND stage = 'actor_update'"
    for line, (name, path) in zip(lines, runs(work)):
        steps = count(f"SELECT count(DISTINCT step) FROM dump WHERE {where}", (name, path))
        assert len(line.get_xdata()) == steps > 0
        last = count(f"SELECT sqrt(sum(norm * norm)) FROM dump WHERE {where} AND step = 2", (name, path))
        assert line.get_ydata()[-1] == pytest.approx(last, rel=1e-12)


def compare_results(ns, work):
    import csv

    cmp = ns["cmp"]
    assert str(cmp["step"].dtype) == "int64" and str(cmp["NormRelativeErr"].dtype) == "float64"
    assert str(cmp["Requires_grad Consistent"].dtype) == "bool"
    # The same comparison as msprobe's CSVs: as many rows, as many errors.
    csv_dir = work / "cmp-csv"
    probelake("compare", work / "lake/bug", work / "lake/base", "-o", csv_dir, "-q", codes=(0, 1))
    rows = [r for f in sorted(csv_dir.rglob("*.csv")) for r in csv.DictReader(f.open(newline=""))]
    assert len(cmp) == len(rows) > 0
    assert len(ns["errors"]) == sum(r["Result"] == "error" for r in rows) > 0
    first = ns["first"]
    assert str(first["step"].dtype) == "int64" and str(first["rel_err"].dtype) == "float64"
    divergence = probelake("divergence", work / "lake/bug", work / "lake/base", "--format", "json", "-q", codes=(0, 1))
    assert len(first) == len(json.loads(divergence.stdout)) > 0


def read_s3(ns, work):
    check_polars_types(ns["per_unit"])
    assert ns["per_unit"]["len"].sum() == leaves(work)


# The package's snippets.


def distinct_units(path):
    return count("SELECT count(*) FROM (SELECT DISTINCT step, stage, rank FROM dump)", ("r", path))


def package_open(ns, work):
    units = ns["lake"].units()
    assert len(units) == distinct_units(work / "lake" / "base") > 0
    assert sum(u.leaves for u in units) == leaves(work)


def package_s3(ns, work):
    per_stage = ns["per_stage"]
    assert per_stage.sum() == leaves(work)
    want = count("SELECT count(DISTINCT stage) FROM dump", runs(work)[0])
    assert len(per_stage) == want


def package_read(ns, work):
    import polars as pl
    import pyarrow as pa

    assert ns["dump"].schema.field("step").type == pa.int64()
    assert ns["dump"].count_rows() == leaves(work)
    update = ns["update"]
    assert len(update) == leaves(work, UPDATE_2) > 0
    assert str(update["step"].dtype) == "int64" and str(update["rank"].dtype) == "int64"
    assert set(update["step"]) == {2}
    outputs = ns["outputs"]
    assert outputs.height == leaves(work, "section = 'output'") > 0
    assert outputs.schema["step"] == pl.Int64


def package_sql(ns, work):
    import polars as pl
    import pyarrow as pa

    worst = ns["worst"]
    assert list(worst.columns) == ["step", "stage", "item", "norm", "norm_base", "rel"]
    assert 0 < len(worst) <= 10 and str(worst["step"].dtype) == "int64"
    assert worst["rel"].max() == pytest.approx(count(JOIN.format(what="max(rel_err(t.norm, g.norm))"), *runs(work)))
    assert ns["table"].num_rows > 0 and ns["table"].schema.field("leaves").type == pa.int64()
    frame = ns["frame"]
    assert isinstance(frame, pl.DataFrame) and frame.schema["leaves"] == pl.Int64
    assert frame["leaves"].to_list() == ns["table"]["leaves"].to_pylist()
    assert sum(ns["table"]["leaves"].to_pylist()) == ns["in_duckdb"][0][0] == leaves(work)


def package_ops(ns, work):
    import csv

    result = ns["result"]
    rows = [r for f in result.files for r in csv.DictReader(f.open(newline=""))]
    assert result.table is None and ns["whole"].table.num_rows == len(rows) > 0
    assert result.errors == len(ns["errors"]) == sum(r["Result"] == "error" for r in rows) > 0
    assert ns["page"].path.is_file() and ns["page"].units > 0 and ns["page"].rows == len(ns["whole"].table)
    book = ns["book"]
    assert book.files and all(f.suffix == ".xlsx" and "actor_update" in f.parts for f in book.files)
    steps = ns["steps"]
    assert set(steps.table.column("step").to_pylist()) == {2} and steps.table.num_rows > 0
    divergence = probelake("divergence", work / "lake/bug", work / "lake/base", "--format", "json", "-q", codes=(0, 1))
    assert len(ns["first"]) == len(json.loads(divergence.stdout)) > 0
    assert ns["units"] == distinct_units(work / "lake" / "base") and ns["files"] > 0
    base = ns["probelake"].open(work / "lake" / "base").units()
    assert [(u.step, u.stage, u.rank, u.leaves) for u in ns["again"]] == [
        (u.step, u.stage, u.rank, u.leaves) for u in base
    ]


def package_writer(ns, work):
    torch = ns["torch"]
    lake = ns["lake"]
    assert [(u.step, u.stage, u.rank) for u in lake.units()] == [(1, "actor_update", 0)]
    stats = ns["stats"].set_index("item")
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    y = linear(torch.randn(8, 64)).detach()
    out = stats.loc["Functional.linear.0.forward.output.0"]
    assert out["min"] == pytest.approx(float(y.min())) and out["min"] < 0  # before the in-place relu
    assert stats.loc["Functional.relu.0.forward.input.0", "min"] == 0.0
    assert list(out["shape"]) == [8, 32] and out["dtype"] == "torch.float32"
    grad = stats.loc["Module.linear.Linear.parameters_grad.bias"]
    want = (y > 0).sum(0).float()  # d sum(relu(y)) / d bias
    assert (grad["max"], grad["min"]) == (float(want.max()), float(want.min()))
    assert (work / "msprobe" / "written").is_dir()
    dumps = list((work / "msprobe" / "written").rglob("dump.json"))
    assert len(dumps) == 1 and "Functional.linear.0.forward" in json.loads(dumps[0].read_text())["data"]


def package_tensors(ns, work):
    assert ns["torch"].equal(ns["back"], ns["w"].t())
    assert ns["lake"].to_arrow("tensor").num_rows == 2


def package_errors(ns, work):
    assert ns["message"].startswith("Schema error: No field named nope")
    done = probelake("sql", work / "lake" / "base", "-c", "SELECT nope FROM dump", codes=(2,))
    assert ns["message"].splitlines()[0] in done.stderr


CHECKS = {
    "Open a dataset": package_open,
    "Open a dataset / On S3": package_s3,
    "Read committed units": package_read,
    "SQL into pyarrow, pandas, polars": package_sql,
    "Compare, divergence, import, export": package_ops,
    "Record from a training job": package_writer,
    "Record from a training job / Tensors too": package_tensors,
    "Errors": package_errors,
    "Load a run / pandas": load_pandas,
    "Load a run / polars": load_polars,
    "Load a run / pyarrow": load_pyarrow,
    "Load a run / DuckDB": load_duckdb,
    "Filter by stage and step / polars": filter_polars,
    "Filter by stage and step / pandas": filter_pandas,
    "Join two runs / polars": join_polars,
    "Join two runs / DuckDB": join_duckdb,
    "Plot one op's norm over steps": plot_matplotlib,
    "Compare and divergence results": compare_results,
    "Read from S3": read_s3,
}


def test_every_recipe_has_a_check():
    assert [h for h, _ in blocks("python")] == list(CHECKS)


def upload_to_s3(work):
    """Copies lake/base to the S3 endpoint under test and points the recipe at it."""
    from pyarrow import fs

    endpoint = os.environ["PROBELAKE_S3_ENDPOINT"]
    s3 = fs.S3FileSystem(
        endpoint_override=endpoint,
        scheme="http" if endpoint.startswith("http://") else "https",
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        allow_bucket_creation=True,
    )
    bucket = os.environ.get("PROBELAKE_S3_BUCKET", "probelake-recipes")
    s3.create_dir(bucket)
    prefix = f"{bucket}/{work.name}/base"
    fs.copy_files(str(work / "lake" / "base"), prefix, destination_filesystem=s3)
    return f"s3://{prefix}"


@pytest.mark.parametrize("heading, code", blocks("python"), ids=[h for h, _ in blocks("python")])
def test_recipe(heading, code, workdir, monkeypatch, request):
    if "import probelake" in code:
        pytest.importorskip("probelake", reason="the probelake package is not installed in this venv")
    if "import torch" in code:
        pytest.importorskip("torch")
    if "PROBELAKE_S3_ENDPOINT" in code:
        if not os.environ.get("PROBELAKE_S3_ENDPOINT"):
            # No S3 of the caller's: the test's own moto server.
            monkeypatch.setenv("PROBELAKE_S3_ENDPOINT", request.getfixturevalue("moto_endpoint"))
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("PROBELAKE_S3_RUN", upload_to_s3(workdir))
    monkeypatch.chdir(workdir)
    namespace = {"__name__": "__recipe__"}
    exec(compile(code, f"docs/python.md ({heading})", "exec"), namespace)
    CHECKS[heading](namespace, workdir)
