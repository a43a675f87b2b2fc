"""Arrow IPC from the native module into pyarrow, and query results as Arrow streams."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _internal
from ._errors import ProbelakeError

if TYPE_CHECKING:
    import pandas
    import polars


def read_ipc(data: bytes) -> pa.Table:
    """The table in one IPC stream (its buffers point into `data`: no copy)."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def read_schema(data: bytes) -> pa.Schema:
    return pa.ipc.open_stream(pa.py_buffer(data)).schema


class SqlResult:
    """The rows of `probelake.sql`, read once, as an Arrow stream: it implements the Arrow
    PyCapsule interface, so `pa.table(r)`, `pl.from_arrow(r)`, `duckdb.sql("… FROM r")` take it
    without copies. The query runs while the rows are read (with the GIL released; Ctrl-C stops
    it)."""

    __slots__ = ("_stream", "_schema", "_taken")

    def __init__(self, stream: _internal.SqlStream) -> None:
        self._stream = stream
        self._schema = read_schema(stream.schema_ipc())
        self._taken = False

    @property
    def schema(self) -> pa.Schema:
        """The columns of the result."""
        return self._schema

    @property
    def query(self) -> str:
        return self._stream.query

    def _batches(self) -> Iterator[pa.RecordBatch]:
        while (chunk := self._stream.next_ipc()) is not None:
            yield from pa.ipc.open_stream(pa.py_buffer(chunk))

    def reader(self) -> pa.RecordBatchReader:
        """The rows as a `pyarrow.RecordBatchReader`; a result can be read only once."""
        if self._taken:
            raise ProbelakeError("this query's rows were already read; run probelake.sql again")
        self._taken = True
        return pa.RecordBatchReader.from_batches(self._schema, self._batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.reader().__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> Any:
        return self._schema.__arrow_c_schema__()

    def to_arrow(self) -> pa.Table:
        return self.reader().read_all()

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
        state = "read" if self._taken else "unread"
        return f"SqlResult({cols}; {state})"
