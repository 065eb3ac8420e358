"""Trace schema: round trip through Parquet and rejection of malformed tables."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.errors import TraceFormatError
from workbench.trace import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    make_trace,
    phase_summary,
    read_trace,
    write_trace,
)


def _rows() -> list[dict]:
    return [
        dict(
            run_id="r",
            worker=0,
            device="m0.gpu0",
            iteration=0,
            phase="h2d",
            ready=0.0,
            start=0.0,
            end=1.5,
            bytes=100,
            items=10,
        ),
        dict(
            run_id="r",
            worker=1,
            device="m0.gpu1",
            iteration=0,
            phase="forward",
            ready=1.5,
            start=1.5,
            end=2.0,
            bytes=0,
            items=5,
        ),
        dict(
            run_id="r",
            worker=0,
            device="m0.gpu0",
            iteration=1,
            phase="h2d",
            ready=1.5,
            start=2.0,
            end=2.5,
            bytes=50,
            items=5,
        ),
    ]


def test_round_trip_is_exact(tmp_path) -> None:
    df = make_trace(_rows())
    path = write_trace(df, tmp_path / "t" / "trace.parquet")
    back = read_trace(path)
    pd.testing.assert_frame_equal(back, df)
    assert list(back.columns)[: len(REQUIRED_COLUMNS)] == list(REQUIRED_COLUMNS)


def test_phase_summary() -> None:
    s = phase_summary(make_trace(_rows())).set_index("phase")
    assert s.loc["h2d", "busy_s"] == pytest.approx(2.0)
    assert s.loc["h2d", "bytes"] == 150
    assert s.loc["h2d", "span_s"] == pytest.approx(2.5)
    assert s.loc["forward", "count"] == 1


@pytest.mark.parametrize("column", list(REQUIRED_COLUMNS))
def test_missing_column_is_named(column, tmp_path) -> None:
    df = pd.DataFrame(_rows()).drop(columns=[column])
    df.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(TraceFormatError, match=f"missing column '{column}'"):
        read_trace(tmp_path / "bad.parquet")


def test_bad_values_are_named() -> None:
    rows = _rows()
    rows[0]["bytes"] = "lots"
    with pytest.raises(TraceFormatError, match="column 'bytes'"):
        make_trace(rows)
    rows = _rows()
    rows[1]["end"] = 0.1
    with pytest.raises(TraceFormatError, match="'end' is before 'start' in row 1"):
        make_trace(rows)


def test_not_a_parquet_file(tmp_path) -> None:
    (tmp_path / "x.parquet").write_text("hello")
    with pytest.raises(TraceFormatError, match="not a Parquet trace"):
        read_trace(tmp_path / "x.parquet")


# ---- build_trace: the one function both executors turn timings into rows with -------------
def _plan_for_rows():
    from workbench.plan import Plan

    p = Plan("rows")
    p.transfer("load", "m0.host", "m0.gpu2", 4096, "h2d", items=64, carries="features", worker=2)
    p.compute("fwd", "m0.gpu2", "forward", ["load"], layer=1, worker=2, iteration=5)
    p.collective("ar", "allreduce", ["m0.gpu2", "m0.gpu3", "m0.gpu0", "m0.gpu1"], 1000, "allreduce", ["fwd"])
    p.collective("bc", "broadcast", ["m0.gpu3", "m0.gpu2"], 800, "other", ["ar"])
    p.transfer("noop", "m0.gpu3", "m0.gpu3", 50, "d2d", ["bc"], worker=3)
    return p


def test_build_trace_fills_every_column_from_the_plan() -> None:
    from workbench.trace import TraceRows, build_trace

    p = _plan_for_rows()
    workers = p.device_workers(["m0.gpu0", "m0.gpu1", "m0.gpu2", "m0.gpu3"], ["m0.host"])
    devices = [
        "m0.gpu2",
        "m0.gpu2",
        "m0.gpu2",
        "m0.gpu3",
        "m0.gpu0",
        "m0.gpu1",
        "m0.gpu3",
        "m0.gpu2",
        "m0.gpu3",
    ]
    rows = TraceRows(
        task=[0, 1, 2, 2, 2, 2, 3, 3, 4],
        device=devices,
        engine=["h2d", "compute", *["collective"] * 6, "d2d"],
        ready=[0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0],
        start=[0.0, 1.5, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0],
        end=[1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0],
    )
    t = build_trace(p.tasks, rows, "run", "real", workers)
    assert list(t.columns) == [*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS]
    assert t["task"].tolist() == ["load", "fwd", "ar", "ar", "ar", "ar", "bc", "bc", "noop"]
    # A collective's rows belong to the workers that drive their devices (global GPU rank
    # here), not to the ranks within the collective (which would be 0, 1, 2, 3 and 0, 1).
    assert t["worker"].tolist() == [2, 2, 2, 3, 0, 1, 3, 2, 3]
    # Bytes each device sends: all-reduce over 4 of 1000 B: 2 * 3 / 4 * 1000 = 1500 each;
    # broadcast from gpu3 along gpu3 -> gpu2: gpu3 sends 800, gpu2 (last) nothing; a copy
    # within one memory crosses no wire.
    assert t["bytes"].tolist() == [4096, 0, 1500, 1500, 1500, 1500, 800, 0, 0]
    assert t["buffer_bytes"].tolist() == [4096, 0, 1000, 1000, 1000, 1000, 800, 800, 50]
    assert t["src"].tolist()[0] == "m0.host" and t["dst"].tolist()[0] == "m0.gpu2"
    assert t["src"].tolist()[1:8] == [""] * 7 and t["dst"].tolist()[-1] == "m0.gpu3"
    assert t["layer"].tolist() == [-1, 1, -1, -1, -1, -1, -1, -1, -1]
    assert t["iteration"].tolist()[1] == 5 and t["items"].tolist()[0] == 64
    assert set(t["executor"]) == {"real"} and t.loc[1, "ready"] == 1.0 and t.loc[1, "start"] == 1.5


def test_plan_workers_override_the_default_owner_of_a_device() -> None:
    from workbench.trace import TraceRows, build_trace

    p = _plan_for_rows()
    p.workers = {"m0.gpu3": 7}
    workers = p.device_workers(["m0.gpu0", "m0.gpu1", "m0.gpu2", "m0.gpu3"], ["m0.host"])
    rows = TraceRows([3, 3], ["m0.gpu3", "m0.gpu2"], ["collective"] * 2, [0.0] * 2, [0.0] * 2, [1.0] * 2)
    assert build_trace(p.tasks, rows, "r", "sim", workers)["worker"].tolist() == [7, 2]


def test_simulated_collective_rows_carry_the_devices_workers() -> None:
    from sim import simulate
    from workbench.plan import Plan

    p = Plan("ar23")
    p.collective("ar", "allreduce", ["m0.gpu2", "m0.gpu3"], 8_000_000, "allreduce")
    t = simulate(p, "neugraph-8xp100-pcie").trace
    assert t["worker"].tolist() == [2, 3] and t["device"].tolist() == ["m0.gpu2", "m0.gpu3"]
    assert t["bytes"].tolist() == [8_000_000, 8_000_000]  # 2 * (2 - 1) / 2 of the buffer


def test_a_simulated_trace_round_trips_through_parquet_with_every_column(tmp_path) -> None:
    from sim import simulate

    t = simulate(_plan_for_rows(), "neugraph-8xp100-pcie").trace
    assert list(t.columns) == [*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS]
    back = read_trace(write_trace(t, tmp_path / "sim.parquet"))
    pd.testing.assert_frame_equal(back, t, check_exact=True)


def test_ready_after_start_is_rejected() -> None:
    rows = _rows()
    rows[2]["ready"] = 2.25
    with pytest.raises(TraceFormatError, match="'start' is before 'ready' in row 2"):
        make_trace(rows)
