"""Calibration recovers known parameters from simulated traces, and refuses bad input clearly.

The synthetic traces come from the simulator itself: a hand-made two-machine cluster whose
links have chosen bandwidths and latencies (different from the "preset" calibration is
given), and plain ``LinearCostModel``s with chosen coefficients per phase. Transfers of
varied sizes run one at a time (each alone on its links, so time = latency + bytes /
bandwidth) with 0.5 % lognormal measurement noise; computes of varied, independent features
run with 0.5 % jitter. Calibration must recover every identifiable parameter within 2 %.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim import LinearCoefficients, LinearCostModel, simulate
from sim.calibrate import (
    CalibrationError,
    TraceSource,
    calibrate,
    features_from_plan,
    load_profile,
)
from workbench.errors import ConfigError
from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec
from workbench.plan import Plan

GB = 1e9
US = 1e-6
GPU = GPUSpec("TestGPU", 16 * 2**30, 10e12, 500e9)
NOISE = 0.005


def cluster(values: dict[str, tuple[float, float]], name: str = "calib-test") -> ClusterSpec:
    """Two machines: GPUs 0-2 under switch pcie0, GPU 3 under pcie1, NVLink between GPUs 0 and 1,
    a NIC on the root complex to the network. ``values``: per link kind, (bandwidth, latency)."""
    machines, links, transit = [], [], {"net": "network"}

    def link(a: str, b: str, kind: str) -> None:
        links.append(LinkSpec(a, b, values[kind][0], values[kind][1], kind))

    for i in range(2):
        m = MachineSpec(f"m{i}", (GPU,) * 4, 64 * 2**30, 8)
        machines.append(m)
        rc, host = f"m{i}.rc", m.host_node
        transit.update({rc: "root-complex", f"m{i}.pcie0": "pcie-switch", f"m{i}.pcie1": "pcie-switch"})
        transit[f"m{i}.nic"] = "nic"
        link(host, rc, "host")
        for s in (0, 1):
            link(rc, f"m{i}.pcie{s}", "pcie-uplink")
        for g, s in ((0, 0), (1, 0), (2, 0), (3, 1)):
            link(f"m{i}.pcie{s}", f"m{i}.gpu{g}", "pcie")
        link(f"m{i}.gpu0", f"m{i}.gpu1", "nvlink")
        link(rc, f"m{i}.nic", "nic")
        link(f"m{i}.nic", "net", "network")
    return ClusterSpec(name, tuple(machines), tuple(links), transit)


GIVEN = {  # what calibration is told (a preset)
    "host": (50 * GB, 0.0),
    "pcie-uplink": (8 * GB, 1 * US),
    "pcie": (10 * GB, 2 * US),
    "nvlink": (40 * GB, 1 * US),
    "nic": (20 * GB, 1 * US),
    "network": (3 * GB, 5 * US),
}
TRUE = {  # what the traces were generated with; the bottleneck of every route stays the same kind
    "host": (50 * GB, 0.8 * US),
    "pcie-uplink": (6.4 * GB, 1.7 * US),
    "pcie": (9.0 * GB, 2.6 * US),
    "nvlink": (33 * GB, 1.8 * US),
    "nic": (20 * GB, 1 * US),  # its latency always comes with the network's: kept as given
    "network": (2.4 * GB, 11 * US),
}
TRUE_COMPUTE = {  # per phase: (device model, coefficients, features that vary)
    "forward": (
        "TestGPU",
        LinearCoefficients(12 * US, 2.5, 1.6, 3e-10, 2e-9),
        ("flops", "bytes", "edges", "vertices"),
    ),
    "backward": (
        "TestGPU",
        LinearCoefficients(20 * US, 4.0, 2.2, 5e-10, 1e-9),
        ("flops", "bytes", "edges", "vertices"),
    ),
    "gather_local": ("TestGPU", LinearCoefficients(8 * US, 0.0, 1.3, 0.0, 5e-10), ("bytes", "vertices")),
    "update": ("TestGPU", LinearCoefficients(50 * US, 0.0, 1.1, 0.0, 0.0), ("bytes",)),
    "sample": ("cpu", LinearCoefficients(150 * US, 0.0, 0.0, 1.2e-7, 3e-7), ("edges", "vertices")),
}
RANGES = {"flops": (1e6, 1e10), "bytes": (1e5, 1e9), "edges": (1e3, 1e7), "vertices": (1e2, 1e6)}
ROUTES = [  # (src, dst): every leg group of the cluster
    ("m0.host", "m0.gpu0"),
    ("m0.gpu2", "m0.host"),
    ("m0.host", "m0.gpu3"),
    ("m0.gpu0", "m0.gpu2"),
    ("m0.gpu1", "m0.gpu3"),
    ("m0.gpu0", "m0.gpu1"),
    ("m0.host", "m1.host"),
    ("m1.gpu3", "m0.gpu2"),
]
RINGS = [  # all-reduces: rings of GPUs within a machine (PCIe) and across machines (network)
    ["m0.gpu0", "m0.gpu2", "m0.gpu3"],
    ["m0.gpu0", "m1.gpu0"],
    ["m0.gpu0", "m1.gpu0", "m1.gpu2"],
]
SIZES = [0, 64, 4096] + [int(4**k * 1024) for k in range(2, 11)]


def transfer_source(rng: np.random.Generator) -> TraceSource:
    plan = Plan("transfers")
    last: list[str] = []
    for rep in range(3):
        for src, dst in ROUTES:
            for size in SIZES:
                tid = f"r{rep}.{src}-{dst}.{size}"
                plan.transfer(tid, src, dst, size, "h2d", last)
                last = [tid]
        for devices in RINGS:
            for size in SIZES[3::2]:
                tid = f"r{rep}.ring{RINGS.index(devices)}.{size}"
                plan.collective(tid, "allreduce", devices, size, "allreduce", last)
                last = [tid]
    trace = simulate(plan, cluster(TRUE)).trace.sort_values(["start", "device"]).reset_index(drop=True)
    # Measurement noise: each task's duration scaled by a mean-one lognormal factor (a collective's
    # rows, one per device, alike); tasks kept apart.
    tasks = trace["task"].drop_duplicates().to_numpy()
    first = trace.groupby("task", sort=False)[["start", "end"]].first().loc[tasks]
    duration = (first["end"] - first["start"]).to_numpy() * np.exp(
        NOISE * rng.standard_normal(len(tasks)) - NOISE**2 / 2
    )
    start = np.cumsum(np.concatenate([[0.0], duration[:-1]])) + 1e-3 * np.arange(len(tasks))
    at = pd.Series(np.arange(len(tasks)), index=tasks)[trace["task"]].to_numpy()
    trace["ready"] = trace["start"] = start[at]
    trace["end"] = start[at] + duration[at]
    return TraceSource("transfers.parquet", trace, None, "synthetic")


def compute_source(phase: str, rng: np.random.Generator, n: int = 160) -> TraceSource:
    model, coefficients, varied = TRUE_COMPUTE[phase]
    plan = Plan(phase)
    device = "m0.host" if model == "cpu" else "m0.gpu0"
    for i in range(n):
        features = {f: float(np.exp(rng.uniform(*np.log(RANGES[f])))) for f in varied}
        plan.compute(f"{phase}{i}", device, phase, [f"{phase}{i - 1}"] if i else [], features=features)
    costs = LinearCostModel({model: coefficients, "default": coefficients})
    result = simulate(plan, cluster(TRUE), cost_model=costs, seed=int(rng.integers(1 << 30)), jitter=NOISE)
    return TraceSource(
        f"{phase}.parquet", result.trace, features_from_plan(result.trace, plan, phase), "synthetic"
    )


@pytest.fixture(scope="module")
def sources() -> list[TraceSource]:
    rng = np.random.default_rng(7)
    return [transfer_source(rng), *(compute_source(p, rng) for p in TRUE_COMPUTE)]


@pytest.fixture(scope="module")
def profile(sources, tmp_path_factory):
    written = calibrate(sources, cluster(GIVEN)).write(tmp_path_factory.mktemp("profile") / "profile.toml")
    return load_profile(written)  # everything below is checked on the profile as read back


def close(got: float, want: float) -> bool:
    return abs(got - want) <= 0.02 * abs(want)


def test_recovers_link_bandwidths_and_latencies_within_2_percent(profile):
    links = profile.data["links"]
    for kind in ("pcie-uplink", "pcie", "nvlink", "network"):
        bandwidth, latency = TRUE[kind]
        assert links[kind]["bandwidth_fitted"] and links[kind]["latency_fitted"], kind
        assert close(links[kind]["bandwidth"], bandwidth), (kind, links[kind]["bandwidth"], bandwidth)
        assert close(links[kind]["latency"], latency), (kind, links[kind]["latency"], latency)
    assert close(links["host"]["latency"], TRUE["host"][1])
    # All-reduce rings are fitted with the transfers, as their own direction.
    for kind in ("network", "pcie-uplink"):
        assert close(links[kind]["directions"]["allreduce"]["bandwidth"], TRUE[kind][0]), kind
    # Never a bottleneck: the given bandwidth is kept, and marked so; the NIC's latency cannot be told apart.
    assert not links["host"]["bandwidth_fitted"] and not links["nic"]["bandwidth_fitted"]
    assert not links["nic"]["latency_fitted"]
    for link, flags in zip(profile.cluster.links, profile.data["cluster"]["links"], strict=True):
        bandwidth, latency = TRUE[link.kind]
        if flags["bandwidth_fitted"]:
            assert close(link.bandwidth, bandwidth)
        else:
            assert link.bandwidth == GIVEN[link.kind][0]
        assert (
            close(link.latency, latency) if flags["latency_fitted"] else link.latency == GIVEN[link.kind][1]
        )


def test_recovers_compute_coefficients_within_2_percent(profile):
    for phase, (model, want, _) in TRUE_COMPUTE.items():
        got = profile.cost_model.phases[phase][model]
        assert isinstance(got, LinearCoefficients), phase  # the linear model wins on linear data
        for name in ("intercept", "per_flop", "per_byte", "per_edge", "per_vertex"):
            w, g = getattr(want, name), getattr(got, name)
            assert (g == 0.0) if w == 0 else close(g, w), (phase, name, g, w)
    sampling = profile.data["sampling"]["cpu"]
    assert close(sampling["per_minibatch"], TRUE_COMPUTE["sample"][1].intercept)
    assert close(sampling["per_edge"], TRUE_COMPUTE["sample"][1].per_edge)


def test_profile_records_fit_quality_and_provenance(profile):
    fit = profile.data["fit"]["compute"]["forward"]["TestGPU"]
    assert fit["r2"] > 0.99 and fit["residual_median_abs"] < 0.02 and fit["model"] == "linear"
    assert fit["heldout_linear"] < fit["heldout_trees"]
    assert set(fit["stderr"]) == {"intercept", "per_flop", "per_byte", "per_edge", "per_vertex"}
    assert profile.data["links"]["pcie"]["directions"]["d2d"]["r2"] > 0.99
    prov = profile.data["provenance"]
    assert prov["traces"][0] == "transfers.parquet" and len(prov["sha256"][0]) == 64
    assert {"python", "numpy", "scikit-learn"} <= set(prov["libraries"]) and prov["workbench"]


def test_the_calibrated_profile_reproduces_the_traces(profile, sources):
    """Simulating the same plans on the profile predicts the measured times (within the noise)."""
    plan = Plan("check")
    plan.transfer("a", "m0.host", "m0.gpu0", 50_000_000, "h2d")
    plan.transfer("b", "m1.gpu3", "m0.gpu2", 50_000_000, "h2d", ["a"])
    plan.compute(
        "c", "m0.gpu0", "forward", ["b"], features={"flops": 1e9, "bytes": 1e8, "edges": 1e6, "vertices": 1e5}
    )
    want = simulate(
        plan, cluster(TRUE), cost_model=LinearCostModel({"TestGPU": TRUE_COMPUTE["forward"][1]})
    ).trace
    got = simulate(plan, profile.cluster, cost_model=profile.cost_model).trace
    assert np.allclose(
        (got["end"] - got["start"]).to_numpy(), (want["end"] - want["start"]).to_numpy(), rtol=0.02
    )


# ---- the command line, and bad input ------------------------------------------------------------
def _write(folder, name: str, trace: pd.DataFrame, hardware: str | None = "synthetic", features=None):
    """A trace file as the CLI reads it: ``hardware`` and ``feature_*`` columns beside the schema's."""
    from workbench.trace import write_trace

    df = trace.copy()
    if hardware is not None:
        df["hardware"] = hardware
    if features is not None:
        for f in ("flops", "bytes", "edges", "vertices"):
            df[f"feature_{f}"] = features[f].fillna(0.0).to_numpy()
    return str(write_trace(df, folder / name))


@pytest.fixture(scope="module")
def files(sources, tmp_path_factory):
    folder = tmp_path_factory.mktemp("traces")
    hardware = folder / "given.toml"
    hardware.write_text(cluster(GIVEN).to_toml())
    paths = [
        _write(folder, s.name, s.trace, features=s.features if "feature" not in s.name else None)
        for s in sources
    ]
    return folder, str(hardware), paths


def run_cli(argv, capsys):
    from workbench.cli.main import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_writes_a_profile_that_gnnwb_sim_accepts(files, tmp_path, capsys):
    folder, hardware, paths = files
    out = tmp_path / "profile.toml"
    code, text, err = run_cli(["calibrate", *paths, "-o", str(out), "--hardware", hardware], capsys)
    assert code == 0, err
    assert "pcie-uplink" in text and "sampling on cpu" in text and out.exists()
    profile = load_profile(out)
    assert close(profile.data["links"]["pcie"]["bandwidth"], TRUE["pcie"][0])
    plan = Plan("one", meta={"hardware": str(out)})
    plan.transfer("a", "m0.host", "m0.gpu0", 10**8, "h2d")
    plan.compute("s", "m0.host", "sample", ["a"], features={"edges": 1e6, "vertices": 1e5})
    plan.save(tmp_path / "plan.json")
    code, text, err = run_cli(["sim", str(tmp_path / "plan.json"), "--hardware", str(out)], capsys)
    assert code == 0, err
    _, coeffs, _ = TRUE_COMPUTE["sample"]
    expected = TRUE["host"][1] + TRUE["pcie-uplink"][1] + TRUE["pcie"][1] + 1e8 / TRUE["pcie-uplink"][0]
    expected += coeffs.intercept + 1e6 * coeffs.per_edge + 1e5 * coeffs.per_vertex
    makespan = float(text.split("makespan:")[1].split("(")[1].split(" s")[0])
    assert makespan == pytest.approx(expected, rel=0.01)


def test_a_folder_is_every_trace_under_it(files, tmp_path, capsys):
    folder, hardware, _ = files
    code, _, err = run_cli(
        ["calibrate", str(folder), "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys
    )
    assert code != 0 and "no trace.parquet under" in err  # the files here have other names
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trace.parquet").write_bytes((folder / "transfers.parquet").read_bytes())
    code, _, err = run_cli(
        ["calibrate", str(tmp_path), "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys
    )
    assert code == 0, err
    assert load_profile(tmp_path / "p.toml").data["provenance"]["traces"] == [
        str(tmp_path / "run" / "trace.parquet")
    ]


def _one_line_error(argv, capsys) -> str:
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    return err


def test_traces_from_different_hardware_are_refused_unless_asked(sources, files, tmp_path, capsys):
    folder, hardware, paths = files
    other = _write(tmp_path, "gpu.parquet", sources[0].trace, hardware="cuda: NVIDIA H100")
    err = _one_line_error(
        ["calibrate", paths[0], other, "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys
    )
    assert (
        "different hardware" in err and paths[0] in err and "gpu.parquet" in err and "--mixed-hardware" in err
    )
    code, _, err = run_cli(
        [
            "calibrate",
            paths[0],
            other,
            "-o",
            str(tmp_path / "p.toml"),
            "--hardware",
            hardware,
            "--mixed-hardware",
        ],
        capsys,
    )
    assert code == 0, err
    assert load_profile(tmp_path / "p.toml").data["provenance"]["mixed_hardware"] is True


def test_an_empty_trace_is_an_error_naming_it(files, tmp_path, capsys):
    from workbench.trace import make_trace, write_trace

    _, hardware, _ = files
    empty = str(write_trace(make_trace([]), tmp_path / "empty.parquet"))
    err = _one_line_error(
        ["calibrate", empty, "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys
    )
    assert "empty.parquet: empty trace" in err


def test_a_phase_calibration_does_not_know_is_an_error_naming_it(sources, files, tmp_path, capsys):
    _, hardware, _ = files
    trace = sources[0].trace.copy()
    trace.loc[3, "phase"] = "spmm"
    bad = _write(tmp_path, "odd.parquet", trace)
    err = _one_line_error(["calibrate", bad, "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys)
    assert "odd.parquet: phase 'spmm' is not one calibration knows" in err


def test_too_few_rows_to_fit_a_parameter_is_an_error_naming_the_trace_and_the_parameter(
    sources, files, tmp_path, capsys
):
    _, hardware, _ = files
    transfers = sources[0].trace
    h2d = transfers[(transfers["src"] == "m0.host") & (transfers["dst"] == "m0.gpu0")].head(2)
    few = _write(tmp_path, "two-copies.parquet", h2d)
    err = _one_line_error(["calibrate", few, "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys)
    assert (
        "two-copies.parquet" in err and "bandwidth of pcie-uplink links (h2d)" in err and "at least 3" in err
    )
    forward = next(s for s in sources if s.name == "forward.parquet")
    rows = forward.trace.head(4)
    few = _write(tmp_path, "four-layers.parquet", rows, features=forward.features.head(4))
    err = _one_line_error(["calibrate", few, "-o", str(tmp_path / "p.toml"), "--hardware", hardware], capsys)
    assert "four-layers.parquet" in err and "phase 'forward' on TestGPU" in err and "per_flop" in err


def test_a_node_the_hardware_lacks_is_an_error_naming_the_trace(files, tmp_path, capsys):
    _, _, paths = files
    err = _one_line_error(
        ["calibrate", paths[0], "-o", str(tmp_path / "p.toml"), "--hardware", "h100-1x"], capsys
    )
    assert "transfers.parquet" in err and "is not in hardware 'h100-1x'" in err


# ---- the cost model's parts -------------------------------------------------------------------
def forward_rows(name: str, edges: np.ndarray, seconds: np.ndarray) -> TraceSource:
    """One forward kernel per iteration on m0.gpu0, of ``edges`` edges taking ``seconds``."""
    n = len(edges)
    trace = pd.DataFrame(
        {
            "run_id": name, "worker": 0, "device": "m0.gpu0", "iteration": np.arange(n), "phase": "forward",
            "ready": np.arange(float(n)), "start": np.arange(float(n)), "end": np.arange(float(n)) + seconds,
            "bytes": 0, "items": edges.astype(int), "kind": "compute",
        }
    )  # fmt: skip
    features = pd.DataFrame({"flops": 0.0, "bytes": 0.0, "edges": edges, "vertices": 0.0})
    return TraceSource(name, trace, features, "synthetic")


def test_trees_are_kept_when_the_cost_is_clearly_not_linear(tmp_path):
    """A step in cost (a kernel that switches algorithm at 1e5 edges) defeats the linear model."""
    rng = np.random.default_rng(3)
    edges = np.exp(rng.uniform(np.log(1e3), np.log(1e7), 200))
    seconds = np.where(edges < 1e5, 1e-4, 5e-3) * np.exp(0.01 * rng.standard_normal(200))
    profile = calibrate([forward_rows("steps", edges, seconds)], cluster(GIVEN))
    q = profile.data["fit"]["compute"]["forward"]["TestGPU"]
    assert q["model"] == "trees" and q["heldout_trees"] < 0.9 * q["heldout_linear"]
    read = load_profile(profile.write(tmp_path / "trees.toml"))
    plan = Plan("p")
    for k, e in enumerate((2e3, 5e4, 2e5, 5e6)):
        plan.compute(f"c{k}", "m0.gpu0", "forward", features={"edges": e})
    got = simulate(plan, read.cluster, cost_model=read.cost_model).trace.sort_values("task")
    assert np.allclose((got["end"] - got["start"]).to_numpy(), [1e-4, 1e-4, 5e-3, 5e-3], rtol=0.05)


def test_trees_correct_the_linear_model_so_a_larger_task_still_costs_more(tmp_path):
    """Cost linear in edges with a kernel twice as slow from 1e5 edges on (1e3-1e6 edges fitted): the
    trees are kept; a task of 1e7 edges, beyond anything fitted, follows the law (about 20 ms) where
    trees alone would stay at the largest fitted task's 2.2 ms."""
    rng = np.random.default_rng(5)
    edges = np.exp(rng.uniform(np.log(1e3), np.log(1e6), 300))
    law = lambda e: (1e-4 + 1e-9 * e) * np.where(e >= 1e5, 2.0, 1.0)  # noqa: E731
    seconds = law(edges) * np.exp(0.01 * rng.standard_normal(300))
    profile = load_profile(
        calibrate([forward_rows("big", edges, seconds)], cluster(GIVEN)).write(tmp_path / "t.toml")
    )
    assert profile.data["fit"]["compute"]["forward"]["TestGPU"]["model"] == "trees"
    plan = Plan("p")
    for k, e in enumerate((1e6, 1e7)):
        plan.compute(f"c{k}", "m0.gpu0", "forward", features={"edges": e})
    got = simulate(plan, profile.cluster, cost_model=profile.cost_model).trace.sort_values("task")
    at_1e6, at_1e7 = (got["end"] - got["start"]).to_numpy()
    assert at_1e6 == pytest.approx(law(np.array(1e6)), rel=0.1)
    assert at_1e7 == pytest.approx(law(np.array(1e7)), rel=0.25)


def test_phase_cost_model_in_bulk_equals_one_by_one(profile):
    plan = Plan("mixed")
    rng = np.random.default_rng(0)
    for i in range(40):
        phase = list(TRUE_COMPUTE)[i % 5]
        device = "m0.host" if phase == "sample" else f"m{i % 2}.gpu{i % 4}"
        feats = {f: float(rng.uniform(1, 1e6)) for f in ("flops", "bytes", "edges", "vertices")}
        plan.compute(f"t{i}", device, "other" if i % 7 == 0 else phase, features=feats)
    model, c = profile.cost_model, profile.cluster
    bulk = model.seconds_many(plan.tasks, c)
    assert bulk.tolist() == [model.seconds(t, c) for t in plan.tasks]
    # A phase the profile did not fit takes the fallback coefficients.
    other = [t for t in plan.tasks if t.phase == "other"][0]
    assert model.seconds(other, c) == LinearCostModel().seconds(other, c)


TINY = """
name = "tiny-calibrated"
[graph]
name = "er:n=600,deg=8"
[hardware]
name = "{hardware}"
profile = "{profile}"
[model]
name = "sage"
hidden = 16
[training]
batch_size = 32
iterations = 4
workers = 2
[partition]
name = "random"
[sampling]
name = "neighbor"
fanouts = [5, 5]
"""


def test_a_configuration_applies_its_profile(profile, files, tmp_path, capsys):
    """[hardware] profile: the configuration's own hardware gets the fitted links, and gnnwb sim the cost model."""
    from workbench.config import load_config
    from workbench.run import apply_profile, prepare_run
    from workbench.trace import read_trace

    _, hardware, _ = files
    path = tmp_path / "p.toml"
    path.write_text(profile.to_toml())
    applied, table = apply_profile(cluster(GIVEN), str(path), "test")
    for link, want in zip(applied.links, profile.cluster.links, strict=True):
        assert link.bandwidth == pytest.approx(want.bandwidth, rel=1e-12) and link.latency == want.latency
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.format(hardware=hardware, profile=path))
    code, _, err = run_cli(["sim", str(config), "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    prepared = prepare_run(load_config(config))
    assert prepared.cost_model == table and prepared.cluster == applied
    features = {t.id: t.features for t in prepared.plan().tasks}
    trace = read_trace(tmp_path / "run" / "trace.parquet")
    sample = trace[trace["phase"] == "sample"]
    _, true, _ = TRUE_COMPUTE["sample"]
    want = [
        true.intercept + true.per_edge * features[t]["edges"] + true.per_vertex * features[t]["vertices"]
        for t in sample["task"]
    ]
    assert np.allclose((sample["end"] - sample["start"]).to_numpy(), want, rtol=0.02)
    # A run folder calibrates without --hardware (its config.toml names it) and with the plan rebuilt
    # for the compute features; the workers' concurrent host-to-GPU copies share the uplink: left out.
    code, _, err = run_cli(["calibrate", str(tmp_path / "run"), "-o", str(tmp_path / "again.toml")], capsys)
    assert code == 0, err
    again = load_profile(tmp_path / "again.toml")
    assert again.data["provenance"]["measured_on"] == [f"simulated: {hardware}"]
    assert close(again.data["sampling"]["cpu"]["per_edge"], true.per_edge)
    assert again.data["fit"]["skipped"]["links_overlapping"] > 0
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.format(hardware=hardware, profile=hardware))
    err = _one_line_error(["sim", str(bad), "--out", str(tmp_path / "run2")], capsys)
    assert "is not a calibrated profile" in err


# ---- fidelity ------------------------------------------------------------------------------------
def test_gaps_before_a_workers_activity_count_to_it():
    from sim.calibrate.sources import attribute_gaps

    trace = pd.DataFrame(
        {
            "run_id": "r", "worker": [0, 0, 0, 1], "phase": "forward",
            "ready": [0.0, 1.0, 1.0, 0.0], "start": [0.0, 1.5, 1.8, 0.5], "end": [1.0, 2.0, 2.5, 1.0],
        }
    )  # fmt: skip
    out = attribute_gaps(trace)
    # The second row waited 0.5 s after its worker's previous end: counted to it; the third overlapped
    # the second and keeps its start; worker 1's only row starts at its ready time.
    assert out["start"].tolist() == [0.0, 1.0, 1.8, 0.0]


def test_fidelity_table_keeps_signed_errors_per_phase_and_ranks_beyond_noise(tmp_path):
    from sim.calibrate.fidelity import Measured, compare, plot, summarize

    measured = {
        "a": Measured([1.00, 1.02, 0.98], [{"forward": 0.5, "allreduce": 0.5}] * 3),
        "b": Measured([2.0, 2.0, 2.0], [{"forward": 1.0, "allreduce": 1.0}] * 3),
        "c": Measured([2.05, 2.0, 1.95], [{"forward": 1.0, "allreduce": 1.0}] * 3),
    }
    predicted = {  # forward 20 % over and all-reduce 20 % under: the epoch is right, the phases are not
        "a": (1.0, {"forward": 0.6, "allreduce": 0.4}),
        "b": (2.2, {"forward": 1.2, "allreduce": 0.8}),
        "c": (1.9, {"forward": 1.2, "allreduce": 0.8}),
    }
    table = compare(measured, predicted, {k: {"workers": 2} for k in measured})
    summary = summarize(table)
    assert summary["epoch_median_abs_error"] == pytest.approx(0.05, rel=1e-9)
    assert summary["epoch_worst_abs_error"] == pytest.approx(0.1)
    assert summary["phases"]["forward"]["mean_error"] == pytest.approx(0.2)
    assert summary["phases"]["allreduce"]["mean_error"] == pytest.approx(-0.2)
    assert summary["epoch_median_spread"] == pytest.approx(0.04)
    # b and c differ by less than c's spread: not counted; a is ordered right against both.
    assert summary["ranking"] == {"pairs": 3, "within_noise": 1, "discordant": 0, "discordant_pairs": []}
    assert [p.name for p in plot(table, summary, tmp_path)] == ["scatter.png", "phase_errors.png"]


def test_fidelity_grid_holds_every_level_out_and_in():
    from studies.fidelity_experiment import grid

    points = grid([2, 4], quick=False)
    assert len(points) == 32 and sum(p.held_out for p in points) == 16
    for attr in ("scheme", "partition", "placement", "fanouts", "workers"):
        for level in {getattr(p, attr) for p in points}:
            assert {p.held_out for p in points if getattr(p, attr) == level} == {True, False}, (attr, level)


@pytest.mark.slow
def test_gnnwb_fidelity_end_to_end(tmp_path, capsys):
    """Four real configurations per half (two schemes), two runs each, on a small graph (about two minutes)."""
    argv = ["fidelity", "--out", str(tmp_path), "--quick", "--workers", "2", "--repeats", "2"]
    argv += ["--iterations", "3", "--batch", "32", "--graph", "sbm:n=2000,blocks=4,deg=6,feat=16"]
    code, text, err = run_cli(argv, capsys)
    assert code == 0, err
    for name in ("table.csv", "summary.json", "report.md", "scatter.png", "phase_errors.png", "profile.toml"):
        assert (tmp_path / name).exists(), name
    table = pd.read_csv(tmp_path / "table.csv")
    held_out = {
        "mc-random-none-f10-10-w2",
        "mc-metis-none-f5-5-w2",
        "hop-random-none-f5-5-w2",
        "hop-metis-none-f10-10-w2",
    }
    assert set(table["config"]) == held_out
    assert {"epoch", "forward", "backward", "allreduce"} <= set(table["quantity"])
    profile = load_profile(tmp_path / "profile.toml")
    traces = profile.data["provenance"]["traces"]
    calibrated_on = {p.split("/runs/")[1].split("/")[0] for p in traces if "/runs/" in p}
    assert any("/microbench/" in p for p in traces)  # the p2p and all-reduce microbenchmarks, by default
    assert calibrated_on == {  # never the held-out ones
        "mc-random-none-f5-5-w2", "mc-metis-none-f10-10-w2", "hop-random-none-f10-10-w2", "hop-metis-none-f5-5-w2"
    }  # fmt: skip


def test_relative_fit_of_noisy_rows_finds_the_mean_time_not_a_low_one():
    """Times with multiplicative noise (log-spread 0.45, mean 1, as a real run's exchanges show):
    weighting rows by their own measured time would fit about exp(-2 * 0.45**2) = 0.67 of the
    mean; weighting by the fit's prediction finds the mean (2,000 rows: its standard error is
    about 1%, so 4% is well outside chance)."""
    from sim.calibrate.regress import relative_nnls

    rng = np.random.default_rng(7)
    nbytes = rng.choice([1e5, 1e6, 4e6], size=2000)
    latency, per_byte = 1e-3, 1e-9
    sigma = 0.45
    noise = np.exp(rng.normal(-(sigma**2) / 2, sigma, size=nbytes.shape))
    y = (latency + per_byte * nbytes) * noise
    fit = relative_nnls(np.stack([np.ones_like(nbytes), nbytes], axis=1), y)
    assert fit.coef[0] == pytest.approx(latency, rel=0.04)
    assert fit.coef[1] == pytest.approx(per_byte, rel=0.04)


def exchange_source(rng: np.random.Generator, with_microbench: bool) -> TraceSource:
    """Host-to-host transfers over the network: a feature exchange (gather_remote, whose every
    transfer first pays OVERHEAD of protocol) and, optionally, bare point-to-point copies (phase
    "other", as the microbenchmark records them) over the same links."""
    plan = Plan("exchanges")
    last: list[str] = []
    phases = ["gather_remote", "other"] if with_microbench else ["gather_remote"]
    for rep in range(3):
        for phase in phases:
            for size in SIZES:
                tid = f"r{rep}.{phase}.{size}"
                src, dst = ("m1.host", "m0.host") if phase == "gather_remote" else ("m0.host", "m1.host")
                plan.transfer(tid, src, dst, size, phase, last)
                last = [tid]
    costs = LinearCostModel(transfer_overhead={"gather_remote": OVERHEAD})
    trace = simulate(plan, cluster(TRUE), cost_model=costs).trace
    return TraceSource("exchanges.parquet", trace, None, "synthetic")


OVERHEAD = 800 * US


def test_an_exchanges_fixed_cost_is_told_from_latency_by_point_to_point_rows(tmp_path):
    rng = np.random.default_rng(3)
    written = calibrate([exchange_source(rng, with_microbench=True)], cluster(GIVEN)).write(
        tmp_path / "p.toml"
    )
    profile = load_profile(written)
    assert close(profile.cost_model.transfer_overhead["gather_remote"], OVERHEAD)
    network = profile.data["links"]["network"]
    # Host, NIC and network links always come together on these routes: the host's and the NIC's
    # latencies keep the given values and the network's takes the rest of the route's.
    rest = TRUE["host"][1] - GIVEN["host"][1] + TRUE["nic"][1] - GIVEN["nic"][1]
    assert close(network["latency"], TRUE["network"][1] + rest)
    assert close(network["bandwidth"], TRUE["network"][0])
    # Simulated with the profile, an exchange takes its fixed cost again.
    plan = Plan("one")
    plan.transfer("x", "m1.host", "m0.host", 1 << 20, "gather_remote")
    bare = simulate(plan, profile.cluster).makespan
    assert simulate(plan, profile.cluster, cost_model=profile.cost_model).makespan - bare == pytest.approx(
        profile.cost_model.transfer_overhead["gather_remote"]
    )


def test_each_exchange_protocol_of_a_phase_gets_its_own_fixed_cost(tmp_path):
    """Two ways of exchanging gather_remote rows (a feature store's fetch, ``remote``, paying 800 us
    before each transfer; a pushed halo, ``halo``, paying 100 us), beside point-to-point rows over the
    same links: each protocol's cost is recovered, the phase gets their median (a protocol no trace
    used), and the profile simulates each with its own."""
    costs = {"gather_remote.remote": OVERHEAD, "gather_remote.halo": 100 * US}
    plan = Plan("protocols")
    last: list[str] = []
    for rep in range(3):
        for size in SIZES:
            for tid, src, dst, phase in (
                (f"i{rep}.w0.remote{size}.m1.host", "m1.host", "m0.host", "gather_remote"),
                (f"i{rep}.w0.halo{size}.from1", "m1.host", "m0.host", "gather_remote"),
                (f"p{rep}.{size}", "m0.host", "m1.host", "other"),
            ):
                plan.transfer(tid, src, dst, size, phase, last)
                last = [tid]
    trace = simulate(plan, cluster(TRUE), cost_model=LinearCostModel(transfer_overhead=costs)).trace
    profile = load_profile(
        calibrate([TraceSource("protocols.parquet", trace, None, "synthetic")], cluster(GIVEN)).write(
            tmp_path / "p.toml"
        )
    )
    fitted = profile.cost_model.transfer_overhead
    assert close(fitted["gather_remote.remote"], OVERHEAD) and close(fitted["gather_remote.halo"], 100 * US)
    assert fitted["gather_remote"] == pytest.approx(
        (fitted["gather_remote.remote"] + fitted["gather_remote.halo"]) / 2
    )
    one = Plan("one")
    one.transfer("i0.w0.halo0.from1", "m1.host", "m0.host", 1 << 20, "gather_remote")
    bare = simulate(one, profile.cluster).makespan
    assert simulate(one, profile.cluster, cost_model=profile.cost_model).makespan - bare == pytest.approx(
        fitted["gather_remote.halo"]
    )


def test_an_exchanges_protocol_and_its_overhead_are_read_from_its_id():
    from sim.costmodel import exchange_protocol, overhead_of, parse_transfer_overhead

    cases = {
        "i3.w1.remote.m0.host": "remote",
        "i3.w12.t2.remote.m0.host": "remote",
        "i0.w0.pregather.m1.host": "pregather",
        "i0.w0.halo1.from1": "halo",
        "i0.w1.halograd1.to0": "halograd",
        "i0.w1.ids-to-w0": "ids-to",
        "i0.w0.rows-from-w1": "rows-from",
        "i0.w0.m1.host": "",
    }
    assert {t: exchange_protocol(t) for t in cases} == cases
    table = parse_transfer_overhead({"gather_remote": 1.0, "gather_remote.halo": 0.25}, "p.toml")
    assert overhead_of(table, "gather_remote", "i0.w0.halo1.from1") == 0.25
    assert overhead_of(table, "gather_remote", "i0.w0.remote.m1.host") == 1.0  # no entry of its own
    assert overhead_of(table, "d2d", "i0.w0.halo1.from1") == 0.0
    with pytest.raises(ConfigError, match=r"^p\.toml: transfer_overhead\.gather_remot: unknown phase"):
        parse_transfer_overhead({"gather_remot.halo": 1.0}, "p.toml")


def test_without_other_rows_an_exchanges_fixed_cost_stays_in_the_latency():
    links = calibrate([exchange_source(np.random.default_rng(3), with_microbench=False)], cluster(GIVEN))
    assert "gather_remote" not in links.cost_model.transfer_overhead
    assert any("cannot tell its fixed cost per call" in n for n in links.data["fit"]["notes"])


CALL_COST = 300 * US  # an all-reduce's fixed work per call (a one-rank gloo call: about 0.4 ms)


def collective_source(one_device: bool) -> TraceSource:
    """All-reduces over rings of 2 and 3 GPUs (and, if ``one_device``, on one GPU), each call first
    paying CALL_COST, beside point-to-point copies over the same links (as the microbenchmark)."""
    plan = Plan("collectives")
    last: list[str] = []
    rings = [*RINGS, ["m1.gpu2"]] if one_device else RINGS
    for rep in range(3):
        for size in SIZES[3::2]:
            for src, dst in ROUTES:
                tid = f"p{rep}.{src}-{dst}.{size}"
                plan.transfer(tid, src, dst, size, "other", last)
                last = [tid]
            for k, devices in enumerate(rings):
                tid = f"i{rep}.ring{k}.{size}.allreduce"
                plan.collective(tid, "allreduce", devices, size, "allreduce", last)
                last = [tid]
    costs = LinearCostModel(transfer_overhead={"allreduce": CALL_COST})
    return TraceSource(
        "collectives.parquet", simulate(plan, cluster(TRUE), cost_model=costs).trace, None, "synthetic"
    )


def test_one_device_all_reduces_tell_a_calls_fixed_cost_from_the_rings_latency(tmp_path):
    profile = load_profile(
        calibrate([collective_source(one_device=True)], cluster(GIVEN)).write(tmp_path / "p.toml")
    )
    assert close(profile.cost_model.transfer_overhead["allreduce"], CALL_COST)
    for kind in ("pcie-uplink", "pcie", "nvlink"):
        assert close(profile.data["links"][kind]["latency"], TRUE[kind][1]), kind
    # Simulated with the profile: a one-GPU all-reduce takes the call's cost, where it took nothing.
    plan = Plan("one")
    plan.collective("i0.allreduce", "allreduce", ["m0.gpu0"], 1 << 20, "allreduce")
    assert simulate(plan, profile.cluster).makespan == 0.0
    assert simulate(plan, profile.cluster, cost_model=profile.cost_model).makespan == pytest.approx(
        profile.cost_model.transfer_overhead["allreduce"]
    )


def test_a_calls_fixed_cost_comes_before_a_rings_steps_and_adds_to_them():
    ring = Plan("ring")
    ring.collective("i0.allreduce", "allreduce", ["m0.gpu0", "m0.gpu2", "m0.gpu3"], 1 << 20, "allreduce")
    bare = simulate(ring, cluster(TRUE)).makespan
    costs = LinearCostModel(transfer_overhead={"allreduce": CALL_COST})
    assert simulate(ring, cluster(TRUE), cost_model=costs).makespan == pytest.approx(bare + CALL_COST)


def test_without_one_device_rows_a_calls_cost_is_told_by_rings_of_two_sizes(tmp_path):
    """Rings of 2 and 3 GPUs take 2 and 4 steps: with the point-to-point rows pinning the links'
    latency, the fixed cost per call is what the steps leave, recovered as well."""
    links = calibrate([collective_source(one_device=False)], cluster(GIVEN))
    assert close(links.cost_model.transfer_overhead["allreduce"], CALL_COST)


def test_a_measured_exchange_and_collective_are_fitted_to_their_last_end() -> None:
    """Rows of one exchange (same run, iteration, phase, task without worker and source) and of one
    collective end with their last row in a measured trace; a simulated trace is left as it is."""
    from types import SimpleNamespace

    from sim.calibrate.links import exchange_of, transfer_rows

    assert exchange_of("i3.w1.remote.m0.host") == "i3.remote"
    assert exchange_of("i3.w12.t2.remote.m0.host") == "i3.t2.remote"
    assert exchange_of("i3.w0.pregather.m1.host") == "i3.pregather"
    # ROC's halo rows of one layer are one exchange, the next layer's another (not one per iteration)
    assert exchange_of("i0.w0.halo0.from1") == exchange_of("i0.w1.halo0.from0") == "i0.halo0"
    assert exchange_of("i0.w1.halo1.from0") == "i0.halo1"
    assert exchange_of("i0.w0.ids-to-w1") == exchange_of("i0.w1.ids-to-w0") == "i0.ids-to"

    def row(task: str, it: int, phase: str, kind: str, end: float, device: str = "m0.gpu0") -> dict:
        src, dst = ("m1.host", "m0.gpu0") if kind == "transfer" else ("", "")
        return dict(run_id="r", task=task, iteration=it, phase=phase, kind=kind, src=src, dst=dst,
                    bytes=100, start=0.0, end=end, device=device, buffer_bytes=100)  # fmt: skip

    rows = [
        row("i0.w0.remote.m1.host", 0, "gather_remote", "transfer", 1.0),
        row("i0.w1.remote.m0.host", 0, "gather_remote", "transfer", 1.5),
        row("i1.w0.remote.m1.host", 1, "gather_remote", "transfer", 0.7),  # another iteration
        row("i0.w0.host.m0.host", 0, "h2d", "transfer", 0.2),  # not an exchange
        row("i0.allreduce", 0, "allreduce", "collective", 2.0, "m0.gpu0"),
        row("i0.allreduce", 0, "allreduce", "collective", 2.6, "m1.gpu0"),
    ]
    for executor, ends in (("real", [1.5, 1.5, 0.7, 0.2, 2.6, 2.6]), ("sim", [1.0, 1.5, 0.7, 0.2, 2.0, 2.6])):
        trace = pd.DataFrame(rows).assign(executor=executor)
        out = transfer_rows([SimpleNamespace(name="t", trace=trace)])
        assert out["end"].tolist() == ends, executor  # transfers in order, then the collective's rows


# ---- which epochs are fitted -------------------------------------------------------------------
def _epochs_source(executor: str, epochs: int):
    from sim.calibrate import TraceSource

    rows = [
        {
            "task": f"t{e}.{k}",
            "epoch": e,
            "executor": executor,
            "kind": "compute",
            "phase": "forward",
            "start": 0.0,
            "end": 1.0,
        }
        for e in range(epochs)
        for k in range(2)
    ]
    trace = pd.DataFrame(rows)
    features = pd.DataFrame({"edges": np.arange(len(trace), dtype=float)}, index=trace.index)
    return TraceSource("run/trace.parquet", trace, features)


def test_a_real_runs_first_epoch_is_left_out_by_default_and_said_so():
    from sim.calibrate.sources import skip_epochs

    kept, line = skip_epochs(_epochs_source("real", 3), None)
    assert sorted(kept.trace["epoch"].unique()) == [1, 2]
    assert list(kept.features["edges"]) == [2.0, 3.0, 4.0, 5.0]  # each kept row's own features
    assert (
        line
        == "run/trace.parquet: epochs 1-2 fitted, 1 left out (by default for a real run's trace, its first epoch is cold)"
    )
    kept, _ = skip_epochs(_epochs_source("real", 3), 0)
    assert len(kept.trace) == 6
    kept, line = skip_epochs(_epochs_source("real", 3), 2)
    assert list(kept.trace["epoch"].unique()) == [2] and "--skip-epochs 2" in line


def test_a_simulated_trace_keeps_every_epoch_by_default():
    from sim.calibrate.sources import skip_epochs

    kept, line = skip_epochs(_epochs_source("sim", 2), None)
    assert len(kept.trace) == 4 and line.endswith("every epoch fitted (2)")


def test_a_trace_with_only_cold_epochs_is_one_line_naming_it():
    from sim.calibrate.sources import skip_epochs

    with pytest.raises(
        CalibrationError, match=r"run/trace.parquet: only cold epochs \(1 epoch\(s\), 1 left out"
    ):
        skip_epochs(_epochs_source("real", 1), None)


def test_transfers_of_one_size_leave_their_links_unfitted_with_a_note_not_an_error(sources, tmp_path):
    """A migrating run moves one model size between two workers: those rows cannot fit a bandwidth,
    but the rest of the trace still calibrates (here the only GPU-to-GPU copies over NVLink)."""
    transfers = sources[0].trace
    nvlink = (transfers["src"] == "m0.gpu0") & (transfers["dst"] == "m0.gpu1")
    biggest = transfers[nvlink]["bytes"].max()
    one_size = transfers[nvlink & (transfers["bytes"] == biggest)].head(2)
    mixed = TraceSource(
        "mixed.parquet", pd.concat([transfers[~nvlink], one_size], ignore_index=True), None, "synthetic"
    )
    profile = calibrate([mixed], cluster(GIVEN))
    assert (
        "mixed.parquet: 2 row(s) of 1 size(s) cannot fit the bandwidth of nvlink links (d2d) (need at least 3 rows "
        "of 2 or more sizes): left out, the hardware's bandwidth kept"
    ) in profile.data["fit"]["notes"]
    assert not profile.data["links"]["nvlink"]["bandwidth_fitted"]
    assert profile.data["links"]["pcie"]["bandwidth_fitted"]  # the rest still fits


def test_a_recorded_migrating_hopgnn_run_calibrates(tmp_path, capsys):
    """A migrating run's trace calibrates (issue 27: its model sends, all of one size, failed the
    fit in about half the repeats of the fidelity grid; the one-size case itself is the test above,
    which fails on the old code; five fresh repeats of this run all calibrate)."""
    from pathlib import Path

    from workbench.cli.main import main
    from workbench.trace import read_trace

    folder = Path(__file__).resolve().parents[1] / "data" / "hopgnn-migrating"
    trace = read_trace(folder / "trace.parquet")
    assert (trace["phase"] == "migrate").sum() >= 16 and trace["epoch"].nunique() == 3
    assert main(["calibrate", str(folder), "-o", str(tmp_path / "p.toml")]) == 0
    out = capsys.readouterr().out
    assert "epochs 1-2 fitted, 1 left out" in out
    profile = load_profile(tmp_path / "p.toml").data
    assert profile["links"]["network"]["bandwidth_fitted"]
    # The cold epoch left out, each compute task recurs in the two warm ones: its noise is fitted.
    noise = profile["noise"]
    assert noise["rows"] == 2 * noise["tasks"] and noise["tasks"] > 0
    assert 0 < noise["compute_jitter"] < 1


def test_iteration_times_run_from_one_completion_to_the_next():
    import pandas as pd

    from sim.calibrate.fidelity import iteration_times

    trace = pd.DataFrame(  # iteration 1 starts before iteration 0 ends (a prefetched sample)
        {"iteration": [0, 0, 1, 2], "start": [0.0, 0.1, 0.9, 2.5], "end": [0.4, 1.0, 2.5, 3.0]}
    )
    assert iteration_times(trace) == pytest.approx([1.0, 1.5, 0.5])
    assert sum(iteration_times(trace)) == pytest.approx(3.0)  # the epoch's span
    assert iteration_times(trace.iloc[:0]) == []


def test_fidelity_scores_iteration_tails_and_leaves_out_noisy_repeats():
    from sim.calibrate.fidelity import SPREAD_LIMIT, Measured, compare, summarize, tails_sentence

    straggler = [1.0, 1.0, 1.0, 1.0, 5.0]  # p50 1.0; p95 = 1 + 0.8 * (5 - 1) = 4.2 (linear)
    measured = {
        "a": Measured([9.0, 9.0], [{"forward": 9.0}] * 2, [straggler, straggler]),
        "b": Measured([1.0, 1.5, 1.0], [{"forward": 1.0}] * 3, [[1.0]] * 3),  # spread 50%
    }
    predicted = {"a": (9.9, {"forward": 9.0}, [1.0] * 5), "b": (1.0, {"forward": 1.0}, [1.0])}
    table = compare(measured, predicted, {})
    a = table[table["config"] == "a"].set_index("quantity")
    assert a.loc["iteration_p50", "measured_s"] == pytest.approx(1.0)
    assert a.loc["iteration_p95", "measured_s"] == pytest.approx(4.2)
    assert a.loc["iteration_p95", "error"] == pytest.approx((1.0 - 4.2) / 4.2)
    assert SPREAD_LIMIT < 0.5
    summary = summarize(table)
    assert summary["unreliable"] == ["b"] and not summary["every_unreliable"]
    # Only a is scored: its epoch is 10% over, its p95 76% under (the straggler the simulator lacks).
    assert summary["configurations"] == 1
    assert summary["epoch_median_abs_error"] == pytest.approx(0.1)
    assert summary["iterations"]["iteration_p95"]["median_abs_error"] == pytest.approx(3.2 / 4.2)
    assert "iteration_p95" not in summary["phases"] and "forward" in summary["phases"]
    text = tails_sentence(summary)
    assert "p95 iteration time |error| median 76.2%" in text and "unreliable" in text and ": b." in text
    everything_noisy = summarize(table[table["config"] == "b"])
    assert everything_noisy["every_unreliable"] and everything_noisy["configurations"] == 1
    assert "scored anyway" in tails_sentence(everything_noisy)
