"""Fuzzing hardware TOML documents: every mutation of a valid cluster file either loads (and
then a small plan simulates on it with finite times) or is refused with one line naming
the file, never any other exception.

Documents come from presets exported as the TOML ``gnnwb hardware export`` writes and
from the shipped hardware example; each example mutates one to three places in one of
them (a field replaced by a valid or an invalid value, a key removed, a key added, a list
item appended or removed).
"""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import simulate
from workbench.errors import WorkbenchError
from workbench.hardware import cluster_from_dict, load_hardware
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan

REPO = Path(__file__).resolve().parents[1]
BASES = [
    tomllib.loads(load_hardware("h100-1x").to_toml()),
    tomllib.loads(load_hardware("hopgnn-4xa100-10gbe", machines=2).to_toml()),
    tomllib.loads((REPO / "examples" / "hardware" / "ring4-nvswitch-nolatency.toml").read_text()),
]
# Valid and invalid values of every class: NaN and infinities, ints at and beyond int64,
# floats at a float's limits, bools where numbers go, strings with and without units, lists
# and tables where scalars go.
VALUES: list[Any] = [
    math.nan, math.inf, -math.inf, 0, -1, 1, 2, 3, 64, 65, 2.5, 1e-300, 1e300, 1.7976931348623157e308,
    2**63 - 1, 2**63, 2**64, 10**400, -(2**63) - 1, True, False, "", "four", "nan", "inf",
    "12 GB/s", "100 Gbit/s", "1e400 GB/s", "5 us", "-5 us", "1e400 s", "16 GiB", "1e400 GiB", "9300 PB",
    "1.5 B", "9.3 TFLOP/s", "1e400 PFLOP/s", "m0", "m0.gpu0", "m0.host", "m0.rc", "m1.gpu0", "net",
    "pcie", "nvlink", "root-complex", "network", [], [1], ["m0"], {}, {"a": 1}, {"name": "m9"}, None,
]  # fmt: skip
EXTRA_KEYS = ["gpudirect", "colour", "name", "kind", "gpus", "bandwidth", "latency", "memory"]


def _places(doc: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``doc``, containers included, depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((doc, key))
        _places(value, out)
    return out


def _valid_values(doc: Any, out: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Per key, the values the documents hold under it (valid ones, to swap in)."""
    for container, key in _places(doc, []):
        if isinstance(key, str) and not isinstance(container[key], dict | list):
            out.setdefault(key, []).append(container[key])
    return out


def draw_value(key: Any, data: st.DataObject) -> Any:
    """Half the time a value some document holds under ``key`` (so mutated documents still
    load often enough to be simulated), else one of :data:`VALUES`."""
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
    value = draw_value(key, data)
    if action == "replace" or (action == "extra" and not isinstance(container, dict)):
        container[key] = copy.deepcopy(value)
    elif action == "delete":
        if isinstance(container, dict):
            container.pop(key, None)  # a drawn top-level key may not be there
        else:
            del container[key]
    elif action == "extra":
        container[data.draw(st.sampled_from(EXTRA_KEYS), label="extra key")] = copy.deepcopy(value)
    elif isinstance(container, dict | list) and isinstance(_get(container, key), list):
        container[key].append(copy.deepcopy(value))
    else:
        container[key] = copy.deepcopy(value)


def _get(container: dict[str, Any] | list[Any], key: Any) -> Any:
    return container.get(key) if isinstance(container, dict) else container[key]


def check_document(doc: dict[str, Any]) -> None:
    """The property: a cluster that simulates with finite times, or one line of WorkbenchError."""
    try:
        cluster = cluster_from_dict(doc, "fuzz.toml")
        cluster.describe()
        again = cluster_from_dict(tomllib.loads(cluster.to_toml()), "exported.toml")
        assert again.gpu_nodes() == cluster.gpu_nodes()
        _simulate_a_copy(cluster)
    except WorkbenchError as exc:
        message = str(exc)
        assert message and "\n" not in message, message


def _simulate_a_copy(cluster: ClusterSpec) -> None:
    """A host-to-GPU copy and a kernel on the first GPU, when the cluster has one."""
    gpus = cluster.gpu_nodes()
    if not gpus:
        return
    host = cluster.machine_of(gpus[0]).host_node
    plan = Plan("fuzz")
    plan.transfer("copy", host, gpus[0], 1_000_000, "h2d")
    plan.compute("kernel", gpus[0], "forward", ["copy"], features={"flops": 1e9, "bytes": 1e6})
    result = simulate(plan, cluster)
    times = result.trace[["ready", "start", "end"]].to_numpy()
    assert not (times != times).any() and math.isfinite(result.makespan)


VALID: dict[str, list[Any]] = {}
for _base in BASES:
    _valid_values(_base, VALID)


def _run(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASES), label="base"))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        mutate(doc, data)
    check_document(doc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_hardware_documents_load_or_fail_in_one_line(data: st.DataObject) -> None:
    _run(data)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_hardware_documents_load_or_fail_in_one_line_10k(data: st.DataObject) -> None:
    _run(data)


@pytest.mark.parametrize("base", range(len(BASES)))
def test_the_unmutated_documents_load_and_simulate(base: int) -> None:
    cluster = cluster_from_dict(copy.deepcopy(BASES[base]), "base.toml")
    _simulate_a_copy(cluster)


def test_the_property_catches_an_exception_that_is_not_a_workbench_error(monkeypatch) -> None:
    """check_document must fail on a traceback-worthy exception, or the fuzz tests prove nothing."""

    def boom(*_: object) -> ClusterSpec:
        raise TypeError("a bug")

    monkeypatch.setitem(check_document.__globals__, "cluster_from_dict", boom)
    with pytest.raises(TypeError):
        check_document(copy.deepcopy(BASES[0]))
    monkeypatch.setitem(check_document.__globals__, "cluster_from_dict", lambda *_: _two_lines())
    with pytest.raises(AssertionError):
        check_document(copy.deepcopy(BASES[0]))


def _two_lines() -> ClusterSpec:
    raise WorkbenchError("first line\nsecond line")
