"""The `probelake` package (crates/probelake-python): readers of committed units, SQL, the
writer from torch, and how the native module behaves (errors, Ctrl-C); fork is test_fork.py."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import re
import time

import pytest

probelake = pytest.importorskip(
    "probelake", reason="the probelake package is not installed in this venv"
)
pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from conftest import binary, fixture_runs, probelake as cli  # noqa: E402

RUNS = fixture_runs()


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: p.name)
def imported(request, tmp_path_factory):
    dst = tmp_path_factory.mktemp("lake") / request.param.name
    cli("import", request.param, dst, "-q")
    return dst


def cli_count(root, table):
    out = cli(
        "sql", root, "-c", f"SELECT count(*) FROM {table}", "--format", "csv"
    ).stdout.split()
    return int(out[-1])


@pytest.mark.parametrize("table", ["dump", "stack", "construct", "source"])
def test_readers_match_probelake_sql(imported, table):
    lake = probelake.open(imported)
    expected = cli_count(imported, table)
    dataset = lake.dataset(table)
    assert dataset.count_rows() == expected
    assert dataset.schema.field("step").type == pa.int64()
    assert dataset.schema.field("rank").type == pa.int64()
    df = lake.to_pandas(table)
    assert len(df) == expected
    assert str(df["step"].dtype) == "int64" and str(df["rank"].dtype) == "int64"
    polars = pytest.importorskip("polars")
    frame = lake.scan_polars(table).collect()
    assert frame.height == expected
    assert frame.schema["step"] == polars.Int64
    result = probelake.sql(f"SELECT * FROM {table}", run=imported)
    table_ = pa.table(result)
    assert table_.num_rows == expected
    assert table_.schema.field("step").type == pa.int64()
    assert (
        len(lake.units()) == len(cli("info", imported).stdout.strip().splitlines()) - 1
        or lake.units()
    )


def test_sql_into_pandas_and_polars(demo_lake):
    polars = pytest.importorskip("polars")
    q = "SELECT t.item, t.norm, g.norm AS gnorm FROM target.dump t JOIN golden.dump g USING (step, stage, rank, item)"
    df = probelake.sql(
        q, target=demo_lake / "attnbug", golden=demo_lake / "base"
    ).to_pandas()
    assert len(df) > 0 and list(df.columns) == ["item", "norm", "gnorm"]
    frame = polars.DataFrame(
        probelake.sql("SELECT step, rank FROM dump LIMIT 5", base=demo_lake / "base")
    )
    assert frame.schema["step"] == polars.Int64 and frame.height == 5
    r = probelake.sql("SELECT 1 AS x", base=demo_lake / "base")
    assert "x: int64" in repr(r)
    assert r.to_arrow().num_rows == 1
    with pytest.raises(probelake.ProbelakeError, match="already read"):
        r.to_arrow()


def test_sql_result_streams_through_the_arrow_c_interface(demo_lake):
    polars = pytest.importorskip("polars")
    base = demo_lake / "base"
    q = "SELECT step, rank, item, norm FROM dump ORDER BY item"
    expected = probelake.sql(q, base=base).to_arrow()
    assert expected.num_rows > 0
    assert pa.table(probelake.sql(q, base=base)).equals(expected)
    reader = pa.RecordBatchReader.from_stream(probelake.sql(q, base=base))
    assert reader.schema == expected.schema and reader.read_all().equals(expected)
    assert polars.DataFrame(probelake.sql(q, base=base)).height == expected.num_rows
    assert probelake.sql(q, base=base).to_pandas().equals(expected.to_pandas())
    # A requested schema is honoured by casting, or refused as the interface allows.
    wanted = pa.schema([("step", pa.int32()), ("rank", pa.int32()), ("item", pa.large_string()),
                        ("norm", pa.float32())])  # fmt: skip
    cast = pa.RecordBatchReader.from_stream(probelake.sql(q, base=base), schema=wanted)
    assert cast.read_all().schema == wanted
    with pytest.raises(NotImplementedError):
        pa.RecordBatchReader.from_stream(
            probelake.sql(q, base=base), schema=pa.schema([("x", pa.int64())])
        )
    r = probelake.sql(q, base=base)
    pa.table(r)
    with pytest.raises(probelake.QueryError, match="already read"):
        pa.table(r)
    assert "; read)" in repr(r)


def test_a_stream_read_partly_then_dropped_is_released(demo_lake):
    import gc

    base = demo_lake / "base"
    live = probelake._internal._live_streams()
    # A cross join: many batches, made one at a time as they are read.
    r = probelake.sql("SELECT a.item, b.item FROM dump a, dump b", base=base)
    reader = pa.RecordBatchReader.from_stream(r)
    assert reader.read_next_batch().num_rows > 0
    assert probelake._internal._live_streams() == live + 1
    start = time.perf_counter()
    del reader
    gc.collect()
    assert probelake._internal._live_streams() == live
    # A capsule never imported is released by its destructor.
    capsule = probelake.sql("SELECT 1 AS x", base=base).__arrow_c_stream__()
    assert probelake._internal._live_streams() == live + 1
    del capsule
    assert probelake._internal._live_streams() == live
    assert time.perf_counter() - start < 5
    # The runtime is still usable.
    assert pa.table(probelake.sql("SELECT 1 AS x", base=base)).num_rows == 1


def test_errors_carry_the_cli_message(demo_lake, tmp_path):
    with pytest.raises(probelake.QueryError, match="No field named nope"):
        probelake.sql("SELECT nope FROM dump", base=demo_lake / "base").to_arrow()
    with pytest.raises(probelake.DatasetError, match="no such dataset"):
        probelake.open(tmp_path / "missing").units()
    assert not (tmp_path / "missing").exists()
    with pytest.raises(probelake.ArgumentError, match="run name"):
        probelake.sql("SELECT 1", **{"Bad": demo_lake / "base"})
    with pytest.raises(probelake.ArgumentError, match="unknown table"):
        probelake.open(demo_lake / "base").dataset("dumps")
    with pytest.raises(probelake.ArgumentError, match="storage_options"):
        probelake.open("s3://bucket/x", storage_options={"nope": 1})


def test_a_credential_in_an_error_is_shown_as_stars_by_the_cli_and_python(tmp_path):
    # The same case for both faces: a path that holds the secret the process knows.
    secret = "pl-test-secret-9f3c1e"
    missing = tmp_path / secret / "lake"
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": secret}
    cli = subprocess.run(
        [binary(), "info", str(missing)], capture_output=True, text=True, env=env
    )
    assert cli.returncode == 2
    assert secret not in cli.stderr and "***" in cli.stderr, cli.stderr
    before = os.environ.get("AWS_SECRET_ACCESS_KEY")
    os.environ["AWS_SECRET_ACCESS_KEY"] = secret
    try:
        with pytest.raises(probelake.DatasetError) as raised:
            probelake.open(missing).units()
    finally:
        if before is None:
            del os.environ["AWS_SECRET_ACCESS_KEY"]
        else:
            os.environ["AWS_SECRET_ACCESS_KEY"] = before
    assert secret not in str(raised.value) and "***" in str(raised.value)


def _files(folder):
    """The files under `folder`, by path with the timestamp taken out of their names."""
    return {
        re.sub(r"_\d{14}\.", ".", str(p.relative_to(folder))): p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "parquet"])
def test_compare_writes_what_the_cli_writes(demo_lake, tmp_path, fmt):
    msprobe = demo_lake.parent / "msprobe"
    cases = {
        # Two step folders: rank folders by position, one flat file named after the rank folder.
        "steps": (
            msprobe / "attnbug/step_2/actor_update/step0",
            msprobe / "base/step_2/actor_update/step0",
            {},
        ),
        # Two datasets: every unit, in step/stage folders.
        "datasets": (demo_lake / "attnbug", demo_lake / "base", {}),
        # One run against itself, step 2 against step 1.
        "flags": (
            demo_lake / "attnbug",
            demo_lake / "attnbug",
            {"target_step": 2, "golden_step": 1, "stage": "actor_update"},
        ),
    }
    for case, (target, golden, units) in cases.items():
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in units.items()]
        cli_out, py_out = tmp_path / case / "cli", tmp_path / case / "py"
        how = ["--xlsx"] if fmt == "xlsx" else ["--format", fmt]
        cli("compare", target, golden, "-o", cli_out, *how, *flags, "-q", codes=(0, 1))
        result = probelake.compare(target, golden, out=py_out, format=fmt, **units)
        cli_files, py_files = _files(cli_out), _files(py_out)
        assert list(py_files) == list(cli_files) and py_files, case
        assert sorted(result.files) == sorted(py_files.values())
        for name, cli_file in cli_files.items():
            if fmt == "csv":
                assert py_files[name].read_bytes() == cli_file.read_bytes(), (
                    case,
                    name,
                )
            elif fmt == "parquet":
                assert pq.read_table(py_files[name]).equals(pq.read_table(cli_file)), (
                    case,
                    name,
                )
            else:
                openpyxl = pytest.importorskip("openpyxl")
                sheets = [
                    [
                        list(r)
                        for r in openpyxl.load_workbook(f).active.iter_rows(
                            values_only=True
                        )
                    ]
                    for f in (py_files[name], cli_file)
                ]
                assert sheets[0] == sheets[1], (case, name)
        # The files were written as the command line writes them, a table at a time, and
        # no table was kept; without `out` the same tables come back.
        assert result.table is None and "tables in files" in repr(result)
        with pytest.raises(probelake.ArgumentError, match="read them"):
            result.to_pandas()
        table = probelake.compare(target, golden, **units).table
        assert table is not None and table.num_rows > 0
        assert result.errors == table.column("Result").to_pylist().count("error")


def test_compare_and_divergence_choices_and_errors(demo_lake, tmp_path):
    lake = demo_lake / "attnbug"
    one = probelake.compare(lake, lake, target_step=2, golden_step=1)
    assert set(one.table.column("step").to_pylist()) == {2}
    notes = probelake.compare(
        demo_lake.parent / "msprobe/attnbug/step_2/actor_update/step0",
        demo_lake.parent / "msprobe/base/step_2/actor_update/step0",
    ).notes
    assert notes == [
        "two step folders: their dump folders paired by position (rank0 with rank0)"
    ]
    # Pairing errors name Python's keyword arguments, not the command line's flags.
    with pytest.raises(probelake.ArgumentError, match="golden_step") as refused:
        probelake.compare(lake, lake, target_step=2)
    assert "--" not in str(refused.value)
    with pytest.raises(probelake.ArgumentError, match="target_step=2, golden_step=1"):
        probelake.divergence(lake, lake, target_step=2, golden_step=7)
    with pytest.raises(probelake.ArgumentError, match="format"):
        probelake.compare(lake, lake, format="html")  # type: ignore[arg-type]
    with pytest.raises(probelake.ArgumentError, match="no such file or folder"):
        probelake.compare(tmp_path / "missing", lake)
    # msprobe files are read in place: a cut dump.json is msprobe's error, naming the file.
    good = demo_lake.parent / "msprobe/base/step_2/actor_update/step0/rank0/dump.json"
    cut = tmp_path / "cut/dump.json"
    cut.parent.mkdir()
    cut.write_bytes(good.read_bytes()[:500])
    with pytest.raises(probelake.MsprobeError, match="cut/dump.json"):
        probelake.compare(cut, good)
    with pytest.raises(probelake.ArgumentError, match="threshold"):
        probelake.divergence(lake, lake, threshold=-1)
    with pytest.raises(
        probelake.ArgumentError, match="no \\(step, stage, rank\\) is in both runs"
    ):
        probelake.divergence(lake, lake, step=99)
    # A failed write leaves nothing: the output folder is a file.
    (tmp_path / "taken").write_text("x")
    with pytest.raises(probelake.ProbelakeError):
        probelake.compare(lake, demo_lake / "base", out=tmp_path / "taken")
    assert (tmp_path / "taken").read_text() == "x"


def test_divergence_is_the_clis(demo_lake, tmp_path):
    target, golden = demo_lake / "attnbug", demo_lake / "base"
    for threshold, units in [
        (0.0, {}),
        (0.5, {}),
        (0.0, {"target_step": 2, "golden_step": 1}),
    ]:
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in units.items()]
        out = tmp_path / f"first-{threshold}-{len(units)}.parquet"
        cli(
            "divergence",
            target,
            golden,
            "--threshold",
            threshold,
            "--format",
            "parquet",
            "-o",
            out,
            *flags,
            "-q",
            codes=(0, 1),
        )
        mine = probelake.divergence(target, golden, threshold=threshold, **units)
        assert mine.table.column_names[-1] == "modules"
        assert mine.table.equals(pq.read_table(out)), (threshold, units)
        assert pa.table(mine).equals(mine.table)
    assert probelake.divergence(target, golden, threshold=0.0).num_rows > 0
    # The notes on how the units were paired come back, as the command line prints them.
    steps = demo_lake.parent / "msprobe/{}/step_2/actor_update/step0"
    found = probelake.divergence(
        str(steps).format("attnbug"), str(steps).format("base"), threshold=0.0
    )
    assert found.notes == [
        "two step folders: their dump folders paired by position (rank0 with rank0)"
    ]
    assert found.num_rows == 1 and "part" in repr(found)
    assert found.table.column_names[-1] == "modules"  # empty for the demo's L1 dumps


def test_first_divergence_table_function_is_the_query(demo_lake):
    runs = {"target": demo_lake / "attnbug", "golden": demo_lake / "base"}
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(repo, "sql", "first_divergence.sql")) as f:
        text = f.read()
    for threshold in ("0.5", "0"):
        query = text.replace(
            "SELECT 0.5 AS threshold", f"SELECT {threshold} AS threshold"
        )
        by_text = probelake.sql(query, **runs).to_pandas()
        by_function = probelake.sql(
            f"SELECT * FROM first_divergence({threshold})", **runs
        ).to_pandas()
        assert len(by_function) > 0
        assert by_function.equals(by_text), threshold
    with pytest.raises(probelake.QueryError, match="no run named `nope`"):
        probelake.sql("SELECT * FROM first_divergence(0.5, 'nope')", **runs).to_pandas()


def test_import_export_round_trip(demo_lake, tmp_path):
    units = probelake.open(demo_lake / "base").units()
    probelake.export_msprobe(demo_lake / "base", tmp_path / "msprobe")
    again = probelake.import_msprobe(tmp_path / "msprobe", tmp_path / "again")
    assert [(u.step, u.stage, u.rank, u.leaves) for u in again] == [
        (u.step, u.stage, u.rank, u.leaves) for u in units
    ]
    with pytest.raises(probelake.ProbelakeError, match="importing"):
        probelake.import_msprobe(tmp_path / "nothing-here", tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


# The writer.


@pytest.fixture(scope="module")
def th():
    return pytest.importorskip("torch")


DTYPES = ["float64", "float32", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
          "complex64", "complex128"]  # fmt: skip


def test_writer_every_dtype_nested_and_export(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    g = th.Generator().manual_seed(0)
    with lake.unit(3, "actor_update", 1) as u:
        for i, name in enumerate(DTYPES):
            dtype = getattr(th, name)
            t = (th.randn(4, 3, generator=g) * 10).to(dtype)
            u.record(
                f"Functional.f{i}.0.forward",
                input_args=[t, (t[:, 1], [None, 2]), 1.5],
                input_kwargs={
                    "dim": -1,
                    "dtype": dtype,
                    "size": th.Size([4, 3]),
                    "s": slice(0, 2),
                },
                output=[t.t()],
            )
        u.record(
            "Module.fc.Linear.parameters_grad",
            parameters_grad={"weight": th.ones(2, 2)},
        )
    exported = tmp_path / "msprobe"
    probelake.export_msprobe(lake, exported)
    probelake.import_msprobe(exported, tmp_path / "reimported")
    cols = ["item", "kind", "dtype", "shape", "max", "min", "mean", "norm", "value"]
    a = lake.to_arrow("dump", cols).sort_by("item")
    b = probelake.open(tmp_path / "reimported").to_arrow("dump", cols).sort_by("item")
    assert a.equals(b)
    assert a.num_rows > 12 * 8


def _msprobe_ndarray(a):
    """msprobe 26.2's leaf for a numpy array (`BaseDataProcessor._analyze_ndarray`)."""
    import numpy as np

    leaf = {"type": "numpy.ndarray", "dtype": str(a.dtype), "shape": list(a.shape)}
    stats = {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if a.size > 0:
        stats = {
            "Max": np.max(a).item(),
            "Min": np.min(a).item(),
            "Mean": np.mean(a).item(),
            "Norm": np.linalg.norm(a).item(),
        }
    return {**leaf, **stats}


@pytest.mark.parametrize("summary_mode", ["statistics", "md5"])
def test_numpy_arrays_are_recorded_as_msprobe_records_them(tmp_path, summary_mode):
    np = pytest.importorskip("numpy")
    import json

    rng = np.random.default_rng(0)
    arrays = {
        "f64": rng.standard_normal(50),
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
        "i64": np.array([3, -4, 12]),
        "i8": np.arange(-5, 5, dtype=np.int8),
        "u8": np.array([[1, 2], [250, 0]], dtype=np.uint8),
        "bool": np.array([True, False, True, True]),
        "strided": rng.standard_normal((4, 6)).astype(np.float32)[:, ::2],
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    lake = probelake.open(tmp_path / "w")
    with lake.unit(0, "default", 0, summary_mode=summary_mode) as u:
        u.record("Functional.f.0.forward", input_kwargs=arrays)
    probelake.export_msprobe(lake, tmp_path / "msprobe")
    (dump,) = (tmp_path / "msprobe").rglob("dump.json")
    kwargs = json.loads(dump.read_text())["data"]["Functional.f.0.forward"][
        "input_kwargs"
    ]
    for name, a in arrays.items():
        want, got = _msprobe_ndarray(a), kwargs[name]
        assert list(got) == list(want), (
            name
        )  # the same keys, in msprobe's order: no md5
        for key in ("type", "dtype", "shape", "Max", "Min"):
            assert got[key] == want[key] and type(got[key]) is type(want[key]), (
                name,
                key,
            )
        for key in ("Mean", "Norm"):
            # numpy reduces float arrays in their own type; probelake in float64, then rounds.
            rel = {"float16": 1e-3, "float32": 1e-6}.get(str(a.dtype), 1e-12)
            same = got[key] is want[key] is None or got[key] == pytest.approx(
                want[key], rel=rel
            )
            assert same, (name, key, got[key], want[key])


LOW_FLOATS = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
              "float4_e2m1fn_x2"]  # fmt: skip


def test_float8_and_float4_are_recorded_as_msprobe_records_them(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    names = [n for n in LOW_FLOATS if hasattr(th, n)]
    raw = th.tensor([0x38, 0x40, 0xC0, 0x00], dtype=th.uint8)
    with lake.unit(0, "default", 0, task="tensor") as u:
        u.record(
            "Functional.to.0.forward",
            output=[raw.view(getattr(th, n)) for n in names],
        )
    df = lake.to_pandas("dump", ["item", "dtype", "max", "min", "mean", "norm"])
    assert sorted(df["dtype"]) == sorted(f"torch.{n}" for n in names)
    assert df[["max", "min", "mean", "norm"]].isna().all().all()
    assert lake.to_arrow("tensor").num_rows == len(names)  # the payloads are kept
    exported = tmp_path / "msprobe"
    probelake.export_msprobe(lake, exported)
    assert len(list(exported.rglob("*.pt"))) == len(names)


def test_a_budget_smaller_than_a_tensor_admits_it_alone(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    big = th.ones(1 << 16)  # 256 KiB, 64 times the budget
    with lake.unit(0, "default", 0, budget_bytes=4096) as u:
        for i in range(8):
            assert u.record(f"Functional.a.{i}.forward", output=[big])
            # Never more than the one tensor admitted alone (and its leaf's overhead).
            assert u.metrics()["staged_bytes"] <= big.nbytes + 4096
    assert lake.dataset("dump").count_rows() == 8
    with lake.unit(1, "default", 0, budget_bytes=4096, backpressure="error") as u:
        assert u.record("Functional.a.0.forward", output=[big])
        try:
            u.record("Functional.a.1.forward", output=[big])
        except probelake.BudgetFullError as e:
            assert "budget" in str(e)


def test_statistics_are_those_at_record_time(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    y = th.randn(1000)
    before = float(y.min())
    with lake.unit(0, "default", 0, threads=1) as u:
        for i in range(50):
            u.record(f"Functional.relu.{i}.forward", output=[y])
            y.relu_()
            y.sub_(1)
    mins = lake.to_pandas("dump", ["item", "min"]).set_index("item")["min"]
    assert mins["Functional.relu.0.forward.output.0"] == pytest.approx(before)


def test_non_contiguous_tensor(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    x = th.arange(12, dtype=th.float32).reshape(3, 4)
    with lake.unit(0, "default", 0, task="tensor") as u:
        u.record("Tensor.t.0.forward", output=[x.t(), x[:, ::2]])
    df = lake.to_pandas("dump", ["item", "max", "min", "mean", "shape"]).set_index(
        "item"
    )
    row = df.loc["Tensor.t.0.forward.output.1"]
    assert (row["max"], row["min"], row["mean"]) == (10.0, 0.0, pytest.approx(5.0))
    assert list(row["shape"]) == [3, 2]


def test_device_path_with_cpu_stand_in(th, tmp_path):
    import threading

    done = threading.Event()

    class Waiter:
        def synchronize(self):
            assert done.wait(10)

    def stage(t):
        return t.detach().contiguous().clone(), Waiter()

    lake = probelake.open(tmp_path / "w")
    u = lake.unit(0, "default", 0)
    u._writer._set_stage_cpu(stage)
    start = time.perf_counter()
    u.record("Functional.x.0.forward", output=[th.full((64,), 2.0)])
    assert time.perf_counter() - start < 5
    done.set()
    u.commit()
    assert lake.to_pandas("dump", ["max"])["max"].tolist() == [2.0]

    # A device tensor the budget refuses is never staged: no pinned copy, no copy enqueued.
    staged, release = [], threading.Event()

    class Held:  # holds the first tensor's budget until the second record has been refused
        def synchronize(self):
            assert release.wait(10)

    def counting_stage(t):
        staged.append(t)
        return t.detach().contiguous().clone(), Held()

    u = lake.unit(1, "default", 0, budget_bytes=4096, backpressure="drop")
    u._writer._set_stage_cpu(counting_stage)
    assert (
        u.record("Functional.x.0.forward", output=[th.ones(1024)]) is True
    )  # alone, admitted
    assert (
        u.record("Functional.x.1.forward", output=[th.ones(1024)]) is False
    )  # dropped
    assert len(staged) == 1
    release.set()
    u.commit()


def test_abort_on_exception_and_bad_arguments_leave_the_dataset(th, tmp_path):
    lake = probelake.open(tmp_path / "w")
    with lake.unit(0, "default", 0) as u:
        u.record("Functional.a.0.forward", output=[th.ones(2)])
    before = lake.units()
    with pytest.raises(RuntimeError):
        with lake.unit(1, "default", 0) as u:
            u.record("Functional.a.0.forward", output=[th.ones(2)])
            raise RuntimeError("boom")
    u2 = lake.unit(0, "default", 0)
    bad = [
        (
            probelake.ArgumentError,
            dict(output=[th.ones(2, dtype=th.uint16)]),
            "uint16",
        ),
        (
            probelake.ValueTypeError,
            dict(output=[object()]),
            "cannot record a value of type object",
        ),
        (probelake.ArgumentError, dict(input_kwargs=[1, 2]), "must be a dict"),
        (probelake.ArgumentError, dict(input_kwargs={1: 2}), "keys must be str"),
        (
            probelake.ArgumentError,
            dict(output=[th.ones(2).to_sparse()]),
            "Sparse|sparse",
        ),
    ]
    for exc, kwargs, message in bad:
        with pytest.raises(exc, match=message):
            u2.record("Functional.b.0.forward", **kwargs)
    u2.abort()
    with pytest.raises(probelake.ArgumentError, match="closed"):
        u2.record("Functional.c.0.forward", output=[None])
    for kwargs, message in [({"task": "x"}, "task"), ({"summary_mode": "crc"}, "summary_mode"),
                            ({"budget_bytes": 0}, "budget_bytes"), ({"backpressure": "later"}, "backpressure")]:  # fmt: skip
        with pytest.raises(probelake.ArgumentError, match=message):
            lake.unit(0, "default", 0, **kwargs)
    with pytest.raises(probelake.ArgumentError):
        lake.unit("0", "default", 0)
    assert lake.units() == before


def test_uncommitted_unit_of_a_killed_writer_is_invisible(th, tmp_path):
    root = tmp_path / "w"
    lake = probelake.open(root)
    with lake.unit(0, "default", 0) as u:
        u.record("Functional.a.0.forward", output=[th.ones(2)])
    script = textwrap.dedent(f"""
        import os, signal, time, torch, probelake
        u = probelake.open({str(root)!r}).unit(1, "default", 0, batch_rows=1)
        for i in range(20):
            u.record(f"Functional.a.{{i}}.forward", output=[torch.ones(2)])
        deadline = time.time() + 30
        while u.metrics()["queue_depth"] or u.metrics()["staged_bytes"]:
            assert time.time() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert lake.dataset("dump").count_rows() == 1
    plain = pq.ParquetDataset(root / "dump").read()
    assert plain.num_rows > 1


def test_ctrl_c_interrupts_a_long_query(demo_lake):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    start = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            probelake.sql(
                "SELECT count(*) FROM dump a, dump b, dump c WHERE a.norm + b.norm > c.norm",
                base=demo_lake / "base",
            ).to_arrow()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - start < 10


def test_ctrl_c_interrupts_a_query_read_by_pyarrow(demo_lake):
    # pyarrow reads the stream itself: the query is cancelled, pyarrow raises its error
    # ("interrupted: KeyboardInterrupt") and SIGINT is simulated again for Python.
    script = textwrap.dedent(f"""
        import os, signal, threading, time
        import pyarrow as pa, probelake
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.perf_counter()
        try:
            pa.table(probelake.sql(
                "SELECT count(*) FROM dump a, dump b, dump c WHERE a.norm + b.norm > c.norm",
                base={str(demo_lake / "base")!r},
            ))
            for _ in range(100):
                time.sleep(0.01)
        except KeyboardInterrupt:
            print("interrupted")
    """)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.perf_counter() - start < 30
    assert (
        "KeyboardInterrupt" in done.stdout + done.stderr or "interrupted" in done.stdout
    )


MAPPING_REFS = pathlib.Path(__file__).parents[1] / "data/compare-ref/mapping"


@pytest.mark.parametrize(
    ("case", "target", "golden", "options"),
    [
        (
            "dm_partial",
            "mix-target",
            "mix-golden-diff",
            {"data_mapping": "dm_partial.yaml"},
        ),
        (
            "cm_partial",
            "mix-target",
            "mix-golden-diff",
            {"cell_mapping": "cm_partial.yaml"},
        ),
        ("cm_noarg", "mix-target", "mix-golden", {"cell_mapping": True}),
    ],
)
def test_compare_mappings_write_msprobes_csv(tmp_path, case, target, golden, options):
    folder = MAPPING_REFS / "cases" / case
    options = {k: (folder / v if isinstance(v, str) else v) for k, v in options.items()}
    result = probelake.compare(
        MAPPING_REFS / "runs" / target / "dump.json",
        MAPPING_REFS / "runs" / golden / "dump.json",
        out=tmp_path / "cmp",
        **options,
    )
    (written,) = result.files
    import pyarrow as pa

    reference = pa.input_stream(
        str(folder / "compare_result.csv.zst"), compression="zstd"
    )
    expected = reference.read()
    assert written.read_bytes() == expected
    assert result.table is None


def test_compare_mapping_errors_name_the_file(tmp_path):
    nested = tmp_path / "nested.yaml"
    nested.write_text("Block:\n  norm: ln\n")
    run = MAPPING_REFS / "runs/mix-target/dump.json"
    with pytest.raises(probelake.ArgumentError, match="nested.yaml: line 1"):
        probelake.compare(run, run, cell_mapping=nested)
    with pytest.raises(probelake.ArgumentError, match="cell_mapping"):
        probelake.compare(run, run, cell_mapping=3)  # type: ignore[arg-type]
