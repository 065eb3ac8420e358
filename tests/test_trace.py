"""Trace schema: round trip through Parquet and rejection of malformed tables."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.errors import TraceFormatError
from workbench.trace import REQUIRED_COLUMNS, make_trace, phase_summary, read_trace, write_trace


def _rows() -> list[dict]:
    return [
        dict(
            run_id="r",
            worker=0,
            device="m0.gpu0",
            iteration=0,
            phase="h2d",
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
