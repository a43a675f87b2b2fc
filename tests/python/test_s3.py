"""A dataset imported to an S3 bucket (moto_server on 127.0.0.1) reads in pandas, polars,
pyarrow and DuckDB as docs/storage.md says, with the rows probelake counts."""

import json
import os
import subprocess

import pytest

from conftest import S3_KEY, S3_SECRET, probelake

BUCKET = "lake"
KEY, SECRET = S3_KEY, S3_SECRET


@pytest.fixture(scope="module")
def endpoint(moto_endpoint):
    return moto_endpoint


@pytest.fixture(scope="module")
def s3_run(endpoint, tmp_path_factory):
    """The demo's base run imported to s3://lake/base; returns (url, rows of dump, steps)."""
    root = tmp_path_factory.mktemp("s3demo")
    probelake("demo", root, "-q")
    env = {
        **os.environ,
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    binary = os.environ.get("PROBELAKE_BIN")
    url = f"s3://{BUCKET}/base"
    subprocess.run([binary, "import", str(root / "msprobe" / "base"), url, "-q"], check=True, env=env)
    out = subprocess.run(
        [binary, "sql", "--run", f"r={url}", "--format", "json", "-c",
         "SELECT count(*) AS n, count(DISTINCT step) AS steps FROM dump"],
        check=True, env=env, capture_output=True, text=True,
    ).stdout
    row = json.loads(out)[0]
    assert row["n"] > 0
    return url, row["n"], row["steps"]


def test_pandas_reads_the_bucket(endpoint, s3_run):
    import pandas as pd

    url, rows, steps = s3_run
    opts = {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": endpoint}}
    df = pd.read_parquet(f"{url}/dump", storage_options=opts)
    assert len(df) == rows
    assert df["step"].nunique() == steps


def test_polars_reads_the_bucket(endpoint, s3_run):
    import polars as pl

    url, rows, steps = s3_run
    opts = {
        "aws_endpoint_url": endpoint,
        "aws_access_key_id": KEY,
        "aws_secret_access_key": SECRET,
        "aws_allow_http": "true",
        "aws_region": "us-east-1",
    }
    df = pl.scan_parquet(f"{url}/dump/**/*.parquet", hive_partitioning=True, storage_options=opts).collect()
    assert df.height == rows
    assert df.schema["step"] == pl.Int64 and df.schema["rank"] == pl.Int64
    assert df["step"].n_unique() == steps


def test_pyarrow_reads_the_bucket(endpoint, s3_run):
    import pyarrow as pa
    import pyarrow.dataset as ds
    from pyarrow import fs

    url, rows, _ = s3_run
    s3 = fs.S3FileSystem(endpoint_override=endpoint, access_key=KEY, secret_key=SECRET, scheme="http", region="us-east-1")
    table = ds.dataset(f"{BUCKET}/base/dump", filesystem=s3, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == rows
    assert pa.types.is_integer(table.schema.field("step").type)


def test_duckdb_reads_the_bucket_through_fsspec(endpoint, s3_run):
    import duckdb
    import s3fs

    url, rows, _ = s3_run
    con = duckdb.connect()
    con.register_filesystem(s3fs.S3FileSystem(key=KEY, secret=SECRET, client_kwargs={"endpoint_url": endpoint}))
    n, step_type = con.execute(
        f"SELECT count(*), any_value(typeof(step)) FROM read_parquet('{url}/dump/**/*.parquet', hive_partitioning=true)"
    ).fetchone()
    assert n == rows
    assert step_type == "BIGINT"
