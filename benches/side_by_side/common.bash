# Shared by the side-by-side scripts (sourced, not run: side_by_side.sh runs only *.sh).
# Expects $RUNS from the sourcing script, and uses its `log` function where it has one (else
# `log` prefixes each line with the script's name); `setup_tools` sets $venv, $data, $probelake
# and $work (a scratch folder removed on exit), `setup_probelake` only the last two.

if ! declare -F log >/dev/null; then
    log() { echo "$(basename "$0"): $*" >&2; }
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/probelake
venv=${MSPROBE_VENV:-$cache/msprobe-venv}
data=${SIDE_BY_SIDE_DATA:-$cache/side-by-side}

# msprobe in $venv (installed when missing: torch from PyPI is several GB) and probelake built.
setup_tools() {
    if [ ! -x "$venv/bin/msprobe" ]; then
        log "setting up msprobe in $venv (pip install mindstudio-probe torch)"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet mindstudio-probe torch >&2
    fi
    setup_probelake
}

# A build of the Cargo profile $BUILD_PROFILE (default `release-lto`, see Cargo.toml) in
# $probelake and a scratch folder $work (removed on exit).
setup_probelake() {
    build_probelake
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
}

# Builds the Cargo profile $BUILD_PROFILE (default `release-lto`) and sets $probelake to the
# binary; $PROBELAKE_BIN, when set, is used as it is instead (a build made otherwise, e.g.
# `cargo build --release --workspace`, or another commit's for an A/B).
build_probelake() {
    if [ -n "${PROBELAKE_BIN:-}" ]; then
        probelake=$PROBELAKE_BIN
        log "using $probelake (PROBELAKE_BIN)"
        return
    fi
    local profile=${BUILD_PROFILE:-release-lto}
    log "building probelake (profile $profile)"
    cargo build --profile "$profile" --quiet --bin probelake >&2
    local target=${CARGO_TARGET_DIR:-target}
    case "$target" in /*) ;; *) target="$(pwd)/$target" ;; esac
    probelake="$target/$(profile_dir "$profile")/probelake"
}

# The folder of the target directory a Cargo profile builds into (`dev` and `test` share
# `debug`, `bench` is `release`'s).
profile_dir() {
    case "$1" in dev | test) echo debug ;; bench) echo release ;; *) echo "$1" ;; esac
}

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
        # Each run starts with the page cache clean: a run timed while the kernel still writes
        # back the last one's output (189 MB of CSV at 89.6 MB) took up to 30% longer.
        sync
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

# synth_runs BIN DATA LAYERS RANKS STEPS: two synthesized runs imported into
# DATA/lake/{golden,target}, the target with the last layer's attention scale off by 1 %
# (`synth --bug`); reused when DATA/lake/spec.txt says they were made with the same sizes.
synth_runs() {
    local bin=$1 data=$2 layers=$3 ranks=$4 steps=$5
    local wanted="layers=$layers ranks=$ranks steps=$steps"
    if [ "$(cat "$data/lake/spec.txt" 2>/dev/null)" = "$wanted" ]; then
        log "reusing the runs in $data"
        return
    fi
    log "synthesizing and importing the two runs into $data"
    rm -rf "$data"
    mkdir -p "$data/lake"
    local run bug
    for run in golden target; do
        bug=()
        [ "$run" = target ] && bug=(--bug)
        "$bin" synth "$data/msprobe/$run" --layers "$layers" --ranks "$ranks" --steps "$steps" "${bug[@]}" >&2
        "$bin" import "$data/msprobe/$run" "$data/lake/$run" >&2
        rm -rf "$data/msprobe/$run"
    done
    echo "$wanted" >"$data/lake/spec.txt"
}

# synth_pair MB: a pair of synthesized msprobe runs of about MB megabytes of dump.json per side
# in $pair/{base,bug} (one training step at L1, the target with the demo's attention-scale bug),
# kept in $data for the next run.
synth_pair() {
    local layers=$(($1 * 1000000 / 41500)) # a training step at L1 writes ~41.5 KB per layer
    pair="$data/${1}MB"
    local side flag
    for side in base bug; do
        if [ ! -f "$pair/$side/step0/rank0/dump.json" ]; then
            log "synthesizing $pair/$side ($layers layers)"
            rm -rf "$pair/$side"
            flag=()
            [ "$side" = bug ] && flag=(--bug)
            "$probelake" synth "$pair/$side" --layout msprobe --steps 1 --layers "$layers" "${flag[@]}" >&2
        fi
    done
}
