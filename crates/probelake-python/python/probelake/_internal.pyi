"""Types of the native module `probelake._internal` (crates/probelake-python/src). Users call the
typed layer (`probelake`); these are its building blocks. Every error is raised as a
`probelake.ProbelakeError` subclass."""

from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, final

__version__: str

StorageOptions = Mapping[str, Any] | None

# (step, stage, rank, commit_id, committed_at, writer, entries, leaves, tensors, bytes, task, level)
UnitTuple = tuple[int, str, int, str, int, str, int, int, int, int, str | None, str | None]

@final
class Lake:
    """A dataset: a local path, `file://` or `s3://` URI."""

    @property
    def uri(self) -> str: ...
    @property
    def display(self) -> str: ...
    @property
    def local_dir(self) -> Path | None: ...
    def units(self) -> list[UnitTuple]: ...
    def files(self, table: str) -> list[tuple[str, int, int]]:
        """(path relative to the root, rows, bytes) of the committed files of `table`."""
    def unit(self, step: int, stage: str, rank: int, options: Mapping[str, Any]) -> UnitWriter: ...

@final
class ArrowStream:
    """Rows made in Rust, readable once through the Arrow PyCapsule interface."""

    @property
    def query(self) -> str | None: ...
    @property
    def taken(self) -> bool: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    def _own_stream(self) -> object: ...
    def _raise_error(self) -> None: ...

@final
class UnitWriter:
    """One (step, stage, rank) unit being written."""

    @property
    def is_open(self) -> bool: ...
    @property
    def unit(self) -> tuple[int, str, int]: ...
    def record(
        self,
        name: str,
        input_args: Any = None,
        input_kwargs: Any = None,
        input: Any = None,  # noqa: A002
        output: Any = None,
        parameters: Any = None,
        parameters_grad: Any = None,
        stack: Sequence[str] | None = None,
        parent: str | None = None,
        has_parent: bool = False,
    ) -> bool: ...
    def commit(self) -> tuple[str, int, int, int, int]:
        """(commit_id, entries, leaves, tensors, bytes)."""
    def abort(self) -> None: ...
    def metrics(self) -> dict[str, int | float]: ...
    def _set_stage_cpu(self, stage: object | None) -> None: ...
    def _set_device_path_always(self, always: bool) -> None: ...

def main(args: Sequence[str | PathLike[str]]) -> int: ...
def open(uri: str, storage_options: StorageOptions = None) -> Lake: ...  # noqa: A001
def sql(query: str, runs: Sequence[tuple[str, str]], storage_options: StorageOptions = None) -> ArrowStream: ...
def import_msprobe(
    src: str | PathLike[str],
    dst: str,
    layout: str | None = None,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    storage_options: StorageOptions = None,
) -> tuple[list[tuple[int, str, int, int, int, int]], int]: ...
def export_msprobe(
    src: str,
    dst: str | PathLike[str],
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    force: bool = False,
    storage_options: StorageOptions = None,
) -> tuple[int, int, int]: ...
def compare(
    target: str,
    golden: str,
    out: str | PathLike[str] | None = None,
    mode: str | None = None,
    format: str | None = None,
    units: dict[str, int | str | None] | None = None,
    storage_options: StorageOptions = None,
    data_mapping: str | None = None,
    cell_mapping: str | None = None,
    bare_cell_mapping: bool = False,
    fuzzy_match: bool = False,
) -> tuple[ArrowStream | None, int, list[Path], list[str]]: ...
def divergence(
    target: str,
    golden: str,
    threshold: float = 0.5,
    units: dict[str, int | str | None] | None = None,
    storage_options: StorageOptions = None,
) -> tuple[ArrowStream, list[str]]: ...
def report(
    target: str,
    golden: str,
    out: str,
    threshold: float = 0.5,
    units: dict[str, int | str | None] | None = None,
    storage_options: StorageOptions = None,
    worst: int | None = None,
    detail_rows: int | None = None,
) -> tuple[list[int], str | None, list[str]]: ...
def reader_schema(table: str) -> object:
    """The schema readers see for `table`, as an "arrow_schema" capsule."""

def check_dataset(uri: str, storage_options: StorageOptions = None) -> None:
    """Opens `uri` for writing and checks that it takes writes (creating the dataset if new)."""

def commit_captured(
    uri: str,
    dump_path: str,
    dump: bytes,
    stack: bytes | None = None,
    construct: bytes | None = None,
    tensors: list[tuple[str, bytes]] = ...,
    relayout: int | None = None,
    storage_options: StorageOptions = None,
) -> tuple[int, str, int, int, int]:
    """Commits a dump msprobe held in memory as its unit: (step, stage, rank, entries, tensors)."""

def tensor_summary(
    dtype: str, ptr: int, nbytes: int, zero_dim: bool, crc32: bool = False
) -> tuple[
    float | int | bool | None,
    float | int | bool | None,
    float | int | bool | None,
    float | int | bool | None,
    str | None,
]:
    """msprobe's Max, Min, Mean and Norm of a live contiguous CPU tensor's bytes, and its CRC-32
    (msprobe's `md5` field) when `crc32` is set."""

def _live_streams() -> int: ...
def _before_fork() -> None: ...
def _after_fork_in_parent() -> None: ...
def _after_fork_in_child() -> None: ...
