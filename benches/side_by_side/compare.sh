#!/usr/bin/env bash
# `msprobe compare` next to `probelake compare` on the same pair of dump.json files.
#
# Prints markdown rows (`| what | size | probelake | other | ratio |`, see
# benches/side_by_side.sh) with the median wall time of $RUNS runs (default 3) of each tool:
#
#   - compare, dump.json -> CSV: both tools read the two msprobe dump.json files and write the
#     CSV; probelake reads them in place and compares them in memory (end to end).
#   - compare, datasets -> CSV: probelake on the two files already imported (what a user with
#     a dataset pays per comparison); msprobe's time is the same as above.
#
# Inputs: synthetic msprobe runs (`probelake synth`, one training step of a transformer at level
# L1, msprobe layout) of about 10 and 100 MB of dump.json per side ($COMPARE_SIZES, in MB), the
# target with the demo's attention-scale bug; and, unless COMPARE_REAL=0, a pair of real
# msprobe dumps of ~10.7 MB each (scripts/gen_msprobe_runs.py: a 200-layer model at
# level mix, one training step on CPU, the target with its attention-scale bug). They are kept
# in $SIDE_BY_SIDE_DATA (default ~/.cache/probelake/side-by-side). Both tables are checked to be
# the same, cell for cell (scripts/check_against_msprobe.py --diff-dirs), before any time is
# printed.
#
# msprobe comes from $MSPROBE_VENV (default ~/.cache/probelake/msprobe-venv), set up with
# `pip install mindstudio-probe torch` when missing (torch from PyPI is several GB).
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-3}
SIZES=${COMPARE_SIZES:-"10 100"}
REAL=${COMPARE_REAL:-1}
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

setup_tools

# compare_pair WHAT TARGET_DUMP GOLDEN_DUMP: times both tools on the pair, prints two rows.
compare_pair() {
    local what=$1 tp=$2 gp=$3
    local size
    size=$(awk -v b="$(stat -c %s "$tp")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
    log "$what, $size of dump.json per side: msprobe compare, $RUNS runs"
    ms=$(time_runs "msprobe-$what" "$work/ms" "$venv/bin/msprobe" compare -tp "$tp" -gp "$gp" -o "$work/ms")
    log "$what, $size: probelake compare, $RUNS runs"
    pl=$(time_runs "probelake-$what" "$work/pl" "$probelake" compare "$tp" "$gp" -o "$work/pl" --quiet)
    python3 scripts/check_against_msprobe.py --diff-dirs "$work/pl" "$work/ms" >&2
    "$probelake" import "$tp" "$work/ds-bug" --quiet
    "$probelake" import "$gp" "$work/ds-base" --quiet
    pd=$(time_runs "probelake-datasets-$what" "$work/pd" "$probelake" compare "$work/ds-bug" "$work/ds-base" -o "$work/pd" --quiet)
    rm -rf "$work/ds-bug" "$work/ds-base"
    row "compare, dump.json -> CSV ($what)" "$size" "$pl" "$ms"
    row "compare, datasets -> CSV ($what)" "$size" "$pd" "$ms"
}

for mb in $SIZES; do
    synth_pair "$mb"
    compare_pair synthesized "$pair/bug/step0/rank0/dump.json" "$pair/base/step0/rank0/dump.json"
done

if [ "$REAL" != 0 ]; then
    gen=scripts/gen_msprobe_runs.py
    pair="$data/real-mix-200"
    for side in base bug; do
        if ! ls "$pair/$side"/step0/proc*/dump.json >/dev/null 2>&1; then
            log "running msprobe on a 200-layer model for $pair/$side"
            rm -rf "$pair/$side"
            flag=()
            [ "$side" = bug ] && flag=(--bug attn_scale)
            "$venv/bin/python" "$gen" "$pair/$side" --layout plain --level mix --task statistics \
                --steps 1 --layers 200 "${flag[@]}" >&2
        fi
    done
    compare_pair "real msprobe" "$(ls "$pair"/bug/step0/proc*/dump.json)" "$(ls "$pair"/base/step0/proc*/dump.json)"
fi
