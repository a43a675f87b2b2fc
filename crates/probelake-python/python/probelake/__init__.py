"""probelake for Python: msprobe numerics dumps as hive-partitioned Parquet.

- `open(uri)` → `Lake`: committed units as pyarrow datasets, pandas and polars frames;
  `lake.unit(step, stage, rank)` records entries from a running job (torch tensors included);
- `sql(query, **runs)`: DataFusion SQL over runs, as an Arrow stream;
- `compare`, `divergence`, `import_msprobe`, `export_msprobe`: the command line's capabilities.

Every error is a `ProbelakeError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from . import _internal
from ._arrow import SqlResult, read_all
from ._errors import (
    ArgumentError,
    BudgetFullError,
    CompareError,
    DatasetError,
    InternalError,
    MsprobeError,
    ProbelakeError,
    QueryError,
    ValueTypeError,
    WriterError,
)
from ._lake import TABLES, Committed, Lake, Unit, UnitInfo, reader_schema

__version__: str = _internal.__version__

Uri = str | os.PathLike[str]


def open(uri: Uri, storage_options: Mapping[str, Any] | None = None) -> Lake:  # noqa: A001
    """Opens the dataset at `uri` (a local path, `file://` or `s3://bucket/prefix`; S3 is
    configured by the `AWS_*` variables, overridden by `storage_options`)."""
    return Lake(uri, storage_options)


def _uri(run: Uri | Lake) -> str:
    return run.uri if isinstance(run, Lake) else os.fspath(run)


def sql(query: str, storage_options: Mapping[str, Any] | None = None, **runs: Uri | Lake) -> SqlResult:
    """Runs `query` over the runs named by the keywords (`sql(q, target=..., golden=...)`, as
    `probelake sql --run target=… --run golden=…`); the first run is also the default schema."""
    pairs = [(name, _uri(uri)) for name, uri in runs.items()]
    opts = dict(storage_options) if storage_options is not None else None
    return SqlResult(_internal.sql(query, pairs, opts))


@dataclass(frozen=True)
class Comparison:
    """What `compare` found: msprobe compare's table for every unit (typed, led by step, stage
    and rank), the count of rows whose Result is `error`, and the CSV files written."""

    table: pa.Table
    errors: int
    files: list[Path]

    def to_pandas(self) -> Any:
        return self.table.to_pandas()


def compare(
    target: Uri | Lake,
    golden: Uri | Lake,
    out: Uri | None = None,
    *,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    mode: Literal["auto", "statistics", "md5", "tensor"] = "auto",
    storage_options: Mapping[str, Any] | None = None,
) -> Comparison:
    """Compares every (step, stage, rank) of `target` with `golden` as `probelake compare` does
    (datasets, or msprobe folders / dump.json files imported on the fly). With `out`, writes
    msprobe's CSV files there, named as the command line names them."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    opts = dict(storage_options) if storage_options is not None else None
    data, errors, files = _internal.compare(
        _uri(target),
        _uri(golden),
        os.fspath(out) if out is not None else None,
        step,
        stage,
        rank,
        mode,
        stamp,
        opts,
    )
    return Comparison(read_all(data), errors, [Path(f) for f in files])


def divergence(
    target: Uri | Lake,
    golden: Uri | Lake,
    *,
    threshold: float = 0.5,
    storage_options: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The first diverging entry of every unit in both runs (sql/first_divergence.sql)."""
    opts = dict(storage_options) if storage_options is not None else None
    return read_all(_internal.divergence(_uri(target), _uri(golden), threshold, opts))


def import_msprobe(
    src: Uri,
    dst: Uri | Lake,
    *,
    layout: Literal["msprobe", "verl", "single"] | None = None,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[UnitInfo]:
    """`probelake import`: an msprobe or verl dump tree (or one dump.json) into `dst`; returns
    the committed units. On bad input `dst` is left as it was."""
    opts = dict(storage_options) if storage_options is not None else None
    _internal.import_msprobe(os.fspath(src), _uri(dst), layout, step, stage, rank, opts)
    lake = dst if isinstance(dst, Lake) else Lake(dst, storage_options)
    return lake.units()


def export_msprobe(
    src: Uri | Lake,
    dst: Uri,
    *,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    force: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[int, int, int]:
    """`probelake export`: the dataset back as msprobe's files; returns (units, files, bytes)."""
    opts = dict(storage_options) if storage_options is not None else None
    return _internal.export_msprobe(_uri(src), os.fspath(dst), step, stage, rank, force, opts)


__all__ = [
    "TABLES",
    "ArgumentError",
    "BudgetFullError",
    "Committed",
    "CompareError",
    "Comparison",
    "DatasetError",
    "InternalError",
    "Lake",
    "MsprobeError",
    "ProbelakeError",
    "QueryError",
    "SqlResult",
    "Unit",
    "UnitInfo",
    "ValueTypeError",
    "WriterError",
    "compare",
    "divergence",
    "export_msprobe",
    "import_msprobe",
    "open",
    "reader_schema",
    "sql",
]
