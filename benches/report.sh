#!/usr/bin/env bash
# `probelake report` on pairs of synthetic runs of about 10k, 100k and 1M leaves per side.
#
# Prints markdown rows `| leaves per side | dump.json per side | page | write | data-ready |`:
#   - page: the HTML file's size;
#   - write: the median wall time of $RUNS runs (default 3) of `probelake report TARGET GOLDEN`
#     on the two runs already imported (`probelake import`);
#   - data-ready: the median over $RUNS page loads in headless Chromium of the time from
#     navigation to the page setting `data-ready="1"` (its own `performance.now()`, printed by
#     tests/report/interact.mjs, which also checks the page).
#
# Each pair is one training step at level L1 (`probelake synth --layout msprobe --steps 1`,
# ~135 leaves per layer), the target with the demo's attention-scale bug, kept in
# $SIDE_BY_SIDE_DATA (default ~/.cache/probelake/side-by-side). $REPORT_LEAVES lists the sizes.
# The browser is Debian's chromium (or $PROBELAKE_CHROMIUM), driven by playwright-core from
# tests/report (`npm ci` there when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
LEAVES=${REPORT_LEAVES:-"10000 100000 1000000"}
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

setup_probelake
if [ ! -d tests/report/node_modules ]; then
    (cd tests/report && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

echo "| leaves per side | dump.json per side | page | write | data-ready |"
echo "|---|---|---|---|---|"
for leaves in $LEAVES; do
    layers=$(((leaves + 134) / 135)) # one training step at L1: ~135 leaves per layer
    pair="$data/report-$leaves"
    for side in base bug; do
        if [ ! -f "$pair/ds-$side/_probelake/manifest.json" ]; then
            log "synthesizing and importing $pair/$side ($layers layers)"
            rm -rf "$pair/$side" "$pair/ds-$side"
            flag=()
            [ "$side" = bug ] && flag=(--bug)
            "$probelake" synth "$pair/$side" --layout msprobe --steps 1 --layers "$layers" --quiet "${flag[@]}" >&2
            "$probelake" import "$pair/$side" "$pair/ds-$side" --quiet >&2
        fi
    done
    size=$(awk -v b="$(stat -c %s "$pair/base/step0/rank0/dump.json")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
    counted=$("$probelake" sql --run base="$pair/ds-base" -c "SELECT count(*) AS n FROM dump" --format csv | tail -1)

    page="$work/report.html"
    writes=()
    ready=()
    for _ in $(seq "$RUNS"); do
        rm -f "$page"
        sync
        t0=$(now)
        "$probelake" report "$pair/ds-bug" "$pair/ds-base" -o "$page" --quiet || [ $? -eq 1 ]
        t1=$(now)
        writes+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')")
        line=$(node tests/report/interact.mjs "$page" | grep 'page ready')
        ready+=("$(echo "$line" | sed -E 's/.*performance\.now\(\) ([0-9.]+) ms.*/\1/')")
    done
    log "$leaves leaves ($counted counted): write ${writes[*]} s, data-ready ${ready[*]} ms"
    write=$(printf '%s\n' "${writes[@]}" | median)
    ms=$(printf '%s\n' "${ready[@]}" | median)
    bytes=$(stat -c %s "$page")
    awk -v l="$counted" -v s="$size" -v b="$bytes" -v w="$write" -v r="$ms" \
        'BEGIN { printf "| %d | %s | %.1f MB | %.2f s | %.2f s |\n", l, s, b / 1e6, w, r / 1000 }'
done
