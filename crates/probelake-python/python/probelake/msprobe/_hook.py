"""The start-up hook behind `PROBELAKE_MSPROBE_LAKE`: costs nothing until msprobe is imported.

`probelake_msprobe.pth` (installed into site-packages with the package) runs this file at every
interpreter start when the variable is set. It imports nothing but the standard library and
installs an import hook; only when msprobe's `data_collector` module is first imported does it
import probelake and route msprobe's writer into the dataset. Processes that never import
msprobe (a Ray head, a data loader) never import torch, msprobe or probelake because of it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence

ENV_LAKE = "PROBELAKE_MSPROBE_LAKE"
# The module whose `DataWriter` global msprobe's `DataCollector` instantiates.
TRIGGER = "msprobe.core.dump.data_dump.data_collector"


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds `TRIGGER` with the other finders and enables probelake right after it executes."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TRIGGER:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            from probelake.msprobe import _enable_from_environment

            # The hook stays armed until routing succeeds: a job that swallows the first failure
            # (verl's precision debugger with `strict: False`) meets it again at every later
            # import of msprobe, rather than msprobe silently writing its own files.
            _enable_from_environment()
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Installs the import hook if `PROBELAKE_MSPROBE_LAKE` is set (a no-op otherwise)."""
    if not os.environ.get(ENV_LAKE):
        return
    if TRIGGER in sys.modules:
        from probelake.msprobe import _enable_from_environment

        _enable_from_environment()
        return
    # By name: site may run the .pth twice (lib and lib64 of a venv), each time with a fresh
    # copy of this module and so of the class.
    if not any(type(f).__name__ == _PatchAfterImport.__name__ for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
