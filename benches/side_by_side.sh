#!/usr/bin/env bash
# Side-by-side benchmarks: probelake next to the tool people use today, on the same input.
#
# Runs every benches/side_by_side/*.sh (each standalone: it sets up its own inputs and tools)
# and prints their markdown rows under one header, ready for docs/benchmarks.md:
#
#     | what | size | probelake | other | ratio |
#
# Each script prints only table rows on stdout (progress goes to stderr) and exits non-zero
# when it could not measure. Times are medians of $RUNS runs (default 3), in seconds, of the
# `release-lto` build (Cargo.toml; BUILD_PROFILE=release measures the plain release build).
#
#   benches/side_by_side.sh                  # all of them
#   benches/side_by_side.sh compare          # only benches/side_by_side/compare.sh
set -uo pipefail
cd "$(dirname "$0")/.."

scripts=()
if [ $# -gt 0 ]; then
    for name in "$@"; do scripts+=("benches/side_by_side/${name%.sh}.sh"); done
else
    scripts=(benches/side_by_side/*.sh)
fi

echo "| what | size | probelake | other | ratio |"
echo "|---|---|---|---|---|"
failed=0
for script in "${scripts[@]}"; do
    if ! bash "$script"; then
        echo "side_by_side: $script failed" >&2
        failed=1
    fi
done
exit "$failed"
