"""pyarrow, pandas, polars and DuckDB read what probelake writes, with the right types."""

import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from conftest import fixture_runs, probelake


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


def test_nan_and_inf_survive(tmp_path):
    runs = [r for r in fixture_runs() if r.name == "plain-l1-md5-bf16-nan"]
    if not runs:
        pytest.skip("../shared/fixtures not found")
    lake = tmp_path / "ds"
    probelake("import", runs[0], lake, "-q")
    df = ds.dataset(str(lake / "dump"), partitioning="hive").to_table().to_pandas()
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
