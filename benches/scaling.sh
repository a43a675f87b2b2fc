#!/usr/bin/env bash
# How probelake's cost grows with the size of a dump tree: synth, import, export, compare and
# first divergence at about 10 MB, 100 MB and 1 GB of dump.json, printed as markdown rows:
#
#   | dump.json | files | synth | import | dataset | export | compare | first divergence |
#
# Each size is a verl tree of the synthesized 64-layer transformer (3 stages, 1 step) over more
# ranks: 4.4 MB of dump.json per rank, so 2, 23 and 230 ranks. `compare` and `divergence` run
# between that run and a second one with the last layer's attention scale off by 1 % (`--bug`),
# both imported. Times are medians of $RUNS runs (default 3) in seconds, with MB/s of dump.json
# where it is the input or output. Not part of CI; needs ~2.5 GB of scratch space at 1 GB.
#
#   benches/scaling.sh                        # the three sizes
#   SCALING_RANKS="2 23" RUNS=5 benches/scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
ranks_list=${SCALING_RANKS:-2 23 230}
log() { printf '%s\n' "$*" >&2; }

# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash
setup_probelake

rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.2f s (%.0f MB/s)", s, b / s / 1e6 }'; }

echo "| dump.json | files | synth | import | dataset | export | compare | first divergence |"
echo "|---|---|---|---|---|---|---|---|"
for ranks in $ranks_list; do
    log "== $ranks ranks"
    base="$work/msprobe/base" bug="$work/msprobe/bug"
    synth=$(time_runs synth "$base" "$probelake" synth "$base" --layers 64 --steps 1 --ranks "$ranks" -q)
    "$probelake" synth "$bug" --layers 64 --steps 1 --ranks "$ranks" --bug -q >&2
    bytes=$(find "$base" -name dump.json -printf '%s\n' | awk '{ s += $1 } END { print s }')
    files=$(find "$base" -name dump.json | wc -l)
    import=$(time_runs import "$work/lake/base" "$probelake" import "$base" "$work/lake/base" --quiet)
    "$probelake" import "$bug" "$work/lake/bug" --quiet >&2
    dataset=$(du -sb "$work/lake/base" | cut -f1)
    export=$(time_runs export "$work/export" "$probelake" export "$work/lake/base" "$work/export" --quiet)
    compare=$(time_runs compare "$work/compare" "$probelake" compare "$work/lake/bug" "$work/lake/base" -o "$work/compare" --quiet)
    divergence=$(time_runs divergence "$work/none" "$probelake" divergence "$work/lake/bug" "$work/lake/base" --format csv)
    awk -v b="$bytes" -v f="$files" -v s="$synth" -v i="$(rate "$bytes" "$import")" -v d="$dataset" \
        -v e="$(rate "$bytes" "$export")" -v c="$compare" -v v="$divergence" 'BEGIN {
            printf "| %.0f MB | %d | %.2f s | %s | %.1f MB (%.1f%%) | %s | %.2f s | %.2f s |\n",
                b / 1e6, f, s, i, d / 1e6, 100 * d / b, e, c, v }'
    rm -rf "$work/msprobe" "$work/lake" "$work/export" "$work/compare"
done
