"""Property tests (hypothesis) over what Python code hands probelake: `record()` values, entry
names and options, `open()` URIs and storage options, `sql()` text and `unit()` keys.

No call may crash the interpreter (segfault, abort, a Rust panic across the FFI). Each either
works or raises a `ProbelakeError`, `TypeError` or `ValueError` whose message says what was
wrong, and after a failure the dataset is as it was. PROBELAKE_HYPOTHESIS_EXAMPLES sets the
number of examples per test (CI runs a bounded number; docs/reliability.md records a long run)."""

import os
import string

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("PROBELAKE_HYPOTHESIS_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ALLOWED = (probelake.ProbelakeError, TypeError, ValueError)

DTYPES = [
    getattr(torch, n)
    for n in (
        "float32 float64 float16 bfloat16 complex64 complex128 int8 uint8 int16 int32 int64 "
        "bool uint16 uint32 uint64 float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz"
    ).split()
    if hasattr(torch, n)
]


class Marked(torch.Tensor):
    """A tensor subclass, as some frameworks pass around."""


def make_tensor(dtype, shape, kind):
    base = torch.zeros(shape, dtype=torch.float64).uniform_(-3, 3)
    t = base.to(dtype) if dtype is not torch.bool else base > 0
    if kind == "transposed" and t.dim() >= 2:
        return t.transpose(0, 1)
    if kind == "strided" and t.dim() >= 1:
        return t[::2]
    if kind == "zero_d":
        return (
            t.reshape(-1)[:1].reshape(()) if t.numel() else torch.zeros((), dtype=dtype)
        )
    if kind == "huge_view":
        # 2^40 elements that all share one: the bytes a copy would need do not exist.
        return torch.zeros(1, dtype=dtype).expand(1 << 40)
    if kind == "freed":
        # Its storage shrunk to nothing under it: the shape promises bytes that are gone.
        t = t.clone()
        t.untyped_storage().resize_(0)
        return t
    if kind == "parameter" and t.is_floating_point():
        return torch.nn.Parameter(t)
    if kind == "subclass":
        return t.as_subclass(Marked)
    if kind in ("numpy", "numpy_strided"):
        try:
            return t.numpy()
        except (TypeError, RuntimeError):  # numpy has no bfloat16, float8, uint16…
            return t.float().numpy()
    if kind == "numpy_strided" and t.dim() >= 1:
        return t.float().numpy()[::-1]
    return t


tensors = st.builds(
    make_tensor,
    st.sampled_from(DTYPES),
    st.lists(st.integers(0, 4), max_size=4),
    st.sampled_from(
        "plain transposed strided zero_d huge_view freed parameter subclass numpy numpy_strided".split()
    ),
)

odd_objects = st.sampled_from(
    [
        object(),
        {1, 2},
        frozenset(),
        b"bytes",
        bytearray(b"x"),
        1j,
        Ellipsis,
        NotImplemented,
        len,
        type,
        np.array(["a", "b"]),
        np.array([object()], dtype=object),
        np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]),
        np.ma.masked_array([1.0, 2.0], mask=[True, False]),
        torch.float32,
        torch.Size([2, 3]),
        torch.device("cpu"),
        slice(1, None, 2),
        range(3),
        iter([1]),
    ]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # beyond 64 bits too
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)

values = st.recursive(
    st.one_of(tensors, scalars, odd_objects),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.integers(), st.none()), inner, max_size=3
        ),
    ),
    max_leaves=8,
)

names = st.one_of(
    st.sampled_from(["Functional.linear.0.forward", "Module.layer.Linear.forward.0"]),
    st.text(max_size=40),
    st.text(alphabet=string.printable + "\x00\ud800é中.", max_size=40),
)


def units_of(lake):
    return sorted((u.step, u.stage, u.rank, u.commit_id) for u in lake.units())


def expect_clean(call):
    """Runs `call`; returns whether it worked. A failure must be one of ALLOWED with a message."""
    try:
        call()
        return True
    except ALLOWED as e:
        assert str(e).strip(), f"{type(e).__name__} with no message"
        return False


def new_lake(path):
    lake = probelake.open(path)
    with lake.unit(0, "kept", 0) as u:
        u.record("Functional.kept.0.forward", output=[torch.ones(3)])
    return lake


@pytest.fixture
def lake(tmp_path):
    return new_lake(tmp_path / "lake")


@pytest.fixture
def small_lake(tmp_path):
    """Gives each example a dataset that stays small, a fresh one every 50 examples: most keys
    that work add a unit, and over a long run one dataset would grow to thousands of units,
    each example listing them all."""
    made = {"lake": None, "uses": 0, "count": 0}

    def get():
        if made["lake"] is None or made["uses"] == 50:
            made["count"] += 1
            made["lake"] = new_lake(tmp_path / f"lake{made['count']}")
            made["uses"] = 0
        made["uses"] += 1
        return made["lake"]

    return get


@SETTINGS
@given(
    name=names,
    slot=st.sampled_from(
        ["input_args", "input_kwargs", "output", "parameters", "parameters_grad"]
    ),
    value=values,
    stack=st.one_of(st.none(), st.lists(st.text(max_size=10), max_size=3), odd_objects),
    parent=st.one_of(st.none(), st.text(max_size=10), odd_objects),
    task=st.sampled_from(["statistics", "tensor"]),
)
def test_record_takes_any_value_or_refuses_it(
    lake, name, slot, value, stack, parent, task
):
    before = units_of(lake)
    unit = lake.unit(1, "prop", 0, task=task)
    if slot in ("input_kwargs", "parameters", "parameters_grad") and not isinstance(
        value, dict
    ):
        value = {"x": value}
    kwargs = {slot: value, "stack": stack, "parent": parent}
    if expect_clean(lambda: unit.record(name, **kwargs)):
        committed = unit.commit()
        assert committed.entries == 1
        assert (1, "prop", 0) in {(u.step, u.stage, u.rank) for u in lake.units()}
        # The next example starts from this dataset.
        return
    unit.abort()
    assert units_of(lake) == before


@SETTINGS
@given(
    step=st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none()),
    stage=st.one_of(
        st.text(max_size=30),
        st.sampled_from(["..", "a/b", "../x", "/", "x=1", "é"]),
        st.integers(),
    ),
    rank=st.one_of(st.integers(), st.booleans()),
)
# A stage too long for a folder name, shortened inside a character: once committed and never
# listed.
@example(step=0, stage="::\x80\x80\x80\x80\x80\u0800" + "\U00010000" * 7, rank=0)
def test_unit_keys(small_lake, step, stage, rank):
    lake = small_lake()
    before = units_of(lake)
    unit = None

    def open_and_record():
        nonlocal unit
        unit = lake.unit(step, stage, rank)
        unit.record("Functional.x.0.forward", output=[torch.ones(2)])
        unit.commit()

    if not expect_clean(open_and_record):
        if unit is not None:
            unit.abort()
        assert units_of(lake) == before
        return
    # A key that worked reads back as given, and stays inside the dataset.
    assert (step, stage, rank) in {(u.step, u.stage, u.rank) for u in lake.units()}


@SETTINGS
@given(
    uri=st.one_of(
        st.text(max_size=30),
        st.builds(
            lambda scheme, rest: scheme + rest,
            st.sampled_from(["s3://", "file://", "gs://", "http://", "s3:/", "::", ""]),
            st.text(max_size=20),
        ),
    ),
    options=st.one_of(
        st.none(),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    [
                        "endpoint",
                        "region",
                        "allow_http",
                        "max_retries",
                        "retry_timeout",
                        "nope",
                    ]
                ),
                st.text(max_size=8),
                st.integers(),
            ),
            st.one_of(scalars, odd_objects),
            max_size=3,
        ),
    ),
)
def test_open_any_uri_and_options(tmp_path, monkeypatch, uri, options):
    # Relative paths land in the test's folder; only local datasets are read (an object store
    # URI would reach for the network).
    monkeypatch.chdir(tmp_path)
    opened = []
    if expect_clean(
        lambda: opened.append(probelake.open(uri, storage_options=options))
    ):
        assert repr(opened[0])
        if "://" not in uri or uri.startswith("file://"):
            expect_clean(lambda: opened[0].units())


SQL_PARTS = st.sampled_from(
    [
        "SELECT",
        "*",
        "count(*)",
        "name",
        "max",
        "FROM",
        "dump",
        "stack",
        "nope",
        "WHERE",
        "GROUP BY",
        "ORDER BY",
        "LIMIT 3",
        "'\x00'",
        "'é'",
        "1/0",
        "CAST('x' AS INT)",
        "first_divergence('base', 'base')",
        "msprobe_rel_err(1.0, 0.0)",
        "(",
        ")",
        ";",
        "--",
        "/*",
        "1e400",
        "9223372036854775808",
        "NULL",
    ]
)


@SETTINGS
@given(
    query=st.one_of(
        st.text(max_size=60), st.lists(SQL_PARTS, min_size=1, max_size=8).map(" ".join)
    )
)
def test_sql_any_text(demo_lake, query):
    expect_clean(lambda: probelake.sql(query, base=demo_lake / "base").to_arrow())
