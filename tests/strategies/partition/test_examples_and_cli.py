"""The shipped partition examples load and partition; ``gnnwb partition`` prints quality and time, or one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.cli.main import main
from workbench.config import load_config
from workbench.graph.datasets import load_dataset
from workbench.hardware import load_hardware

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "partition").glob("*.toml"))


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_partitions(path: Path) -> None:
    cfg = load_config(path)
    strategy = cfg.strategy("partition")
    assert strategy is not None
    partitioner = strategy.build()
    # The example's own graph at a smaller scale keeps the test fast.
    graph = load_dataset(cfg.graph.name, scale=0.002, seed=cfg.graph.seed)
    parts = load_hardware(cfg.hardware.name).num_gpus
    result = partitioner.partition(graph, parts, np.random.default_rng(cfg.seed))
    assert result.vertex_counts.sum() == graph.num_nodes
    assert result.vertex_counts.min() > 0
    if result.chunk_grid is not None:
        assert result.chunk_grid.num_chunks % parts == 0


def run_partition(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["partition", "--graph", "er:n=300,deg=6", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_quality_and_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "owner.npy"
    code, out, _ = run_partition(capsys, "--strategy", "equal-vertex", "--parts", "3", "--out", str(out_file))
    assert code == 0
    assert "strategy equal-vertex: 3 parts in" in out
    assert "edge_cut:" in out and "vertex_balance: 1.0" in out and "train_balance:" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])]
    assert [r[1] for r in rows] == ["100", "100", "100"]
    assert np.load(out_file).tolist() == [0] * 100 + [1] * 100 + [2] * 100


def test_cli_writes_parquet_and_passes_params(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "owner.parquet"
    code, out, _ = run_partition(
        capsys, "--strategy", "ldg", "--parts", "4", "--param", "order=natural", "--param", "slack=1.1",
        "--seed", "3", "--out", str(out_file),
    )  # fmt: skip
    assert code == 0
    assert "order: natural" in out and "capacity: 83" in out
    table = pd.read_parquet(out_file)
    assert list(table.columns) == ["vertex", "owner"]
    assert table["vertex"].tolist() == list(range(300))
    assert table["owner"].between(0, 3).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "kernighan", "--parts", "2"], "unknown partition strategy 'kernighan'; valid: chunk2d"),
        (["--strategy", "metis", "--parts", "301"], "301 parts is more than the 300 vertices"),
        (["--strategy", "metis", "--parts", "0"], "--parts must be at least 1"),
        (["--strategy", "metis", "--parts", "2", "--param", "colour=red"], "unknown parameter(s) colour"),
        (["--strategy", "metis", "--parts", "2", "--param", "ufactor"], "expected KEY=VALUE"),
        (["--strategy", "ldg", "--parts", "2", "--param", "order=bfs"], "order 'bfs'; allowed: random, natural"),
        (["--strategy", "random", "--parts", "2", "--out", "owner.csv"], "must end in .npy or .parquet"),
        (["--strategy", "chunk2d", "--parts", "2", "--param", "gpu_memory_bytes=1kB"], "cannot hold even"),
    ],
)  # fmt: skip
def test_cli_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run_partition(capsys, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    # one line of error (graph generation may have said what it did before it)
    assert err.strip().splitlines()[-1].startswith("gnnwb partition: error: ")
    assert sum("error" in line for line in err.splitlines()) == 1
