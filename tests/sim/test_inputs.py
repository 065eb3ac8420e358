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
    assert exit_status(["sim", str(tmp_path / "p.json"), "--hardware", "h100-1x", "--jitter", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--jitter" in err and "must be at least 0" in err and "Traceback" not in err


def exit_status(argv: list[str]) -> int:
    """What ``gnnwb ARGV`` exits with: main's return value, or argparse's SystemExit code for
    an option refused as it is parsed."""
    from workbench.cli.main import main

    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


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


# ---- saved cost models (--cost-model) and calibrated profiles ----
def _cost_model_doc() -> dict:
    import json

    from sim import LinearCostModel

    return json.loads(LinearCostModel().to_json())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d["coefficients"]["default"].update(per_flop=float("nan")),
            "coefficients.default.per_flop must be a finite number, got nan",
        ),
        (
            lambda d: d["coefficients"]["default"].update(intercept=float("inf")),
            "coefficients.default.intercept must be a finite number, got inf",
        ),
        (
            lambda d: d["coefficients"]["cpu"].update(per_edge=-1e-7),
            "coefficients.cpu.per_edge must be at least 0, got -1e-07",
        ),
        (
            lambda d: d["coefficients"]["cpu"].update(per_edge=True),
            "coefficients.cpu.per_edge must be a number, got True",
        ),
        (
            lambda d: d["coefficients"]["cpu"].update(per_edge="1e-7"),
            "coefficients.cpu.per_edge must be a number, got '1e-7'",
        ),
        (lambda d: d["coefficients"].update(cpu=[1, 2]), "coefficients.cpu must be a table, got [1, 2]"),
        (
            lambda d: d["coefficients"]["cpu"].update(per_cat=1),
            "coefficients.cpu has unknown field(s) per_cat",
        ),
        (lambda d: d.update(coefficients=5), "coefficients must be a table, got 5"),
        (lambda d: d.update(coefficients={}), "no coefficients"),
        (lambda d: d.update(kind="quadratic"), "kind 'quadratic'; allowed: linear"),
        (lambda d: d.update(kind=["linear"]), "kind ['linear']; allowed: linear"),
        (lambda d: d.update(provenance=3), "provenance must be a string, got 3"),
        (lambda d: d.update(extra=1), "unknown field(s) extra"),
        (
            lambda d: d.update(transfer_overhead={"gather_remote": float("nan")}),
            "transfer_overhead.gather_remote (seconds) must be a finite number",
        ),
        (
            lambda d: d.update(transfer_overhead={"gather_remote": float("inf")}),
            "transfer_overhead.gather_remote (seconds) must be a finite number",
        ),
        (lambda d: d.update(transfer_overhead=[1]), "transfer_overhead must be a table"),
    ],
)
def test_a_saved_cost_model_with_a_bad_field_is_one_line_naming_file_and_field(tmp_path, mutate, message):
    import json

    from sim import LinearCostModel
    from workbench.errors import ConfigError

    doc = _cost_model_doc()
    mutate(doc)
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        LinearCostModel.from_json(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.json", "missing.json: no such cost model file"),
        (lambda d: d, "is a folder, expected a cost model file"),
        (
            lambda d: _write_bytes(d / "bin.json", b"\x89PNG\r\n\x1a\n\xff\xfe"),
            "bin.json: not a cost model: not UTF-8 text",
        ),
        (lambda d: _write_bytes(d / "bad.json", b"{nope"), "bad.json: not valid JSON"),
        (lambda d: _write_bytes(d / "list.json", b"[1, 2]"), "list.json must be a table, got [1, 2]"),
        (
            lambda d: _write_bytes(d / "deep.json", b"[" * 100_000 + b"]" * 100_000),
            "deep.json: not a cost model: JSON nested too deeply",
        ),
    ],
)
def test_a_cost_model_file_that_is_missing_a_folder_binary_or_not_json(tmp_path, make, message):
    from sim import LinearCostModel
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match=None) as err:
        LinearCostModel.from_json(make(tmp_path))
    assert message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError):  # a path given as a string reads the same
        LinearCostModel.from_json(str(make(tmp_path)))


def _write_bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_cost_model_round_trips_and_json_text_still_reads():
    import json

    from sim import LinearCostModel

    model = LinearCostModel()
    assert LinearCostModel.from_json(model.to_json()).coefficients == model.coefficients
    assert LinearCostModel.from_json(json.dumps(_cost_model_doc())).provenance == model.provenance


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such cost model file"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (
            b'{"coefficients": {"default": {"per_flop": NaN}}}',
            "coefficients.default.per_flop must be a finite number",
        ),
    ],
)
def test_sim_with_a_bad_cost_model_prints_one_line_and_exits_2(repo, tmp_path, capsys, content, message):

    path = tmp_path / "cm.json"
    if content is not None:
        path.write_bytes(content)
    plan = repo / "examples" / "plans" / "one_transfer.json"
    assert exit_status(["sim", str(plan), "--cost-model", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    # One error line (a missing file is refused as the option is parsed: argparse's usage comes first).
    assert message in err.splitlines()[-1] and "Traceback" not in err


def test_cost_features_that_overflow_the_model_are_a_plan_error(h100):
    p = Plan("huge")
    p.compute("k", "m0.gpu0", "forward", features={"flops": 1e308})
    with pytest.raises(
        PlanError, match=r"task 'k': its cost features give a compute time of inf s on m0.gpu0"
    ):
        simulate(p, h100)


def _profile_table() -> dict:
    from workbench.hardware import load_hardware

    cluster = load_hardware("h100-1x").to_dict()
    cluster["links"] = [
        {**link, "bandwidth_fitted": True, "latency_fitted": False} for link in cluster["links"]
    ]
    return {
        "format": "gnnwb-profile/1",
        "name": "h100-1x-calibrated",
        "cluster": cluster,
        "cost_model": {
            "kind": "phase",
            "provenance": "test",
            "fallback": {"default": {"intercept": 5e-6, "per_flop": 2.0}},
            "phases": {
                "forward": {"H100": {"model": "linear", "intercept": 1e-5, "per_flop": 1.5}},
                "backward": {
                    "H100": {
                        "model": "trees",
                        "init": -9.0,
                        "learning_rate": 0.1,
                        "log_target": True,
                        "roots": [0],
                        "feature": [0, -2, -2],
                        "threshold": [0.5, -2.0, -2.0],
                        "left": [1, -1, -1],
                        "right": [2, -1, -1],
                        "value": [0.0, -1.0, 1.0],
                    }
                },
            },
        },
    }


def _write_profile(tmp_path, table: dict):
    from sim.calibrate import tomlwrite

    path = tmp_path / "profile.toml"
    path.write_text(tomlwrite.dumps(table))
    return path


def test_a_good_profile_loads_and_simulates(tmp_path, capsys):
    from sim.calibrate.profile import load_profile
    from workbench.cli.main import main

    path = _write_profile(tmp_path, _profile_table())
    profile = load_profile(path)
    assert profile.cluster.name == "h100-1x" and set(profile.cost_model.phases) == {"forward", "backward"}
    plan = Plan("p")
    plan.compute("f", "m0.gpu0", "forward", features={"flops": 1e9})
    plan.compute("b", "m0.gpu0", "backward", ["f"], features={"flops": 1e9})
    plan.save(tmp_path / "p.json")
    assert main(["sim", str(tmp_path / "p.json"), "--hardware", str(path)]) == 0
    capsys.readouterr()


def _tree(table: dict) -> dict:
    return table["cost_model"]["phases"]["backward"]["H100"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda t: t["cost_model"]["phases"]["forward"]["H100"].update(per_flop=float("nan")),
            "cost_model.phases.forward.H100.per_flop must be a finite number, got nan",
        ),
        (
            lambda t: t["cost_model"]["phases"]["forward"]["H100"].update(intercept=-1.0),
            "cost_model.phases.forward.H100.intercept must be at least 0",
        ),
        (
            lambda t: t["cost_model"]["phases"]["forward"].update(H100=[1]),
            "cost_model.phases.forward.H100 must be a table",
        ),
        (
            lambda t: t["cost_model"]["phases"].update(forward=3),
            "cost_model.phases.forward must be a table, got 3",
        ),
        (lambda t: t["cost_model"].update(phases=[1]), "cost_model.phases must be a table"),
        (
            lambda t: t["cost_model"]["fallback"]["default"].update(per_byte=float("inf")),
            "cost_model.fallback: coefficients.default.per_byte must be a finite number",
        ),
        (lambda t: t["cost_model"].update(fallback=1), "cost_model.fallback: coefficients must be a table"),
        (
            lambda t: t["cost_model"].update(transfer_overhead={"h2d": float("nan")}),
            "transfer_overhead.h2d (seconds) must be a finite number",
        ),
        (lambda t: t["cost_model"].update(colour=1), "cost_model: unknown field(s) colour"),
        (lambda t: t.update(cost_model=5), "profile has no [cost_model] table"),
        (lambda t: _tree(t).update(init=float("nan")), "backward.H100.init must be a finite number, got nan"),
        (
            lambda t: _tree(t).update(value=[0.0, float("nan"), 1.0]),
            "backward.H100.value[1] must be a finite number, got nan",
        ),
        (lambda t: _tree(t).update(value=[0.0]), "backward.H100: value has 1 nodes, feature has 3"),
        (lambda t: _tree(t).update(left=[0, -1, -1]), "backward.H100: node 0's children must come after it"),
        (
            lambda t: _tree(t).update(feature=[7, -2, -2]),
            "backward.H100.feature[0] must be from 0 to 3, got 7",
        ),
        (lambda t: _tree(t).update(roots=[5]), "backward.H100.roots[0] must be at most 2, got 5"),
        (lambda t: _tree(t).update(roots="0"), "backward.H100.roots must be a list"),
        (lambda t: _tree(t).update(log_target=1), "backward.H100.log_target must be true or false, got 1"),
        (lambda t: _tree(t).pop("threshold"), "backward.H100: missing field 'threshold'"),
        (
            lambda t: t["cluster"]["machines"][0].update(host_memory=float("nan")),
            "cluster: machines[0].host_memory: a size must be a finite number, got nan",
        ),
        (
            lambda t: t["cluster"]["links"][0].update(latency=float("nan")),
            "cluster: links[0].latency: a latency must be a finite number, got nan",
        ),
        (
            lambda t: t["cluster"]["links"][0].update(bandwidth_fitted="yes"),
            "cluster.links[0].bandwidth_fitted must be true or false, got 'yes'",
        ),
        (lambda t: t["cluster"].update(links=5), "cluster.links must be a list, got 5"),
        (lambda t: t.update(cluster=[1]), "cluster must be a table, got [1]"),
        (lambda t: t.update(format=5), "not a calibrated profile"),
    ],
)
def test_a_profile_with_nan_or_a_wrong_shape_is_one_line_naming_file_and_field(
    tmp_path, capsys, mutate, message
):
    from sim.calibrate.profile import load_profile
    from workbench.cli.main import main
    from workbench.errors import ConfigError

    table = _profile_table()
    mutate(table)
    path = _write_profile(tmp_path, table)
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert str(err.value).startswith(f"{path}") and message in str(err.value) and "\n" not in str(err.value)
    if table.get("format") == "gnnwb-profile/1":  # gnnwb sim reads it as a profile: the same line, status 2
        plan = Plan("p")
        plan.compute("f", "m0.gpu0", "forward", features={"seconds": 1})
        plan.save(tmp_path / "p.json")
        assert main(["sim", str(tmp_path / "p.json"), "--hardware", str(path)]) == 2
        err_line = capsys.readouterr().err.strip()
        assert err_line.count("\n") == 0 and message in err_line


def test_a_profile_link_that_is_not_a_table_is_named():
    from sim.calibrate.profile import profile_from_dict
    from workbench.errors import ConfigError

    table = _profile_table()
    table["cluster"]["links"][0] = 5  # no TOML writer makes this; a hand edit can
    with pytest.raises(ConfigError, match=r"^p.toml: cluster: links\[0\] must be a table, got 5$"):
        profile_from_dict(table, "p.toml")
