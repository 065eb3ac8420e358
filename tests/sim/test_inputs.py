"""Bad input gets one clear error naming the task; plans that do not fit are reported, not run."""

from __future__ import annotations

import pytest

from sim import simulate
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


def test_a_plan_that_does_not_fit_is_reported_with_the_gpu_the_moment_and_the_excess(neugraph):
    # P100: 16 GiB. a and b share gpu2's compute stream, so they run one after the other:
    # a at 0-1 s holds 1.2 GiB beside the 15 GiB cache: a peak of 16.2 GiB at t=0, 0.2 GiB over.
    p = Plan("big")
    p.keep("cache", "m0.gpu2", 15 * GiB)
    p.compute("a", "m0.gpu2", "forward", features={"seconds": 1}, memory=int(1.2 * GiB))
    p.compute("b", "m0.gpu2", "forward", features={"seconds": 1}, memory=int(0.5 * GiB))
    p.keep("small", "m0.gpu0", GiB)
    with pytest.raises(InfeasiblePlanError) as err:
        simulate(p, neugraph)
    assert str(err.value) == (
        "plan 'big' does not fit: m0.gpu2 holds 16.2 GiB of 16 GiB (204.8 MiB over) at t=0 s; "
        "live then: resident 'cache' 15 GiB, workspace of task 'a' 1.2 GiB"
    )
    p.resident[0].bytes = 14 * GiB
    assert simulate(p, neugraph).memory["m0.gpu2"] == 14 * GiB + int(1.2 * GiB)


def test_resident_tensors_that_do_not_fit_are_reported_before_running(neugraph):
    p = Plan("cache")
    p.keep("cache", "m0.gpu1", 20 * GiB)
    p.compute("never", "m0.gpu1", "forward", features={"seconds": 1})
    seen = []
    with pytest.raises(InfeasiblePlanError, match=r"m0.gpu1 holds 20 GiB of 16 GiB \(4 GiB over\) at t=0 s"):
        simulate(p, neugraph, on_task_end=lambda *row: seen.append(row))
    assert seen == []


def test_transient_memory_of_a_transfer_counts_at_its_destination(h100):
    # 79 GiB model + the copy's 2 GiB workspace on gpu0 + its 10-byte landing buffer.
    p = Plan("landing")
    p.keep("model", "m0.gpu0", 79 * GiB)
    p.transfer("copy", "m0.host", "m0.gpu0", 10, "h2d", memory=2 * GiB)
    with pytest.raises(InfeasiblePlanError, match="m0.gpu0 holds 81 GiB of 80 GiB"):
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


GOOD_TASK = '{"id": "x", "kind": "transfer", "phase": "h2d", "src": "m0.host", "dst": "m0.gpu0", %s}'


@pytest.mark.parametrize(
    "field, message",
    [
        ('"bytes": "1000"', "task 'x': bytes must be a non-negative whole number, got '1000'"),
        ('"bytes": 1000.5', "task 'x': bytes must be a non-negative whole number, got 1000.5"),
        ('"bytes": NaN', "task 'x': bytes must be a non-negative whole number, got nan"),
        ('"bytes": true', "task 'x': bytes must be a non-negative whole number, got True"),
        ('"bytes": 10, "items": -1', "task 'x': items must be a non-negative whole number, got -1"),
        ('"bytes": 10, "worker": "0"', "task 'x': worker must be a non-negative whole number, got '0'"),
        ('"bytes": 10, "carries": "cats"', "task 'x': carries 'cats'; allowed: features, activations"),
        ('"bytes": 10, "features": {"flops": NaN}', "task 'x': cost feature 'flops' must be a finite"),
        ('"bytes": 10, "deps": "y"', "task 'x': deps must be a list of task ids, got 'y'"),
        ('"bytes": 10, "layer": 1.5', "task 'x': layer must be a non-negative whole number, got 1.5"),
    ],
)
def test_a_plan_field_of_the_wrong_type_gets_one_line_naming_task_and_field(tmp_path, capsys, field, message):
    from workbench.cli.main import main

    plan = tmp_path / "typed.json"
    plan.write_text('{"tasks": [' + GOOD_TASK % field + "]}")
    trace = tmp_path / "t.parquet"
    assert main(["sim", str(plan), "--hardware", "h100-1x", "--trace", str(trace)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err
    assert not trace.exists()


def test_whole_numbers_written_as_json_floats_are_accepted(h100):
    p = Plan.from_dict({"tasks": [json_task(bytes=1e9)]})
    assert p.tasks[0].bytes == 1_000_000_000 and type(p.tasks[0].bytes) is int
    assert simulate(p, h100).trace["bytes"].tolist() == [1_000_000_000]


def json_task(**fields):
    return {"id": "x", "kind": "transfer", "phase": "h2d", "src": "m0.host", "dst": "m0.gpu0", **fields}


def test_an_infeasible_plan_is_reported_and_writes_no_trace(tmp_path, capsys):
    from workbench.cli.main import main

    # h100-1x: 80 GiB. Two 50 GiB landings into gpu0 at once: 100 GiB at t=0.
    plan = Plan("twice")
    plan.transfer("a", "m0.host", "m0.gpu0", 50 * GiB, "h2d")
    plan.compute("k", "m0.gpu0", "forward", features={"seconds": 1}, memory=50 * GiB)
    plan.save(tmp_path / "p.json")
    trace = tmp_path / "t.parquet"
    assert main(["sim", str(tmp_path / "p.json"), "--hardware", "h100-1x", "--trace", str(trace)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "m0.gpu0 holds 100 GiB of 80 GiB (20 GiB over) at t=0 s" in err
    assert not trace.exists()


def test_seed_and_jitter_from_the_command_line(tmp_path, capsys):
    from workbench.cli.main import main
    from workbench.trace import read_trace

    plan = Plan("jittery")
    for i in range(5):
        plan.compute(f"k{i}", "m0.gpu0", "forward", [f"k{i - 1}"] if i else [], features={"seconds": 0.01})
    plan.save(tmp_path / "p.json")

    def run(name: str, *extra: str) -> bytes:
        out = tmp_path / name
        assert (
            main(["sim", str(tmp_path / "p.json"), "--hardware", "h100-1x", "--trace", str(out), *extra]) == 0
        )
        return out.read_bytes()

    a = run("a.parquet", "--seed", "7", "--jitter", "0.2")
    assert run("b.parquet", "--seed", "7", "--jitter", "0.2") == a  # byte-identical file
    c = run("c.parquet", "--seed", "8", "--jitter", "0.2")
    durations = {
        name: (lambda t: (t["end"] - t["start"]).tolist())(read_trace(tmp_path / name))
        for name in ("a.parquet", "c.parquet")
    }
    assert all(x != y for x, y in zip(durations["a.parquet"], durations["c.parquet"], strict=True))
    # Without jitter the seed changes nothing; every kernel takes its stated 10 ms.
    assert run("d.parquet", "--seed", "1") == run("e.parquet", "--seed", "2")
    assert (lambda t: (t["end"] - t["start"]).tolist())(read_trace(tmp_path / "d.parquet")) == pytest.approx(
        [0.01] * 5
    )
    assert c != a
    capsys.readouterr()
    # A negative jitter is refused as the option is parsed (argparse's usage error, status 2).
    with pytest.raises(SystemExit) as exit_:
        main(["sim", str(tmp_path / "p.json"), "--hardware", "h100-1x", "--jitter", "-1"])
    assert exit_.value.code == 2
    assert "--jitter: the value must be at least 0, got -1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "field, message",
    [
        ('"bytes": 10, "items": 9223372036854775808', "task 'x': items is beyond what an int64 holds"),
        (
            '"bytes": 10, "iteration": 18446744073709551616',
            "task 'x': iteration is beyond what an int64 holds",
        ),
        ('"bytes": 10, "worker": 1e30', "task 'x': worker is beyond what an int64 holds"),
        ('"bytes": 10, "layer": 9223372036854775808', "task 'x': layer is beyond what an int64 holds"),
        ('"bytes": 9223372036854775808', "task 'x': bytes is beyond what an int64 holds"),
        ('"bytes": 10, "meta": 1', "unknown field(s) meta"),  # a task field that is not one
    ],
)
def test_plan_counts_beyond_int64_are_refused_before_the_trace(tmp_path, capsys, field, message):
    from workbench.cli.main import main

    plan = tmp_path / "big.json"
    plan.write_text('{"tasks": [' + GOOD_TASK % field + "]}")
    trace = tmp_path / "t.parquet"
    assert main(["sim", str(plan), "--hardware", "h100-1x", "--trace", str(trace)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and str(plan) in err and "Traceback" not in err
    assert not trace.exists()


@pytest.mark.parametrize(
    "document, message",
    [
        ('{"tasks": [], "resident": 5}', "resident must be a list"),
        ('{"tasks": [], "meta": [1]}', "meta must be an object, got [1]"),
        ('{"tasks": 5}', "a plan is a JSON object with a 'tasks' list"),
        ('{"tasks": [1]}', "tasks[0] must be an object, got 1"),
        (
            '{"tasks": [' + GOOD_TASK % '"bytes": 1, "deps": [1]' + "]}",
            "task 'x': deps must be a list of task ids",
        ),
    ],
)
def test_wrongly_shaped_plans_on_the_command_line(tmp_path, capsys, document, message):
    from workbench.cli.main import main

    plan = tmp_path / "shape.json"
    plan.write_text(document)
    assert main(["sim", str(plan), "--hardware", "h100-1x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err


def test_a_free_racing_its_allocation_is_refused_on_the_command_line(tmp_path, capsys):
    from workbench.cli.main import main

    plan = Plan("race")
    plan.compute("make", "m0.gpu0", "forward", features={"seconds": 1}, allocate={"x": 10})
    plan.compute("drop", "m0.host", "forward", features={"seconds": 2}, free=["x"])
    plan.save(tmp_path / "p.json")
    assert main(["sim", str(tmp_path / "p.json"), "--hardware", "h100-1x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "task 'drop': frees tensor 'x', allocated by task 'make'" in err
