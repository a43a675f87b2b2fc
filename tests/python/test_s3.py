"""A dataset imported to an S3 bucket (moto_server on 127.0.0.1) reads in pandas, polars,
pyarrow and DuckDB as docs/storage.md says, with the rows probelake counts."""

import json
import os
import subprocess

import pytest

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, binary, probelake


@pytest.fixture(scope="module")
def s3_run(moto_endpoint, tmp_path_factory):
    """The demo's base run imported to s3://lake/base; returns (url, rows of dump, steps)."""
    root = tmp_path_factory.mktemp("s3demo")
    probelake("demo", root, "-q")
    env = {
        **os.environ,
        "AWS_ENDPOINT": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": S3_KEY,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
    }
    url = f"s3://{S3_BUCKET}/base"
    subprocess.run([binary(), "import", str(root / "msprobe" / "base"), url, "-q"], check=True, env=env)
    out = subprocess.run(
        [binary(), "sql", "--run", f"r={url}", "--format", "json", "-c",
         "SELECT count(*) AS n, count(DISTINCT step) AS steps FROM dump"],
        check=True, env=env, capture_output=True, text=True,
    ).stdout
    row = json.loads(out)[0]
    assert row["n"] > 0
    return url, row["n"], row["steps"]


def test_pandas_reads_the_bucket(moto_endpoint, s3_run):
    import pandas as pd

    url, rows, steps = s3_run
    opts = {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": {"endpoint_url": moto_endpoint}}
    df = pd.read_parquet(f"{url}/dump", storage_options=opts)
    assert len(df) == rows
    assert df["step"].nunique() == steps


def test_polars_reads_the_bucket(moto_endpoint, s3_run):
    import polars as pl

    url, rows, steps = s3_run
    opts = {
        "aws_endpoint_url": moto_endpoint,
        "aws_access_key_id": S3_KEY,
        "aws_secret_access_key": S3_SECRET,
        "aws_allow_http": "true",
        "aws_region": "us-east-1",
    }
    df = pl.scan_parquet(f"{url}/dump/**/*.parquet", hive_partitioning=True, storage_options=opts).collect()
    assert df.height == rows
    assert df.schema["step"] == pl.Int64 and df.schema["rank"] == pl.Int64
    assert df["step"].n_unique() == steps


def test_pyarrow_reads_the_bucket(moto_endpoint, s3_run):
    import pyarrow as pa
    import pyarrow.dataset as ds
    from pyarrow import fs

    url, rows, _ = s3_run
    s3 = fs.S3FileSystem(endpoint_override=moto_endpoint, access_key=S3_KEY, secret_key=S3_SECRET, scheme="http", region="us-east-1")
    table = ds.dataset(f"{S3_BUCKET}/base/dump", filesystem=s3, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == rows
    assert pa.types.is_integer(table.schema.field("step").type)


def test_duckdb_reads_the_bucket_through_fsspec(moto_endpoint, s3_run):
    import duckdb
    import s3fs

    url, rows, _ = s3_run
    con = duckdb.connect()
    con.register_filesystem(s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, client_kwargs={"endpoint_url": moto_endpoint}))
    n, step_type = con.execute(
        f"SELECT count(*), any_value(typeof(step)) FROM read_parquet('{url}/dump/**/*.parquet', hive_partitioning=true)"
    ).fetchone()
    assert n == rows
    assert step_type == "BIGINT"
