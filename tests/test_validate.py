"""``gnnwb validate``: every real scheme from the registry, refusals before any work, a failed run
recorded beside the others, the summary and its page; the whole ``--device cpu`` run is slow-marked."""

from __future__ import annotations

import json
import time

import pytest

from studies import validate as v
from workbench.cli.main import main
from workbench.errors import ConfigError

SMALL_GRAPH = "sbm:n=1000,blocks=4,deg=6,feat=16"


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- which runs -----------------------------------------------------------------------------------
def test_every_real_scheme_and_memory_policy_has_a_validation_configuration():
    from realrun.schemes import REAL_EXECUTORS
    from workbench.registry import MEMORY_POLICIES

    chosen = v.cases()
    assert {c.scheme for c in chosen} == set(REAL_EXECUTORS.names())
    roc = {c.variant for c in chosen if c.scheme == "roc-fullgraph"}
    assert roc == {"resident", *MEMORY_POLICIES.names()}
    assert len({c.name for c in chosen}) == len(chosen)


def test_a_real_scheme_without_a_configuration_stops_validate_before_any_work(tmp_path, monkeypatch, capsys):
    """The next scheme given a real executor cannot be skipped silently: validate refuses to run."""
    from realrun.schemes import REAL_EXECUTORS

    names = REAL_EXECUTORS.names()
    monkeypatch.setattr(REAL_EXECUTORS, "names", lambda: [*names, "brand-new-scheme"])
    with pytest.raises(ConfigError, match="brand-new-scheme have no validation configuration"):
        v.validate(v.ValidateOptions("cpu", tmp_path / "out"))
    code, _, err = run_cli(["validate", "--device", "cpu", "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "brand-new-scheme" in one_error_line(err)
    assert not (tmp_path / "out").exists()


def test_a_configuration_of_a_scheme_that_does_not_run_for_real_is_left_out():
    real = [c.scheme for c in v.CASES if c.scheme != "p3"]
    assert "p3" not in {c.scheme for c in v.cases(real=real)}


def test_every_case_and_worker_count_is_in_both_halves():
    chosen = v.cases()
    points = v.run_points(chosen, (1, 2))
    assert len(points) == 2 * len(chosen)
    for case in chosen:
        assert {p.held_out for p in points if p.case == case} == {True, False}, case.name
    for workers in (1, 2):
        assert {p.held_out for p in points if p.workers == workers} == {True, False}
    # A scheme whose workers share one server (NeuGraph): on CPU its 2-worker run models them as
    # one machine's GPUs and is held out; its 1-worker run calibrates. On CUDA there is one cluster.
    server = v.Case("neugraph-like", one_machine=True)
    points = v.run_points([server, *chosen[:2]], (1, 2))
    assert [(p.name, p.held_out, p.hardware) for p in points[:2]] == [
        ("neugraph-like-w1", False, v.HARDWARE),
        ("neugraph-like-w2", True, v.ONE_MACHINE),
    ]
    assert all(p.hardware == v.HARDWARE for p in points[2:])
    assert all(p.hardware == v.HARDWARE for p in v.run_points([server], (1, 4), "cuda"))


def test_the_cases_configurations_load_on_one_and_two_workers(tmp_path):
    from studies.fidelity_experiment import hardware_toml
    from workbench.config import load_config

    hardware = tmp_path / "hardware.toml"
    hardware.write_text(hardware_toml(2))
    for case in v.cases():
        for workers in (1, 2):
            path = tmp_path / f"{case.name}-{workers}.toml"
            path.write_text(case.config(workers, hardware))
            config = load_config(path)
            assert config.training.workers == workers
    hop = next(c for c in v.CASES if c.scheme == "hopgnn")
    assert "merge = false" in hop.config(1, hardware) and "merge = true" in hop.config(2, hardware)


def test_the_device_budgets_grow_with_the_graph_as_its_bytes_do(tmp_path):
    # GRAPH (6,000 vertices x 64 floats, about 60,000 edges) doubled in vertices keeps its degree, so
    # its feature and edge bytes double: the scale is 2 within the generator's edge-count noise.
    # A smaller graph keeps GRAPH's budgets: they already fit it.
    from studies.fidelity_experiment import hardware_toml
    from workbench.config import load_config

    assert v.graph_memory_scale(v.GRAPH) == 1.0
    assert v.graph_memory_scale(SMALL_GRAPH) == 1.0
    doubled = v.graph_memory_scale("sbm:n=12000,blocks=8,deg=10,feat=64")
    assert 1.9 < doubled < 2.1, doubled
    hardware = tmp_path / "hardware.toml"
    hardware.write_text(hardware_toml(1))
    neugraph = next(c for c in v.CASES if c.scheme == "neugraph-stream")
    assert f'gpu_memory_bytes = "{v.CHUNK_KIB}KiB"' in neugraph.config(1, hardware)
    path = tmp_path / "neugraph.toml"
    path.write_text(neugraph.config(1, hardware, memory_scale=2.0))
    assert load_config(path).strategy("partition").params["gpu_memory_bytes"] == f"{2 * v.CHUNK_KIB}KiB"
    lru = next(c for c in v.cases(["roc-fullgraph"]) if c.variant == "lru")
    assert f'gpu_memory = "{2 * v.arena_kib(2)}KiB"' in lru.config(2, hardware, memory_scale=2.0)


# ---- refusals, before any work --------------------------------------------------------------------
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_device_cuda_without_a_gpu_is_refused_at_once_in_one_line(tmp_path, capsys):
    began = time.perf_counter()
    code, out, err = run_cli(["validate", "--device", "cuda", "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and time.perf_counter() - began < 10
    assert "--device cuda: this machine has no CUDA device" in one_error_line(err)
    assert out == "" and not (tmp_path / "out").exists()


def test_an_unknown_device_is_refused_in_one_line(tmp_path, capsys):
    code, _, err = run_cli(["validate", "--device", "tpu"], capsys)
    assert code == 2 and "invalid choice: 'tpu'" in one_error_line(err)
    code, _, err = run_cli(["validate"], capsys)
    assert code == 2 and "--device" in one_error_line(err)
    with pytest.raises(ConfigError, match="--device 'tpu'; allowed: cpu, cuda"):
        v.ValidateOptions("tpu", tmp_path).resolved()


def test_an_output_that_cannot_be_a_folder_is_refused_in_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, err = run_cli(["validate", "--device", "cpu", "--out", str(blocker)], capsys)
    assert code == 2 and "a-file" in one_error_line(err)
    code, _, err = run_cli(["validate", "--device", "cpu", "--out", str(blocker / "below")], capsys)
    assert code == 2 and "is a file" in one_error_line(err)
    with pytest.raises(ConfigError, match="is a file"):
        v.ValidateOptions("cpu", blocker).resolved()


def test_options_the_library_refuses(tmp_path):
    with pytest.raises(ConfigError, match="at least 2 epochs"):
        v.ValidateOptions("cpu", tmp_path, epochs=1).resolved()
    with pytest.raises(ConfigError, match="scheme.s. no-such do not run for real"):
        v.cases(["no-such"])
    opts = v.ValidateOptions("cpu", reports=tmp_path).resolved()
    assert opts.out == tmp_path / "traces" / "cpu" and opts.workers == (1, 2)


def test_worker_counts_schemes_and_time_limit_from_the_command_line_are_checked(tmp_path, capsys):
    code, _, err = run_cli(["validate", "--device", "cpu", "--workers", "1,two"], capsys)
    assert code == 2 and "--workers '1,two': give worker counts as integers" in one_error_line(err)
    code, _, err = run_cli(
        ["validate", "--device", "cpu", "--time-limit", "0", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "time limit per run must be positive" in one_error_line(err)
    code, _, err = run_cli(
        ["validate", "--device", "cpu", "--schemes", "no-such", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "no-such do not run for real" in one_error_line(err)
    assert not (tmp_path / "o" / "summary.json").exists()


# ---- the CUDA branch, as far as this machine can check it -----------------------------------------
class FakeProps:
    name = "NVIDIA H100 80GB HBM3"
    total_memory = 80 * 2**30


def test_the_cuda_hardware_and_folder_name_come_from_the_gpu(monkeypatch, tmp_path):
    import torch

    from studies.fidelity_experiment import hardware_toml
    from workbench.hardware import load_hardware

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: FakeProps())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: FakeProps.name)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert v.device_slug("cuda") == "nvidia-h100-80gb-hbm3" and v.device_slug("cpu") == "cpu"
    assert v.worker_counts("cuda") == (1, 4) and v.worker_counts("cpu") == (1, 2)
    path = tmp_path / "hw.toml"
    path.write_text(hardware_toml(4, "cuda"))
    cluster = load_hardware(str(path))
    assert len(cluster.machines) == 1 and len(cluster.machines[0].gpus) == 4
    assert cluster.machines[0].gpus[0].memory_bytes == 80 * 2**30
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert v.worker_counts("cuda") == (1,)


def test_the_cpu_page_says_the_cuda_branch_never_ran_until_a_cuda_summary_is_beside_it(tmp_path):
    out = tmp_path / "traces" / "cpu"
    out.mkdir(parents=True)
    branch = v.cuda_branch("cpu", out)
    assert not branch["has_run"] and "has never run" in branch["statement"]
    gpu = tmp_path / "traces" / "nvidia-h100-80gb-hbm3"
    gpu.mkdir()
    (gpu / "summary.json").write_text(json.dumps({"kind": v.KIND, "device": "cuda", "written": "2030-01-01"}))
    branch = v.cuda_branch("cpu", out)
    assert branch["has_run"] and "nvidia-h100-80gb-hbm3 (2030-01-01)" in branch["statement"]


# ---- a small validation, for real -----------------------------------------------------------------
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """model-centric and roc-fullgraph (resident) on one CPU worker each, a small graph, no
    microbenchmarks: one run calibrates, the other is held out (about 15 s)."""
    out = tmp_path_factory.mktemp("validate") / "out"
    lines: list[str] = []
    opts = v.ValidateOptions("cpu", out, ("model-centric", "roc-fullgraph"), (1,), 3, False, SMALL_GRAPH)
    original = v.memory_cases
    v.memory_cases = lambda policies: []  # resident only: the policies' arenas are sized for GRAPH
    try:
        summary = v.validate(opts, lines.append)
    finally:
        v.memory_cases = original
    return out, summary, lines


def test_a_small_validation_writes_its_summary_page_and_small_run_folders(small):
    out, summary, lines = small
    assert summary["passed"], summary["failures"]
    assert [(r["name"], r["half"], r["status"]) for r in summary["runs"]] == [
        ("model-centric-w1", "calibration", "ok"),
        ("roc-fullgraph-resident-w1", "held-out", "ok"),
    ]
    for run in summary["runs"]:
        assert run["bytes_match_plan"] and run["epochs"] == 3 and len(run["epoch_ms"]) == 3
        assert all(b["measured"] == b["planned"] for b in run["bytes"].values())
        folder = out / run["folder"]
        assert {p.name for p in folder.iterdir()} <= set(v.KEPT) and (folder / "trace.parquet").exists()
    assert summary["calibration"]["status"] == "ok" and (out / "profile.toml").exists()
    fidelity = summary["fidelity"]
    held_out = [r["name"] for r in fidelity["runs"]]
    assert fidelity["status"] == "ok" and held_out == ["roc-fullgraph-resident-w1"]
    assert json.loads((out / "summary.json").read_text()) == summary  # strict JSON: no NaN
    page = (out / "index.html").read_text()
    for needle in ("PASSED", "has never run", "model-centric-w1", "Fidelity of the held-out", "scatter.png"):
        assert needle in page, needle
    assert [line[:5] for line in lines if line.startswith("[")] == [f"[{k}/5]" for k in range(1, 6)]
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 2 * 2**20


def test_a_failing_run_is_recorded_and_the_others_are_kept(tmp_path, monkeypatch):
    """p3 refused while prepared (an imposed parameter set otherwise): its one-line error is in the
    summary, model-centric still ran, and validate does not pass."""
    broken = v.Case("p3", partition="random", execution="prefetch = 2\n")
    monkeypatch.setattr(v, "CASES", tuple(broken if c.scheme == "p3" else c for c in v.CASES))
    monkeypatch.setattr(v, "memory_cases", lambda policies: [])
    opts = v.ValidateOptions("cpu", tmp_path / "out", ("model-centric", "p3"), (1,), 2, False, SMALL_GRAPH)
    summary = v.validate(opts, lambda line: None)
    runs = {r["name"]: r for r in summary["runs"]}
    assert runs["model-centric-w1"]["status"] == "ok"
    assert runs["p3-w1"]["status"] == "failed" and "prefetch" in runs["p3-w1"]["error"]
    assert "\n" not in runs["p3-w1"]["error"]
    assert not summary["passed"]
    assert any(f.startswith("p3-w1: ") for f in summary["failures"])
    assert any(f.startswith("fidelity: ") for f in summary["failures"])  # its only held-out run failed
    assert "FAILED" in (tmp_path / "out" / "index.html").read_text()


def test_a_run_whose_bytes_differ_from_the_plan_does_not_pass(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.csv").write_text(
        "epoch,epoch_s,bytes_match_plan,measured_allreduce_bytes,planned_allreduce_bytes,"
        "measured_h2d_bytes,planned_h2d_bytes\n0,0.5,True,100,100,0,0\n1,0.25,False,90,100,0,0\n"
    )
    record = v.run_record(folder)
    assert record["status"] == "bytes differ" and not record["bytes_match_plan"]
    assert record["bytes"] == {"allreduce": {"measured": 90, "planned": 100}}
    assert record["error"] == "bytes per phase differ from the plan's: allreduce 90 vs 100"
    assert record["epoch_ms"] == [500.0, 250.0] and record["warm_epoch_ms"] == 250.0


# ---- the whole command ----------------------------------------------------------------------------
@pytest.mark.slow
def test_gnnwb_validate_device_cpu_end_to_end(tmp_path, capsys):
    """Every real scheme (and roc-fullgraph's memory policies) on 1 and 2 CPU workers, calibration,
    fidelity and the page, within the 15 minutes the issue allows (about 70 s on 2 cores)."""
    from realrun.schemes import REAL_EXECUTORS

    out = tmp_path / "cpu"
    began = time.perf_counter()
    code, text, err = run_cli(["validate", "--device", "cpu", "--out", str(out)], capsys)
    assert code == 0, text + err
    assert time.perf_counter() - began < 15 * 60
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] and summary["workers"] == [1, 2]
    ran = {(r["scheme"], r["workers"]) for r in summary["runs"] if r["status"] == "ok"}
    assert ran == {(s, w) for s in REAL_EXECUTORS.names() for w in (1, 2)}
    assert summary["fidelity"]["configurations"] == len(summary["runs"]) // 2
    assert "has never run" in text and "validate passed" in text
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 5 * 2**20
