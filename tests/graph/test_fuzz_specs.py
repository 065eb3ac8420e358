"""Fuzzing dataset specs: any spec, scale and seed either loads a sound graph or is one clear error.

Specs are built from the generator names and their keys with values drawn from valid
and invalid ones (negative, zero, fractional, huge, NaN, infinity, words, nothing), plus
unknown and repeated keys and malformed entries. Every example either loads (the graph
is valid, its numbers finite) or raises a :class:`WorkbenchError` whose message is one
line; any other exception is a bug. Sizes stay tiny: valid counts are drawn small, and
the memory available to the generators is pretended to be 4 MiB, so that a huge but
well-formed size is refused by the memory check instead of generated.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.cli.main import main
from workbench.errors import WorkbenchError
from workbench.graph import specs
from workbench.graph.datasets import _NODE_DATA_KEYS, SPEC_KEYS, load_dataset

PRETEND_MEMORY = 4 * 2**20

# Valid values, drawn small so a graph that loads generates in milliseconds.
_VALID: dict[str, st.SearchStrategy[str]] = {
    "n": st.integers(2, 300).map(str),
    "m": st.integers(0, 300).map(lambda k: str(2 * k)),
    "deg": st.sampled_from(["0", "1", "2.5", "4", "1e0"]),
    "blocks": st.integers(1, 8).map(str),
    "communities": st.integers(0, 8).map(str),
    "classes": st.integers(1, 8).map(str),
    "feat": st.integers(0, 32).map(str),
    "connect": st.sampled_from(["0", "1"]),
    "a": st.sampled_from(["0.45", "0.57", "0.6"]),
    "b": st.sampled_from(["0.19", "0.2"]),
    "c": st.sampled_from(["0.19", "0.2"]),
    "exponent": st.sampled_from(["2.1", "2.5", "3"]),
    "concentration": st.sampled_from(["0.5", "2", "4.0"]),
    "train": st.sampled_from(["0", "0.1", "0.3", "0.6"]),
    "val": st.sampled_from(["0", "0.1", "0.2"]),
    "test": st.sampled_from(["0", "0.1", "0.2"]),
}
_FRACTION = st.sampled_from(["0", "0.1", "0.5", "1", "1.0", "0.999"])

# Invalid (or out-of-range, or merely odd) spellings of a value.
_ODD = st.one_of(
    st.sampled_from(
        ["nan", "NaN", "inf", "-inf", "1e400", "-1e400", "true", "false", "", " ", "x", "1.5", "-1", "0", "1"]
        + ["1e3", "2.0", "0x10", "1_000", "9223372036854775808", "-9223372036854775809", "1e-400", "+3"]
    ),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text("0123456789.eE+-_ ", max_size=8),
)
_MALFORMED = st.sampled_from(["colour=3", "n=5", "noequals", "=4", "", "deg==2", "n"])

VALID_SCALES = st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0, 0.25, 1e-3]))
ODD_SCALES = st.one_of(
    st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf, 1e300, 1e-300, True, 3]),
    st.floats(allow_nan=True, allow_infinity=True),
)
VALID_SEEDS = st.integers(0, 2**63 - 1)
ODD_SEEDS = st.one_of(st.sampled_from([-1, 2**63, 2**64, -(2**63), True, False, 1.5, None]), st.integers())


@st.composite
def spec_cases(draw: st.DrawFn) -> tuple[str, Any, Any]:
    """(spec, scale, seed): half of them valid throughout, the rest with one to three things wrong."""
    kind = draw(st.sampled_from([*SPEC_KEYS, *SPEC_KEYS, "ba"]))  # "ba" is no generator
    keys = [*SPEC_KEYS.get(kind, {"n": None}), *_NODE_DATA_KEYS]
    required = [k for k, v in SPEC_KEYS.get(kind, {"n": None}).items() if v is None]
    required = [k for k in required if k not in ("communities", "exponent", "concentration")]
    values = {
        k: draw(_VALID.get(k, _FRACTION)) for k in keys if k in required or draw(st.integers(0, 3)) == 0
    }
    if kind == "rmat":  # an edge count the vertex count can hold
        n = int(values["n"])
        values["m"] = str(2 * draw(st.integers(0, min(300, n * (n - 1) // 8))))
    scale, seed = draw(VALID_SCALES), draw(VALID_SEEDS)
    entries = [f"{k}={v}" for k, v in values.items()]
    if draw(st.booleans()):  # something wrong
        for _ in range(draw(st.integers(1, 3))):
            what = draw(st.sampled_from(["value", "value", "value", "drop", "entry", "scale", "seed"]))
            if what == "value" and entries:
                i = draw(st.integers(0, len(entries) - 1))
                entries[i] = f"{entries[i].partition('=')[0]}={draw(_ODD)}"
            elif what == "drop" and entries:
                entries.pop(draw(st.integers(0, len(entries) - 1)))
            elif what == "entry":
                entries.append(draw(_MALFORMED))
            elif what == "scale":
                scale = draw(ODD_SCALES)
            elif what == "seed":
                seed = draw(ODD_SEEDS)
    return f"{kind}:{','.join(draw(st.permutations(entries)))}", scale, seed


def _finite_numbers(value: Any, where: str) -> None:
    """Every float in ``value`` (a meta tree) is finite."""
    if isinstance(value, dict):
        for k, v in value.items():
            _finite_numbers(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _finite_numbers(v, f"{where}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), f"{where} is {value}"


def check_spec(spec: str, scale: Any, seed: Any) -> None:
    """The property: a sound graph or one WorkbenchError line; nothing else."""
    try:
        graph = load_dataset(spec, scale=scale, seed=seed, cache=False)
    except WorkbenchError as exc:
        message = str(exc)
        assert message and "\n" not in message, repr(message)
        return
    graph.validate()
    assert graph.num_nodes >= 2 and graph.labels is not None
    _finite_numbers(graph.meta, "meta")


@pytest.fixture(autouse=True)
def _small_machine(monkeypatch) -> None:
    monkeypatch.setattr(specs, "available_memory", lambda: PRETEND_MEMORY)


@settings(max_examples=200, deadline=None)
@given(case=spec_cases())
def test_any_spec_loads_or_is_one_line(case: tuple[str, Any, Any]) -> None:
    check_spec(*case)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=spec_cases())
def test_any_spec_on_the_command_line(case: tuple[str, Any, Any], capsys) -> None:
    """Through ``gnnwb datasets show``: exit 0 with no NaN printed, or exit 2 with one line."""
    spec, scale, seed = case
    # Only what argparse reads as the options' types (it refuses the rest itself).
    assume(isinstance(scale, float | None) and isinstance(seed, int) and not isinstance(seed, bool))
    capsys.readouterr()
    options = ([] if scale is None else [f"--scale={scale!r}"]) + [f"--seed={seed}"]
    status = main(["datasets", "show", spec, *options, "--no-cache"])
    out, err = capsys.readouterr()
    if status == 0:
        assert "nan" not in out.lower(), out
    else:
        assert status == 2, err
        # One error line; a spec whose graph fails while it is generated (too dense to place its
        # edges) may have printed the generator's progress lines before it.
        lines = err.strip().splitlines()
        assert "Traceback" not in err and len([line for line in lines if ": error: " in line]) == 1, err
        assert all(line.startswith("[datasets] ") for line in lines[:-1]) and ": error: " in lines[-1], err


# The slow run's examples; GNNWB_FUZZ_EXAMPLES=1000 times a shorter run of the same property.
SLOW_EXAMPLES = int(os.environ.get("GNNWB_FUZZ_EXAMPLES", "10000"))


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, deadline=None)
@given(case=spec_cases())
def test_any_spec_loads_or_is_one_line_many(case: tuple[str, Any, Any]) -> None:
    check_spec(*case)
