"""Fuzzing run configurations: mutations of a shipped example either load as written or are one clear error.

Each example takes ``examples/configs/sage-products-hopgnn.toml``, changes one to three
things (a field or strategy parameter set to a value of any class: numbers, NaN,
infinity, integers beyond int64, booleans, strings, lists, tables; a key or table added
or removed; a table replaced by a scalar), writes it as TOML and loads it. It either
loads, with every changed value kept exactly as written and no NaN or infinity anywhere,
or raises a :class:`WorkbenchError` whose message is one line naming the file; any other
exception is a bug.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.config import load_config
from workbench.errors import WorkbenchError

BASE_FILE = Path(__file__).resolve().parents[1] / "examples" / "configs" / "sage-products-hopgnn.toml"
BASE: dict[str, Any] = tomllib.loads(BASE_FILE.read_text())
KNOWN_KEYS = sorted({k for table in BASE.values() if isinstance(table, dict) for k in table})
NEW_KEYS = ["colour", "fanout", "layer_sizes", "heads", "iterations", "workers", "seeds", "order", "machines"]

_WORDS = st.text("abcdefghijklmnopqrstuvwxyz-_%.0123456789 ", max_size=12)
_SCALARS = st.one_of(
    st.integers(-3, 300),
    st.sampled_from([0, 1, 2, 3, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, 1e-300, 1e300]),
    st.booleans(),
    _WORDS,
    st.sampled_from(
        ["metis", "degree", "neighbor", "model-centric", "sage", "gat", "10%", "2GiB", "nan%", ""]
    ),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["name", "a", "fanouts", "x"]), inner, max_size=2),
    ),
    max_leaves=6,
)
# Lists shaped like fanouts: empty, zero, negative, fractional, huge or NaN entries among good ones.
_FANOUTS = st.lists(
    st.one_of(st.integers(1, 20), st.sampled_from([0, -1, 1.5, math.nan, math.inf, True, 2**63, "5"])),
    max_size=4,
)


def _near(value: Any) -> st.SearchStrategy[Any]:
    """Values of ``value``'s class (the kind a user would write there), some out of range, some odd."""
    if isinstance(value, bool):
        return st.one_of(st.booleans(), st.sampled_from([0, 1, "true"]))
    if isinstance(value, int):
        return st.one_of(st.integers(-2, 4096), st.sampled_from([0, 2**63 - 1, 2**63, 1.0, True, math.nan]))
    if isinstance(value, float):
        special = st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf, 1e-300, 1e300, 1, True])
        return st.one_of(st.floats(1e-4, 2.0), special)
    if isinstance(value, list):
        return st.one_of(st.lists(st.integers(1, 20), min_size=3, max_size=3), _FANOUTS)
    return st.one_of(
        st.just(value), _WORDS, st.sampled_from(["", "10%", "0%", "100%", "150%", "1GiB", "-5%"])
    )


@st.composite
def mutated_configs(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str | None, str, Any]]]:
    """A copy of the example with one to three changes; the (table, key, value) each one set."""
    data = copy.deepcopy(BASE)
    changes: list[tuple[str | None, str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["tweak", "tweak", "tweak", "set", "fanouts", "drop", "table", "top"]))
        tables = [k for k, v in data.items() if isinstance(v, dict)]
        if what == "top":
            key = draw(st.sampled_from(["name", "seed", "colour"]))
            data[key] = draw(_VALUES)
            changes.append((None, key, data[key]))
        elif what == "table":
            table = draw(st.sampled_from([*tables, "colour", "memory"]))
            data[table] = draw(_VALUES)
            changes.append((None, table, data[table]))
        elif not tables:
            continue
        elif what == "drop":
            table = draw(st.sampled_from(tables))
            if data[table]:
                data[table].pop(draw(st.sampled_from(sorted(data[table]))))
            changes.append((table, "", None))  # nothing to compare
        elif what == "fanouts":
            data.setdefault("sampling", {"name": "neighbor"})
            if isinstance(data["sampling"], dict):
                data["sampling"]["fanouts"] = draw(_FANOUTS)
                changes.append(("sampling", "fanouts", data["sampling"]["fanouts"]))
        elif what == "tweak":  # a field or parameter the table has, to a value of its own class or near it
            table = draw(st.sampled_from(tables))
            if not data[table]:
                continue
            key = draw(st.sampled_from(sorted(data[table])))
            data[table][key] = draw(_near(data[table][key]))
            changes.append((table, key, data[table][key]))
        else:
            table = draw(st.sampled_from(tables))
            key = draw(st.sampled_from([*KNOWN_KEYS, *NEW_KEYS]))
            data[table][key] = draw(_VALUES)
            changes.append((table, key, data[table][key]))
    return data, changes


def to_toml(data: dict[str, Any]) -> str:
    """TOML for a document of tables, scalars, lists and inline tables (quoted keys throughout)."""
    top = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [
        f"[{json.dumps(k)}]\n" + "".join(f"{json.dumps(kk)} = {_toml_value(vv)}\n" for kk, vv in v.items())
        for k, v in data.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top) + "\n" + "\n".join(tables)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def _same(a: Any, b: Any) -> bool:
    """Equal as written: lists and tuples alike, an int equal to the float it became, bools never numbers."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _no_nan(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _no_nan(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _no_nan(v, f"{where}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), f"{where} loaded as {value}"


def check_config(folder: Path, case: tuple[dict[str, Any], list[tuple[str | None, str, Any]]]) -> None:
    """The property: loads as written with no NaN, or one WorkbenchError line naming the file."""
    data, changes = case
    path = folder / "run.toml"
    path.write_text(to_toml(data))
    assert tomllib.loads(path.read_text()) == data or any(
        isinstance(v, float) and math.isnan(v) for v in _leaves(data)
    )  # the writer wrote what was drawn (NaN never equals itself)
    try:
        config = load_config(path)
    except WorkbenchError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}:"), message
        return
    loaded = config.to_dict()
    _no_nan(loaded, "config")
    for table, key, _ in changes:
        if table is None or not key or not isinstance(data.get(table), dict) or key not in data[table]:
            continue
        value = data[table][key]  # as finally written (a later change may have set it again)
        if key == "name" and table in config.strategies:
            assert config.strategies[table].name == value
        elif key in loaded.get(table, {}):
            assert _same(loaded[table][key], value), (table, key, loaded[table][key], value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config")


def test_base_example_loads(folder: Path) -> None:
    check_config(folder, (copy.deepcopy(BASE), []))
    assert load_config(folder / "run.toml").strategy("sampling").params["fanouts"] == [15, 10, 5]


@settings(max_examples=200, deadline=None)
@given(case=mutated_configs())
def test_mutated_configs_load_as_written_or_are_one_line(folder: Path, case) -> None:
    check_config(folder, case)


# The slow run's examples; GNNWB_FUZZ_EXAMPLES=1000 times a shorter run of the same property.
SLOW_EXAMPLES = int(os.environ.get("GNNWB_FUZZ_EXAMPLES", "10000"))


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, deadline=None)
@given(case=mutated_configs())
def test_mutated_configs_load_as_written_or_are_one_line_many(folder: Path, case) -> None:
    check_config(folder, case)
