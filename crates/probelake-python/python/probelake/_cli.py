"""The `probelake` command installed with the package: the command line, run inside the native
module (`probelake._internal.main`), so that one build gives both faces and one version."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

from . import _internal


def main() -> NoReturn:
    """Runs `probelake` with this process's arguments and exits with its exit code."""
    # Ctrl-C belongs to the command line, as in the binary: it removes what an interrupted
    # command had written and exits with 130. Python's own handler would only note the signal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_internal.main(["probelake", *sys.argv[1:]]))
