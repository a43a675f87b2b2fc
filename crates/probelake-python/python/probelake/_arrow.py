"""Rows made by the native module, handed to pyarrow as Arrow C streams (no copy)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _internal

if TYPE_CHECKING:
    import pandas
    import polars


class _Capsule:
    """A capsule the native module made, given to pyarrow's public importers (which take
    objects implementing the PyCapsule interface, not capsules)."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._capsule

    def __arrow_c_schema__(self) -> object:
        return self._capsule


def schema_of(capsule: object) -> pa.Schema:
    """The schema in an "arrow_schema" capsule."""
    return pa.schema(_Capsule(capsule))


def read_all(stream: _internal.ArrowStream) -> pa.Table:
    """Every batch of `stream` as one table. A failed read raises the native module's own
    exception (a `QueryError` with the CLI's message, or the `KeyboardInterrupt` of a Ctrl-C)
    rather than pyarrow's rendering of it."""
    try:
        return pa.RecordBatchReader.from_stream(_Capsule(stream._own_stream())).read_all()
    except BaseException:
        stream._raise_error()
        raise


class SqlResult:
    """The rows of `probelake.sql`, read once, as an Arrow stream: it implements the Arrow
    PyCapsule interface, so `pa.table(r)`, `pl.DataFrame(r)`, `duckdb.sql("… FROM r")` take it
    without copies. The query runs while the rows are read, batch by batch (with the GIL
    released; Ctrl-C stops it)."""

    __slots__ = ("_stream", "_schema")

    def __init__(self, stream: _internal.ArrowStream) -> None:
        self._stream = stream
        self._schema = schema_of(stream.__arrow_c_schema__())

    @property
    def schema(self) -> pa.Schema:
        """The columns of the result."""
        return self._schema

    @property
    def query(self) -> str:
        return self._stream.query or ""

    def reader(self) -> pa.RecordBatchReader:
        """The rows as a `pyarrow.RecordBatchReader`; a result can be read only once."""
        return pa.RecordBatchReader.from_stream(self._stream)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.reader())

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._stream.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> object:
        return self._stream.__arrow_c_schema__()

    def to_arrow(self) -> pa.Table:
        return read_all(self._stream)

    def to_pandas(self, **kwargs: Any) -> pandas.DataFrame:
        """The rows as a pandas DataFrame (keyword arguments go to `pyarrow.Table.to_pandas`)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self) -> polars.DataFrame:
        import polars as pl

        frame = pl.from_arrow(self.to_arrow())
        assert isinstance(frame, pl.DataFrame)
        return frame

    def __repr__(self) -> str:
        cols = ", ".join(f"{f.name}: {f.type}" for f in self._schema)
        state = "read" if self._stream.taken else "unread"
        return f"SqlResult({cols}; {state})"
