#!/usr/bin/env bash
# Runs docs/cluster.md's Spark recipe and checks that Spark reads exactly the committed units,
# with typed partitions, and that its cross-run join and first-divergence query give the rows
# `probelake sql` gives. Not part of scripts/test-all.sh: pyspark is ~320 MB and starts a JVM
# (Java 17 or newer must be on PATH).
#
#   bash scripts/check-spark.sh [PROBELAKE_BINARY]
#
# The venv is .venv-spark (or $PROBELAKE_SPARK_VENV); the binary defaults to a release build.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${1:-}"
if [ -z "$bin" ]; then
    cargo build --release --bin probelake
    bin="${CARGO_TARGET_DIR:-target}/release/probelake"
fi
venv="${PROBELAKE_SPARK_VENV:-.venv-spark}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pyspark==4.0.1" "pyarrow>=15"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" scripts/check_spark.py --probelake "$bin" --work "$work"
