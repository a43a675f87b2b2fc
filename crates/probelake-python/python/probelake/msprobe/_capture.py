"""msprobe's `DataWriter`, kept in memory and committed to a dataset instead of written as files.

msprobe builds a dump in its writer's caches (`cache_data`, `cache_stack`, `cache_construct`)
and rewrites `dump.json`, `stack.json` and `construct.json` whole at every flush; its processor
saves tensors with `torch.save`. The subclass here lets msprobe do all of that except the
files: flushes only resolve msprobe's placeholders, `torch.save` writes into memory, and when
msprobe resets the writer (`debugger.step()`, verl's `reset_status()`) the dump it would have
left on disk is committed as one unit. At interpreter exit whatever was not committed is.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .. import _internal
from .._errors import MsprobeError

if TYPE_CHECKING:
    from ._fast import FastPath

log = logging.getLogger("probelake.msprobe")

Fallback = Literal["raise", "json"]


@dataclass(repr=False)
class Route:
    """Where msprobe's dumps go, what happens when a commit fails, and what was committed
    (`committed`: step, stage, rank, entries, tensors per unit) or left out (`dropped`).
    In `fast` mode, `counts` says how many tensors' values each path computed: `device`
    (on the tensor's own device, no host sync), `host` (CPU tensors, in Rust) and `msprobe`
    (left to msprobe's own code)."""

    uri: str
    storage_options: dict[str, Any] | None = None
    fallback: Fallback = "raise"
    mode: str = "exact"
    device_path: str = "auto"
    # Units committed by this process, in order: (step, stage, rank, entries, tensors).
    committed: list[tuple[int, str, int, int, int]] = field(default_factory=list)
    # Units left out because an exception was propagating when msprobe reset its writer.
    dropped: list[str] = field(default_factory=list)
    # `fast` mode's paths (None in `exact` mode).
    fast: FastPath | None = None
    committer: Committer = field(default_factory=lambda: Committer())

    @property
    def counts(self) -> dict[str, int]:
        """Tensors whose values each path computed: {"device": n, "host": n, "msprobe": n}
        (all zero in `exact` mode, where msprobe computes every value)."""
        if self.fast is None:
            return {"device": 0, "host": 0, "msprobe": 0}
        return dict(self.fast.counts)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        paths = f", device_path={self.device_path!r}, counts: {counts}" if self.mode == "fast" else ""
        return (
            f"Route({self.uri!r}, mode={self.mode!r}, fallback={self.fallback!r}{paths}: "
            f"{len(self.committed)} unit(s) committed, {len(self.dropped)} dropped)"
        )


class Committer:
    """Commits one dump at a time behind the training thread: a hand-over returns at once,
    and the next one (or the exit) first waits for the one before and raises its error. So a
    step never waits for encoding or storage unless the store is slower than the steps, and
    then by one unit at most (back-pressure, not a growing queue)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, work: Callable[[], None]) -> None:
        self.wait()
        thread = threading.Thread(target=self._run, args=(work,), name="probelake-msprobe-commit", daemon=True)
        self._thread = thread
        thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as e:  # noqa: BLE001 - handed to the training thread by wait()
            self._error = e

    def wait(self) -> None:
        """Waits for the commit in flight; raises its error, if it failed."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error


_writers: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def writer_for(path: str) -> Any | None:
    """The live capturing writer whose tensor folder holds `path` (msprobe joins both from the
    same dump_tensor_data_dir string)."""
    folder = os.path.dirname(path)
    with _lock:
        for w in _writers:
            if w.dump_tensor_data_dir and w.dump_tensor_data_dir == folder:
                return w
    return None


def make_writer_class(base: type, route: Route, const: Any) -> type:
    """The `DataWriter` subclass msprobe's `DataCollector` builds while `route` is enabled."""

    class LakeDataWriter(base):  # type: ignore[misc, valid-type]
        """msprobe's writer with its output routed into a probelake dataset."""

        def __init__(self) -> None:
            super().__init__()
            self.probelake_route = route
            # `.pt` bytes by file name; futures of them where staging threads serialize them.
            self.probelake_tensors: dict[str, bytes | Future[bytes]] = {}
            with _lock:
                _writers.add(self)

        def initialize_json_file(self, **kwargs: Any) -> None:
            # What msprobe's initialize_json_file sets up, minus the empty files it writes.
            if kwargs["level"] == const.LEVEL_DEBUG and not self.cache_debug:
                debug = dict(kwargs)
                debug.update({"dump_data_dir": self.dump_tensor_data_dir, const.DATA: {}})
                self.cache_debug = debug
                return
            if not self.cache_data:
                kwargs.update({"dump_data_dir": self.dump_tensor_data_dir, const.DATA: {}})
                self.cache_data = kwargs

        def write_json(self) -> None:
            # In `fast` mode the placeholders resolve at the commit, behind the training
            # thread (device statistics are not on the host before then); a flush writes
            # nothing either way.
            if route.fast is None:
                super().write_json()

        # A flush resolves msprobe's placeholders (base `write_json`) and writes nothing.
        def write_data_json(self, file_path: str) -> None:
            pass

        def write_stack_info_json(self, file_path: str) -> None:
            pass

        def write_construct_info_json(self, file_path: str) -> None:
            pass

        def write_debug_info_json(self, file_path: str) -> None:
            pass

        def reset_cache(self) -> None:
            try:
                commit(self, route)
            finally:
                self.probelake_tensors = {}
                super().reset_cache()

    LakeDataWriter.__qualname__ = LakeDataWriter.__name__ = "LakeDataWriter"
    atexit.register(_commit_at_exit, route)
    return LakeDataWriter


def _commit_at_exit(route: Route) -> None:
    with _lock:
        writers = list(_writers)
    for w in writers:
        if getattr(w, "probelake_route", None) is route:
            try:
                commit(w, route, at_exit=True)
            except Exception as e:  # noqa: BLE001 - the interpreter is exiting: say it, do not mask
                log.error("probelake: the last msprobe dump of this process was not committed: %s", e)
            w.probelake_tensors = {}
            w.cache_data, w.cache_debug = {}, {}
    try:
        route.committer.wait()
    except Exception as e:  # noqa: BLE001
        log.error("probelake: the last msprobe dump of this process was not committed: %s", e)


def _has_data(writer: Any) -> bool:
    return bool(writer.cache_data) or bool(writer.cache_debug)


def commit(writer: Any, route: Route, at_exit: bool = False) -> None:
    """Commits what `writer` holds as the unit of its dump path, unless an exception is on its
    way through the caller (verl resets msprobe in a `finally`): that stage is not committed."""
    placeholders: Placeholders | None = None
    if route.fast is not None:
        route.fast.seal()
        route.fast.forget()
        placeholders = _take_placeholders(writer)
    if not _has_data(writer):
        return
    if not at_exit and sys.exc_info()[1] is not None:
        unit = writer.dump_file_path or "?"
        route.dropped.append(unit)
        log.warning(
            "probelake: not committing the msprobe dump %s: an exception is propagating (%s)",
            unit,
            type(sys.exc_info()[1]).__name__,
        )
        return
    if placeholders is None:
        writer.write_json()  # resolves the statistics and CRC placeholders, writes nothing
    debug = bool(writer.cache_debug)
    path = writer.debug_file_path if debug else writer.dump_file_path
    document = writer.cache_debug if debug else writer.cache_data
    stack: Mapping[Any, Any] | None = None
    construct: Mapping[Any, Any] | None = None
    if writer._is_extra_info_enabled() and not debug:
        stack = {i: [names, frames] for i, (frames, names) in enumerate(writer.cache_stack.items())}
        construct = writer.cache_construct
    captured = list(writer.probelake_tensors.items())
    tensor_dir = writer.dump_tensor_data_dir

    def serialized(indent: int | None) -> list[bytes | None]:
        return [_json(v, indent) if v is not None else None for v in (document, stack, construct)]

    # One-line JSON is what Python's C encoder writes (json.dump with an indent runs the
    # pure-Python one); probelake stores it as msprobe's indent=1 files. msprobe gives its
    # writer new caches after the reset, so the documents read behind the training thread are
    # ones it no longer changes. In `exact` mode they are serialized here, on the training
    # thread, as msprobe's flush would have resolved them; in `fast` mode the placeholders are
    # resolved (waiting for the device) and the documents serialized on the commit thread.
    one_line = serialized(None) if placeholders is None else None

    def store() -> None:
        nonlocal one_line
        if placeholders is not None:
            from ._device_path import msprobe_hooks_off

            with msprobe_hooks_off():
                _resolve(writer, document, placeholders)
        tensors = [(name, body.result() if isinstance(body, Future) else body) for name, body in captured]
        if one_line is None:
            one_line = serialized(None)
        try:
            try:
                result = _commit(route, path, one_line, tensors, relayout=1)
            except MsprobeError:
                # A document the one-line text cannot be re-laid out from: as msprobe writes it.
                result = _commit(route, path, serialized(1), tensors, relayout=None)
        except Exception as e:
            if route.fallback != "json":
                raise
            log.error("probelake: %s; writing msprobe's files to %s instead", e, os.path.dirname(path))
            _write_files(path, *serialized(1), tensors, tensor_dir)
            return
        route.committed.append(result)

    route.committer.submit(store)


# msprobe's statistics vectors and CRC futures of one dump, taken from its writer at the commit.
Placeholders = tuple[list[list[Any]], list[Any]]


def _take_placeholders(writer: Any) -> Placeholders:
    """The dump's placeholder values, in the order their indices count; the writer starts the
    next dump with empty lists (msprobe's flush would have emptied them)."""
    for callback in getattr(writer, "_pre_flush_callbacks", ()):
        callback()
    stats, writer.stat_stack_list = writer.stat_stack_list, []
    crcs, writer.crc32_stack_list = writer.crc32_stack_list, []
    return stats, crcs


def _resolve(writer: Any, document: Any, placeholders: Placeholders) -> None:
    """What msprobe's `write_json` does to the placeholders before it writes, on the commit
    thread: the values (waiting for the device's copies), then the records rewritten by
    msprobe's own methods, so keys and values are laid out as msprobe lays them out."""
    stats, crcs = placeholders
    if stats:
        writer._replace_stat_placeholders(document, [[_stat_value(x, i) for i, x in enumerate(v)] for v in stats])
    if crcs:
        writer._replace_crc32_placeholders(document, [f.result() for f in crcs])


def _stat_value(x: Any, position: int) -> Any:
    # As msprobe's `flush_stat_stack` resolves one value.
    if isinstance(x, Future):
        try:
            x = x.result()
        except Exception as e:  # noqa: BLE001 - msprobe logs and writes null
            log.warning("probelake: an asynchronous tensor statistic failed: %s", e)
            return None
    x = x.item() if hasattr(x, "item") else x
    if position == 4 and isinstance(x, int):
        return f"0x{(x & ((1 << 64) - 1)):016x}"
    return x


def _commit(
    route: Route,
    path: str,
    files: list[bytes | None],
    tensors: list[tuple[str, bytes]],
    relayout: int | None,
) -> tuple[int, str, int, int, int]:
    dump, stack, construct = files
    return _internal.commit_captured(
        route.uri,
        path,
        dump or b"",
        stack,
        construct,
        tensors,
        relayout=relayout,
        storage_options=route.storage_options,
    )


def _json(value: Mapping[Any, Any], indent: int | None) -> bytes:
    # With indent=1, what msprobe's save_json writes: json.dump(data, f, indent=1).
    return json.dumps(value, indent=indent).encode()


def _write_files(
    path: str,
    dump: bytes,
    stack: bytes | None,
    construct: bytes | None,
    tensors: list[tuple[str, bytes]],
    tensor_dir: str | None,
) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    for name, body in (("", dump), ("stack.json", stack), ("construct.json", construct)):
        if body is not None:
            with open(os.path.join(folder, name) if name else path, "wb") as f:
                f.write(body)
    if tensors and tensor_dir:
        os.makedirs(tensor_dir, exist_ok=True)
        for name, body in tensors:
            with open(os.path.join(tensor_dir, name), "wb") as f:
                f.write(body)


def capture_save_pt(original: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    """msprobe's `save_pt(tensor, path)`: `torch.save` into memory, kept for the commit. In
    `fast` mode a tensor on the device path is copied non-blocking into pinned staging memory
    and serialized on a staging thread (`_device_path.DevicePath.payload`), as `torch.save`
    would have written it from the device."""
    import torch

    plain = _into_memory(original, lambda buffer, tensor: torch.save(tensor, buffer))

    def save_pt(tensor: Any, filepath: str) -> None:
        writer = writer_for(filepath)
        fast = writer.probelake_route.fast if writer is not None else None
        if (
            fast is not None
            and isinstance(tensor, torch.Tensor)
            and (not tensor.is_cpu or fast.device_path == "always")
        ):
            payload = fast.device.payload(tensor)
            if payload is not None:
                writer.probelake_tensors[os.path.basename(filepath)] = payload
                return
        plain(tensor, filepath)

    return save_pt


def capture_save_npy(original: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    """msprobe's `save_npy(array, path)` (string arrays): `numpy.save` into memory."""
    import numpy as np

    return _into_memory(original, np.save)


def _into_memory(
    original: Callable[[Any, str], None], save: Callable[[io.BytesIO, Any], Any]
) -> Callable[[Any, str], None]:
    """`original(value, path)` when no capturing writer owns `path`; otherwise the bytes
    `save(buffer, value)` writes, kept by that writer under the file's name."""

    def save_file(value: Any, filepath: str) -> None:
        writer = writer_for(filepath)
        if writer is None:
            original(value, filepath)
            return
        buffer = io.BytesIO()
        save(buffer, value)
        writer.probelake_tensors[os.path.basename(filepath)] = buffer.getvalue()

    return save_file
