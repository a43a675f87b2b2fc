#!/usr/bin/env bash
# The same two queries on the local engine and on a probelake cluster (a scheduler and 1 or 2
# executors, all on this machine): the cross-run join and `sql/first_divergence.sql`, over two
# synthesized runs, each command timed whole (process start to last row written), medians,
# printed as markdown table rows:
#
#   | query | engine | median s | ratio to local |
#
# Run: benches/cluster.sh (not one of side_by_side.sh's scripts: its table has other columns)
# Knobs (environment): BUILD_PROFILE (release), PROBELAKE_BENCH_DIR (data, default
# $HOME/.cache/probelake-bench/cluster; reused when made with the same sizes), CL_LAYERS (2),
# CL_RANKS (64), CL_STEPS (8), CL_REPEATS (5).
#
# On one machine executors share its cores: with two cores, one executor with one task slot
# against two executors with one slot each shows how a stage spreads over executors (at most
# ~2x here); "1 executor, 2 slots" uses both cores in one process, as the local engine does.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

log() { printf '%s\n' "$*" >&2; }
BUILD_PROFILE="${BUILD_PROFILE:-release}" build_probelake
bin="$probelake"
data="${PROBELAKE_BENCH_DIR:-$HOME/.cache/probelake-bench/cluster}"
layers="${CL_LAYERS:-2}" ranks="${CL_RANKS:-64}" steps="${CL_STEPS:-8}" repeats="${CL_REPEATS:-5}"

synth_runs "$bin" "$data" "$layers" "$ranks" "$steps"
leaves=$("$bin" sql --run "t=$data/lake/target" --format csv -c "SELECT count(*) FROM t.dump" | tail -1)
units=$("$bin" info "$data/lake/target" | head -1 | sed 's/.*: \([0-9]*\) unit.*/\1/')
log "each run: $units units, $leaves leaves"

join_sql="SELECT t.step, t.stage, t.rank, t.item, rel_err(t.norm, g.norm) AS rel
FROM target.dump t JOIN golden.dump g USING (step, stage, rank, item)
WHERE t.section = 'output' AND rel_err(t.norm, g.norm) > 0.001
ORDER BY t.step, t.stage, t.rank, t.item"
runs=(--run "target=$data/lake/target" --run "golden=$data/lake/golden")

work=$(mktemp -d)
pids=()
stop_cluster() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
trap 'stop_cluster; rm -rf "$work"' EXIT

# start_cluster EXECUTORS SLOTS: sets $address.
start_cluster() {
    "$bin" cluster scheduler --bind 127.0.0.1:0 >"$work/scheduler.out" 2>/dev/null &
    pids+=($!)
    while ! grep -q listening "$work/scheduler.out" 2>/dev/null; do sleep 0.1; done
    address=$(sed 's/.* //' "$work/scheduler.out")
    for i in $(seq "$1"); do
        "$bin" cluster executor --scheduler "$address" --bind-host 127.0.0.1 --flight-port 0 --grpc-port 0 \
            --slots "$2" --work-dir "$work/executor$i" >/dev/null 2>&1 &
        pids+=($!)
    done
    sleep 3 # registration
}

# median_of COMMAND...: median wall seconds of $repeats runs (after one warm-up), output checked
# against the local engine's.
median_of() {
    "$@" >"$work/out.csv"
    if [ -n "${want:-}" ]; then cmp -s "$work/out.csv" "$want" || { log "output differs: $*"; exit 1; }; fi
    local times=()
    for _ in $(seq "$repeats"); do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" >/dev/null
        t1=$(date +%s.%N)
        times+=("$(echo "$t1 - $t0" | bc)")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

declare -A local_time
echo "| query | engine | median s | ratio to local |"
echo "|---|---|---|---|"
for engine in local "1 executor, 1 slot" "1 executor, 2 slots" "2 executors, 1 slot each"; do
    cluster=()
    case "$engine" in
        "1 executor, 1 slot") start_cluster 1 1 ;;
        "1 executor, 2 slots") start_cluster 1 2 ;;
        "2 executors, 1 slot each") start_cluster 2 1 ;;
    esac
    [ "$engine" != local ] && cluster=(--cluster "$address")
    for query in join first_divergence; do
        case "$query" in
            join) args=(-c "$join_sql") ;;
            first_divergence) args=(-f sql/first_divergence.sql) ;;
        esac
        want=""
        [ "$engine" != local ] && want="$work/want-$query.csv"
        seconds=$(median_of "$bin" sql "${runs[@]}" --format csv "${args[@]}" "${cluster[@]}")
        if [ "$engine" = local ]; then
            cp "$work/out.csv" "$work/want-$query.csv"
            local_time[$query]=$seconds
        fi
        ratio=$(echo "scale=2; $seconds / ${local_time[$query]}" | bc)
        echo "| $query ($units units, $leaves leaves a run) | $engine | $seconds | ${ratio}x |"
    done
    stop_cluster
done
