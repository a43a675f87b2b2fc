"""Fails when the Python module the tests build and the one `pip install` builds differ.

The tests build `crates/probelake-python` with the whole workspace, so Cargo unifies its
dependencies' features with the CLI's and Ballista's; `pip install ./crates/probelake-python`
resolves them for that crate alone. The crate names the workspace's features itself (its
Cargo.toml says why); this script compares the two resolutions with `cargo tree` and prints the
dependency lines that would make them equal."""

import subprocess
import sys


def features(*args: str) -> dict[str, set[str]]:
    """Package (name and version) -> features enabled, over every build kind."""
    out = subprocess.run(
        ["cargo", "tree", "--prefix", "none", "-f", "{p}|{f}", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        package, enabled = line.split("|", 1)
        package = " ".join(package.split()[:2])  # "name vX.Y.Z", without "(proc-macro)" or "(*)"
        enabled = enabled.split(" ")[0]  # without a trailing "(*)"
        found.setdefault(package, set()).update(f for f in enabled.split(",") if f)
    return found


def main() -> int:
    alone = features("-p", "probelake-python", "-e", "normal,build")
    # What `cargo build --workspace --lib --tests` builds: dev-dependencies' features included.
    workspace = features("--workspace", "-e", "normal,build,dev")
    missing = {
        package: sorted(workspace[package] - enabled)
        for package, enabled in alone.items()
        if package in workspace and workspace[package] - enabled
    }
    if not missing:
        print(f"the module's {len(alone)} crates resolve the same features alone and in the workspace")
        return 0
    print(
        "crates/probelake-python alone resolves fewer features than the workspace build the tests\n"
        "use; add these to its [dependencies] (or drop what the workspace no longer needs):",
        file=sys.stderr,
    )
    for package, names in sorted(missing.items()):
        name, version = package.split(" ")
        major = version.lstrip("v").split(".")
        req = major[0] if major[0] != "0" else ".".join(major[:2])
        quoted = ", ".join(f'"{n}"' for n in names)
        print(f'  {name} = {{ version = "{req}", default-features = false, features = [{quoted}] }}', file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
