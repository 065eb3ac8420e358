"""Plans: building, JSON round trip, validation errors that name the task."""

from __future__ import annotations

import json

import pytest

from workbench.errors import PlanError
from workbench.plan import Plan


def _plan() -> Plan:
    p = Plan("t")
    p.transfer("load", "m0.host", "m0.gpu0", 4096, "h2d", items=1024, carries="features")
    p.compute("fwd", "m0.gpu0", "forward", deps=["load"], features={"vertices": 10, "edges": 40})
    p.compute("bwd", "m0.gpu0", "backward", deps=["fwd"])
    p.collective("ar", "allreduce", ["m0.gpu0"], 1000, "allreduce", deps=["bwd"])
    p.keep("weights", "m0.gpu0", 1000)
    return p


def test_topological_order_follows_dependencies_and_plan_order() -> None:
    p = Plan("t")
    p.compute("c", "m0.gpu0", "forward", deps=["b", "a"])
    p.compute("a", "m0.gpu0", "forward")
    p.compute("b", "m0.gpu0", "forward", deps=["a"])
    p.compute("d", "m0.gpu0", "forward")
    assert [t.id for t in p.validate()] == ["a", "b", "c", "d"]


def test_json_round_trip(tmp_path) -> None:
    p = _plan()
    path = tmp_path / "p.json"
    p.save(path)
    again = Plan.load(path)
    assert again.to_dict() == p.to_dict()
    assert [t.id for t in again.validate()] == ["load", "fwd", "bwd", "ar"]


def test_cycle_names_a_task() -> None:
    p = _plan()
    p.tasks[0].deps = ["ar"]
    with pytest.raises(PlanError, match="cycle through task 'load'"):
        p.validate()


def test_negative_bytes_names_the_task() -> None:
    p = _plan()
    p.tasks[0].bytes = -1
    with pytest.raises(PlanError, match="task 'load': bytes must be a non-negative whole number, got -1"):
        p.validate()


def test_unknown_device_names_the_task() -> None:
    p = _plan()
    p.tasks[1].device = "m0.gpu9"
    with pytest.raises(PlanError, match="task 'fwd': the hardware has no device or memory 'm0.gpu9'"):
        p.validate(known_nodes=["m0.host", "m0.gpu0"])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["tasks"][0].update(kind="teleport"), "unknown kind 'teleport'"),
        (lambda d: d["tasks"][0].update(phase="napping"), "unknown phase 'napping'"),
        (lambda d: d["tasks"][1].update(deps=["ghost"]), "depends on unknown task 'ghost'"),
        (lambda d: d["tasks"][0].update(colour="red"), "unknown field"),
        (lambda d: d["tasks"][3].update(op="gossip"), "unknown collective op"),
        (lambda d: d["tasks"].append(dict(d["tasks"][0])), "duplicate task id"),
    ],
)
def test_malformed_plans(mutate, message) -> None:
    d = json.loads(json.dumps(_plan().to_dict()))
    mutate(d)
    with pytest.raises(PlanError, match=message):
        Plan.from_dict(d).validate()


def test_file_errors(tmp_path) -> None:
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(PlanError, match="not valid JSON"):
        Plan.load(tmp_path / "x.json")
    with pytest.raises(PlanError, match="no such plan file"):
        Plan.load(tmp_path / "missing.json")
    (tmp_path / "y.json").write_text("[1, 2]")
    with pytest.raises(PlanError, match="'tasks' list"):
        Plan.load(tmp_path / "y.json")
