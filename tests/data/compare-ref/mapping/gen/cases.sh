#!/usr/bin/env bash
# Builds every case folder from the dumps of make_runs.sh and the YAMLs of mappings.py.
#   usage: [ONLY="case1 case2"] cases.sh RUNS OUT [MSPROBE]      (run make_runs.sh RUNS first)
# Per case OUT/CASE/: target/ and golden/ (dump.json, stack.json, construct.json and, for
# tensor dumps, dump_tensor_data/), the mapping YAML, and msprobe's CSV for the command run in
# OUT/CASE (compare_result.csv.zst, the timestamp taken out of its name, zstd -19), plus
# no_option/compare_result.csv.zst: the same pair compared with no option. Where msprobe fails,
# msprobe_error.txt holds its error lines and traceback instead of a CSV. (The repository keeps
# this output de-duplicated: target/ and golden/ once each under runs/, the rest under cases/.)
# MSPROBE defaults to the repository's .venv (five levels above this script); its python runs
# mappings.py and truncate.py.
set -uo pipefail
RUNS=$(cd "${1:?RUNS}" && pwd)
OUT=${2:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
MSPROBE=${3:-$HERE/../../../../../.venv/bin/msprobe}
PY=$(dirname "$MSPROBE")/python
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MAPS=$(mktemp -d)
"$PY" "$HERE/mappings.py" "$RUNS" "$MAPS"
cat > "$MAPS/lm.yaml" <<'YAML'
TargetModel:
  blocks: layers
Block:
  norm: ln
  up: fc1
  down: fc2
YAML
cp "$MAPS/dm_full.yaml" "$MAPS/am.yaml"

copy_run() {  # run dest
  mkdir -p "$2"
  for f in dump.json stack.json construct.json; do cp "$RUNS/$1/step0/rank0/$f" "$2/"; done
  if [ -d "$RUNS/$1/step0/rank0/dump_tensor_data" ]; then
    cp -r "$RUNS/$1/step0/rank0/dump_tensor_data" "$2/"
  fi
}

compare() {  # dir result_name args...   (run in dir; leaves dir/result_name.csv.zst or msprobe_error.txt)
  compare_tp_gp "$1" "$2" target golden "${@:3}"
}

compare_tp_gp() {  # dir result_name tp_folder gp_folder args...
  local dir=$1 name=$2 tp=$3 gp=$4; shift 4
  (
    cd "$dir" && rm -rf _result && "$MSPROBE" compare -tp "$tp/dump.json" -gp "$gp/dump.json" -o _result "$@" > _log.txt 2>&1
    rc=$?
    csv=$(ls _result/compare_result_*.csv 2>/dev/null | head -1)
    mkdir -p "$(dirname "$name")"
    if [ "$rc" = 0 ] && [ -n "$csv" ]; then
      mv "$csv" "$name.csv" && zstd -19 -q -f --rm "$name.csv"
    else
      { echo "rc=$rc"; n=$(grep -c 'can not fuzzy match' _log.txt)
        [ "$n" != 0 ] && echo "($n warnings '[WARNING] A and B can not fuzzy match' left out)"
        grep -v 'CANN environment\|Progress\|\[INFO\]\|^=*$\|>>>>>\|TOOLCHAIN\|^$\|can not fuzzy match' _log.txt \
          | sed -E 's/^[0-9-]+ [0-9:]+ \([0-9]+\) //'; } > "$(dirname "$name")/msprobe_error.txt"
    fi
    rm -rf _result _log.txt
  )
}

case_() {  # name target_run golden_run yaml[,yaml]|- args...
  local name=$1 t=$2 g=$3 y=$4; shift 4
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  local d="$OUT/$name"
  rm -rf "$d"; mkdir -p "$d"
  copy_run "$t" "$d/target"; copy_run "$g" "$d/golden"
  if [ "$y" != - ]; then for f in ${y//,/ }; do cp "$MAPS/$f" "$d/"; done; fi
  compare "$d" compare_result "$@"
  compare "$d" no_option/compare_result
  echo "$name: $(cd "$d" && ls -R | tr '\n' ' ' | cut -c1-200)"
}

case_ dm_full         mix_stats_target mix_stats_golden      dm_full.yaml       -dm dm_full.yaml
case_ dm_full_keys    mix_stats_target mix_stats_golden      dm_full_keys.yaml  -dm dm_full_keys.yaml
case_ dm_full_fm      mix_stats_target mix_stats_golden      dm_full.yaml       -dm dm_full.yaml -fm
case_ dm_partial      mix_stats_target mix_stats_golden_diff dm_partial.yaml    -dm dm_partial.yaml
case_ dm_edge         mix_stats_target mix_stats_golden      dm_edge.yaml       -dm dm_edge.yaml
case_ cm_full         mix_stats_target mix_stats_golden      cm_full.yaml       -cm cm_full.yaml
case_ cm_substring    mix_stats_target mix_stats_golden      cm_substring.yaml  -cm cm_substring.yaml
case_ cm_partial      mix_stats_target mix_stats_golden_diff cm_partial.yaml    -cm cm_partial.yaml
case_ cm_noarg        mix_stats_target mix_stats_golden      -                  -cm
case_ cm_dm_combined  mix_stats_target mix_stats_golden      cm_full.yaml,dm_edge.yaml -cm cm_full.yaml -dm dm_edge.yaml
case_ lm_ignored      mix_stats_target mix_stats_golden      lm.yaml            -lm lm.yaml
case_ am_rejected     mix_stats_target mix_stats_golden      am.yaml            -am am.yaml
case_ fm_stats_same   l1_stats_target  l1_stats_golden       -                  -fm
case_ fm_stats_diff   l1_stats_target  l1_stats_golden_diff  -                  -fm
case_ fm_md5_diff     l1_md5_target    l1_md5_golden_diff    -                  -fm
case_ fm_tensor_diff  l1_tensor_target l1_tensor_golden_diff -                  -fm
# the same pair the other way round (target = golden_diff, longer): swapped/
if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" fm_tensor_diff "* ]]; then
  compare_tp_gp "$OUT/fm_tensor_diff" swapped/compare_result golden target -fm
  compare_tp_gp "$OUT/fm_tensor_diff" swapped/no_option/compare_result golden target
fi
# golden = target minus its last API (derived from the l1 tensor dump by truncate.py)
if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" fm_tensor_prefix "* ]]; then
  rm -rf "$OUT/fm_tensor_prefix"
  "$PY" "$HERE/truncate.py" "$RUNS/l1_tensor_target/step0/rank0" "$OUT/fm_tensor_prefix" 3
  compare "$OUT/fm_tensor_prefix" compare_result -fm
  compare "$OUT/fm_tensor_prefix" no_option/compare_result
  echo "fm_tensor_prefix: $(cd "$OUT/fm_tensor_prefix" && ls -R | tr '\n' ' ' | cut -c1-200)"
fi
rm -rf "$MAPS"
