"""Fuzzing published-figures files: mutations of the shipped ones load or are one clear error.

Each example takes one of ``studies/published/*.toml``, changes one to three things (a
field of the file, of a figure or of a setting set to a value of any class: numbers, NaN,
infinity, integers beyond int64, booleans, strings, lists, tables; a figure's field removed;
a table replaced by a scalar), writes it as TOML, loads it and checks every setting as the
run configuration the fit would build (``config_from_dict``, what ``gnnwb calibrate
--published`` does before simulating). Each either loads, with no NaN or infinity in any
figure's value, or raises a :class:`WorkbenchError` whose message is one line; any other
exception is a bug. Fitting is not run: it simulates, which is what the fit's own tests
cover.
"""

from __future__ import annotations

import copy
import math
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.calibrate.published import load_published
from workbench.config import config_from_dict
from workbench.errors import WorkbenchError

FOLDER = Path(__file__).resolve().parents[2] / "studies" / "published"
FILES = sorted(FOLDER.glob("*.toml"))
BASES = {f.name: tomllib.loads(f.read_text()) for f in FILES}
FIGURE_KEYS = ["setting", "quantity", "phases", "value", "source", "headline", "held_out", "use", "baseline"]

_SCALARS = st.one_of(
    st.integers(-3, 300),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.5, 1e-300, 1e300]),
    st.booleans(),
    st.text("abcdefghijklmnopqrstuvwxyz-_.%0123456789 ", max_size=12),
    st.sampled_from(["share", "speedup", "bytes", "epoch_s", "gather_remote", "sample", "", "Fig. 3"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["name", "a"]), inner)
    ),
    max_leaves=5,
)


def _toml(value: Any) -> str:
    """``value`` as TOML (tomllib reads, nothing writes TOML in the standard library)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"


def _document(data: dict[str, Any]) -> str:
    """A whole file as inline tables, one top-level key a line (every shape stays writable)."""
    return "\n".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in data.items()) + "\n"


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(BASES)))
    data = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["top", "figure", "setting", "fit", "drop"]))
        figures = data.get("figures") if isinstance(data.get("figures"), list) else []
        if target == "figure" and figures and isinstance(figures[0], dict):
            figure = draw(st.sampled_from(figures)) if all(isinstance(f, dict) for f in figures) else {}
            figure[draw(st.sampled_from(FIGURE_KEYS))] = draw(_VALUES)
        elif target == "drop" and figures and all(isinstance(f, dict) for f in figures):
            figure = draw(st.sampled_from(figures))
            if figure:
                figure.pop(draw(st.sampled_from(sorted(figure))))
        elif target == "setting" and isinstance(data.get("settings"), dict) and data["settings"]:
            setting = data["settings"][draw(st.sampled_from(sorted(data["settings"])))]
            if isinstance(setting, dict):
                setting[draw(st.sampled_from(["graph", "model", "training", "base", "execution", "x"]))] = (
                    draw(_VALUES)
                )
        elif target == "fit" and isinstance(data.get("fit"), dict):
            data["fit"][draw(st.sampled_from(["parameters", "start", "x"]))] = draw(_VALUES)
        else:
            data[
                draw(st.sampled_from(["testbed", "settings", "figures", "fit", "paper", "notes", "extra"]))
            ] = draw(_VALUES)
    return name, data


def check_file(name: str, data: dict[str, Any], folder: Path) -> None:
    path = folder / name
    path.write_text(_document(data))
    try:
        published = load_published(path, require_fit=False)
        for setting, table in published.settings.items():
            config_from_dict(table, f"{path}: settings.{setting}")
    except WorkbenchError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        return
    for figure in published.figures:
        assert all(math.isfinite(v) for v in figure.value), figure


def _property(examples: int):
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(case=mutated_files())
    def run(tmp_path: Path, case: tuple[str, dict[str, Any]]) -> None:
        check_file(*case, tmp_path)

    return run


def test_the_shipped_files_load_as_written(tmp_path: Path) -> None:
    for name, data in BASES.items():
        check_file(name, data, tmp_path)
        assert load_published(tmp_path / name, require_fit=False).figures, name


def test_the_property_catches_a_two_line_message(tmp_path: Path, monkeypatch) -> None:
    def two_lines(*_: Any, **__: Any) -> None:
        raise WorkbenchError("one\ntwo")

    monkeypatch.setattr(sys.modules[__name__], "load_published", two_lines)
    with pytest.raises(AssertionError):
        check_file(*next(iter(BASES.items())), tmp_path)


test_fuzz_published_files = _property(100)

test_fuzz_published_files_many = pytest.mark.slow(
    _property(int(os.environ.get("GNNWB_FUZZ_EXAMPLES", 10_000)))
)
