#!/usr/bin/env bash
# Runs every test of probelake: formatting, lints, the Rust tests (unit, doc, end-to-end over
# tests/data/fixtures) and the Python reader tests in a venv it sets up itself.
#
# Reuses a Cargo target directory outside the clone when one exists
# ($PROBELAKE_TARGET_DIR or $HOME/.cache/probelake-target); never needs one.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${PROBELAKE_TARGET_DIR:-$HOME/.cache/probelake-target}"
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ -d "$cache" ]; then
    export CARGO_TARGET_DIR="$cache"
fi
target="${CARGO_TARGET_DIR:-target}"

step() { printf '\n== %s\n' "$*" >&2; }

# The Python package's native module (crates/probelake-python) is built by the same cargo
# invocation as the tests, so with their features: `maturin develop` resolves features for that
# crate alone and would compile DataFusion a second time. This keeps pyo3 from linking
# libpython into it, as maturin does; set for every cargo step so none rebuilds pyo3.
export PYO3_BUILD_EXTENSION_MODULE=1

step "cargo fmt --check"
cargo fmt --all -- --check

# docs/crates.md: the kernel knows nothing of msprobe's files, and no library but the CLI
# builds on the synthesizer (tests and examples may).
step "crate boundaries (cargo tree)"
refuse() { # CRATE PATTERN WHY
    if cargo tree -p "$1" -e normal --prefix none | grep -Eq "$2"; then
        echo "$1: $3 (docs/crates.md); cargo tree -p $1 -e normal shows the path" >&2
        exit 1
    fi
}
refuse probelake-format '^probelake-(msprobe|synth) ' "the dataset kernel must not know msprobe's files"
refuse probelake-query '^probelake-(synth|compare) ' "queries must not build on the synthesizer or on compare"
refuse probelake-compare '^probelake-synth ' "compare must not build on the synthesizer"
refuse probelake-report '^probelake-synth ' "the report must not build on the synthesizer"
refuse probelake-writer '^probelake-(synth|query) ' "the writer must not build on the synthesizer or DataFusion"

# The module the tests build (with the workspace) and the one `pip install` builds (the crate
# alone) must resolve the same features: crates/probelake-python/Cargo.toml names them.
step "the Python module resolves the same features alone as in the workspace"
python3 scripts/check_module_features.py

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# The NPU backend links libascendcl, which CI does not have; type-checking it needs neither the
# toolkit nor DataFusion (the writer does not depend on it), so this costs about a minute cold.
step "cargo clippy -p probelake-writer --features npu (type-check the NPU backend)"
cargo clippy -p probelake-writer --features npu --all-targets -- -D warnings

# The venv comes first: the Rust S3 tests run moto_server from it.
# torch brings its CUDA wheels (~6 GB); a cold install from PyPI took 87 s (docs/benchmarks.md).
step "python venv (pyarrow, pandas, polars, duckdb, matplotlib, moto, pytest, hypothesis, torch, mindstudio-probe, ruff)"
venv=".venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# Without a pip cache: the downloaded wheels would sit on disk a second time (~3 GB for torch).
# A fresh venv needs ~7 GB; say so plainly rather than let pip fail half-way through.
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    free_gb=$(( $(df -Pk . | awk 'NR == 2 { print $4 }') / 1024 / 1024 ))
    if [ "$free_gb" -lt 7 ]; then
        echo "only ${free_gb} GB free on $(df -P . | awk 'NR == 2 { print $6 }'): the venv (torch with" \
            "its CUDA wheels) needs ~7 GB plus room for the build; free some space and run again" >&2
        exit 1
    fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    -r tests/python/requirements.txt
export PROBELAKE_TEST_VENV="$(pwd)/$venv"

step "cargo build --workspace --lib --tests (the tests and the Python package's native module)"
cargo build --workspace --lib --tests

step "cargo test"
cargo test --workspace

# Installed as `maturin develop` installs it (the Python sources in place, the native module
# beside them), from the build above; `pip install ./crates/probelake-python` builds the same
# package in the release profile.
step "probelake Python package into the venv (ruff, then the native module the build made)"
"$venv/bin/ruff" format --check crates/probelake-python/python tests/python/test_package.py \
    tests/python/test_msprobe_route.py tests/python/test_msprobe_device_path.py tests/python/msprobe_job.py \
    tests/python/test_report.py tests/python/test_fork.py tests/python/test_many_writers.py \
    tests/python/writer_job.py tests/python/test_hostile_arguments.py tests/python/test_kill_points.py \
    tests/python/test_faulty_store.py tests/python/faulty_proxy.py tests/python/test_command.py \
    tests/python/test_doc_commands.py
"$venv/bin/ruff" check crates/probelake-python/python
case "$target" in
    /*) built="$target/debug" ;;
    *) built="$(pwd)/$target/debug" ;;
esac
package="$(pwd)/crates/probelake-python/python"
cp "$built/lib_internal.so" "$package/probelake/_internal.abi3.so"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$package" >"$site/probelake-dev.pth"
# The start-up hook behind PROBELAKE_MSPROBE_LAKE, which a wheel installs from probelake.data/.
cp crates/probelake-python/probelake.data/purelib/probelake_msprobe.pth "$site/"
"$venv/bin/python" -c 'import probelake; print("probelake", probelake.__file__)'

# The report's pages are tested in Debian's Chromium, driven by playwright-core from npm (no
# browser of its own is downloaded); Node.js 20 and npm come with the machine.
step "Chromium (apt) and playwright-core (npm) for the report's browser tests"
if ! command -v chromium-headless-shell >/dev/null && ! command -v chromium >/dev/null; then
    as_root=()
    if [ "$(id -u)" != 0 ]; then as_root=(sudo); fi
    "${as_root[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium-headless-shell
fi
(cd tests/report && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)

step "pytest tests/python"
# The binary `cargo test` built for the e2e tests: `cargo build --bin probelake` alone resolves
# features without the dev-dependencies and would compile DataFusion a second time.
# Two workers, each module's tests on one (its module-scoped fixtures built once): most tests
# wait on subprocesses, servers and kills, and a cold CI run on two cores took 16 min this way.
# --durations: the slowest tests, to keep CI within its time; -rs: the run ends with each
# skipped test and the reason it could not run here.
PROBELAKE_BIN="$built/probelake" "$venv/bin/python" -m pytest -q -n 2 --dist loadfile --durations=15 -rs tests/python
