"""The shipped sampling examples load and sample; ``gnnwb sample`` prints sizes and rates, or a clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.config import load_config
from workbench.graph.datasets import load_dataset
from workbench.hardware import load_hardware
from workbench.strategies.sampling.base import check_block_invariants
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler
from workbench.strategies.sampling.bulk_matrix_plan import bulk_sampling_plan

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "sampling").glob("*.toml"))


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_samples(path: Path) -> None:
    cfg = load_config(path)
    sampler = cfg.strategy("sampling").build()
    # The example's own graph at a smaller scale keeps the test fast.
    graph = load_dataset(cfg.graph.name, scale=0.002, seed=cfg.graph.seed)
    rng = np.random.default_rng(cfg.seed)
    batch = min(cfg.training.batch_size, 64)
    batches = [rng.choice(graph.train_nids(), batch, replace=False) for _ in range(3)]
    if cfg.strategy("sampling").name == "locality-aware":
        sampler = sampler.with_cached(np.arange(graph.num_nodes) < graph.num_nodes // 5)
    layer_sizes = getattr(sampler, "layer_sizes", None)
    if layer_sizes:  # the example's layer size may exceed this tiny graph's neighborhoods
        sampler = type(sampler)(algorithm="ladies", layer_sizes=[8] * len(layer_sizes), bulk=sampler.bulk)
    mbs = sampler.sample_many(graph, batches, rng)
    for mb in mbs:
        check_block_invariants(mb)
        assert len(mb.blocks) == cfg.model.num_layers
    fanouts = getattr(sampler, "fanouts", None)
    if fanouts:
        assert len(fanouts) == cfg.model.num_layers
    if isinstance(sampler, BulkMatrixSampler):
        cluster = load_hardware(cfg.hardware.name)
        for mode, c in (("replicated", 1), ("partitioned-1.5d", 2)):
            result = bulk_sampling_plan(
                graph,
                batches,
                cluster,
                sampler=sampler,
                rng=rng,
                mode=mode,
                replication=c,
                devices=cluster.gpu_nodes()[:4],
            )
            result.plan.validate(cluster.nodes())


def run_sample(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["sample", "--graph", "er:n=300,deg=6", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_sizes_and_rate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_sample(
        capsys, "--sampler", "neighbor", "--fanouts", "4,3", "--batch", "16", "--batches", "5"
    )
    assert code == 0
    assert "sampler NeighborSampler(fanouts=[4, 3]), batch 16, 5 minibatches" in out
    lines = [
        line.split() for line in out.splitlines() if line[:1].isdigit() and not line.startswith("5 mini")
    ]
    assert [row[0] for row in lines] == ["0", "1"]
    assert float(lines[1][2].replace(",", "")) == 16.0  # the seeds are the last layer's destinations
    assert "minibatches/s" in out


@pytest.mark.parametrize(
    "args",
    [
        ("--sampler", "bulk-matrix", "--fanouts", "4,3", "--param", "bulk=4", "--param", 'spgemm="scipy"'),
        ("--sampler", "bulk-matrix", "--layer-sizes", "20", "--param", 'algorithm="ladies"'),
        ("--sampler", "ladies", "--layer-sizes", "20,20"),
        ("--sampler", "fastgcn", "--layer-sizes", "20"),
        ("--sampler", "full", "--layers", "2"),
        (
            "--sampler",
            "locality-aware",
            "--fanouts",
            "3",
            "--param",
            "cached=[0, 1, 2]",
            "--param",
            "factor=2.5",
        ),
    ],
    ids=lambda a: a[1] + ("-" + a[-1] if a[-2] == "--param" else ""),
)
def test_cli_each_sampler(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = run_sample(capsys, *args, "--batch", "8", "--batches", "3")
    assert code == 0, err
    assert "minibatches/s" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("--sampler", "nieghbor", "--fanouts", "2"),
            "unknown sampling strategy 'nieghbor'; valid: bulk-matrix, fastgcn, full",
        ),
        (("--sampler", "neighbor", "--fanouts", "2,0"), "--fanouts '2,0': need at least one layer, all >= 1"),
        (("--sampler", "neighbor", "--fanouts", "a"), "expected integers"),
        (("--sampler", "neighbor"), "missing parameter(s) fanouts"),
        (
            ("--sampler", "locality-aware", "--fanouts", "3", "--batch", "8"),
            "sampler 'locality-aware' needs the GPU's cache",
        ),
        (("--sampler", "ladies", "--layer-sizes", "5000", "--batch", "8"), "asks for 5000 vertices"),
        (("--sampler", "neighbor", "--fanouts", "2", "--batch", "0"), "--batch-size must be at least 1"),
        (
            ("--sampler", "neighbor", "--fanouts", "2", "--batch", "181"),
            "exceeds the graph's 180 training vertices",
        ),
    ],
)
def test_cli_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str) -> None:
    code, _, err = run_sample(capsys, *args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 or "generating" in err
