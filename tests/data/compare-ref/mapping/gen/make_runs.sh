#!/usr/bin/env bash
# Makes the msprobe dumps the cases compare: RUNS/<name>/step0/rank0/{dump,stack,construct}.json
#   usage: make_runs.sh RUNS [PYTHON]
# PYTHON defaults to the repository's .venv (five levels above this script) with mindstudio-probe
# and torch installed. The RUNS names map to the runs/ folders as README.md lists.
set -euo pipefail
RUNS=${1:?RUNS folder}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${2:-$HERE/../../../../../.venv/bin/python}
mkdir -p "$RUNS"
run() {  # name variant [job.py options...]
  local name=$1 variant=$2; shift 2
  rm -rf "$RUNS/$name"
  "$PY" "$HERE/job.py" "$RUNS/$name" --variant "$variant" "$@" > "$RUNS/$name.log" 2>&1
}
for v in target golden golden_diff; do
  run "mix_stats_$v" "$v" --level mix                               # modules + APIs, statistics
  run "l1_stats_$v" "$v" --level L1                                 # APIs only, statistics
done
for v in target golden_diff; do
  run "l1_md5_$v" "$v" --level L1 --summary-mode md5                # APIs only, md5 (CRC32)
  run "l1_tensor_$v" "$v" --level L1 --task tensor --data-mode forward  # APIs only, real tensors, forward only
done
