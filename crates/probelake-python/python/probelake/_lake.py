"""Datasets: reading committed units, and writing new ones from a running job."""

from __future__ import annotations

import os
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from . import _internal
from ._arrow import schema_of
from ._errors import ArgumentError

if TYPE_CHECKING:
    import pandas
    import polars

TABLES = ("dump", "stack", "construct", "tensor", "source")
_PARTITIONS = ("step", "stage", "rank", "api")

Task = Literal["statistics", "tensor"]
SummaryMode = Literal["statistics", "md5", "xor"]
Backpressure = Literal["wait", "error", "drop"]


@dataclass(frozen=True)
class UnitInfo:
    """One committed (step, stage, rank) unit."""

    step: int
    stage: str
    rank: int
    commit_id: str
    committed_at: int
    writer: str
    entries: int
    leaves: int
    tensors: int
    bytes: int
    task: str | None
    level: str | None


@dataclass(frozen=True)
class Committed:
    """What `Unit.commit` made visible."""

    step: int
    stage: str
    rank: int
    commit_id: str
    entries: int
    leaves: int
    tensors: int
    bytes: int


def reader_schema(table: str) -> pa.Schema:
    """The typed schema of `table` as readers see it: file columns, then the partition columns
    (`step` and `rank` int64). The same as `_probelake/schema/<table>.parquet`."""
    return schema_of(_internal.reader_schema(table))


def _s3_filesystem(options: Mapping[str, Any] | None) -> pafs.S3FileSystem:
    """pyarrow's S3 client configured as the CLI configures its own: `storage_options` first,
    then the `AWS_*` variables."""
    opts = {k.lower().removeprefix("aws_"): v for k, v in (options or {}).items()}

    def pick(key: str, *names: str) -> Any:
        if key in opts:
            return opts[key]
        for name in names:
            if os.environ.get(name):
                return os.environ[name]
        return None

    endpoint = pick("endpoint", "AWS_ENDPOINT_URL", "AWS_ENDPOINT") or opts.get("endpoint_url")
    allow_http = pick("allow_http", "AWS_ALLOW_HTTP")
    scheme = "https"
    if endpoint and "://" in str(endpoint):
        scheme, endpoint = str(endpoint).split("://", 1)
    elif str(allow_http).lower() in ("true", "1", "yes"):
        scheme = "http"
    return pafs.S3FileSystem(
        access_key=pick("access_key_id", "AWS_ACCESS_KEY_ID"),
        secret_key=pick("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
        session_token=pick("session_token", "AWS_SESSION_TOKEN"),
        region=pick("region", "AWS_REGION", "AWS_DEFAULT_REGION") or "us-east-1",
        endpoint_override=endpoint,
        scheme=scheme,
    )


class Lake:
    """A probelake dataset: a local folder, `file://` or `s3://bucket/prefix`. Readers see only
    committed units; a new dataset is created by its first write."""

    __slots__ = ("_lake", "_storage_options")
    _lake: _internal.Lake
    _storage_options: dict[str, Any] | None

    def __init__(self, uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        options = dict(storage_options) if storage_options is not None else None
        object.__setattr__(self, "_storage_options", options)
        object.__setattr__(self, "_lake", _internal.open(os.fspath(uri), options))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Lake is immutable")

    @property
    def uri(self) -> str:
        return self._lake.uri

    def __repr__(self) -> str:
        return f"probelake.Lake({self._lake.display!r})"

    def __fspath__(self) -> str:
        local = self._lake.local_dir
        if local is None:
            raise TypeError(f"{self._lake.display} is not a local folder")
        return str(local)

    # Reading.

    def units(self) -> list[UnitInfo]:
        """The committed units, in (step, stage, rank) order."""
        return [UnitInfo(*u) for u in self._lake.units()]

    def files(self, table: str = "dump") -> list[str]:
        """The committed data files of `table`, as paths of the dataset's filesystem."""
        _, base = self._filesystem()
        return [f"{base}/{path}" for path, _, _ in self._lake.files(table)]

    def _filesystem(self) -> tuple[pafs.FileSystem, str]:
        local = self._lake.local_dir
        if local is not None:
            return pafs.LocalFileSystem(), str(local).rstrip("/")
        uri = self._lake.uri
        scheme, rest = uri.split("://", 1)
        if scheme not in ("s3", "s3a"):
            raise ArgumentError(f"{self._lake.display}: pyarrow cannot read {scheme}:// datasets")
        return _s3_filesystem(self._storage_options), rest.strip("/")

    def dataset(self, table: str = "dump") -> ds.Dataset:
        """`table` as a `pyarrow.dataset.Dataset` over exactly the committed files, typed as
        probelake types it (`step`, `rank` int64; no `schema=` needed)."""
        schema = reader_schema(table)
        fs, base = self._filesystem()
        paths = [f"{base}/{path}" for path, _, _ in self._lake.files(table)]
        parts = pa.schema([schema.field(n) for n in _PARTITIONS if n in schema.names])
        return ds.dataset(
            paths,
            schema=schema,
            format="parquet",
            filesystem=fs,
            partitioning=ds.partitioning(parts, flavor="hive"),
            partition_base_dir=f"{base}/{table}",
        )

    def to_arrow(self, table: str = "dump", columns: Sequence[str] | None = None, filter: Any = None) -> pa.Table:
        """`table` read whole (or `columns` of it, rows passing the pyarrow `filter`)."""
        return self.dataset(table).to_table(columns=list(columns) if columns is not None else None, filter=filter)

    def to_pandas(
        self, table: str = "dump", columns: Sequence[str] | None = None, filter: Any = None
    ) -> pandas.DataFrame:
        """`table` as a pandas DataFrame: `step`, `rank` int64, strings as str."""
        return self.to_arrow(table, columns, filter).to_pandas()

    def scan_polars(self, table: str = "dump") -> polars.LazyFrame:
        """`table` as a polars LazyFrame over the committed files (filters on `step`, `stage`,
        `rank` choose files before any is opened)."""
        import polars as pl

        return pl.scan_pyarrow_dataset(self.dataset(table))

    # Writing.

    def unit(
        self,
        step: int,
        stage: str,
        rank: int,
        *,
        task: Task = "statistics",
        summary_mode: SummaryMode = "statistics",
        level: str = "L1",
        framework: str = "pytorch",
        budget_bytes: int = 256 << 20,
        backpressure: Backpressure = "wait",
        threads: int = 0,
        batch_rows: int = 64 * 1024,
        tensor_batch_bytes: int = 64 << 20,
        extra_info: bool = True,
        pid: int | None = None,
        dump_data_dir: str | None = None,
    ) -> Unit:
        """Starts writing one (step, stage, rank) unit; use it as a context manager: it commits
        on normal exit and aborts on an exception. Nothing is visible before the commit; a
        commit replaces an earlier commit of the same unit."""
        for name, value in (("step", step), ("rank", rank)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentError(f"{name}: expected an int, got {value!r}")
            if not -(1 << 63) <= value < 1 << 63:
                raise ArgumentError(f"{name} {value} is out of range: it is stored as a 64-bit signed integer")
        if not isinstance(stage, str):
            raise ArgumentError(f"stage: expected a str, got {stage!r}")
        options = {
            "task": task,
            "summary_mode": summary_mode,
            "level": level,
            "framework": framework,
            "budget_bytes": budget_bytes,
            "backpressure": backpressure,
            "threads": threads,
            "batch_rows": batch_rows,
            "tensor_batch_bytes": tensor_batch_bytes,
            "extra_info": extra_info,
            "pid": pid,
            "dump_data_dir": dump_data_dir,
        }
        return Unit(self._lake.unit(step, stage, rank, options))


_NO_PARENT = object()


class Unit:
    """One (step, stage, rank) unit being written: `record` entries, then `commit` (or leave
    the `with` block). `record` returns as soon as the values are snapshotted: statistics,
    encoding and storage happen on the writer's threads."""

    __slots__ = ("_writer",)

    def __init__(self, writer: _internal.UnitWriter) -> None:
        self._writer = writer

    def record(
        self,
        name: str,
        *,
        input_args: Sequence[Any] | None = None,
        input_kwargs: Mapping[str, Any] | None = None,
        input: Sequence[Any] | None = None,
        output: Any = None,
        parameters: Mapping[str, Any] | None = None,
        parameters_grad: Mapping[str, Any] | None = None,
        stack: Sequence[str] | None = None,
        parent: Any = _NO_PARENT,
    ) -> bool:
        """Records one msprobe entry (`Functional.linear.0.forward`, …). Values are nested as
        msprobe nests them: tensors (torch, numpy), None, bool, int, float, str, torch.dtype,
        torch.Size, torch.device, slices, lists, tuples, dicts. `output` is a list of outputs
        (a single value is one output). The statistics are those of the values now, even if
        they change right after. Returns False if the entry was dropped (`backpressure="drop"`).

        A tensor on an accelerator is read without a host sync: in a unit of task `statistics`
        and summary mode `statistics` its Max, Min, Mean and Norm are computed on its device
        and only those four values are copied back; otherwise its bytes are copied
        non-blocking into pinned memory. Either way the writer's threads wait for the copy.
        """
        has_parent = parent is not _NO_PARENT
        return self._writer.record(
            name,
            input_args,
            input_kwargs,
            input,
            output,
            parameters,
            parameters_grad,
            list(stack) if stack is not None else None,
            parent if has_parent else None,
            has_parent,
        )

    def commit(self) -> Committed:
        """Writes what is left and makes the unit visible (the GIL is free meanwhile)."""
        commit_id, entries, leaves, tensors, size = self._writer.commit()
        step, stage, rank = self._writer.unit
        return Committed(step, stage, rank, commit_id, entries, leaves, tensors, size)

    def abort(self) -> None:
        """Drops the unit: nothing of it becomes visible."""
        self._writer.abort()

    def metrics(self) -> dict[str, float]:
        """The writer's counters: records, bytes, drops, waits, queue_depth, staged_bytes, leaves,
        and record_p50/p99/max in seconds."""
        return self._writer.metrics()

    @property
    def is_open(self) -> bool:
        return self._writer.is_open

    @property
    def step(self) -> int:
        return self._writer.unit[0]

    @property
    def stage(self) -> str:
        return self._writer.unit[1]

    @property
    def rank(self) -> int:
        return self._writer.unit[2]

    def __enter__(self) -> Unit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._writer.abort()
        elif self._writer.is_open:
            self.commit()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"probelake.Unit(step={self.step}, stage={self.stage!r}, rank={self.rank}, {state})"
