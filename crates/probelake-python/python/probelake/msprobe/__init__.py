"""msprobe writes probelake datasets directly: no dump.json, no `.pt` files, one unit per dump.

Turn it on for every process of a job with one environment variable (the package installs a
start-up hook that does nothing until msprobe is imported)::

    PROBELAKE_MSPROBE_LAKE=s3://bucket/run-7 python train.py

or in code, before msprobe's `PrecisionDebugger` is created::

    import probelake.msprobe
    probelake.msprobe.enable("/data/run-7")

msprobe keeps doing everything it does (hooks, statistics, naming, stack and construct
records); what it would have written under `dump_path` becomes units of the dataset: verl's
`{dump_path}/step_{g}/{stage}/step{S}/rank{R}` is unit (g, stage, R), plain msprobe's
`{dump_path}/step{N}/rank{R}` is (N, "default", R), as `probelake import` maps them, and
`probelake export` writes the files msprobe would have written, byte for byte. A unit is
committed when msprobe resets its writer (`debugger.step()`, verl's `reset_status()`) and at
interpreter exit, never while an exception propagates through the caller. Commits run on a
thread of their own, one at a time, so a training step does not wait for storage; `flush()`
waits for them.

Environment variables, read when msprobe is imported:

- `PROBELAKE_MSPROBE_LAKE`: the dataset (a path, `file://` or `s3://`; S3 from `AWS_*`);
- `PROBELAKE_MSPROBE_MODE`: `exact` (the default: msprobe computes every value) or `fast`
  (probelake computes Max, Min, Mean and Norm, md5 and the `.pt` files: of accelerator
  tensors on their own device with no host sync on the training thread, of CPU tensors in
  Rust; once per tensor version; Max and Min exactly, Mean and Norm within the bounds
  docs/msprobe-integration.md gives);
- `PROBELAKE_MSPROBE_DEVICE_PATH`: `auto` (the default) or `always` (CPU tensors take the
  device path too: the same torch ops and buffers, for testing it without an accelerator);
- `PROBELAKE_MSPROBE_STAGING_BYTES`: the pinned host memory that md5 and task `tensor` copies
  may hold at once in `fast` mode (default 256 MiB); the training thread waits beyond it;
- `PROBELAKE_MSPROBE_FALLBACK`: `raise` (the default: a dataset that cannot be written stops
  the job with the reason) or `json` (msprobe writes its own files, with an error logged).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Literal

from .._errors import ArgumentError, ProbelakeError
from . import _capture, _fast
from ._capture import Fallback, Route
from ._fast import DevicePathChoice

__all__ = [
    "SUPPORTED_MSPROBE",
    "IntegrationError",
    "DevicePathChoice",
    "Mode",
    "Route",
    "disable",
    "enable",
    "enabled",
    "flush",
]

log = logging.getLogger("probelake.msprobe")

Mode = Literal["exact", "fast"]

#: mindstudio-probe versions whose writer this module has been tested against.
SUPPORTED_MSPROBE: tuple[str, ...] = ("26.2.0",)

ENV_LAKE = "PROBELAKE_MSPROBE_LAKE"
ENV_MODE = "PROBELAKE_MSPROBE_MODE"
ENV_FALLBACK = "PROBELAKE_MSPROBE_FALLBACK"
ENV_DEVICE_PATH = "PROBELAKE_MSPROBE_DEVICE_PATH"
ENV_STAGING = "PROBELAKE_MSPROBE_STAGING_BYTES"

#: Pinned staging memory for md5 and task `tensor` copies in `fast` mode, by default.
DEFAULT_STAGING_BYTES = 256 << 20

_COLLECTOR = "msprobe.core.dump.data_dump.data_collector"
_PROCESSOR = "msprobe.core.dump.data_dump.data_processor.pytorch_processor"
_SERVICE = "msprobe.core.dump.service"
# Its `BaseHookManager.inner_switch` keeps msprobe's hooks out of probelake's own threads.
_HOOK_MANAGER = "msprobe.core.dump.hook_manager"
# What the routing relies on in msprobe's writer; a release without one of them is refused.
_WRITER_API = (
    "initialize_json_file",
    "update_dump_paths",
    "write_json",
    "reset_cache",
    "write_data_json",
    "write_stack_info_json",
    "write_construct_info_json",
    "_is_extra_info_enabled",
    "flush_stat_stack",
)


# What fast mode replaces in msprobe's processor.
_PROCESSOR_API = ("get_stat_info", "_analyze_tensor")


class IntegrationError(ProbelakeError):
    """msprobe cannot be routed into a dataset: msprobe is missing, or is a release whose writer
    this version of probelake was not tested with. Nothing was changed in msprobe."""


_route: Route | None = None
_saved: list[tuple[Any, str, Any]] = []


def enabled() -> Route | None:
    """The active routing (dataset, fallback, units committed so far and, in `fast` mode,
    `counts` of the tensors each path computed), or None."""
    return _route


def enable(
    uri: str | os.PathLike[str],
    mode: Mode = "exact",
    storage_options: Mapping[str, Any] | None = None,
    fallback: Fallback = "raise",
    device_path: DevicePathChoice = "auto",
    staging_bytes: int = DEFAULT_STAGING_BYTES,
) -> Route:
    """Routes msprobe's dumps in this process into the dataset at `uri` (created if new).

    Call it before msprobe's `PrecisionDebugger` is created. Checks, before changing anything,
    that msprobe is installed and is a tested release (`SUPPORTED_MSPROBE`), and that the
    dataset takes writes; raises `IntegrationError` or `DatasetError` otherwise. `fallback`
    says what a failed commit later does: `"raise"` (the training step fails with the reason)
    or `"json"` (the dump is written as msprobe's own files, and the error logged).

    In `fast` mode, accelerator tensors are summarized on their device (`device_path="always"`
    sends CPU tensors that way too, to test it without an accelerator), and md5 and task
    `tensor` copies hold at most `staging_bytes` of pinned memory at once. The returned
    `Route`'s `counts` says how many tensors each path computed.

    >>> route = probelake.msprobe.enable("/data/run-7", mode="fast")  # doctest: +SKIP
    >>> route.counts  # after some steps  # doctest: +SKIP
    {'device': 5120, 'host': 0, 'msprobe': 0}
    """
    global _route
    if mode not in ("exact", "fast"):
        raise ArgumentError(f"mode {mode!r}: use 'exact' (msprobe computes every value) or 'fast'")
    if fallback not in ("raise", "json"):
        raise ArgumentError(f"fallback {fallback!r}: use 'raise' or 'json'")
    if device_path not in ("auto", "always"):
        raise ArgumentError(
            f"device_path {device_path!r}: use 'auto' (accelerator tensors on their device) or 'always' "
            "(CPU tensors too, for testing)"
        )
    if isinstance(staging_bytes, bool) or not isinstance(staging_bytes, int) or staging_bytes <= 0:
        raise ArgumentError(f"staging_bytes {staging_bytes!r}: expected a positive number of bytes")
    modules = _msprobe_modules()
    uri = os.fspath(uri)
    options = dict(storage_options) if storage_options is not None else None
    from .. import _internal

    _internal.check_dataset(uri, storage_options=options)
    disable()
    route = Route(uri=uri, storage_options=options, fallback=fallback, mode=mode, device_path=device_path)
    collector, processor, service, const = modules
    writer_class = _capture.make_writer_class(collector.DataWriter, route, const)
    _patch(collector, "DataWriter", writer_class)
    _patch(processor, "save_pt", _capture.capture_save_pt(processor.save_pt))
    if mode == "fast":
        data_processor = processor.PytorchDataProcessor
        fast = _fast.FastPath(const, device_path, staging_bytes)
        get_stat_info = _fast.make_get_stat_info(data_processor.get_stat_info, processor.TensorStatInfo, fast)
        _patch(data_processor, "get_stat_info", get_stat_info)
        _patch(data_processor, "_analyze_tensor", _fast.make_analyze_tensor(data_processor._analyze_tensor, fast))
        route.fast = fast
    if hasattr(processor, "save_npy"):
        _patch(processor, "save_npy", _capture.capture_save_npy(processor.save_npy))
    # msprobe creates dump_path/step{N}/rank{R}/ before writing into it; nothing is written there.
    _patch(service, "create_directory", _skip_directory)
    _route = route
    log.info("probelake: msprobe's dumps go to %s", uri)
    return route


def flush() -> None:
    """Waits until every dump handed over so far is committed (commits run behind the training
    thread, one at a time); raises the error of one that failed."""
    if _route is not None:
        _route.committer.wait()


def disable() -> None:
    """Waits for the commit in flight, then gives msprobe its own writer back; dumps already
    routed stay where they are."""
    global _route
    if _route is not None:
        try:
            _route.committer.wait()
        except ProbelakeError as e:
            log.error("probelake: the last msprobe dump handed over was not committed: %s", e)
    while _saved:
        module, name, value = _saved.pop()
        setattr(module, name, value)
    _route = None


def _skip_directory(path: str, *args: Any, **kwargs: Any) -> None:
    return None


def _patch(module: Any, name: str, value: Any) -> None:
    _saved.append((module, name, getattr(module, name)))
    setattr(module, name, value)


def _msprobe_modules() -> tuple[Any, Any, Any, Any]:
    try:
        version = importlib.metadata.version("mindstudio-probe")
    except importlib.metadata.PackageNotFoundError:
        raise IntegrationError(
            "msprobe is not installed: `pip install mindstudio-probe` "
            f"(tested: {', '.join(SUPPORTED_MSPROBE)}); probelake.msprobe routes its dumps"
        ) from None
    if version not in SUPPORTED_MSPROBE:
        raise IntegrationError(
            f"mindstudio-probe {version} has not been tested with probelake.msprobe "
            f"(tested: {', '.join(SUPPORTED_MSPROBE)}); install one of those, or leave "
            f"{ENV_LAKE} unset to let msprobe write its own files"
        )
    try:
        collector = importlib.import_module(_COLLECTOR)
        processor = importlib.import_module(_PROCESSOR)
        service = importlib.import_module(_SERVICE)
        hook_manager = importlib.import_module(_HOOK_MANAGER)
        from msprobe.core.common.const import Const
    except ImportError as e:
        raise IntegrationError(f"mindstudio-probe {version} could not be imported: {e}") from e
    missing = [a for a in _WRITER_API if not hasattr(collector.DataWriter, a)]
    data_processor = getattr(processor, "PytorchDataProcessor", None)
    missing += [f"PytorchDataProcessor.{a}" for a in _PROCESSOR_API if not hasattr(data_processor, a)]
    needed = (
        (processor, "save_pt"),
        (processor, "TensorStatInfo"),
        (processor, "PytorchDataProcessor"),
        (service, "create_directory"),
        (hook_manager, "BaseHookManager"),
    )
    for module, attr in needed:
        if not hasattr(module, attr):
            missing.append(f"{module.__name__}.{attr}")
    if missing:
        raise IntegrationError(
            f"mindstudio-probe {version}: its writer lacks {', '.join(missing)}; "
            f"probelake.msprobe needs one of {', '.join(SUPPORTED_MSPROBE)}"
        )
    return collector, processor, service, Const


def _enable_from_environment() -> None:
    """Called by the start-up hook once msprobe's collector module is imported."""
    uri = os.environ.get(ENV_LAKE)
    if not uri or _route is not None:
        return
    mode = os.environ.get(ENV_MODE, "exact")
    fallback = os.environ.get(ENV_FALLBACK, "raise")
    device_path = os.environ.get(ENV_DEVICE_PATH, "auto")
    staging = os.environ.get(ENV_STAGING, str(DEFAULT_STAGING_BYTES))
    try:
        try:
            staging_bytes = int(staging)
        except ValueError:
            raise ArgumentError(f"{ENV_STAGING}={staging!r}: expected a number of bytes") from None
        enable(uri, mode=mode, fallback=fallback, device_path=device_path, staging_bytes=staging_bytes)  # type: ignore[arg-type]
        # At WARNING, so that it shows in a worker's log with no logging set up: a user who set
        # the variable for a cluster sees which processes took it.
        log.warning("probelake: msprobe's dumps of process %d go to %s (%s)", os.getpid(), uri, ENV_LAKE)
    except ProbelakeError as e:
        if fallback == "json":
            print(f"probelake: {e}; msprobe writes its own files", file=sys.stderr)
            return
        # Logged as well as raised: a job may catch the error and go on (verl's precision
        # debugger does with `strict: False`); the worker's log still says why nothing is dumped.
        log.error(
            "probelake: msprobe's dumps of process %d cannot go to %s (%s): %s; msprobe is not started "
            "(%s=json lets msprobe write its own files instead)",
            os.getpid(),
            uri,
            ENV_LAKE,
            e,
            ENV_FALLBACK,
        )
        raise
