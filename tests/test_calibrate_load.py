"""``gnnwb calibrate`` records the machine's load around each trace (``load.json`` beside a real
run's trace) in the profile's provenance, and warns in one line on stderr, exiting 0, when the
traces it fits were taken under loads that differ by more than ``LOAD_LIMIT`` (issue 27, item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sim.calibrate import LOAD_LIMIT, load_profile, read_source
from workbench.cli.main import main

RECORDED = Path(__file__).resolve().parent / "data" / "hopgnn-migrating"
REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, name: str, load: tuple[float, float] | None) -> Path:
    """A copy of the recorded real run, with a ``load.json`` as the studies write it (none when None)."""
    folder = tmp_path / name
    shutil.copytree(RECORDED, folder)
    if load is not None:
        before, after = load
        (folder / "load.json").write_text(json.dumps({"load_before": before, "load_after": after, "cpus": 2}))
    return folder


def _calibrate(folders: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """stdout and stderr of ``gnnwb calibrate FOLDERS -o p.toml``, which must exit 0."""
    assert main(["calibrate", *map(str, folders), "-o", str(tmp_path / "p.toml")]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_read_source_reads_the_load_beside_the_trace(tmp_path: Path) -> None:
    source = read_source(_run(tmp_path, "a", (0.5, 1.5)) / "trace.parquet")
    assert source.load is not None
    assert (source.load.median, source.load.max, source.load.cpus) == (1.0, 1.5, 2)


def test_a_trace_without_load_json_has_no_load(tmp_path: Path) -> None:
    assert read_source(_run(tmp_path, "a", None) / "trace.parquet").load is None


def test_different_loads_warn_once_in_one_line_naming_both_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet, busy = _run(tmp_path, "quiet", (0.3, 0.5)), _run(tmp_path, "busy", (3.0, 3.2))
    out, err = _calibrate([quiet, busy], tmp_path, capsys)
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "warning" not in out
    line = warnings[0]
    assert line.startswith("gnnwb calibrate: warning: traces taken under different load: ")
    assert f"{quiet / 'trace.parquet'} (load 0.40)" in line
    assert f"{busy / 'trace.parquet'} (load 3.10)" in line
    assert (tmp_path / "p.toml").exists()


def test_equal_loads_do_not_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, "a", (0.4, 0.6)), _run(tmp_path, "b", (0.5, 0.5))
    _, err = _calibrate([a, b], tmp_path, capsys)
    assert "warning" not in err


def test_loads_just_within_the_limit_do_not_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, "a", (0.0, 0.0)), _run(tmp_path, "b", (LOAD_LIMIT, LOAD_LIMIT))
    _, err = _calibrate([a, b], tmp_path, capsys)
    assert "warning" not in err


def test_a_trace_without_load_is_not_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A microbenchmark folder never has a load.json: mixing one with a run says nothing."""
    a, b = _run(tmp_path, "a", (3.0, 3.0)), _run(tmp_path, "b", None)
    _, err = _calibrate([a, b], tmp_path, capsys)
    assert "warning" not in err
    recorded = load_profile(tmp_path / "p.toml").data["provenance"]["load"]
    assert [entry["trace"] for entry in recorded] == [str(a / "trace.parquet")]


def test_the_profile_records_each_traces_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quiet, busy = _run(tmp_path, "quiet", (0.3, 0.5)), _run(tmp_path, "busy", (3.0, 3.2))
    _calibrate([quiet, busy], tmp_path, capsys)
    provenance = load_profile(tmp_path / "p.toml").data["provenance"]
    assert provenance["load"] == [
        {"trace": str(quiet / "trace.parquet"), "median": pytest.approx(0.4), "max": 0.5, "cpus": 2},
        {"trace": str(busy / "trace.parquet"), "median": pytest.approx(3.1), "max": 3.2, "cpus": 2},
    ]
    assert provenance["load_warning"].startswith("traces taken under different load: ")


def test_profiles_written_before_loads_were_recorded_still_load() -> None:
    profile = load_profile(REPO / "studies" / "published" / "profiles" / "003_hopgnn.profile.toml")
    assert "load" not in profile.data["provenance"]


def _with_others(folder: Path, others: float) -> Path:
    """The run's load.json with other processes' CPU share as realrun.launcher writes it."""
    path = folder / "load.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "others_cpu": others, "steal": 0.0, "window_s": 6.0}))
    return folder


def test_others_cpu_decides_over_a_load_average_that_counts_the_previous_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Back-to-back runs: the second's load average (3.7) is its predecessor's 4 workers, but
    nothing else ran during either (others 1% and 2%): no warning."""
    first = _with_others(_run(tmp_path, "first", (0.3, 3.5)), 0.01)
    second = _with_others(_run(tmp_path, "second", (3.7, 2.1)), 0.02)
    _, err = _calibrate([first, second], tmp_path, capsys)
    assert "warning" not in err
    recorded = load_profile(tmp_path / "p.toml").data["provenance"]["load"]
    assert [entry["others_cpu"] for entry in recorded] == [0.01, 0.02]


def test_others_cpu_apart_by_more_than_the_limit_warns_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.calibrate import OTHERS_LIMIT

    quiet = _with_others(_run(tmp_path, "quiet", (0.5, 0.5)), 0.03)
    busy = _with_others(_run(tmp_path, "busy", (0.5, 0.5)), 0.03 + OTHERS_LIMIT + 0.05)
    _, err = _calibrate([quiet, busy], tmp_path, capsys)
    (line,) = [line for line in err.splitlines() if "warning" in line]
    assert f"took 3% of the machine's CPU time while {quiet / 'trace.parquet'} ran" in line
    assert f"28% while {busy / 'trace.parquet'} ran" in line
    within = _with_others(_run(tmp_path, "within", (3.0, 3.0)), 0.03 + OTHERS_LIMIT - 0.01)
    _, err = _calibrate([quiet, within], tmp_path, capsys)
    assert "warning" not in err


def test_a_trace_without_others_cpu_falls_back_to_load_averages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = _with_others(_run(tmp_path, "new", (0.3, 0.3)), 0.0)
    old = _run(tmp_path, "old", (3.0, 3.0))
    _, err = _calibrate([new, old], tmp_path, capsys)
    assert "(load 0.30)" in err and "(load 3.00)" in err


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", None, True])
def test_an_others_cpu_that_is_not_a_share_is_not_read(tmp_path: Path, bad: object) -> None:
    folder = _run(tmp_path, "a", (0.5, 0.5))
    data = json.loads((folder / "load.json").read_text())
    (folder / "load.json").write_text(json.dumps({**data, "others_cpu": bad}))
    load = read_source(folder / "trace.parquet").load
    assert load is not None and load.others_cpu is None and load.median == 0.5
