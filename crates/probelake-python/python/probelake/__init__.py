"""probelake for Python: msprobe numerics dumps as hive-partitioned Parquet.

- `open(uri)` → `Lake`: committed units as pyarrow datasets, pandas and polars frames;
  `lake.unit(step, stage, rank)` records entries from a running job (torch tensors included);
- `sql(query, **runs)`: DataFusion SQL over runs, as an Arrow stream;
- `compare`, `divergence`, `report`, `import_msprobe`, `export_msprobe`: the command line's
  capabilities.

Every error is a `ProbelakeError`.
"""

from __future__ import annotations

import os
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

# A child made by fork (torch's DataLoader workers, multiprocessing, launchers) inherits no
# thread of its parent: probelake's threads finish their work and stop before every fork, and
# start again on the next call, in both processes (docs/python.md, "Processes and fork").
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_internal._before_fork,
        after_in_parent=_internal._after_fork_in_parent,
        after_in_child=_internal._after_fork_in_child,
    )

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
    """What `compare` found: msprobe compare's table for every unit pair (typed, led by the
    target unit's step, stage and rank; `None` when the tables went to files, see `compare`),
    the count of rows whose Result is `error`, the result files written, and how the units
    were paired."""

    table: pa.Table | None
    errors: int
    files: list[Path]
    notes: list[str]

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (with `out`, read the files: they hold the table)."""
        if self.table is None:
            raise ArgumentError(
                f"the table went to {len(self.files)} file(s) and was not kept: read them, e.g. "
                "pyarrow.parquet.read_table(comparison.files) after format='parquet', or compare without out="
            )
        return self.table.to_pandas()

    def __repr__(self) -> str:
        rows = "tables in files" if self.table is None else f"{self.table.num_rows} rows"
        return f"Comparison({rows}, {self.errors} with Result `error`, {len(self.files)} file(s) written)"

    def _repr_html_(self) -> str:
        """A notebook's view: the counts, the notes, and the rows marked `error` (at most 20)."""
        return _comparison_html(self)


@dataclass(frozen=True)
class Divergence:
    """What `divergence` found: a row per unit pair where the runs part (the first diverging
    entry, both sides' statistics and `modules`, the chain of modules above it), and how the
    units were paired."""

    table: pa.Table
    notes: list[str]

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def to_pandas(self) -> Any:
        return self.table.to_pandas()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        if self.table.num_rows == 0:
            return "Divergence(the runs never part)"
        first = self.table.column("first_divergence")[0].as_py()
        return f"Divergence({self.table.num_rows} unit pair(s) part; the first row: {first})"


@dataclass(frozen=True)
class Report:
    """What `report` wrote: the page, its counts, and the earliest diverging op."""

    path: Path
    units: int
    rows: int
    errors: int
    warnings: int
    nan_inf: int
    unmatched: int
    first: str | None
    notes: list[str]

    def __repr__(self) -> str:
        where = f"first parting at {self.first}" if self.first else "no divergence past the threshold"
        return f"Report({self.path}: {self.units} unit pair(s), {self.rows} rows, {self.errors} error; {where})"


def _units(
    step: int | None,
    stage: str | None,
    rank: int | None,
    target: tuple[int | None, str | None, int | None],
    golden: tuple[int | None, str | None, int | None],
) -> dict[str, Any]:
    return {
        "step": step,
        "stage": stage,
        "rank": rank,
        "target_step": target[0],
        "target_stage": target[1],
        "target_rank": target[2],
        "golden_step": golden[0],
        "golden_stage": golden[1],
        "golden_rank": golden[2],
    }


def compare(
    target: Uri | Lake,
    golden: Uri | Lake,
    out: Uri | None = None,
    *,
    mode: Literal["auto", "statistics", "md5", "tensor"] = "auto",
    format: Literal["csv", "xlsx", "parquet"] = "csv",  # noqa: A002
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    target_step: int | None = None,
    golden_step: int | None = None,
    target_stage: str | None = None,
    golden_stage: str | None = None,
    target_rank: int | None = None,
    golden_rank: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    data_mapping: str | os.PathLike[str] | None = None,
    cell_mapping: str | os.PathLike[str] | bool | None = None,
    fuzzy_match: bool = False,
) -> Comparison:
    """`probelake compare`: compares `target` with `golden` (datasets, or msprobe folders and
    dump.json files, read in place and compared in memory), their units paired as the command line pairs them:
    two dump files with each other, two step folders rank folder by rank folder, anything else
    by equal (step, stage, rank). `step`/`stage`/`rank` keep only the target units with that
    value; `target_X` with `golden_X` compares the target's X with the golden run's (both or
    neither). With `out`, writes msprobe's result files there in `format`, named and stamped
    (local time) as the command line names them, each table written as it is built and none kept
    in memory (`table` is then `None`: read the files, e.g. `format="parquet"` and
    `pyarrow.parquet.read_table(result.files)`); on an error none are left.

    `data_mapping` and `cell_mapping` are msprobe's `-dm` and `-cm` (a .yaml file of
    `npu_row_name: bench_row_name`, or of `target_cell: golden_cell`; `cell_mapping=True` is a
    bare `-cm`), for runs that name modules or APIs otherwise, with msprobe 26.2's rules
    (docs/compare.md). `fuzzy_match` is msprobe's `-fm`: rows paired by a walk over names
    without call counters, in tensor mode (other modes raise `CompareError`)."""
    opts = dict(storage_options) if storage_options is not None else None
    units = _units(
        step, stage, rank, (target_step, target_stage, target_rank), (golden_step, golden_stage, golden_rank)
    )
    if cell_mapping is not None and not isinstance(cell_mapping, (bool, str, os.PathLike)):
        raise ArgumentError(f"cell_mapping: expected a .yaml path or True, got {cell_mapping!r}")
    cells = None if cell_mapping is None or isinstance(cell_mapping, bool) else os.fspath(cell_mapping)
    data, errors, files, notes = _internal.compare(
        _uri(target),
        _uri(golden),
        os.fspath(out) if out is not None else None,
        mode,
        format,
        units,
        opts,
        os.fspath(data_mapping) if data_mapping is not None else None,
        cells,
        cell_mapping is True,
        bool(fuzzy_match),
    )
    table = read_all(data) if data is not None else None
    return Comparison(table, errors, [Path(f) for f in files], list(notes))


def _comparison_html(result: Comparison) -> str:
    from html import escape

    head = (
        f"<p><b>{result.errors}</b> row(s) with Result <code>error</code>"
        + (f", {result.table.num_rows} rows" if result.table is not None else ", the tables in files")
        + f", {len(result.files)} file(s) written</p>"
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in result.notes)
    rows = ""
    if result.table is not None and result.table.num_rows:
        columns = [
            c for c in ("step", "stage", "rank", "NPU Name", "Result", "Err_message") if c in result.table.column_names
        ]
        errors = [r for r in result.table.select(columns).to_pylist() if r.get("Result") == "error"][:20]
        if errors:
            header = "".join(f"<th>{escape(c)}</th>" for c in columns)
            body = "".join("<tr>" + "".join(f"<td>{escape(str(r[c]))}</td>" for c in columns) + "</tr>" for r in errors)
            rows = f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
    return f"<div>{head}<ul>{notes}</ul>{rows}</div>"


def divergence(
    target: Uri | Lake,
    golden: Uri | Lake,
    *,
    threshold: float = 0.5,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    target_step: int | None = None,
    golden_step: int | None = None,
    target_stage: str | None = None,
    golden_stage: str | None = None,
    target_rank: int | None = None,
    golden_rank: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Divergence:
    """`probelake divergence`: for every unit pair (paired as `compare` pairs them), the first
    entry in execution order with an output whose statistics differ by more than `threshold`
    (a fraction; 0 finds the first difference of any size), with both sides' statistics and
    `modules`, the chain of modules above it. A row per unit where the runs part, and the
    notes on how the units were paired."""
    opts = dict(storage_options) if storage_options is not None else None
    units = _units(
        step, stage, rank, (target_step, target_stage, target_rank), (golden_step, golden_stage, golden_rank)
    )
    data, notes = _internal.divergence(_uri(target), _uri(golden), threshold, units, opts)
    return Divergence(read_all(data), list(notes))


def report(
    target: Uri | Lake,
    golden: Uri | Lake,
    out: Uri = "report.html",
    *,
    threshold: float = 0.5,
    step: int | None = None,
    stage: str | None = None,
    rank: int | None = None,
    target_step: int | None = None,
    golden_step: int | None = None,
    target_stage: str | None = None,
    golden_stage: str | None = None,
    target_rank: int | None = None,
    golden_rank: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    worst: int | None = None,
    detail_rows: int | None = None,
) -> Report:
    """`probelake report`: one offline HTML page at `out` that shows where `target` parts from
    `golden` (units paired as `compare` pairs them): the verdict, a rank × step heatmap per
    stage, each unit's module tree, a node's inputs and outputs with its stack, trends, and the
    worst rows (docs/report.md). `worst` and `detail_rows` bound what the page embeds."""
    opts = dict(storage_options) if storage_options is not None else None
    units = _units(
        step, stage, rank, (target_step, target_stage, target_rank), (golden_step, golden_stage, golden_rank)
    )
    path = Path(os.fspath(out))
    counts, first, notes = _internal.report(
        _uri(target), _uri(golden), os.fspath(path), threshold, units, opts, worst, detail_rows
    )
    return Report(path, *counts, first, list(notes))


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
    "Divergence",
    "InternalError",
    "Lake",
    "MsprobeError",
    "ProbelakeError",
    "QueryError",
    "Report",
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
    "report",
    "sql",
]
