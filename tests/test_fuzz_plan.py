"""Fuzzing plan JSON documents: every mutation of a valid plan either loads and simulates
to a trace with no NaN in its times, or is refused with one line naming the file, never
any other exception.

Documents are the shipped example plans (``examples/plans/``) and a plan built here
that uses every field (resident tensors, workers, a collective, layers, items, tensors
allocated and freed); each simulates on the hardware its base names. Each example
mutates one to three places (a field replaced by a valid or an invalid value, a key
removed, a key added, a list item appended or removed), then goes through JSON text as a
file would (NaN, infinities and huge integers included).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import simulate
from workbench.errors import WorkbenchError
from workbench.hardware import load_hardware
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan

PLANS = Path(__file__).resolve().parents[1] / "examples" / "plans"


def _every_field_plan() -> dict[str, Any]:
    p = Plan("every-field", meta={"hardware": "neugraph-8xp100-pcie"}, workers={"m0.gpu1": 1})
    p.keep("weights", "m0.gpu0", 1000)
    p.transfer(
        "load", "m0.host", "m0.gpu0", 4096, "h2d", items=1024, carries="features", allocate={"x": 4096}
    )
    p.compute(
        "fwd", "m0.gpu0", "forward", ["load"], layer=0, allocate={"h": 512}, memory=64,
        features={"vertices": 10, "edges": 40, "flops": 1e6, "bytes": 1e4}, label="layer 0",
    )  # fmt: skip
    p.transfer("peer", "m0.gpu0", "m0.gpu1", 512, "d2d", ["fwd"], worker=1, carries="activations")
    p.compute("bwd", "m0.gpu0", "backward", ["fwd"], features={"seconds": 1e-3}, free=["x", "h"], iteration=0)
    p.collective("ar", "allreduce", ["m0.gpu0", "m0.gpu1"], 1000, "allreduce", ["bwd", "peer"], memory=100)
    return json.loads(json.dumps(p.to_dict()))


BASES: list[dict[str, Any]] = [
    *(json.loads(path.read_text()) for path in sorted(PLANS.glob("*.json"))),
    _every_field_plan(),
]


def _cluster(doc: dict[str, Any]) -> ClusterSpec:
    """The hardware a base plan names: a preset, or a file relative to the plans' folder."""
    name = doc["meta"]["hardware"]
    return load_hardware(name if not name.endswith(".toml") else PLANS / name)


CLUSTERS = [_cluster(doc) for doc in BASES]
VALUES: list[Any] = [
    math.nan, math.inf, -math.inf, 0, -1, 1, 2, 1.5, -0.0, 1e9, 1e19, 1e300, 1.7976931348623157e308,
    2**63 - 1, 2**63, 2**64, 10**30, 10**400, True, False, "", "1000", "x", "h", "load", "fwd", "ghost",
    "m0.gpu0", "m0.gpu1", "m0.host", "m0.rc", "m9.gpu0", "h2d", "forward", "allreduce", "teleport",
    "features", [], ["load"], ["m0.gpu0", "m0.gpu0"], [1], [[]], {}, {"x": 10}, {"flops": 1e9},
    {"seconds": 1e308}, {"name": "r", "device": "m0.gpu0", "bytes": 1}, None,
]  # fmt: skip
EXTRA_KEYS = ["colour", "id", "kind", "deps", "free", "allocate", "layer", "bytes", "seconds", "hardware"]


def _places(doc: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``doc``, containers included, depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((doc, key))
        _places(value, out)
    return out


def _valid_values(doc: Any, out: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Per key, the scalar values the documents hold under it (valid ones, to swap in)."""
    for container, key in _places(doc, []):
        if isinstance(key, str) and not isinstance(container[key], dict | list):
            out.setdefault(key, []).append(container[key])
    return out


VALID: dict[str, list[Any]] = {}
for _base in BASES:
    _valid_values(_base, VALID)


def draw_value(key: Any, data: st.DataObject) -> Any:
    """Half the time a value some document holds under ``key`` (so mutated plans still load
    often enough to be simulated), else one of :data:`VALUES`."""
    valid = VALID.get(key) if isinstance(key, str) else None
    if valid and data.draw(st.booleans(), label="valid"):
        return data.draw(st.sampled_from(valid), label="valid value")
    return data.draw(st.sampled_from(VALUES), label="value")


def mutate(doc: dict[str, Any], data: st.DataObject) -> None:
    """One change at a place drawn from ``doc``: replace, delete, add a key or append."""
    places = _places(doc, [(None, None)])
    container, key = data.draw(st.sampled_from(places), label="place")
    if container is None:  # the document itself
        container, key = doc, data.draw(st.sampled_from([*doc, *EXTRA_KEYS]), label="top key")
    action = data.draw(st.sampled_from(["replace", "replace", "replace", "delete", "extra", "append"]))
    value = copy.deepcopy(draw_value(key, data))
    if action == "delete":
        if isinstance(container, dict):
            container.pop(key, None)  # a drawn top-level key may not be there
        else:
            del container[key]
    elif action == "extra" and isinstance(container, dict):
        container[data.draw(st.sampled_from(EXTRA_KEYS), label="extra key")] = value
    elif action == "append" and isinstance(_get(container, key), list):
        container[key].append(value)
    else:
        container[key] = value


def _get(container: dict[str, Any] | list[Any], key: Any) -> Any:
    return container.get(key) if isinstance(container, dict) else container[key]


def check_plan_document(doc: dict[str, Any], cluster: ClusterSpec) -> None:
    """The property: a plan whose simulated times hold no NaN, or one line of WorkbenchError."""
    try:
        plan = Plan.from_dict(json.loads(json.dumps(doc)), "fuzz.json")
        assert Plan.from_dict(plan.to_dict(), "again.json").to_dict() == plan.to_dict()
        result = simulate(plan, cluster)
        times = result.trace[["ready", "start", "end"]].to_numpy()
        assert not (times != times).any() and math.isfinite(result.makespan)
    except WorkbenchError as exc:
        message = str(exc)
        assert message and "\n" not in message, message


def _run(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(BASES) - 1), label="base")
    doc = copy.deepcopy(BASES[index])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        mutate(doc, data)
    check_plan_document(doc, CLUSTERS[index])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_plans_simulate_or_fail_in_one_line(data: st.DataObject) -> None:
    _run(data)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_plans_simulate_or_fail_in_one_line_10k(data: st.DataObject) -> None:
    _run(data)


@pytest.mark.parametrize("index", range(len(BASES)))
def test_the_unmutated_plans_load_and_simulate(index: int) -> None:
    plan = Plan.from_dict(copy.deepcopy(BASES[index]), "base.json")
    assert simulate(plan, CLUSTERS[index]).makespan > 0


def test_the_property_catches_an_exception_that_is_not_a_workbench_error(monkeypatch) -> None:
    """check_plan_document must fail on a traceback-worthy exception, or the fuzz tests prove nothing."""

    def boom(*_: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setitem(check_plan_document.__globals__, "simulate", boom)
    with pytest.raises(TypeError):
        check_plan_document(copy.deepcopy(BASES[0]), CLUSTERS[0])


def test_the_property_catches_a_message_of_two_lines(monkeypatch) -> None:
    def two_lines(*_: object) -> None:
        raise WorkbenchError("first line\nsecond line")

    monkeypatch.setitem(check_plan_document.__globals__, "simulate", two_lines)
    with pytest.raises(AssertionError):
        check_plan_document(copy.deepcopy(BASES[0]), CLUSTERS[0])
