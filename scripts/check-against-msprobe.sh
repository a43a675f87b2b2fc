#!/usr/bin/env bash
# Checks `probelake compare` against `msprobe compare` (and, with --da, `probelake divergence`
# against `msprobe compare -da`) on pairs of real msprobe runs made by
# scripts/gen_msprobe_runs.py: every CSV cell must agree (tests/e2e/compare.rs rules).
#
#   scripts/check-against-msprobe.sh                 # every pair (--list shows them)
#   scripts/check-against-msprobe.sh --da            # and the first-divergence comparison
#   scripts/check-against-msprobe.sh --pairs plain-mix-md5__nan_vs_base
#
# msprobe comes from $MSPROBE_VENV (default: the test venv .venv when it has msprobe, else
# ~/.cache/probelake/msprobe-venv, set up with `pip install mindstudio-probe torch` when missing;
# torch from PyPI is several GB). The runs are generated once into $PROBELAKE_MSPROBE_DATA
# (default ~/.cache/probelake/msprobe-runs), about 15 s each; every msprobe compare takes 5-60 s. Uses the debug build of probelake
# unless $PROBELAKE_BIN names a binary. Other arguments go to scripts/check_against_msprobe.py.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${XDG_CACHE_HOME:-$HOME/.cache}/probelake
default_venv=$cache/msprobe-venv
if [ -x .venv/bin/msprobe ]; then default_venv=.venv; fi
venv=${MSPROBE_VENV:-$default_venv}
if [ ! -x "$venv/bin/msprobe" ]; then
    echo "setting up msprobe in $venv (pip install mindstudio-probe torch)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet mindstudio-probe torch >&2
fi
if [ -z "${PROBELAKE_BIN:-}" ]; then
    # As scripts/test-all.sh builds it: `--bin probelake` alone would resolve other features
    # and compile DataFusion a second time.
    PYO3_BUILD_EXTENSION_MODULE=1 cargo build --quiet --workspace --lib --tests >&2
    target=${CARGO_TARGET_DIR:-target}
    case "$target" in /*) ;; *) target="$(pwd)/$target" ;; esac
    export PROBELAKE_BIN="$target/debug/probelake"
fi
exec python3 scripts/check_against_msprobe.py --msprobe "$venv/bin/msprobe" "$@"
