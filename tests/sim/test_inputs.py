"""Bad input gets one clear error naming the task; plans that do not fit are reported, not run."""

from __future__ import annotations

import pytest

from sim import check_memory, memory_needs, simulate
from workbench.errors import InfeasiblePlanError, PlanError
from workbench.plan import Plan

GiB = 2**30


def test_unknown_device_names_the_task(h100):
    p = Plan("bad")
    p.compute("fwd", "m0.gpu3", "forward", features={"seconds": 1})
    with pytest.raises(PlanError, match=r"task 'fwd'.*no device or memory 'm0.gpu3'"):
        simulate(p, h100)
    q = Plan("bad2")
    q.transfer("copy", "m1.host", "m0.gpu0", 10, "h2d")
    with pytest.raises(PlanError, match=r"task 'copy'.*'m1.host'"):
        simulate(q, h100)


def test_transit_nodes_are_not_memories(h100):
    p = Plan("rc")
    p.transfer("copy", "m0.rc", "m0.gpu0", 10, "h2d")
    with pytest.raises(PlanError, match=r"task 'copy'.*'m0.rc'"):
        simulate(p, h100)


def test_cycle_names_a_task(h100):
    p = Plan("loop")
    p.compute("a", "m0.gpu0", "forward", ["c"])
    p.compute("b", "m0.gpu0", "forward", ["a"])
    p.compute("c", "m0.gpu0", "forward", ["b"])
    with pytest.raises(PlanError, match=r"cycle through task 'a'"):
        simulate(p, h100)


def test_negative_bytes_names_the_task(h100):
    p = Plan("neg")
    p.transfer("copy", "m0.host", "m0.gpu0", -5, "h2d")
    with pytest.raises(PlanError, match=r"task 'copy'.*negative"):
        simulate(p, h100)


def test_a_plan_that_does_not_fit_is_reported_with_the_gpu_and_the_excess(neugraph):
    # P100: 16 GiB. Resident 17 GiB + the largest transient buffer 1.2 GiB = 18.2 GiB: 2.2 GiB over.
    p = Plan("big")
    p.keep("cache", "m0.gpu2", 17 * GiB)
    p.compute("a", "m0.gpu2", "forward", features={"seconds": 1}, memory=int(1.2 * GiB))
    p.compute("b", "m0.gpu2", "forward", features={"seconds": 1}, memory=int(0.5 * GiB))
    p.keep("small", "m0.gpu0", GiB)
    assert memory_needs(p)["m0.gpu2"] == 17 * GiB + int(1.2 * GiB)
    msg = "plan 'big' does not fit: m0.gpu2 needs 18.2 GiB of 16 GiB (2.2 GiB over)"
    with pytest.raises(InfeasiblePlanError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        simulate(p, neugraph)
    p.resident[0].bytes = 14 * GiB
    assert check_memory(p, neugraph)["m0.gpu2"] == 14 * GiB + int(1.2 * GiB)


def test_transient_memory_of_a_transfer_counts_at_its_destination(h100):
    p = Plan("landing")
    p.keep("model", "m0.gpu0", 79 * GiB)
    p.transfer("copy", "m0.host", "m0.gpu0", 10, "h2d", memory=2 * GiB)
    with pytest.raises(InfeasiblePlanError, match="m0.gpu0 needs 81 GiB of 80 GiB"):
        simulate(p, h100)


def test_cli_prints_one_line_errors(repo, tmp_path, capsys):
    from workbench.cli.main import main

    plan = tmp_path / "bad.json"
    plan.write_text(
        '{"tasks": [{"id": "x", "kind": "transfer", "phase": "h2d", "src": "m0.host", "dst": "m0.gpu9", "bytes": 1}]}'
    )
    assert main(["sim", str(plan), "--hardware", "h100-1x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "task 'x'" in err and "m0.gpu9" in err
