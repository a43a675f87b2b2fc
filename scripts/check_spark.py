"""docs/cluster.md's Spark recipe, checked: see scripts/check-spark.sh."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession


def probelake(binary: str, *args: str) -> str:
    done = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    return done.stdout


# --- the recipe (docs/cluster.md, "Spark") ------------------------------------------------


def read_committed(
    spark: SparkSession, binary: str, dataset: str, table: str = "dump"
) -> DataFrame:
    """Exactly the committed files of `table`, partition columns typed as probelake types them."""
    listing = json.loads(
        probelake(binary, "files", dataset, "--table", table, "--format", "json")
    )
    schema = spark.read.parquet(
        listing["schema"]
    ).schema  # step/rank BIGINT, stage/api STRING
    uris = [f["uri"] for f in listing["files"]]
    return (
        spark.read.schema(schema).option("basePath", listing["dataset"]).parquet(*uris)
    )


# msprobe's relative error, as probelake's rel_err(t, g): 0 when equal (NaN = NaN, inf = inf),
# NULL where either side is NULL, NaN or infinite or golden is 0.
REL_ERR = """CASE WHEN {t} IS NULL OR {g} IS NULL THEN NULL
     WHEN {t} = {g} OR (isnan({t}) AND isnan({g})) THEN 0D
     WHEN isnan({t}) OR isnan({g}) OR abs({t}) = double('inf') OR abs({g}) = double('inf') OR {g} = 0 THEN NULL
     ELSE abs(({t} - {g}) / {g}) END"""


def rel_err(t: str, g: str) -> str:
    return "(" + REL_ERR.format(t=t, g=g) + ")"


JOIN = """SELECT t.step, t.stage, t.rank, t.item, t.norm, g.norm AS golden_norm, rel_err(t.norm, g.norm) AS rel
FROM target.dump t JOIN golden.dump g ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank
                                     AND t.item = g.item
WHERE t.section = 'output' ORDER BY t.step, t.stage, t.rank, t.item"""


def to_spark_sql(sql: str) -> str:
    """probelake's SQL as Spark SQL: `rel_err` written out, `IS NOT DISTINCT FROM` as `<=>`,
    `VARCHAR` as `STRING`, runs as the temporary views `target_dump` and `golden_dump`."""
    sql = re.sub(
        r"rel_err\(([\w.]+), ([\w.]+)\)", lambda m: rel_err(m.group(1), m.group(2)), sql
    )
    sql = sql.replace("IS NOT DISTINCT FROM", "<=>").replace("AS VARCHAR", "AS STRING")
    return (
        sql.replace("target.dump", "target_dump")
        .replace("golden.dump", "golden_dump")
        .strip()
        .rstrip(";")
    )


# --- the checks ---------------------------------------------------------------------------


def cell(value: object) -> str:
    """A value as both sides are compared: numbers as floats (exactly), the rest as text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        f = float(value)
        return "nan" if math.isnan(f) else repr(f)
    return str(value)


def from_csv(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))[1:]
    out = []
    for row in rows:
        parsed = []
        for v in row:
            try:
                parsed.append(cell(float(v)) if v not in ("true", "false") else v)
            except ValueError:
                parsed.append(v)
        out.append(parsed)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--probelake", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    work = Path(args.work)
    probelake(args.probelake, "-q", "demo", str(work / "demo"))
    target, golden = str(work / "demo/lake/attnbug"), str(work / "demo/lake/base")
    # A file no commit names (a crashed write), in a unit of its own: a folder listing sees it.
    some = next(Path(target, "dump").rglob("*.parquet"))
    stray = Path(target, "dump/step=99/stage=crashed/rank=0/api=Torch")
    stray.mkdir(parents=True)
    shutil.copy(some, stray / "unfinished.parquet")

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("probelake-check")
        # probelake stores floats BYTE_STREAM_SPLIT-encoded, which Spark's vectorized Parquet
        # reader refuses ("Unsupported encoding: BYTE_STREAM_SPLIT"); parquet-mr's reads it.
        .config("spark.sql.parquet.enableVectorizedReader", "false")
        # parquet-mr reads DELTA_BYTE_ARRAY strings of writers it does not know (PARQUET-246)
        # only when a file is read whole; probelake's files are one unit's rows each.
        .config("spark.hadoop.parquet.split.files", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    t = read_committed(spark, args.probelake, target)
    read_committed(spark, args.probelake, golden).createOrReplaceTempView("golden_dump")
    t.createOrReplaceTempView("target_dump")

    types = {f.name: f.dataType.simpleString() for f in t.schema.fields}
    assert (types["step"], types["rank"], types["stage"], types["api"]) == (
        "bigint",
        "bigint",
        "string",
        "string",
    ), types
    steps = sorted(r.step for r in t.select("step").distinct().collect())
    assert 99 not in steps, f"Spark read an uncommitted file: steps {steps}"
    folder_steps = sorted(
        r.step
        for r in spark.read.parquet(str(Path(target, "dump")))
        .select("step")
        .distinct()
        .collect()
    )
    assert 99 in folder_steps, (
        "the stray file is not where a folder listing would find it"
    )
    count = t.count()
    want_count = probelake(
        args.probelake,
        "sql",
        "--run",
        f"t={target}",
        "--format",
        "csv",
        "-c",
        "SELECT count(*) FROM t.dump",
    )
    assert count == int(want_count.splitlines()[1]), (count, want_count)

    runs = ["--run", f"target={target}", "--run", f"golden={golden}"]
    checks = [("cross-run join", to_spark_sql(JOIN), ["-c", JOIN])]
    sql_file = Path(__file__).resolve().parent.parent / "sql/first_divergence.sql"
    for threshold in ("0.5", "0.0"):
        edited = sql_file.read_text().replace(
            "SELECT 0.5 AS threshold", f"SELECT {threshold} AS threshold"
        )
        checks.append(
            (
                f"first divergence, threshold {threshold}",
                to_spark_sql(edited),
                ["-c", edited],
            )
        )
    for name, spark_sql, probelake_args in checks:
        got = [[cell(v) for v in row] for row in spark.sql(spark_sql).collect()]
        want = from_csv(
            probelake(args.probelake, "sql", *runs, "--format", "csv", *probelake_args)
        )
        assert got == want, (
            f"{name}: Spark's rows differ from probelake sql's\n{got[:3]}\n{want[:3]}"
        )
        print(f"{name}: {len(got)} rows, equal to probelake sql's")
    print(
        f"committed units only: {count} rows of dump, step 99 (an uncommitted file) not read; partitions typed {types['step']}/{types['stage']}"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
