#!/usr/bin/env bash
# `probelake compare` next to another build of probelake (an earlier commit) on the same pairs:
# what a change that should cost no speed costs, measured.
#
#   git worktree add /tmp/before COMMIT && (cd /tmp/before && cargo build --release --workspace)
#   BASELINE_BIN=/tmp/before/target/release/probelake BUILD_PROFILE=release \
#       benches/side_by_side.sh compare_ab
#
# Without $BASELINE_BIN it prints nothing. Rows (`| what | size | probelake | other | ratio |`,
# the other being the baseline build): compare, dump.json -> CSV and datasets -> CSV on the
# synthesized pairs compare.sh uses ($COMPARE_SIZES, default "10 100" MB per side). The two
# builds run in turn in ABBA order, $RUNS times each (default 5); medians. The two CSVs must be
# the same byte for byte before any time is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-5}
SIZES=${COMPARE_SIZES:-"10 100"}
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

if [ -z "${BASELINE_BIN:-}" ]; then
    log "BASELINE_BIN is not set: no baseline build to compare with"
    exit 0
fi
setup_probelake

# seconds OUT CMD...: one run of CMD writing into OUT (emptied first); its wall time.
seconds() {
    local out=$1 t0 t1 rc=0
    shift
    rm -rf "$out"
    sync
    t0=$(now)
    "$@" >/dev/null 2>&1 || rc=$?
    t1=$(now)
    # 1: some row's Result is `error`, as on a diverging pair.
    [ "$rc" -le 1 ] || { log "failed ($rc): $*"; return 1; }
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}

# ab WHAT SIZE TARGET GOLDEN: both builds in turn on the pair, one row.
ab() {
    local what=$1 size=$2 target=$3 golden=$4 new=() old=()
    # ABBA order: in plain alternation the second of each pair ran faster (docs/benchmarks.md,
    # "Method").
    for i in $(seq "$RUNS"); do
        if [ $((i % 2)) = 1 ]; then
            new+=("$(seconds "$work/new" "$probelake" compare "$target" "$golden" -o "$work/new" --quiet)")
            old+=("$(seconds "$work/old" "$BASELINE_BIN" compare "$target" "$golden" -o "$work/old" --quiet)")
        else
            old+=("$(seconds "$work/old" "$BASELINE_BIN" compare "$target" "$golden" -o "$work/old" --quiet)")
            new+=("$(seconds "$work/new" "$probelake" compare "$target" "$golden" -o "$work/new" --quiet)")
        fi
    done
    cmp "$work/new"/*.csv "$work/old"/*.csv >&2
    log "$what: ${new[*]} s against ${old[*]} s"
    awk -v what="$what" -v size="$size" -v a="$(printf '%s\n' "${new[@]}" | median)" \
        -v b="$(printf '%s\n' "${old[@]}" | median)" \
        'BEGIN { printf "| %s | %s | %.3f s | %.3f s | %.2fx |\n", what, size, a, b, b / a }'

}

for mb in $SIZES; do
    synth_pair "$mb"
    size=$(awk -v b="$(stat -c %s "$pair/base/step0/rank0/dump.json")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
    ab "compare, dump.json -> CSV, against the baseline build" "$size" \
        "$pair/bug/step0/rank0/dump.json" "$pair/base/step0/rank0/dump.json"
    for side in base bug; do
        [ -d "$pair/ds-$side" ] || "$probelake" import "$pair/$side" "$pair/ds-$side" --quiet
    done
    ab "compare, datasets -> CSV, against the baseline build" "$size" "$pair/ds-bug" "$pair/ds-base"
done
