"""pyarrow, pandas, polars and DuckDB read what probelake writes, with the right types."""

import csv
import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from conftest import FIXTURES, fixture_runs, probelake


def count_leaves_from_info(lake):
    """Leaves as `probelake info` reports them (from the commit records)."""
    out = probelake("info", lake).stdout
    total = [line for line in out.splitlines() if line.startswith("total:")][0]
    return int(total.split(",")[1].split()[0])


def check_dump_table(lake):
    dataset = ds.dataset(str(lake / "dump"), format="parquet", partitioning="hive")
    table = dataset.to_table()
    assert table.num_rows == count_leaves_from_info(lake)
    schema = table.schema
    assert pa.types.is_integer(schema.field("step").type), schema.field("step").type
    assert pa.types.is_integer(schema.field("rank").type), schema.field("rank").type
    assert pa.types.is_list(schema.field("shape").type)
    assert pa.types.is_integer(schema.field("shape").type.value_type)
    for stat in ("max", "min", "mean", "norm"):
        assert schema.field(stat).type == pa.float64()
    return table


def test_pyarrow_reads_the_demo(demo_lake):
    table = check_dump_table(demo_lake / "base")
    steps = sorted(set(table.column("step").to_pylist()))
    assert steps == [1, 2]
    stages = set(table.column("stage").to_pylist())
    assert stages == {"actor_compute_log_prob", "ref_compute_log_prob", "actor_update"}


@pytest.mark.parametrize("run", fixture_runs(), ids=lambda p: p.name)
def test_pyarrow_reads_every_fixture_run(run, tmp_path):
    lake = tmp_path / "ds"
    probelake("import", run, lake, "-q")
    check_dump_table(lake)


@pytest.fixture(scope="module")
def nan_lake(tmp_path_factory):
    """The fixture run whose statistics hold NaN and inf, imported once for this module."""
    runs = [r for r in fixture_runs() if r.name == "plain-l1-md5-bf16-nan"]
    assert runs, f"no plain-l1-md5-bf16-nan under {FIXTURES}"
    lake = tmp_path_factory.mktemp("nan") / "ds"
    probelake("import", runs[0], lake, "-q")
    return lake


def test_nan_and_inf_survive(nan_lake):
    df = ds.dataset(str(nan_lake / "dump"), partitioning="hive").to_table().to_pandas()
    assert df["max"].isna().any()
    assert (df["max"] == float("inf")).any()


def test_pandas_polars_duckdb_types(demo_lake):
    import duckdb
    import pandas as pd
    import polars as pl

    path = demo_lake / "base" / "dump"
    df = pd.read_parquet(path)
    assert len(df) == count_leaves_from_info(demo_lake / "base")
    lf = pl.scan_parquet(str(path / "**" / "*.parquet"), hive_partitioning=True).collect()
    assert lf.schema["step"].is_integer() and lf.schema["rank"].is_integer()
    assert lf.height == len(df)
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT typeof(step), typeof(rank), count(*) FROM read_parquet('{path}/**/*.parquet', hive_partitioning=true) GROUP BY ALL"
    ).fetchall()
    assert rows[0][0] == "BIGINT" and rows[0][1] == "BIGINT", rows
    assert sum(r[2] for r in rows) == len(df)


def test_manifest_and_commit_records(demo_lake):
    base = demo_lake / "base"
    manifest = json.loads((base / "_probelake" / "manifest.json").read_text())
    assert manifest["format"] == "probelake"
    commits = sorted((base / "_probelake" / "commits").rglob("*.json"))
    assert len(commits) == 6
    for c in commits:
        record = json.loads(c.read_text())
        for f in record["files"]:
            assert (base / f["path"]).is_file()


def test_schema_files_type_every_table_as_its_files_do(demo_lake):
    """_probelake/schema/<table>.parquet holds exactly the columns a hive reader finds, with
    step and rank as int64; pandas given it reads integers, not categoricals."""
    import pandas as pd
    import pyarrow.parquet as pq

    base = demo_lake / "base"
    for table in ("dump", "stack", "construct", "tensor", "source"):
        shipped = pq.read_schema(base / "_probelake" / "schema" / f"{table}.parquet")
        assert shipped.field("step").type == pa.int64() and shipped.field("rank").type == pa.int64()
        if not (base / table).is_dir():
            continue  # the demo has no tensor files
        found = ds.dataset(str(base / table), format="parquet", partitioning="hive").schema
        assert shipped.names == found.names, table
        for field in found:
            if field.name not in ("step", "rank"):
                assert shipped.field(field.name).type == field.type, (table, field)
    plain = pd.read_parquet(base / "dump")
    assert isinstance(plain["step"].dtype, pd.CategoricalDtype)  # why the schema file exists
    typed = pd.read_parquet(base / "dump", schema=pq.read_schema(base / "_probelake/schema/dump.parquet"))
    assert str(typed["step"].dtype) == "int64" and str(typed["rank"].dtype) == "int64"
    assert len(typed) == count_leaves_from_info(base)


def test_compare_and_divergence_parquet_are_typed(demo_lake, tmp_path):
    import pandas as pd

    bug, base = demo_lake / "attnbug", demo_lake / "base"
    probelake("compare", bug, base, "--format", "parquet", "-o", tmp_path / "cmp", "-q", codes=(0, 1))
    cmp = pd.read_parquet(tmp_path / "cmp")
    assert str(cmp["step"].dtype) == "int64" and str(cmp["rank"].dtype) == "int64"
    for column in ("Max diff", "MaxRelativeErr", "NPU max", "Bench l2norm"):
        assert str(cmp[column].dtype) == "float64", column
    assert str(cmp["Requires_grad Consistent"].dtype) == "bool"
    shapes = cmp["NPU Tensor Shape"].dropna()
    assert len(shapes) and all(s.dtype == "int64" for s in shapes)
    probelake("compare", bug, base, "-o", tmp_path / "csv", "-q", codes=(0, 1))
    csv_rows = sum(len(list(csv.DictReader(f.open(newline="")))) for f in (tmp_path / "csv").rglob("*.csv"))
    assert len(cmp) == csv_rows
    out = tmp_path / "first.parquet"
    probelake("divergence", bug, base, "--threshold", "0", "--format", "parquet", "-o", out, "-q", codes=(1,))
    first = pd.read_parquet(out)
    assert str(first["step"].dtype) == "int64" and str(first["rel_err"].dtype) == "float64"
    as_json = probelake("divergence", bug, base, "--threshold", "0", "--format", "json", "-q", codes=(1,))
    assert len(first) == len(json.loads(as_json.stdout)) == 4  # actor stages; the ref model has no bug
    # Runs that never part still give a file with the columns.
    probelake("divergence", base, base, "--format", "parquet", "-o", out, "-q")
    assert list(pd.read_parquet(out).columns) == list(first.columns) and len(pd.read_parquet(out)) == 0


def test_sql_parquet_keeps_nan_and_inf(nan_lake, tmp_path):
    import polars as pl

    out = tmp_path / "stats.parquet"
    probelake("sql", nan_lake, "-c", "SELECT step, rank, shape, max, norm FROM dump", "--format", "parquet", "-o", out)
    df = pl.read_parquet(out)
    assert df.schema["step"] == pl.Int64 and df.schema["shape"] == pl.List(pl.Int64)
    nan = probelake("sql", nan_lake, "-c", "SELECT count(*) AS n FROM dump WHERE isnan(max)", "--format", "json")
    inf = probelake("sql", nan_lake, "-c", "SELECT count(*) AS n FROM dump WHERE max = 'inf'::double", "--format", "json")
    assert df["max"].is_nan().sum() == json.loads(nan.stdout)[0]["n"] > 0
    assert (df["max"] == float("inf")).sum() == json.loads(inf.stdout)[0]["n"] > 0
