"""The shipped placement examples load and place; ``gnnwb place`` prints sizes and hit rates, or clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.cli.common import parse_params
from workbench.cli.main import main
from workbench.cli.place import parse_capacity
from workbench.config import load_config
from workbench.errors import ConfigError
from workbench.graph.datasets import load_dataset
from workbench.hardware import load_hardware
from workbench.registry import SAMPLERS
from workbench.strategies.placement.base import PlacementRequest
from workbench.strategies.placement.probability import full_neighborhood_probability
from workbench.strategies.sampling.base import Sampler

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "placement").glob("*.toml"))


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_places(path: Path) -> None:
    cfg = load_config(path)
    placement = cfg.strategy("placement").build()
    # The example's own graph at a smaller scale keeps the test fast.
    graph = load_dataset(cfg.graph.name, scale=0.002, seed=cfg.graph.seed)
    cluster = load_hardware(cfg.hardware.name)
    prob = full_neighborhood_probability(graph, 1, cfg.training.batch_size)
    req = PlacementRequest(
        graph=graph,
        num_gpus=cluster.num_gpus,
        capacity=graph.num_nodes // 5,
        access_probability=prob,
        cluster=cluster,
    )
    result = placement.place(req)
    assert result.cache_sizes() == [graph.num_nodes // 5] * cluster.num_gpus
    rates = result.expected_hit_rate(prob)
    assert rates.mean_gpu > 0.2


def run_place(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["place", "--graph", "er:n=300,deg=6", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_sizes_and_hit_rates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_place(
        capsys, "--strategy", "song-jiang", "--gpus", "2", "--capacity", "30", "--param", "alpha=0.5",
        "--layers", "1", "--batch-size", "4",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert "capacity 30 vertices each" in lines[0]
    rows = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"])]
    assert [r[1] for r in rows] == ["30", "30"]
    local, peer, host = (float(x.rstrip("%")) for x in rows[0][2:5])
    assert local + peer + host == pytest.approx(100, abs=0.2)
    assert peer > 0  # Algorithm 1 spreads distinct vertices over the two GPUs
    code, out, _ = run_place(capsys, "--strategy", "degree", "--gpus", "3", "--capacity", "10%")
    assert code == 0 and "capacity 30 vertices each" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "lru", "--gpus", "2", "--capacity", "10"], "unknown placement strategy 'lru'; valid: degree"),
        (["--strategy", "song-jiang", "--gpus", "2", "--capacity", "10", "--param", "alpha=0"], "alpha must lie in (0, 1]"),
        (["--strategy", "song-jiang", "--gpus", "2", "--capacity", "10", "--param", "alpha=1.01"], "alpha must lie"),
        (["--strategy", "degree", "--gpus", "2", "--capacity", "301"], "larger than graph"),
        (["--strategy", "degree", "--gpus", "0", "--capacity", "10"], "--gpus must be at least 1"),
        (["--strategy", "degree", "--gpus", "2", "--capacity", "10", "--param", "colour=red"], "unknown parameter"),
        (["--strategy", "degree", "--gpus", "2", "--capacity", "120%"], "0%..100%"),
        (["--strategy", "degree", "--gpus", "2", "--capacity", "10", "--sampler", "no-such"], "unknown sampling"),
        (["--strategy", "fifo", "--gpus", "2", "--capacity", "10"], "give --sampler"),
        (["--strategy", "degree", "--gpus", "9", "--capacity", "10", "--hardware", "v100x8-nvswitch"], "has 8 GPUs"),
    ],
)  # fmt: skip
def test_cli_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run_place(capsys, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_cli_replays_a_dynamic_cache(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fanout_sampler: Sampler
) -> None:
    SAMPLERS.names()  # load the real samplers first, then add the test one beside them, for this test only
    monkeypatch.setitem(SAMPLERS._entries, "tiny-test", type(fanout_sampler))
    code, out, _ = run_place(
        capsys, "--strategy", "fifo", "--gpus", "2", "--capacity", "100", "--sampler", "tiny-test",
        "--fanouts", "3,3", "--batch-size", "16", "--epochs", "2",
    )  # fmt: skip
    assert code == 0
    assert "replayed" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["0"], ["1"])]
    assert [r[1] for r in rows] == ["100", "100"]
    assert all(float(r[2].rstrip("%")) > 0 for r in rows)


def test_parse_helpers() -> None:
    assert parse_params(["alpha=0.3", "mode=algorithm1", 'partitioner="metis"', "flag=true"]) == {
        "alpha": 0.3,
        "mode": "algorithm1",
        "partitioner": "metis",
        "flag": True,
    }
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_params(["alpha"])
    assert parse_capacity("25%", 1000, 100) == 250
    assert parse_capacity("1234", 1000, 100) == 1234
    assert parse_capacity("4kB", 1000, 100) == 10  # 100 floats = 400 bytes per vertex
    with pytest.raises(ConfigError):
        parse_capacity("-3", 1000, 100)
    np.testing.assert_equal(parse_capacity("0%", 7, 1), 0)
