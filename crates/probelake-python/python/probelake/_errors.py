"""The exceptions probelake raises. Every one is a `ProbelakeError`; the native module raises
them by name, with the message the `probelake` command line prints for the same failure."""


class ProbelakeError(Exception):
    """Base class of every error probelake raises."""


class DatasetError(ProbelakeError):
    """A dataset could not be opened, read or written: storage, Parquet, a damaged dataset."""


class MsprobeError(ProbelakeError):
    """msprobe's files: invalid JSON, a tree with no dump, a tensor file probelake cannot read."""


class QueryError(ProbelakeError):
    """SQL that DataFusion refused or could not run."""


class CompareError(ProbelakeError):
    """`compare` or `divergence` could not pair or compare the runs."""


class ArgumentError(ProbelakeError, ValueError):
    """A bad argument (an unknown option or dtype, wrong nesting, a closed unit); nothing was
    written."""


class ValueTypeError(ProbelakeError, TypeError):
    """A recorded value of a type msprobe does not record."""


class BudgetFullError(ProbelakeError, BufferError):
    """The writer's staging budget is full and the unit was opened with `backpressure="error"`."""


class WriterError(ProbelakeError):
    """The writer stopped (a failed store, a device copy) or could not commit; nothing of the unit
    became visible."""


class InternalError(ProbelakeError):
    """A bug in probelake, or a state it cannot continue from (a unit used across a fork)."""


__all__ = [
    "ArgumentError",
    "BudgetFullError",
    "CompareError",
    "DatasetError",
    "InternalError",
    "MsprobeError",
    "ProbelakeError",
    "QueryError",
    "ValueTypeError",
    "WriterError",
]
