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


# ---- issue 23: plan files refused at load, one line naming the file, the task and the field ----
INT64_MAX = 2**63 - 1


def _doc() -> dict:
    return json.loads(json.dumps(_plan().to_dict()))


def _load(tmp_path, doc: object) -> Plan:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    return Plan.load(path)


@pytest.mark.parametrize(
    ("task", "field", "value"),
    [
        (0, "items", INT64_MAX + 1),
        (0, "iteration", 2**64),
        (0, "worker", 10**30),
        (1, "layer", INT64_MAX + 1),
        (3, "bytes", 2**63),
        (0, "bytes", 1e19),  # a JSON float that is a whole number, beyond int64
    ],
)
def test_counts_beyond_int64_are_refused_at_load(tmp_path, task: int, field: str, value: object) -> None:
    doc = _doc()
    doc["tasks"][task][field] = value
    tid = doc["tasks"][task]["id"]
    with pytest.raises(
        PlanError, match=rf"p.json: plan 't': task '{tid}': {field} is beyond what an int64 holds"
    ):
        _load(tmp_path, doc)


def test_the_largest_int64_count_is_accepted(tmp_path) -> None:
    doc = _doc()
    doc["tasks"][0]["items"] = INT64_MAX
    assert _load(tmp_path, doc).tasks[0].items == INT64_MAX


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d.update(resident=5),
            r"p.json: resident must be a list of \{name, device, bytes\} objects, got 5",
        ),
        (
            lambda d: d.update(resident=[5]),
            r"p.json: resident\[0\] must be an object with exactly name, device and bytes",
        ),
        (
            lambda d: d["resident"][0].update(name=1),
            r"p.json: resident\[0\].name must be a non-empty string, got 1",
        ),
        (
            lambda d: d["resident"][0].update(bytes=2**64),
            r"p.json: resident\[0\].bytes is beyond what an int64 holds",
        ),
        (
            lambda d: d["resident"][0].update(bytes="1"),
            r"p.json: resident\[0\].bytes must be a non-negative whole",
        ),
        (lambda d: d.update(meta=[1]), r"p.json: meta must be an object, got \[1\]"),
        (lambda d: d.update(name=7), r"p.json: name must be a string, got 7"),
        (lambda d: d.update(workers=[1]), r"p.json: 'workers' must map devices to worker numbers, got \[1\]"),
        (lambda d: d.update(workers={"m0.gpu0": -1}), r"p.json: workers\['m0.gpu0'\] must be a non-negative"),
        (
            lambda d: d.update(workers={"m0.gpu0": 2**63}),
            r"p.json: workers\['m0.gpu0'\] is beyond what an int64",
        ),
        (lambda d: d.update(tasks={"a": 1}), r"p.json: a plan is a JSON object with a 'tasks' list"),
        (
            lambda d: d.update(colour="red"),
            r"p.json: unknown field\(s\) colour; allowed: meta, name, resident",
        ),
        (lambda d: d["tasks"].__setitem__(0, 5), r"p.json: tasks\[0\] must be an object, got 5"),
        (lambda d: d["tasks"].__setitem__(0, ["load"]), r"p.json: tasks\[0\] must be an object"),
        (lambda d: d["tasks"][0].update(id=5), r"p.json: tasks\[0\].id must be a non-empty string, got 5"),
        (lambda d: d["tasks"][0].update(id=""), r"p.json: tasks\[0\].id must be a non-empty string"),
        (
            lambda d: d["tasks"][1].update(deps="load"),
            r"task 'fwd': deps must be a list of task ids, got 'load'",
        ),
        (lambda d: d["tasks"][1].update(deps=[1]), r"task 'fwd': deps must be a list of task ids, got \[1\]"),
        (lambda d: d["tasks"][1].update(deps=[["load"]]), r"task 'fwd': deps must be a list of task ids"),
        (lambda d: d["tasks"][1].update(features=[1]), r"task 'fwd': features must be an object of numbers"),
        (
            lambda d: d["tasks"][1].update(features={"edges": "40"}),
            r"task 'fwd': cost feature 'edges' must be a finite",
        ),
        (
            lambda d: d["tasks"][1].update(allocate=[1]),
            r"task 'fwd': allocate must map tensor names to bytes",
        ),
        (
            lambda d: d["tasks"][1].update(free="x"),
            r"task 'fwd': free must be a list of tensor names, got 'x'",
        ),
        (lambda d: d["tasks"][1].update(free=[{}]), r"task 'fwd': free must be a list of tensor names"),
        (lambda d: d["tasks"][1].update(device=["m0.gpu0"]), r"task 'fwd': a compute task needs a device"),
        (lambda d: d["tasks"][0].update(src=1), r"task 'load': a transfer needs src and dst"),
        (
            lambda d: d["tasks"][3].update(devices="m0.gpu0"),
            r"task 'ar': a collective needs a list of devices",
        ),
        (lambda d: d["tasks"][3].update(op=["allreduce"]), r"task 'ar': unknown collective op"),
        (lambda d: d["tasks"][0].update(kind=["transfer"]), r"task 'load': unknown kind"),
        (lambda d: d["tasks"][0].update(phase={}), r"task 'load': unknown phase"),
        (lambda d: d["tasks"][0].update(label=3), r"task 'load': label must be a string, got 3"),
        (lambda d: d["tasks"][0].update(carries=None), r"task 'load': carries None"),
        (
            lambda d: d["tasks"][0].update(bytes=True),
            r"task 'load': bytes must be a non-negative whole number, got True",
        ),
        (
            lambda d: d["tasks"][1].update(layer=False),
            r"task 'fwd': layer must be a non-negative whole number",
        ),
    ],
)
def test_wrongly_shaped_plan_fields_get_one_line_naming_file_and_field(
    tmp_path, mutate, message: str
) -> None:
    doc = _doc()
    mutate(doc)
    with pytest.raises(PlanError, match=message) as err:
        _load(tmp_path, doc)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(tmp_path / "p.json"))


def test_a_folder_or_a_binary_file_is_not_a_plan(tmp_path) -> None:
    with pytest.raises(PlanError, match="is a folder, expected a plan file"):
        Plan.load(tmp_path)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(PlanError, match="bin.json: not valid JSON"):
        Plan.load(tmp_path / "bin.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlanError, match="deep.json"):
        Plan.load(tmp_path / "deep.json")


def _tensors() -> Plan:
    p = Plan("mem")
    p.compute("make", "m0.gpu0", "forward", allocate={"x": 10})
    p.compute("use", "m0.gpu0", "forward", ["make"])
    p.compute("other", "m0.gpu1", "forward")
    return p


def test_a_free_by_a_task_that_does_not_depend_on_the_allocation_is_refused() -> None:
    p = _tensors()
    p.compute("drop", "m0.gpu1", "backward", ["other"], free=["x"])
    with pytest.raises(
        PlanError,
        match=r"^plan 'mem': task 'drop': frees tensor 'x', allocated by task 'make', but does not depend on it "
        r"\(directly or not\), so the free could run before the allocation$",
    ):
        p.validate()


def test_a_free_before_its_allocation_in_the_dependency_order_is_refused() -> None:
    p = Plan("backwards")
    p.compute("drop", "m0.gpu0", "forward", free=["x"])
    p.compute("make", "m0.gpu0", "forward", ["drop"], allocate={"x": 10})
    with pytest.raises(
        PlanError, match=r"task 'drop': frees tensor 'x', allocated by task 'make', but does not"
    ):
        p.validate()


@pytest.mark.parametrize(
    "deps",
    [["make"], ["use"], ["other", "use"]],  # directly, through one task, beside an unrelated one
)
def test_a_free_that_depends_on_the_allocation_is_accepted(deps: list[str]) -> None:
    p = _tensors()
    p.compute("drop", "m0.gpu1", "backward", deps, free=["x"])
    assert [t.id for t in p.validate()][-1] == "drop"


def test_a_task_may_free_what_it_allocates_and_a_reallocation_may_be_freed_after_it() -> None:
    p = Plan("again")
    p.compute("a", "m0.gpu0", "forward", allocate={"x": 10}, free=["x"])
    p.compute("b", "m0.gpu0", "forward", ["a"], allocate={"x": 10})
    p.compute("c", "m0.gpu0", "forward", ["b"], free=["x"])
    p.validate()


def test_the_free_check_follows_dependencies_listed_out_of_plan_order() -> None:
    p = Plan("shuffled")
    p.compute("drop", "m0.gpu0", "backward", ["mid"], free=["x"])
    p.compute("mid", "m0.gpu0", "forward", ["make"])
    p.compute("make", "m0.gpu0", "forward", allocate={"x": 10})
    assert [t.id for t in p.validate()] == ["make", "mid", "drop"]
