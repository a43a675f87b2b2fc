#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS_PER_TARGET (default 60), one after the
# other, one libFuzzer process each, and prints per target the executions tried, the corpus
# size and the crashes found. Exits non-zero if any target crashed, timed out or ran out of
# memory; the inputs are then under fuzz/artifacts/<target>/. Not part of CI.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 300        # 5 minutes per target
#   FUZZ_TARGETS="dump_json roundtrip" scripts/fuzz.sh 30
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 0   # each target until 10 million executions
#
# Needs the nightly toolchain (rustup toolchain install nightly) and installs cargo-fuzz when
# missing. Corpora are seeded at each run from real msprobe output ($PROBELAKE_FIXTURES,
# default tests/data/fixtures/runs) by fuzz/seed.py into fuzz/corpus/ (not committed); libFuzzer
# keeps what it finds there, so later runs resume. The build goes to $FUZZ_TARGET_DIR (default
# fuzz/target), apart from the normal build: its instrumented objects differ.
#
# The build has no sanitizer (-s none: probelake-msprobe has no unsafe code) but has debug
# assertions (-a), so integer overflow panics as in the test build. Inputs are at most
# $FUZZ_MAX_LEN bytes (default 32768); one that takes over 10 s or 1 GB of memory counts as a
# crash.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
fixtures=${PROBELAKE_FIXTURES:-tests/data/fixtures/runs}
target_dir=${FUZZ_TARGET_DIR:-fuzz/target}
max_len=${FUZZ_MAX_LEN:-32768}
targets=${FUZZ_TARGETS:-dump_json stack_json construct_json tensor_pt tensor_npy roundtrip}
fuzz_flags=(--sanitizer none --debug-assertions --target-dir "$target_dir")
# libFuzzer stops at whichever limit comes first; 0 seconds means no time limit.
run_limit=()
if [ -n "${FUZZ_RUNS:-}" ]; then
    run_limit=(-runs="$FUZZ_RUNS")
fi

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz (cargo install cargo-fuzz)" >&2
    cargo install cargo-fuzz >&2
fi

if [ -d "$fixtures" ]; then
    python3 fuzz/seed.py "$fixtures" fuzz/corpus "$max_len"
else
    echo "no fixtures at $fixtures: the corpora start from what fuzz/corpus already has" >&2
fi

cargo +nightly fuzz build "${fuzz_flags[@]}" >&2

mkdir -p fuzz/logs
status=0
printf '%-16s %8s %12s %10s %8s\n' target seconds executions corpus crashes
for target in $targets; do
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    log="fuzz/logs/$target.log"
    before=$(find "fuzz/artifacts/$target" -type f | wc -l)
    start=$(date +%s)
    if cargo +nightly fuzz run "${fuzz_flags[@]}" "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" "${run_limit[@]}" -max_len="$max_len" -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 >"$log" 2>&1; then
        :
    else
        status=1
    fi
    elapsed=$(($(date +%s) - start))
    after=$(find "fuzz/artifacts/$target" -type f | wc -l)
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    corpus=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
    printf '%-16s %8s %12s %10s %8s\n' "$target" "$elapsed" "${executions:-?}" "${corpus:-?}" \
        "$((after - before))"
done
if [ "$status" -ne 0 ]; then
    echo "a target failed: see fuzz/logs/ and fuzz/artifacts/" >&2
fi
exit "$status"
