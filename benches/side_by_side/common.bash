# Shared by the side-by-side scripts (sourced, not run: side_by_side.sh runs only *.sh).
# Expects $RUNS, $work (a scratch folder) and a `log` function from the sourcing script.

now() { date +%s%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# time_runs NAME OUTDIR CMD...: runs CMD $RUNS times (OUTDIR emptied before each), prints the
# median in seconds; exit codes 0 and 1 are success (probelake: 1 = some Result is `error`).
time_runs() {
    local name=$1 out=$2
    shift 2
    local times=()
    for _ in $(seq "$RUNS"); do
        rm -rf "$out"
        local t0 t1 rc=0
        t0=$(now)
        "$@" >"$work/$name.log" 2>&1 || rc=$?
        t1=$(now)
        if [ "$rc" -gt 1 ]; then
            log "$name failed ($rc):"
            tail -20 "$work/$name.log" >&2
            return 1
        fi
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')")
    done
    log "$name: ${times[*]} s"
    printf '%s\n' "${times[@]}" | median
}

row() { # what size probelake other
    awk -v what="$1" -v size="$2" -v a="$3" -v b="$4" \
        'BEGIN { printf "| %s | %s | %.3f s | %.2f s | %.0fx |\n", what, size, a, b, b / a }'
}
