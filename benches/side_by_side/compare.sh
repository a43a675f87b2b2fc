#!/usr/bin/env bash
# `msprobe compare` next to `probelake compare` on the same pair of dump.json files.
#
# Prints markdown rows (`| what | size | probelake | other | ratio |`, see
# benches/side_by_side.sh) with the median wall time of $RUNS runs (default 3) of each tool:
#
#   - compare, dump.json -> CSV: both tools read the two msprobe dump.json files and write the
#     CSV; probelake imports them into a temporary dataset first (end to end).
#   - compare, datasets -> CSV: probelake on the two files already imported (what a user with
#     a dataset pays per comparison); msprobe's time is the same as above.
#
# Inputs: synthetic msprobe runs (`probelake synth`, one training step of a transformer at level
# L1, msprobe layout) of about 10 and 100 MB of dump.json per side ($COMPARE_SIZES, in MB), the
# target with the demo's attention-scale bug. They are kept in $SIDE_BY_SIDE_DATA (default
# ~/.cache/probelake/side-by-side). Both tables are checked to be the same, cell for cell
# (scripts/check_against_msprobe.py --diff-dirs), before any time is printed.
#
# msprobe comes from $MSPROBE_VENV (default ~/.cache/probelake/msprobe-venv), set up with
# `pip install mindstudio-probe torch` when missing (torch from PyPI is several GB).
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-3}
SIZES=${COMPARE_SIZES:-"10 100"}
log() { echo "compare.sh: $*" >&2; }
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

setup_tools

for mb in $SIZES; do
    layers=$((mb * 1000000 / 41500)) # a training step at L1 writes ~41.5 KB of dump.json per layer
    pair="$data/${mb}MB"
    for side in base bug; do
        if [ ! -f "$pair/$side/step0/rank0/dump.json" ]; then
            log "synthesizing $pair/$side ($layers layers)"
            rm -rf "$pair/$side"
            flag=()
            [ "$side" = bug ] && flag=(--bug)
            "$probelake" synth "$pair/$side" --layout msprobe --steps 1 --layers "$layers" "${flag[@]}" >&2
        fi
    done
    tp="$pair/bug/step0/rank0/dump.json"
    gp="$pair/base/step0/rank0/dump.json"
    size=$(awk -v b="$(stat -c %s "$tp")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
    log "$size of dump.json per side: msprobe compare, $RUNS runs"
    ms=$(time_runs "msprobe-$mb" "$work/ms" "$venv/bin/msprobe" compare -tp "$tp" -gp "$gp" -o "$work/ms")
    log "$size: probelake compare, $RUNS runs"
    pl=$(time_runs "probelake-$mb" "$work/pl" "$probelake" compare "$tp" "$gp" -o "$work/pl" --quiet)
    python3 scripts/check_against_msprobe.py --diff-dirs "$work/pl" "$work/ms" >&2
    "$probelake" import "$pair/bug" "$work/ds-bug" --quiet
    "$probelake" import "$pair/base" "$work/ds-base" --quiet
    pd=$(time_runs "probelake-datasets-$mb" "$work/pd" "$probelake" compare "$work/ds-bug" "$work/ds-base" -o "$work/pd" --quiet)
    rm -rf "$work/ds-bug" "$work/ds-base"
    row "compare, dump.json -> CSV" "$size" "$pl" "$ms"
    row "compare, datasets -> CSV" "$size" "$pd" "$ms"
done
