#!/usr/bin/env bash
# `probelake import` next to what a user would run instead to get at the same dump.json data:
#
#   - `python json.load` of every dump.json of the tree (the floor of any Python tool: parse
#     only, nothing stored);
#   - `msprobe data2db` (msprobe's own importer: the tree into a SQLite database).
#
# Prints markdown rows (`| what | size | probelake | other | ratio |`, see
# benches/side_by_side.sh), medians of $RUNS runs (default 3). Inputs: synthetic msprobe runs
# (`probelake synth`, one training step at level L1, msprobe layout) of about $IMPORT_SIZES MB
# of dump.json (default "10 100"), kept in $SIDE_BY_SIDE_DATA (default
# ~/.cache/probelake/side-by-side, shared with compare.sh). msprobe comes from $MSPROBE_VENV,
# set up as compare.sh does when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-3}
SIZES=${IMPORT_SIZES:-"10 100"}
# shellcheck source=benches/side_by_side/common.bash
. benches/side_by_side/common.bash

setup_tools

json_load='
import json, pathlib, sys
n = 0
for path in sorted(pathlib.Path(sys.argv[1]).rglob("dump.json")):
    with open(path) as f:
        n += len(json.load(f)["data"])
print(n, "entries")
'

for mb in $SIZES; do
    layers=$((mb * 1000000 / 41500)) # a training step at L1 writes ~41.5 KB of dump.json per layer
    tree="$data/${mb}MB/base"
    if [ ! -f "$tree/step0/rank0/dump.json" ]; then
        log "synthesizing $tree ($layers layers)"
        rm -rf "$tree"
        "$probelake" synth "$tree" --layout msprobe --steps 1 --layers "$layers" >&2
    fi
    size=$(awk -v b="$(stat -c %s "$tree/step0/rank0/dump.json")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
    log "$size of dump.json: $RUNS runs each"
    pl=$(time_runs "import-$mb" "$work/ds" "$probelake" import "$tree" "$work/ds" --quiet)
    py=$(time_runs "json-load-$mb" "$work/none" python3 -c "$json_load" "$tree")
    db=$(time_runs "data2db-$mb" "$work/db" "$venv/bin/msprobe" data2db --db "$work/db" --data "$tree")
    row "import vs python json.load" "$size" "$pl" "$py"
    row "import vs msprobe data2db" "$size" "$pl" "$db"
done
