#!/usr/bin/env bash
# First divergence between two runs of ~1M dump leaves each, three ways over the same Parquet
# files: probelake's `first_divergence()` table function (reads each unit pair in execution
# order and stops at its first divergence), probelake running the text of
# `sql/first_divergence.sql`, and DuckDB (Python package) running that same text. Builds
# probelake with `release-lto` (or the profile $BUILD_PROFILE); medians of several runs,
# interleaved, printed as markdown table rows:
#
#   | what | size | probelake | duckdb | ratio |
#
# (the header goes to stderr, the rows to stdout, so a driver can collect rows from many
# scripts under one header). ratio = probelake / duckdb: below 1 probelake is faster.
#
# Three target runs against one golden run (`synth`, 64 layers): `early` has the attention bug
# in the first layer (`--bug-layer 0`), `late` in the last (`--bug`), `never` has none (the
# same model and seed: nothing differs). Each at thresholds 0.5 (msprobe's rule) and 0.
#
# Standalone: benches/side_by_side/first_divergence.sh
# Knobs (environment): PROBELAKE_BENCH_DIR (data, default $HOME/.cache/probelake-bench/first_divergence;
# reused when made with the same sizes), FD_LAYERS (64), FD_RANKS (32), FD_STEPS (2),
# FD_REPEATS (7), FD_THREADS (threads for both engines; default: all cores), FD_CASES
# ("early late never").
#
# The DuckDB side reads `target.dump` / `golden.dump` as views over
# read_parquet('<lake>/<run>/dump/**/*.parquet', hive_partitioning = true) and gets
# `rel_err` as a macro with the rule of probelake's UDF; everything else is the file's text.
# probelake is timed as a whole command (process start, opening both runs, planning, running,
# writing CSV); DuckDB as connect + views + query inside an already started Python. Every run's
# rows are checked against DuckDB's.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$(pwd)"
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash # for build_probelake; its $data and $venv are set again below

data="${PROBELAKE_BENCH_DIR:-$HOME/.cache/probelake-bench/first_divergence}"
layers="${FD_LAYERS:-64}"
ranks="${FD_RANKS:-32}"
steps="${FD_STEPS:-2}"
repeats="${FD_REPEATS:-7}"
threads="${FD_THREADS:-$(nproc)}"
cases="${FD_CASES:-early late never}"

log() { printf '%s\n' "$*" >&2; }

build_probelake
bin="$probelake"

synth_runs "$bin" "$data" "$layers" "$ranks" "$steps"
# The other two targets, made beside them (`late` is synth_runs' target).
for variant in early never; do
    [ -d "$data/lake/$variant" ] && continue
    args=()
    [ "$variant" = early ] && args=(--bug-layer 0)
    log "synthesizing and importing the $variant target into $data"
    "$bin" synth "$data/msprobe/$variant" --layers "$layers" --ranks "$ranks" --steps "$steps" "${args[@]}" >&2
    "$bin" import "$data/msprobe/$variant" "$data/lake/$variant" >&2
    rm -rf "$data/msprobe/$variant"
done

venv="$repo/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check duckdb
fi

log "| what | size | probelake | duckdb | ratio |"
log "|---|---|---|---|---|"
PROBELAKE_BIN="$bin" LAKES="$data/lake" REPEATS="$repeats" THREADS="$threads" CASES="$cases" "$venv/bin/python" - <<'PY'
import csv, io, os, statistics, subprocess, sys, time

import duckdb

bin_, lakes = os.environ["PROBELAKE_BIN"], os.environ["LAKES"]
repeats, threads = int(os.environ["REPEATS"]), int(os.environ["THREADS"])
sql_text = open("sql/first_divergence.sql").read()

REL_ERR = """CREATE MACRO rel_err(t, g) AS CASE
    WHEN t = g OR (isnan(t) AND isnan(g)) THEN 0.0
    WHEN t IS NULL OR g IS NULL OR NOT isfinite(t) OR NOT isfinite(g) OR g = 0 THEN NULL
    ELSE abs((t - g) / g) END"""


def leaves(run):
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet('{lakes}/{run}/dump/**/*.parquet')").fetchone()[0]
    con.close()
    return n


RUNS = {"early": "early", "late": "target", "never": "never"}


def probelake(query, target):
    env = dict(os.environ, PROBELAKE_LOG="error")
    started = time.perf_counter()
    out = subprocess.run(
        [bin_, "sql", "--run", f"target={lakes}/{target}", "--run", f"golden={lakes}/golden",
         "-c", f"SET datafusion.execution.target_partitions = {threads}; {query}", "--format", "csv"],
        check=True, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    return elapsed, list(csv.reader(io.StringIO(out.stdout)))[1:]


def duck(query, target):
    started = time.perf_counter()
    con = duckdb.connect(config={"threads": threads})
    con.execute(REL_ERR)
    for schema, run in (("target", target), ("golden", "golden")):
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(f"CREATE VIEW {schema}.dump AS SELECT * FROM "
                    f"read_parquet('{lakes}/{run}/dump/**/*.parquet', hive_partitioning = true)")
    rows = con.execute(query).fetchall()
    elapsed = time.perf_counter() - started
    con.close()
    return elapsed, rows


def same(p_rows, d_rows):
    """The same (step, stage, rank, first_divergence, item) in the same order."""
    key = lambda r: tuple(str(v) for v in r[:5])
    return [key(r) for r in p_rows] == [key(r) for r in d_rows]


size = f"2 x {leaves('golden') / 1e6:.2f}M leaves"
for case in os.environ["CASES"].split():
    target = RUNS[case]
    for threshold in ("0.5", "0"):
        text = sql_text.replace("SELECT 0.5 AS threshold", f"SELECT {threshold} AS threshold")
        function = f"SELECT * FROM first_divergence({threshold})"
        times = {"function": [], "text": [], "duckdb": []}
        for _ in range(repeats):  # interleaved, so load from other jobs hits all alike
            t, f_rows = probelake(function, target)
            times["function"].append(t)
            t, p_rows = probelake(text, target)
            times["text"].append(t)
            t, d_rows = duck(text, target)
            times["duckdb"].append(t)
            for what, rows in (("first_divergence()", f_rows), ("the query text", p_rows)):
                if not same(rows, d_rows):
                    sys.exit(f"{case}, threshold {threshold}: probelake's {what} and duckdb disagree: "
                             f"{rows[:3]} vs {d_rows[:3]}")
        f, p, d = (statistics.median(times[k]) for k in ("function", "text", "duckdb"))
        what = f"first divergence, {case}, threshold {threshold} ({len(d_rows)} units)"
        print(f"| {what}: `first_divergence({threshold})` | {size} | {f:.3f} s | {d:.3f} s | {f / d:.2f}x |", flush=True)
        print(f"| {what}: `sql/first_divergence.sql` | {size} | {p:.3f} s | {d:.3f} s | {p / d:.2f}x |", flush=True)
PY
